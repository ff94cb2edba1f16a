"""The memory limit of a queue: how many messages held in memory only it may keep, and what happens at the limit.

Owns the rule, not the counting (``engine.nodes.Queue`` counts) and not the wire (``gateway.broker`` rejects
and withholds credit). A message held in memory only is one that is not in the journal: a non-persistent one,
or any message on a queue that journals nothing (a temporary queue, a non-durable subscription). Journaled
messages page instead (docs/architecture.md, "Paging") and never count.

The policy says what a full queue does (docs/architecture.md, "Memory limit"):

- ``block`` (the default): the queue's own publisher links get no more credit until it drains to the low-water
  mark; what they already had credit for is still taken, up to a hard ceiling of twice the limit. An
  anonymous-relay link serves every queue, so its credit is never withheld: its messages to a full queue are
  rejected, as under ``fail``.
- ``fail``: every further memory-only message is rejected with ``amqp:resource-limit-exceeded``.

A topic subscription's queue never stops its topic's publishers: the copy for a full subscription is dropped
(and counted), so one slow subscriber does not stop the others' messages (JMS NON_PERSISTENT is at most once).

The server's memory high-water mark (``HighWater``, one per server, carried by the one ``MemoryLimit`` every queue
gets) is the other bound, over all queues together: its rule is ``engine.memory_mark``'s. A queue's limit never lets
it hold more than the server's mark allows: the mark counts every queue's bytes and the credit of every publisher
link before the bytes arrive.

Pure Python, no I/O; everything here runs on the reactor thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from subgate.engine.groups import DEFAULT_MAX_GROUPS
from subgate.engine.memory_mark import RESUME_PERCENT as RESUME_PERCENT  # re-exported (engine.backlog, nodes)
from subgate.engine.memory_mark import UNLIMITED as UNLIMITED
from subgate.engine.memory_mark import HighWater as HighWater

if TYPE_CHECKING:
    from subgate.engine.backlog import BacklogLimit

BLOCK = "block"
FAIL = "fail"
POLICIES = (BLOCK, FAIL)


class Sender(Enum):
    """Where a memory-only message comes from, as far as the limit cares."""

    LINK = "link"  # a publisher link attached to the queue (its credit can be withheld)
    RELAY = "relay"  # an anonymous-relay link (one link, many queues)
    FANOUT = "fanout"  # a topic handing its subscription queue a copy


class Answer(Enum):
    TAKE = "take"
    REJECT = "reject"  # settle the transfer rejected{amqp:resource-limit-exceeded}
    DROP = "drop"  # this copy is not kept (the publisher was answered for the topic as a whole)


# (policy, sender) -> (the multiple of the limit at which a message is no longer taken, the answer then).
REFUSE_AT: dict[tuple[str, Sender], tuple[int, Answer]] = {
    (FAIL, Sender.LINK): (1, Answer.REJECT),
    (FAIL, Sender.RELAY): (1, Answer.REJECT),
    (FAIL, Sender.FANOUT): (1, Answer.DROP),
    (BLOCK, Sender.LINK): (2, Answer.REJECT),  # credit granted before the queue filled: the hard ceiling
    (BLOCK, Sender.RELAY): (1, Answer.REJECT),  # withholding a relay's credit would block every queue
    (BLOCK, Sender.FANOUT): (1, Answer.DROP),
}
WITHHOLDS_CREDIT = {BLOCK: True, FAIL: False}


@dataclass(frozen=True)
class MemoryLimit:
    """A queue's limit on messages held in memory only: ``messages`` and ``bytes`` (0: none), and the policy; and
    on the message groups whose consumer it remembers (``groups``: engine.groups)."""

    messages: int = 0
    bytes: int = 0
    policy: str = BLOCK
    groups: int = DEFAULT_MAX_GROUPS
    backlog: BacklogLimit | None = None  # durable queues only (engine.backlog; None: no limit)
    gauge: HighWater = field(default_factory=HighWater, compare=False)  # the server's, shared by every queue

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"memory-full policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.messages < 0 or self.bytes < 0 or self.groups < 1:
            raise ValueError("memory limits cannot be negative")

    def full_at(self) -> tuple[int, int]:
        """(messages, bytes) at which the queue is full (UNLIMITED where no limit is set)."""
        return self.messages or UNLIMITED, self.bytes or UNLIMITED

    def resume_at(self) -> tuple[int, int]:
        """(messages, bytes) a blocked queue must be down to before its publishers get credit again."""
        return _share(self.messages, RESUME_PERCENT), _share(self.bytes, RESUME_PERCENT)

    @property
    def blocks(self) -> bool:
        return WITHHOLDS_CREDIT[self.policy]


NO_LIMIT = MemoryLimit()


def _share(limit: int, percent: int) -> int:
    return limit * percent // 100 if limit else UNLIMITED


def answer(limit: MemoryLimit, sender: Sender, messages: int, size: int) -> Answer:
    """May a queue holding ``messages`` memory-only messages of ``size`` bytes in all take one more from
    ``sender``? Past the limit times the policy's factor, the answer is the table's."""
    factor, refusal = REFUSE_AT[(limit.policy, sender)]
    if limit.messages and messages >= limit.messages * factor:
        return refusal
    if limit.bytes and size >= limit.bytes * factor:
        return refusal
    return Answer.TAKE


def describe(limit: MemoryLimit, name: str) -> str:
    """The description of a rejection, naming the queue and the limit it reached."""
    parts = [f"{limit.messages} messages"] if limit.messages else []
    if limit.bytes:
        parts.append(f"{limit.bytes} bytes")
    return f"queue {name!r} is full: it holds its limit of {' or '.join(parts)} not in the journal"
