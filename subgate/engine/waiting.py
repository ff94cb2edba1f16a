"""A queue's available messages, highest JMS priority first: per priority, the merge by sequence of arrivals and
released messages going back.

Owns the stores behind ``engine.nodes.Queue``'s available messages. Each priority in use has a ``Lane``: ``ready``
(arrival order, a deque) and ``returned`` (a heap of released or skipped messages, each back at its original place
by sequence). The next message comes from the highest priority that has one (JMS priority 0-9, AMQP header
priority, 4 by default; above 9 counts as 9, as the JMS client reads it), FIFO within a priority (docs/jms.md,
"Priority"). With one priority in use, as usual, that is one lane and the cost of one more attribute read.
Arrivals are normally in sequence order; a journaled message routed at its commit can arrive behind a later
non-journaled one, and then ``lowest_seq`` looks at all of ``ready``. No proton, no store; reactor thread only.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from subgate.engine.messages import Message


def _seq(message: Message) -> int:
    return message.seq


class Lane:
    """The available messages of one priority (see the module docstring)."""

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

    def peek(self) -> Message | None:
        ready, returned = self.ready, self.returned
        if returned and (not ready or returned[0][0] < ready[0].seq):
            return returned[0][1]
        return ready[0] if ready else None

    def pop(self, message: Message) -> None:
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

    def expire(self, now: int, expired: Callable[[Message], None]) -> int:
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

    def messages(self) -> list[Message]:
        return list(self.ready) + [m for _, m in self.returned]


def _level(message: Message) -> int:
    priority = message.priority
    return priority if priority <= 9 else 9


class Waiting:
    """The available messages of one queue: a lane per priority in use (see the module docstring)."""

    __slots__ = ("lanes", "top", "_top_lane")

    def __init__(self) -> None:
        self.lanes: dict[int, Lane] = {}  # priority -> its lane, non-empty ones only
        self.top = -1  # the highest priority that has a lane
        self._top_lane: Lane | None = None

    def __len__(self) -> int:
        lane = self._top_lane
        if lane is not None and len(self.lanes) == 1:
            return len(lane)
        return sum(len(lane) for lane in self.lanes.values())

    def _lane(self, message: Message) -> Lane:
        level = _level(message)
        lane = self.lanes.get(level)
        if lane is None:
            lane = self.lanes[level] = Lane()
            if level > self.top:
                self.top, self._top_lane = level, lane
        return lane

    def append(self, message: Message) -> None:
        lane = self._top_lane
        if lane is None or message.priority != self.top:
            lane = self._lane(message)
        ready = lane.ready
        if ready and message.seq < ready[-1].seq:
            lane.unordered = True
        ready.append(message)

    def give_back(self, message: Message) -> None:
        heapq.heappush(self._lane(message).returned, (message.seq, message))

    def peek(self) -> Message | None:
        lane = self._top_lane
        return lane.peek() if lane is not None else None

    def pop(self, message: Message) -> None:
        """Remove ``message``, which ``peek`` just gave."""
        lane = self._top_lane
        assert lane is not None
        lane.pop(message)
        if not lane.ready and not lane.returned:
            del self.lanes[self.top]
            self._retop()

    def lowest_seq(self) -> int | None:
        found = [seq for lane in self.lanes.values() if (seq := lane.lowest_seq()) is not None]
        return min(found) if found else None

    def above(self, after: int) -> list[Message]:
        """The messages above sequence ``after``, in sequence order (nothing is removed)."""
        found = [m for lane in self.lanes.values() for m in lane.messages() if m.seq > after]
        found.sort(key=_seq)
        return found

    def expire(self, now: int, expired: Callable[[Message], None]) -> int:
        """Remove the messages expired at ``now``, telling ``expired`` of each; returns how many."""
        dropped = sum(lane.expire(now, expired) for lane in self.lanes.values())
        if dropped:
            self._forget_empty()
        return dropped

    def drain(self) -> list[Message]:
        """Remove and return every message."""
        messages = [m for lane in self.lanes.values() for m in lane.messages()]
        self.lanes.clear()
        self._retop()
        return messages

    def _forget_empty(self) -> None:
        for level in [level for level, lane in self.lanes.items() if not lane]:
            del self.lanes[level]
        self._retop()

    def _retop(self) -> None:
        """The highest priority left, after lanes went."""
        self.top = max(self.lanes) if self.lanes else -1
        self._top_lane = self.lanes.get(self.top)
