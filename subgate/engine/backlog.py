"""The backlog limit of a durable queue or durable subscription: how many messages it may hold, and what happens
at the limit.

Owns the rule, not the counting (``engine.nodes.Queue.depth`` counts what a queue holds: in memory, paged out
to the journal, scheduled, delivered and not settled) and not the wire (``gateway.publish`` rejects,
``gateway.links.Inbound.top_up`` withholds credit). Where ``engine.memory`` bounds the memory held by messages
that are not in the journal, this bounds the journal's backlog: a journaled message pages to disk
(docs/architecture.md, "Paging"), so without a limit a queue nobody consumes grows the store until the disk is
full. Counted in messages only: a paged-out message's size is not known without reading it back (and after a
restart only an estimate of their number is).

A queue is ``backlog_full`` from the moment it holds its limit until it drains to its resume mark (80 % of the
limit under ``block``; one below the limit under ``fail``). The queue keeps that flag itself, so admitting a
message below the limit costs one attribute read; only a full queue's depth is looked at per message.

The policy says what a full queue does (docs/security.md, "Backlog of durable queues and subscriptions"):

- ``block`` (the default): its publisher links get no more credit until it drains to the resume mark; what a
  link already had credit for is still taken, up to a hard ceiling of twice the limit. An anonymous-relay link
  serves every destination, so its credit is never withheld: its messages to a full queue are rejected.
- ``fail``: every further message is rejected with ``amqp:resource-limit-exceeded``.

A topic with a full durable subscription is full as a whole (Artemis' BLOCK blocks the address): its publishers
are blocked, or their messages rejected, under the subscription's policy. A durable subscriber's messages are
never dropped (a JMS durable subscription is at least once), and a rejected message went to no subscriber at all.
A topic fed through a fan-out link (docs/fanout.md) takes its primary's messages whatever the backlog: the
primary has no publisher to stop. Durable subscriptions on a topic selector are not limited (a selector queue is
fed by many topics, and no one topic's publishers are its own).

Pure Python, no I/O; everything here runs on the reactor thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from subgate.engine.memory import BLOCK, FAIL, POLICIES, RESUME_PERCENT, UNLIMITED, Answer, Sender

if TYPE_CHECKING:
    from subgate.engine.nodes import Queue, Topic

# (policy, sender) -> the multiple of the limit at which a message is no longer taken (then: rejected).
REFUSE_AT: dict[tuple[str, Sender], int] = {
    (FAIL, Sender.LINK): 1,
    (FAIL, Sender.RELAY): 1,
    (BLOCK, Sender.LINK): 2,  # credit granted before the queue filled: the hard ceiling
    (BLOCK, Sender.RELAY): 1,  # withholding a relay's credit would block every destination
}


@dataclass(frozen=True)
class BacklogLimit:
    """A durable queue's limit on the messages it holds (``messages``, 0: none) and the policy at the limit."""

    messages: int = 0
    policy: str = BLOCK

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"backlog-full policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if self.messages < 0:
            raise ValueError("the backlog limit cannot be negative")

    def full_at(self) -> int:
        """The depth at which the queue is full (UNLIMITED with no limit)."""
        return self.messages or UNLIMITED

    def resume_at(self) -> int:
        """The depth a full queue must be down to before it is not full (and its publishers get credit) again."""
        if not self.messages:
            return UNLIMITED
        return self.messages * RESUME_PERCENT // 100 if self.blocks else self.messages - 1

    @property
    def blocks(self) -> bool:
        return self.policy == BLOCK


NO_BACKLOG_LIMIT = BacklogLimit()


def answer(limit: BacklogLimit, sender: Sender, depth: int) -> Answer:
    """May a queue holding ``depth`` messages take one more from ``sender``? (A queue below its limit is not
    asked: see the module docstring.)"""
    if limit.messages and depth >= limit.messages * REFUSE_AT[(limit.policy, sender)]:
        return Answer.REJECT
    return Answer.TAKE


def refusal(node: Queue | Topic, sender: Sender) -> str | None:
    """Why ``node`` (a ``backlog_full`` queue, or a topic with a full durable subscription) does not take one
    more message from ``sender``, or None if it does."""
    for queue in _full_queues(node):
        if answer(queue.backlog, sender, queue.depth) is not Answer.TAKE:
            return describe(queue.backlog, queue.name)
    return None


def withholds(node: Queue | Topic) -> bool:
    """Does ``node``'s backlog withhold its publisher links' credit now?"""
    if not node.backlog_full:
        return False
    return any(queue.backlog.blocks for queue in _full_queues(node))


def _full_queues(node: Queue | Topic) -> list[Queue]:
    if node.kind == "queue":
        return [cast("Queue", node)]
    return list(cast("Topic", node).full_subscriptions.values())


def subscription_changed(topic: Topic, queue: Queue, full: bool) -> None:
    """A durable subscription queue of ``topic`` became full (or not full any more, or left the topic): the topic
    is full while any of its subscriptions is; when it stops blocking, its publishers are told (``on_unblocked``)."""
    blocked = withholds(topic)
    if full:
        topic.full_subscriptions[id(queue)] = queue
    else:
        topic.full_subscriptions.pop(id(queue), None)
    topic.backlog_full = bool(topic.full_subscriptions)
    if blocked and not withholds(topic) and topic.on_unblocked is not None:
        topic.on_unblocked(topic)


def describe(limit: BacklogLimit, name: str) -> str:
    """The description of a rejection, naming the queue and the limit it reached."""
    return f"queue {name!r} is full: it holds its backlog limit of {limit.messages} messages"
