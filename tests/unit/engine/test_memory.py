"""engine.memory and the queue's side of it: the limit on messages held in memory only (not in the journal),
the policy table (block / fail, per kind of sender), counting from take to discard, blocking with a low-water
mark, topic copies dropped for a full subscription, and credit withheld from a blocked queue's publishers.

Pure and fast: no proton, no store (issue 11, defect 7).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from subgate.engine.memory import BLOCK, FAIL, Answer, MemoryLimit, Sender, answer, describe
from subgate.engine.nodes import Message, Queue, Topic
from subgate.gateway.links import Inbound
from subgate.mapping.outcomes import settle_outcome
from tests.unit.gateway.test_credit import FakeLink

ACCEPT = settle_outcome("accepted")
RELEASE = settle_outcome("released")


def msg(seq: int, *, journaled: bool = False, size: int = 10) -> Message:
    return Message(seq, b"x" * size, journaled=journaled)


class Taker:
    """A consumer with credit that keeps what it got (to settle later)."""

    def __init__(self, credit: int) -> None:
        self.credit = credit
        self.got: list[Message] = []

    def deliver(self, message: Message, failures: int) -> None:
        self.credit -= 1
        self.got.append(message)

    def accepts(self, message: Message) -> bool:
        return True


def limited(messages: int = 10, size: int = 0, policy: str = BLOCK) -> Queue:
    queue = Queue("q", durable=False)
    queue.limit_memory(MemoryLimit(messages, size, policy))
    return queue


def fill(queue: Queue, count: int, *, start: int = 1, size: int = 10) -> None:
    for seq in range(start, start + count):
        queue.push(msg(seq, size=size))


# -- the rule -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "sender", "held", "expected"),
    [
        (FAIL, Sender.LINK, 9, Answer.TAKE),
        (FAIL, Sender.LINK, 10, Answer.REJECT),
        (FAIL, Sender.RELAY, 10, Answer.REJECT),
        (FAIL, Sender.FANOUT, 10, Answer.DROP),
        (BLOCK, Sender.LINK, 10, Answer.TAKE),  # credit granted before it filled: up to the ceiling
        (BLOCK, Sender.LINK, 19, Answer.TAKE),
        (BLOCK, Sender.LINK, 20, Answer.REJECT),  # the hard ceiling, twice the limit
        (BLOCK, Sender.RELAY, 10, Answer.REJECT),  # a relay's credit is never withheld
        (BLOCK, Sender.FANOUT, 10, Answer.DROP),  # a topic's publishers are never stopped by one subscriber
    ],
)
def test_the_policy_table(policy, sender, held, expected):
    assert answer(MemoryLimit(10, 0, policy), sender, held, held * 100) is expected


@pytest.mark.parametrize(("size", "expected"), [(999, Answer.TAKE), (1000, Answer.REJECT)])
def test_the_byte_limit_counts_too(size, expected):
    assert answer(MemoryLimit(0, 1000, FAIL), Sender.LINK, 1, size) is expected


def test_no_limit_takes_everything():
    assert answer(MemoryLimit(0, 0, FAIL), Sender.LINK, 10**9, 10**12) is Answer.TAKE


@pytest.mark.parametrize(("limit", "error"), [((1, 1, "drop"), "policy"), ((-1, 0, FAIL), "negative")])
def test_a_bad_limit_is_refused(limit, error):
    with pytest.raises(ValueError, match=error):
        MemoryLimit(*limit)


def test_a_rejection_names_the_queue_and_its_limit():
    text = describe(MemoryLimit(50, 1024, FAIL), "orders")
    assert "'orders'" in text and "50 messages or 1024 bytes" in text


# -- the queue counts what is not in the journal ------------------------------------------------------------------
def test_a_queue_counts_memory_only_messages_from_take_to_discard():
    queue = limited(10, policy=FAIL)
    fill(queue, 4, size=100)
    queue.push(msg(5, journaled=True, size=100))  # journaled: it pages, it is not counted
    assert queue.memory_held == (4, 400)
    consumer = Taker(credit=3)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert queue.memory_held == (4, 400)  # delivered but not settled: still held
    queue.settle(consumer.got[0], RELEASE, consumer)
    assert queue.memory_held == (4, 400)
    for message in consumer.got[1:]:
        queue.settle(message, ACCEPT, consumer)
    assert queue.memory_held == (2, 200)  # the released one (back in place, no credit left) and the fourth
    queue.purge()
    assert queue.memory_held == (0, 0)


def test_fail_rejects_at_the_limit_and_takes_again_below_it():
    queue = limited(3, policy=FAIL)
    fill(queue, 2)
    assert queue.admits(Sender.LINK) is Answer.TAKE
    fill(queue, 1, start=3)
    assert queue.admits(Sender.LINK) is Answer.REJECT
    assert not queue.blocked  # fail never withholds credit
    consumer = Taker(credit=1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(consumer.got[0], ACCEPT, consumer)
    assert queue.admits(Sender.LINK) is Answer.TAKE


def test_block_holds_until_the_low_water_mark_and_says_so_once():
    queue = limited(10, policy=BLOCK)
    told: list[Queue] = []
    queue.on_unblocked = told.append
    fill(queue, 9)
    assert not queue.blocked
    fill(queue, 1, start=10)
    assert queue.blocked
    consumer = Taker(credit=10)
    queue.add_consumer(consumer)
    queue.dispatch()
    for message in consumer.got[:1]:
        queue.settle(message, ACCEPT, consumer)
    assert queue.blocked and told == []  # 9 held: above the low-water mark (80%)
    queue.settle(consumer.got[1], ACCEPT, consumer)
    assert not queue.blocked and told == [queue]  # 8 held
    for message in consumer.got[2:]:
        queue.settle(message, ACCEPT, consumer)
    assert told == [queue]


def test_the_byte_limit_blocks_too():
    queue = limited(0, 1000, BLOCK)
    fill(queue, 1, size=999)
    assert not queue.blocked
    fill(queue, 1, start=2, size=1)
    assert queue.blocked


def test_a_full_subscription_drops_the_topic_copy_and_the_others_still_get_it():
    topic = Topic("t")
    full, free = limited(2, policy=BLOCK), limited(100, policy=BLOCK)
    topic.subscribe(full)
    topic.subscribe(free)
    assert [topic.publish(msg(seq)) for seq in range(1, 5)] == [2, 2, 1, 1]
    assert full.memory_held[0] == 2 and full.dropped_count == 2
    assert free.memory_held[0] == 4 and free.dropped_count == 0
    assert full.offer(msg(9, journaled=True))  # journaled copies page, never dropped


# -- credit --------------------------------------------------------------------------------------------------------
def test_a_blocked_queues_publisher_gets_no_credit_until_it_drains():
    queue = limited(10, policy=BLOCK)
    link = FakeLink()
    inbound = Inbound(link, SimpleNamespace(container_id="c1"), queue, 4)  # type: ignore[arg-type]
    inbound.top_up()
    assert link.flows == [4]
    fill(queue, 10)
    for _ in range(4):
        link.transfer(inbound)
    inbound.top_up()
    assert link.flows == [4]  # blocked: nothing more
    queue.on_unblocked = lambda _queue: inbound.top_up()
    consumer = Taker(credit=10)
    queue.add_consumer(consumer)
    queue.dispatch()
    for message in consumer.got[:2]:
        queue.settle(message, ACCEPT, consumer)
    assert link.flows == [4, 4]  # down to the low-water mark: the window again
