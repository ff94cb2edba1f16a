"""Message groups on a queue (JMSXGroupID / AMQP ``group-id``): which consumer owns each group.

Owns the rule (docs/jms.md, "Message groups"), after Artemis's message grouping: the messages of one group go to
one consumer of the queue at a time, in queue order. The first message of a group that a consumer takes makes it
the group's owner; later messages of the group wait for that owner (its credit, its selector) while the queue's
other messages go on past them. The group moves when its owner leaves the queue (detach, session or connection
end): its unsettled messages come back first and the next consumer to take one owns it. A message with
``JMSXGroupSeq = -1`` (AMQP group-sequence 0xFFFFFFFF, the uint the JMS client writes for -1) closes its group
once delivered: the next message of that group may go to any consumer.

The table is bounded (``max_groups``): past it, the least recently used group is forgotten (its next message
picks an owner again), so a million group ids cannot exhaust memory. Ownership lives in memory only: after a
restart groups pick their owners again, as in Artemis. Pure: no proton, no store.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

CLOSE_SEQUENCE = 0xFFFFFFFF  # JMSXGroupSeq -1 as the uint group-sequence
DEFAULT_MAX_GROUPS = 100_000

Owner = TypeVar("Owner")


class GroupTable(Generic[Owner]):
    """Group id -> owning consumer, least recently used first."""

    __slots__ = ("_owners", "max_groups", "forgotten")

    def __init__(self, max_groups: int = DEFAULT_MAX_GROUPS) -> None:
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self.max_groups = max_groups
        self.forgotten = 0  # groups dropped to stay within max_groups

    def __len__(self) -> int:
        return len(self._owners)

    def owner(self, group: str) -> Owner | None:
        return self._owners.get(group)

    def delivered(self, group: str, consumer: Owner, sequence: int | None) -> None:
        """``consumer`` took a message of ``group``: it owns the group (most recently used), unless the message
        closed it."""
        owners = self._owners
        if sequence == CLOSE_SEQUENCE:
            owners.pop(group, None)
            return
        if owners.get(group) is consumer:
            owners.move_to_end(group)
            return
        owners[group] = consumer
        owners.move_to_end(group)
        while len(owners) > self.max_groups:
            owners.popitem(last=False)
            self.forgotten += 1

    def release(self, consumer: Owner) -> int:
        """``consumer`` left the queue: forget every group it owned. Returns how many."""
        owned = [group for group, owner in self._owners.items() if owner is consumer]
        for group in owned:
            del self._owners[group]
        return len(owned)
