"""engine.nodes: queue order, round robin, redelivery, expiry, delay, browse, low water and topic fan-out.

Pure and fast: consumers are ``FakeConsumer`` records, the journal cursor is ``FakeCursor``, and the clock is
pinned at ``NOW`` (``nodes.now_ms`` is patched for every test).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from subgate.engine import nodes
from subgate.engine.nodes import Message, Queue, Topic
from subgate.mapping.outcomes import settle_outcome, settle_unsettled

NOW = 1_000_000_000
LATER = NOW + 60_000
EARLIER = NOW - 1

ACCEPT = settle_outcome("accepted")
REJECT = settle_outcome("rejected")
RELEASE = settle_outcome("released")
FAILED = settle_outcome("modified", failed=True)
UNDELIVERABLE = settle_outcome("modified", failed=True, undeliverable_here=True)
NOT_HERE = settle_outcome("modified", undeliverable_here=True)


REAL_NOW_MS = nodes.now_ms


class Clock:
    now = NOW


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(nodes, "now_ms", lambda: clock.now)
    return clock


class FakeConsumer:
    """The ``Consumer`` shape: credit, and a record of what was delivered (sequence, failures)."""

    def __init__(self, credit: int = 0, accepts: Callable[[Message], bool] | None = None) -> None:
        self.credit = credit
        self.got: list[tuple[int, int]] = []
        self._accepts = accepts

    def deliver(self, message: Message, failures: int) -> None:
        self.credit -= 1
        self.got.append((message.seq, failures))

    def accepts(self, message: Message) -> bool:
        return self._accepts is None or self._accepts(message)

    @property
    def seqs(self) -> list[int]:
        return [seq for seq, _ in self.got]


class FakeCursor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None]] = []

    def discarded(self, seq: int) -> None:
        self.calls.append(("discarded", seq, None))

    def failed(self, seq: int, failures: int) -> None:
        self.calls.append(("failed", seq, failures))


def msg(seq: int, **fields: object) -> Message:
    return Message(seq, f"m{seq}".encode(), **fields)  # type: ignore[arg-type]


def queue_with(*seqs: int, cursor: FakeCursor | None = None, **fields: object) -> Queue:
    queue = Queue("q", cursor=cursor)
    for seq in seqs:
        queue.push(msg(seq, **fields))
    return queue


def build(
    ready=(),
    outstanding=(),
    returned=(),
    scheduled=(),
    late=(),
    *,
    expires=None,
    cursor=None,
    clock=None,
) -> Queue:
    """A queue holding messages in each state, all journaled: ``outstanding`` are out for delivery,
    ``returned`` were delivered and released, ``ready`` wait in arrival order, ``scheduled`` wait for their
    delivery time, and ``late`` are pushed after ``ready`` with lower sequences (a journaled message routed
    after its commit, behind a non-journaled one that was routed at once). ``expires`` maps sequence to expiry;
    the clock is held at 0 while messages go out and come back so that none expires on the way."""
    expires = expires or {}
    queue = Queue("q", cursor=cursor)

    def push(seq: int, **fields: object) -> None:
        queue.push(msg(seq, expires=expires.get(seq, 0), journaled=True, **fields))

    taken = sorted(set(outstanding) | set(returned))
    for seq in taken:
        push(seq)
    if taken:
        saved = clock.now if clock else None
        if clock:
            clock.now = 0
        consumer = FakeConsumer(len(taken))
        queue.add_consumer(consumer)
        queue.dispatch()
        queue.remove_consumer(consumer)
        for seq in returned:
            queue.settle(queue._outstanding[seq], RELEASE, None)
        if clock:
            clock.now = saved
    for seq in ready:
        push(seq)
    for seq in scheduled:
        push(seq, deliver_at=LATER)
    for seq in late:
        push(seq)
    return queue


def delivered(queue: Queue, consumer: FakeConsumer) -> Message:
    """The message object the queue holds as outstanding for the consumer's last delivery."""
    return queue._outstanding[consumer.got[-1][0]]


# -- ordering and round robin ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("credit", "pushed", "expected"),
    [
        (10, [1, 2, 3], [1, 2, 3]),
        (2, [1, 2, 3], [1, 2]),
        (0, [1, 2, 3], []),
        (5, [], []),
        (3, [7, 8, 9, 10], [7, 8, 9]),
    ],
)
def test_a_consumer_gets_messages_in_order_up_to_its_credit(credit, pushed, expected):
    queue = Queue("q")
    consumer = FakeConsumer(credit)
    queue.add_consumer(consumer)
    for seq in pushed:
        queue.push(msg(seq))
    assert consumer.seqs == expected
    assert len(queue.waiting) == len(pushed) - len(expected)
    assert queue.depth == len(pushed)


def test_messages_pushed_before_a_consumer_wait_until_dispatch():
    queue = queue_with(1, 2)
    consumer = FakeConsumer(5)
    queue.add_consumer(consumer)
    assert consumer.got == []  # adding a consumer does not dispatch by itself
    queue.dispatch()
    assert consumer.seqs == [1, 2]
    assert len(queue.waiting) == 0


def test_dispatch_without_consumers_keeps_everything():
    queue = queue_with(1)
    queue.dispatch()
    assert len(queue.waiting) == 1


@pytest.mark.parametrize(
    ("credits", "count", "expected"),
    [
        ([2, 2], 4, [[1, 3], [2, 4]]),
        ([1, 3], 4, [[1], [2, 3, 4]]),
        ([0, 2], 3, [[], [1, 2]]),
        ([0, 0], 2, [[], []]),
        ([5, 5, 5], 6, [[1, 4], [2, 5], [3, 6]]),
        ([1, 1, 1], 5, [[1], [2], [3]]),
    ],
)
def test_round_robin_across_consumers_with_credit(credits, count, expected):
    queue = queue_with(*range(1, count + 1))
    consumers = [FakeConsumer(c) for c in credits]
    for consumer in consumers:
        queue.add_consumer(consumer)
    queue.dispatch()
    assert [c.seqs for c in consumers] == expected
    assert len(queue.waiting) == count - sum(len(e) for e in expected)


def test_new_credit_resumes_dispatch_in_order():
    queue = queue_with(1, 2, 3, 4)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    consumer.credit = 2
    queue.dispatch()
    assert consumer.seqs == [1, 2, 3]


def test_removed_consumer_gets_nothing_more():
    queue = Queue("q")
    first, second = FakeConsumer(5), FakeConsumer(5)
    queue.add_consumer(first)
    queue.add_consumer(second)
    queue.remove_consumer(first)
    queue.remove_consumer(first)  # removing twice is harmless
    queue.push(msg(1))
    queue.push(msg(2))
    assert (first.seqs, second.seqs) == ([], [1, 2])
    assert queue.consumers == [second]


# -- settlement ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settlement", "redelivered", "failures", "dead"),
    [
        (ACCEPT, False, 0, 0),
        (REJECT, False, 0, 1),
        (RELEASE, True, 0, 0),
        (settle_outcome("modified"), True, 0, 0),
        (FAILED, True, 1, 0),
        (settle_outcome(None), True, 0, 0),
        (settle_unsettled(abrupt=False), True, 0, 0),
        (settle_unsettled(abrupt=True), True, 1, 0),
    ],
)
def test_settlement_removes_or_returns_the_message(settlement, redelivered, failures, dead):
    queue = queue_with(1)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    consumer.credit = 1
    queue.settle(delivered(queue, consumer), settlement, consumer)
    assert consumer.got[1:] == ([(1, failures)] if redelivered else [])
    assert queue.depth == (1 if redelivered else 0)
    assert queue.dead_count == dead


@pytest.mark.parametrize("settlement", [RELEASE, FAILED, settle_unsettled(abrupt=True)])
def test_returned_message_goes_back_to_its_original_position(settlement):
    queue = queue_with(1, 2, 3, 4)
    consumer = FakeConsumer(2)
    queue.add_consumer(consumer)
    queue.dispatch()
    first = queue._outstanding[1]
    queue.settle(first, settlement, None)  # no credit: nothing is redelivered yet
    assert len(queue.waiting) == 3
    consumer.credit = 10
    queue.dispatch()
    assert consumer.seqs == [1, 2, 1, 3, 4]


def test_several_returned_messages_keep_their_relative_order():
    queue = queue_with(1, 2, 3, 4, 5)
    consumer = FakeConsumer(3)
    queue.add_consumer(consumer)
    queue.dispatch()
    for seq in (3, 1, 2):  # settled out of order
        queue.settle(queue._outstanding[seq], RELEASE, None)
    consumer.credit = 10
    queue.dispatch()
    assert consumer.seqs == [1, 2, 3, 1, 2, 3, 4, 5]


def test_failure_counts_grow_with_each_failed_delivery():
    cursor = FakeCursor()
    queue = queue_with(1, cursor=cursor, journaled=True)
    consumer = FakeConsumer(10)
    queue.add_consumer(consumer)
    queue.dispatch()
    for _ in range(3):
        queue.settle(delivered(queue, consumer), FAILED, consumer)
    queue.settle(delivered(queue, consumer), RELEASE, consumer)  # a release does not count
    assert consumer.got == [(1, 0), (1, 1), (1, 2), (1, 3), (1, 3)]
    assert cursor.calls == [("failed", 1, 1), ("failed", 1, 2), ("failed", 1, 3)]
    queue.settle(delivered(queue, consumer), ACCEPT, consumer)
    assert cursor.calls[-1] == ("discarded", 1, None)
    assert queue._failures == {}


def test_failure_counts_are_kept_per_queue():
    """A message shared by two subscription queues fails in one of them only."""
    topic = Topic("t")
    q1, q2 = Queue("t#1"), Queue("t#2")
    c1, c2 = FakeConsumer(5), FakeConsumer(5)
    for queue, consumer in ((q1, c1), (q2, c2)):
        topic.subscribe(queue)
        queue.add_consumer(consumer)
    topic.publish(msg(1))
    q1.settle(delivered(q1, c1), FAILED, c1)
    q1.settle(delivered(q1, c1), FAILED, c1)
    q2.settle(delivered(q2, c2), RELEASE, c2)
    assert c1.got == [(1, 0), (1, 1), (1, 2)]
    assert c2.got == [(1, 0), (1, 0)]


def test_recovered_failures_are_delivered_with_the_message():
    queue = Queue("q")
    queue.push(msg(1), failures=2)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(delivered(queue, consumer), FAILED, consumer)
    consumer.credit = 1
    queue.dispatch()
    assert consumer.got == [(1, 2), (1, 3)]


@pytest.mark.parametrize("settlement", [UNDELIVERABLE, NOT_HERE])
def test_undeliverable_here_excludes_only_that_consumer(settlement):
    queue = queue_with(1)
    first, second = FakeConsumer(5), FakeConsumer(5)
    queue.add_consumer(first)
    queue.dispatch()
    queue.settle(delivered(queue, first), settlement, first)
    assert first.seqs == [1]  # not offered to the same consumer again
    assert len(queue.waiting) == 1
    queue.add_consumer(second)
    queue.dispatch()
    assert second.got == [(1, 1 if settlement.failed else 0)]


def test_a_consumer_keeps_getting_later_messages_after_declining_the_first():
    """JMS consumers settle locally expired or undecodable messages modified{failed, undeliverable-here};
    the message they declined must not hold back the rest of the queue (mapping doc §5.6, §5.7)."""
    queue = queue_with(1, 2, 3)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(delivered(queue, consumer), UNDELIVERABLE, consumer)
    consumer.credit = 5
    queue.dispatch()
    assert consumer.seqs == [1, 2, 3]
    other = FakeConsumer(5)
    queue.add_consumer(other)
    queue.dispatch()
    assert other.got == [(1, 1)]  # the declined message kept its place for everyone else


def test_declined_message_keeps_its_place_among_later_returns():
    queue = queue_with(1, 2, 3)
    picky, other = FakeConsumer(3), FakeConsumer(0)
    queue.add_consumer(picky)
    queue.add_consumer(other)
    queue.dispatch()
    queue.settle(queue._outstanding[1], NOT_HERE, picky)
    queue.settle(queue._outstanding[2], RELEASE, picky)
    queue.settle(queue._outstanding[3], RELEASE, picky)
    other.credit = 3
    queue.dispatch()
    assert other.seqs == [1, 2, 3]


def test_a_removed_consumer_no_longer_excludes_anyone():
    """The exclusion is per consumer; once it has gone, a new consumer (whatever its id) may have the message."""
    queue = queue_with(1)
    first = FakeConsumer(1)
    queue.add_consumer(first)
    queue.dispatch()
    queue.settle(delivered(queue, first), NOT_HERE, first)
    queue.remove_consumer(first)
    first.credit = 1
    queue.add_consumer(first)  # the same object stands for a new consumer with a reused id()
    queue.dispatch()
    assert first.seqs == [1, 1]


def test_exclusion_without_a_consumer_is_ignored():
    queue = queue_with(1)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(delivered(queue, consumer), NOT_HERE, None)
    consumer.credit = 1
    queue.dispatch()
    assert consumer.seqs == [1, 1]


def test_consumer_filter_is_asked():
    queue = queue_with(1, 2, 3, 4)
    odd = FakeConsumer(10, accepts=lambda m: m.seq % 2 == 1)
    queue.add_consumer(odd)
    queue.dispatch()
    assert odd.seqs == [1, 3]
    assert len(queue.waiting) == 2


# -- presettled ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("journaled", "calls"), [(True, [("discarded", 1, None)]), (False, [])])
def test_presettled_delivery_discards_the_message(journaled, calls):
    cursor = FakeCursor()
    queue = queue_with(1, cursor=cursor, journaled=journaled)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.discard_delivered(delivered(queue, consumer))
    assert queue.depth == 0
    assert cursor.calls == calls


# -- expiry ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expires", "delivered_seqs"),
    [
        ({}, [1, 2, 3]),
        ({1: EARLIER}, [2, 3]),
        ({1: NOW}, [2, 3]),  # due exactly now counts as expired
        ({2: EARLIER, 3: EARLIER}, [1]),
        ({1: LATER, 2: EARLIER}, [1, 3]),
    ],
)
def test_expired_messages_are_dropped_at_dispatch(expires, delivered_seqs):
    cursor = FakeCursor()
    queue = Queue("q", cursor=cursor)
    for seq in (1, 2, 3):
        queue.push(msg(seq, expires=expires.get(seq, 0), journaled=True))
    consumer = FakeConsumer(10)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert consumer.seqs == delivered_seqs
    dropped = sorted(set((1, 2, 3)) - set(delivered_seqs))
    assert queue.expired_count == len(dropped)
    assert cursor.calls == [("discarded", seq, None) for seq in dropped]


def test_expiry_at_dispatch_also_covers_returned_messages(clock):
    queue = queue_with(1, 2, expires=NOW + 10)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(delivered(queue, consumer), RELEASE, None)
    clock.now = NOW + 10
    consumer.credit = 5
    queue.dispatch()
    assert consumer.seqs == [1]
    assert queue.expired_count == 2
    assert queue.depth == 0


def test_expired_head_is_dropped_even_without_credit():
    queue = queue_with(1, expires=EARLIER)
    consumer = FakeConsumer(0)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert queue.expired_count == 1  # the head is checked before credit
    assert queue.depth == 0


@pytest.mark.parametrize(
    ("ready", "returned", "now", "left"),
    [
        ({1: 0, 2: 0}, {}, NOW, [1, 2]),
        ({1: NOW, 2: LATER}, {}, NOW, [2]),
        ({1: NOW, 2: LATER}, {}, LATER, []),
        ({3: EARLIER, 4: 0}, {1: EARLIER, 2: LATER}, NOW, [2, 4]),
        ({3: 0}, {1: LATER, 2: LATER}, NOW, [1, 2, 3]),
        ({}, {1: EARLIER}, NOW, []),
    ],
)
def test_expire_due_drops_waiting_expired_messages(clock, ready, returned, now, left):
    cursor = FakeCursor()
    expires = {**ready, **returned}
    queue = build(ready=ready, returned=returned, expires=expires, cursor=cursor, clock=clock)
    dropped = len(expires) - len(left)
    assert queue.expire_due(now) == dropped
    assert queue.expired_count == dropped
    assert sorted(seq for _, seq, _ in cursor.calls) == sorted(set(expires) - set(left))
    assert [m.seq for m in queue.waiting.above(0)] == left
    clock.now = now
    consumer = FakeConsumer(100)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert consumer.seqs == left  # order kept in both the arrival deque and the returned heap


def test_expire_due_uses_the_clock_by_default():
    queue = queue_with(1, expires=NOW)
    assert queue.expire_due() == 1


def test_outstanding_messages_do_not_expire_in_the_sweep():
    queue = queue_with(1, expires=NOW + 5)
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert queue.expire_due(LATER) == 0
    assert queue.depth == 1


# -- scheduled delivery ----------------------------------------------------------------------------------------


def test_future_delivery_time_holds_the_message_and_asks_for_a_timer():
    queue = Queue("q")
    timers: list[int] = []
    queue.on_schedule = timers.append
    consumer = FakeConsumer(10)
    queue.add_consumer(consumer)
    queue.push(msg(1, deliver_at=NOW + 500))
    queue.push(msg(2, deliver_at=NOW + 100))
    queue.push(msg(3))
    queue.push(msg(4, deliver_at=NOW))  # due now: at once
    assert consumer.seqs == [3, 4]
    assert timers == [NOW + 500, NOW + 100]
    assert (queue.depth, len(queue.waiting)) == (4, 0)
    assert queue.release_scheduled(NOW + 99) == NOW + 100
    assert consumer.seqs == [3, 4]
    assert queue.release_scheduled(NOW + 100) == NOW + 500
    assert consumer.seqs == [3, 4, 2]
    assert queue.release_scheduled(NOW + 1000) is None
    assert consumer.seqs == [3, 4, 2, 1]


def test_scheduled_messages_without_a_timer_callback():
    queue = Queue("q")
    queue.push(msg(1, deliver_at=LATER))
    assert queue.release_scheduled() == LATER  # uses the clock
    assert len(queue.waiting) == 0


def test_released_scheduled_messages_take_their_place_by_sequence():
    queue = Queue("q")
    queue.push(msg(1, deliver_at=NOW + 10))
    queue.push(msg(2))
    queue.push(msg(3))
    assert queue.release_scheduled(NOW + 10) is None
    consumer = FakeConsumer(5)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert consumer.seqs == [1, 2, 3]


# -- browse ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("after", "expected"), [(0, [2, 3, 4]), (2, [3, 4]), (3, [4]), (4, [])])
def test_browsable_lists_available_messages_in_order(after, expected):
    # 1 is out for delivery, 2 back in the returned heap, 3 and 4 waiting, 5 scheduled: 2, 3, 4 are browsable
    queue = build(outstanding=[1], returned=[2], ready=[3, 4], scheduled=[5])
    assert [m.seq for m in queue.waiting.above(after)] == expected
    assert len(queue.waiting) == 3  # nothing removed
    assert queue.depth == 5


def test_browsable_of_a_plain_queue():
    queue = queue_with(1, 2, 3)
    assert [m.seq for m in queue.waiting.above(0)] == [1, 2, 3]
    assert len(queue.waiting) == 3


# -- low water -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "low"),
    [
        ({}, -1),
        ({"ready": [5, 6]}, 4),
        ({"outstanding": [3], "ready": [5]}, 2),
        ({"returned": [4], "ready": [5]}, 3),
        ({"scheduled": [2], "ready": [7]}, 1),
        ({"outstanding": [9], "returned": [8], "scheduled": [10], "ready": [11]}, 7),
        ({"scheduled": [12, 11]}, 10),
        ({"ready": [6], "late": [5]}, 4),
        ({"ready": [6, 9], "late": [3, 7]}, 2),
    ],
)
def test_low_water_is_just_below_every_message_held(state, low):
    assert build(**state).low_water() == low


def test_low_water_follows_consumption():
    queue = queue_with(1, 2, 3)
    consumer = FakeConsumer(2)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert queue.low_water() == 0
    queue.settle(queue._outstanding[1], ACCEPT, consumer)
    assert queue.low_water() == 1
    queue.settle(queue._outstanding[2], ACCEPT, consumer)
    assert queue.low_water() == 2
    consumer.credit = 1
    queue.dispatch()
    queue.settle(queue._outstanding[3], ACCEPT, consumer)
    assert queue.low_water() == -1


def test_late_lower_sequence_is_delivered_in_arrival_order_and_low_water_recovers():
    queue = build(ready=[6], late=[5])
    consumer = FakeConsumer(5)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert consumer.seqs == [6, 5]
    queue.settle(queue._outstanding[6], ACCEPT, consumer)
    assert queue.low_water() == 4
    queue.settle(queue._outstanding[5], ACCEPT, consumer)
    queue.push(msg(8))
    assert queue.low_water() == 7


# -- cursor callbacks: only for journaled messages ---------------------------------------------------------------


def _accept(queue: Queue, consumer: FakeConsumer) -> None:
    queue.dispatch()
    queue.settle(delivered(queue, consumer), ACCEPT, consumer)


def _reject(queue: Queue, consumer: FakeConsumer) -> None:
    queue.dispatch()
    queue.settle(delivered(queue, consumer), REJECT, consumer)


def _fail(queue: Queue, consumer: FakeConsumer) -> None:
    queue.dispatch()
    queue.settle(delivered(queue, consumer), FAILED, consumer)


def _release(queue: Queue, consumer: FakeConsumer) -> None:
    queue.dispatch()
    queue.settle(delivered(queue, consumer), RELEASE, consumer)


def _presettle(queue: Queue, consumer: FakeConsumer) -> None:
    queue.dispatch()
    queue.discard_delivered(delivered(queue, consumer))


def _expire_sweep(queue: Queue, consumer: FakeConsumer) -> None:
    queue.expire_due(LATER + LATER)


def _purge(queue: Queue, consumer: FakeConsumer) -> None:
    queue.purge()


@pytest.mark.parametrize(
    ("action", "journaled_calls"),
    [
        (_accept, [("discarded", 1, None)]),
        (_reject, [("discarded", 1, None)]),
        (_fail, [("failed", 1, 1)]),
        (_release, []),
        (_presettle, [("discarded", 1, None)]),
        (_expire_sweep, [("discarded", 1, None)]),
        (_purge, [("discarded", 1, None)]),
    ],
)
@pytest.mark.parametrize("journaled", [True, False])
@pytest.mark.parametrize("with_cursor", [True, False])
def test_cursor_hears_only_about_journaled_messages(action, journaled_calls, journaled, with_cursor):
    cursor = FakeCursor()
    queue = Queue("q", cursor=cursor if with_cursor else None)
    queue.push(msg(1, journaled=journaled, expires=LATER))
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    action(queue, consumer)
    assert cursor.calls == (journaled_calls if journaled and with_cursor else [])


# -- purge -----------------------------------------------------------------------------------------------------


def test_purge_drops_what_waits_but_not_what_is_out():
    cursor = FakeCursor()
    queue = Queue("q", cursor=cursor)
    for seq in (1, 2, 3):
        queue.push(msg(seq, journaled=True))
    queue.push(msg(4, journaled=True, deliver_at=LATER))
    consumer = FakeConsumer(2)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(queue._outstanding[2], FAILED, None)
    queue.purge()
    assert sorted(seq for kind, seq, _ in cursor.calls if kind == "discarded") == [2, 3, 4]
    assert queue.depth == 1  # message 1 is still out for delivery
    assert queue._failures == {}


# -- topics ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([None, None, None], [[1], [1], [1]]),
        ([None, lambda m: False, None], [[1], [], [1]]),
        ([lambda m: m.seq == 1, lambda m: m.seq == 2, None], [[1], [], [1]]),
        ([lambda m: False, lambda m: False, lambda m: False], [[], [], []]),
    ],
)
def test_topic_fans_out_to_every_matching_subscription(filters, expected):
    topic = Topic("t")
    queues = [Queue(f"t#{i}", durable=False) for i in range(3)]
    consumers = [FakeConsumer(5) for _ in queues]
    for queue, consumer, accepts in zip(queues, consumers, filters, strict=True):
        topic.subscribe(queue, accepts)
        queue.add_consumer(consumer)
    taken = topic.publish(msg(1))
    assert taken == sum(1 for e in expected if e)
    assert [c.seqs for c in consumers] == expected


def test_topic_shares_one_message_object_across_subscriptions():
    topic = Topic("t")
    queues = [Queue("a"), Queue("b")]
    consumers = [FakeConsumer(1), FakeConsumer(1)]
    for queue, consumer in zip(queues, consumers, strict=True):
        topic.subscribe(queue)
        queue.add_consumer(consumer)
    message = msg(1)
    topic.publish(message)
    assert all(q._outstanding[1] is message for q in queues)


def test_topic_without_subscriptions_drops_the_message():
    assert Topic("t").publish(msg(1)) == 0


def test_unsubscribe_stops_delivery_and_forgets_the_filter():
    topic = Topic("t")
    kept, gone = Queue("kept"), Queue("gone")
    topic.subscribe(kept)
    topic.subscribe(gone, lambda m: True)
    topic.unsubscribe(gone)
    topic.unsubscribe(gone)  # twice is harmless
    assert topic.publish(msg(1)) == 1
    assert (len(kept.waiting), len(gone.waiting)) == (1, 0)
    assert topic.filters == {}
    assert topic.subscriptions == [kept]


def test_node_kinds_and_defaults():
    queue, topic = Queue("q"), Topic("t", durable=False)
    assert (queue.kind, queue.durable, queue.cursor) == ("queue", True, None)
    assert (topic.kind, topic.durable) == ("topic", False)
    message = Message(1, b"x")
    assert (message.priority, message.expires, message.deliver_at, message.journaled) == (4, 0, 0, False)


def test_now_ms_is_wall_clock_milliseconds():
    before = int(time.time() * 1000)
    assert before <= REAL_NOW_MS() <= int(time.time() * 1000)
