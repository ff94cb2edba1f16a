"""engine.waiting with priorities: highest JMS priority first, FIFO within one, released messages back in place."""

from __future__ import annotations

from subgate.engine.nodes import Message, Queue
from subgate.engine.waiting import Waiting
from subgate.mapping.outcomes import settle_outcome
from tests.unit.engine.test_nodes import FakeConsumer

RELEASE = settle_outcome("released")


def message(seq: int, priority: int = 4, expires: int = 0) -> Message:
    return Message(seq, b"m", priority=priority, expires=expires)


def take_all(waiting: Waiting) -> list[int]:
    out = []
    while (m := waiting.peek()) is not None:
        waiting.pop(m)
        out.append(m.seq)
    return out


def test_highest_priority_first_and_fifo_within_a_priority():
    waiting = Waiting()
    for seq, priority in enumerate([1, 9, 4, 0, 7, 9, 2], start=1):
        waiting.append(message(seq, priority))
    assert len(waiting) == 7
    assert take_all(waiting) == [2, 6, 5, 3, 7, 1, 4]
    assert len(waiting) == 0 and waiting.peek() is None


def test_a_priority_above_nine_counts_as_nine():
    waiting = Waiting()
    waiting.append(message(1, 9))
    waiting.append(message(2, 200))
    waiting.append(message(3, 9))
    assert take_all(waiting) == [1, 2, 3]


def test_a_released_message_goes_back_to_its_place_in_its_priority():
    waiting = Waiting()
    first, second, low = message(1, 7), message(2, 7), message(3, 1)
    for m in (first, second, low):
        waiting.append(m)
    waiting.pop(first)
    waiting.give_back(first)
    assert take_all(waiting) == [1, 2, 3]


def test_lowest_seq_expiry_above_and_drain_see_every_priority():
    waiting = Waiting()
    for m in (message(5, 1), message(6, 9, expires=10), message(7, 4), message(8, 9)):
        waiting.append(m)
    assert waiting.lowest_seq() == 5
    assert [m.seq for m in waiting.above(5)] == [6, 7, 8]
    expired: list[int] = []
    assert waiting.expire(11, lambda m: expired.append(m.seq)) == 1 and expired == [6]
    assert waiting.peek().seq == 8
    assert sorted(m.seq for m in waiting.drain()) == [5, 7, 8] and len(waiting) == 0


def test_a_queue_delivers_by_priority_to_a_consumer_that_attaches_later():
    queue = Queue("q")
    for seq, priority in enumerate([1, 9, 4, 0, 7, 9, 2], start=1):
        queue.push(message(seq, priority))
    consumer = FakeConsumer(credit=3)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert consumer.seqs == [2, 6, 5]
    queue.settle(message(6, 9), RELEASE, consumer)  # back in its place: first again
    consumer.credit = 10
    queue.dispatch()
    assert consumer.seqs == [2, 6, 5, 6, 3, 7, 1, 4]
