"""What a primary holds for one secondary that is behind: in order up to a limit, then conflated per topic.

Owns the pending replication operations of one ``replicate`` link (docs/fanout.md, "A secondary that is
behind"). A secondary grants credit as it applies what arrived (its ``max_in_flight``); what the credit does not
cover waits here. Up to ``limit`` operations wait **in order**, each one as it happened (a secondary that is
briefly behind misses nothing). Past that the queue **conflates**: replication carries topic *values*, so for each
topic only what the secondary needs to reach the primary's current state is kept — at most a ``remove`` (the
secondary may hold the topic) followed by the topic's latest value (``add`` or ``update``). A topic added and
removed again while conflated leaves nothing. So the queue holds at most ``limit`` operations plus one entry per
topic, however long the secondary stops reading and however fast the topics change; once the secondary reads
again it converges to the latest values, and the queue goes back to order once the conflated part is sent.

Operations are ``(op, path, value)`` tuples, ``op`` one of ``engine.fanout.OPERATIONS``; ``snapshot-end`` (path
``""``) keeps its place after every snapshot ``add`` queued before it. Pure: no I/O, no proton.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import cast

from subgate.engine.fanout import ADD, REMOVE, UPDATE

Operation = tuple[str, str, bytes | None]


class ReplicationQueue:
    """The pending operations of one replication link (module docstring)."""

    __slots__ = ("limit", "ordered", "conflated", "folded")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ordered: deque[Operation] = deque()
        # path -> [removed first, value op (add/update) or None, value]; insertion order is sending order.
        self.conflated: OrderedDict[str, list[object]] = OrderedDict()
        self.folded = 0  # operations that replaced or cancelled an earlier pending one (since the link opened)

    def __len__(self) -> int:
        return len(self.ordered) + len(self.conflated)

    def __bool__(self) -> bool:
        return bool(self.ordered) or bool(self.conflated)

    def push(self, op: str, path: str, value: bytes | None) -> None:
        """One more operation, in order while under the limit and nothing is conflated, else folded per topic."""
        if not self.conflated and len(self.ordered) < self.limit:
            self.ordered.append((op, path, value))
            return
        entry = self.conflated.get(path)
        if entry is None:
            self.conflated[path] = [True, None, None] if op == REMOVE else [False, op, value]
        elif op == REMOVE:
            self.folded += 1
            if not entry[0] and entry[1] == ADD:
                del self.conflated[path]  # created and removed while conflated: the secondary never heard of it
            else:
                entry[:] = [True, None, None]
        else:
            if entry[1] is not None:
                self.folded += 1
            entry[1] = ADD if op == ADD or entry[1] == ADD else UPDATE
            entry[2] = value

    def pop(self) -> Operation | None:
        """The next operation to send (None: nothing pending)."""
        if self.ordered:
            return self.ordered.popleft()
        if not self.conflated:
            return None
        path, entry = self.conflated.popitem(last=False)
        removed, op, value = entry
        if removed:
            if op is not None:  # the latest value follows the remove: it stays first
                entry[0] = False
                self.conflated[path] = entry
                self.conflated.move_to_end(path, last=False)
            return (REMOVE, path, None)
        return (cast(str, op), path, cast("bytes | None", value))

    def clear(self) -> None:
        self.ordered.clear()
        self.conflated.clear()
