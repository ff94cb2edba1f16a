"""A queue's available messages: the merge, by sequence, of arrivals and released messages going back.

Owns the two stores behind ``engine.nodes.Queue``'s available messages: ``ready`` (arrival order, a deque) and
``returned`` (a heap of released or skipped messages, each back at its original place by sequence), and which one
the next message comes from. Arrivals are normally in sequence order; a journaled message routed at its commit
can arrive behind a later non-journaled one, and then ``lowest_seq`` looks at all of ``ready``. No proton, no
store; reactor thread only.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from subgate.engine.messages import Message


def _seq(message: Message) -> int:
    return message.seq


class Waiting:
    """The available messages of one queue (see the module docstring)."""

    __slots__ = ("ready", "returned", "unordered")

    def __init__(self) -> None:
        self.ready: deque[Message] = deque()
        self.returned: list[tuple[int, Message]] = []
        self.unordered = False  # a lower sequence arrived after a higher one

    def __len__(self) -> int:
        return len(self.ready) + len(self.returned)

    def append(self, message: Message) -> None:
        ready = self.ready
        if ready and message.seq < ready[-1].seq:
            self.unordered = True
        ready.append(message)

    def give_back(self, message: Message) -> None:
        heapq.heappush(self.returned, (message.seq, message))

    def peek(self) -> Message | None:
        ready, returned = self.ready, self.returned
        if returned and (not ready or returned[0][0] < ready[0].seq):
            return returned[0][1]
        return ready[0] if ready else None

    def pop(self, message: Message) -> None:
        """Remove ``message``, which ``peek`` just gave."""
        returned = self.returned
        if returned and returned[0][1] is message:
            heapq.heappop(returned)
        else:
            self.ready.popleft()
            if not self.ready:
                self.unordered = False

    def lowest_seq(self) -> int | None:
        candidates = []
        if self.ready:
            ready = self.ready
            candidates.append(min(m.seq for m in ready) if self.unordered else ready[0].seq)
        if self.returned:
            candidates.append(self.returned[0][0])
        return min(candidates) if candidates else None

    def above(self, after: int) -> list[Message]:
        """The messages above sequence ``after``, in queue order (nothing is removed)."""
        found = [m for m in self.ready if m.seq > after]
        found.extend(m for seq, m in self.returned if seq > after)
        found.sort(key=_seq)
        return found

    def expire(self, now: int, expired: Callable[[Message], None]) -> int:
        """Remove the messages expired at ``now``, telling ``expired`` of each; returns how many."""
        dropped = 0
        keep: deque[Message] = deque()
        for message in self.ready:
            if message.expires and message.expires <= now:
                expired(message)
                dropped += 1
            else:
                keep.append(message)
        if dropped:
            self.ready = keep
        returned = [(s, m) for s, m in self.returned if not (m.expires and m.expires <= now)]
        for _, m in self.returned:
            if m.expires and m.expires <= now:
                expired(m)
                dropped += 1
        if len(returned) != len(self.returned):
            heapq.heapify(returned)
            self.returned = returned
        return dropped

    def drain(self) -> list[Message]:
        """Remove and return every message."""
        messages = list(self.ready) + [m for _, m in self.returned]
        self.ready.clear()
        self.returned.clear()
        self.unordered = False
        return messages
