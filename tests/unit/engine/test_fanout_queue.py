"""What a primary holds for a secondary that is behind (``engine.fanout_queue``): in order up to the limit, then
the latest value per topic, a remove kept when the secondary may hold the topic, and order back after."""

from __future__ import annotations

from subgate.engine.fanout import ADD, REMOVE, SNAPSHOT_END, UPDATE
from subgate.engine.fanout_queue import ReplicationQueue


def drain(queue: ReplicationQueue) -> list[tuple[str, str, bytes | None]]:
    out = []
    while (item := queue.pop()) is not None:
        out.append(item)
    return out


def test_under_the_limit_every_operation_waits_in_order():
    queue = ReplicationQueue(10)
    for i in range(5):
        queue.push(UPDATE, "a", b"%d" % i)
    assert len(queue) == 5 and queue.folded == 0
    assert drain(queue) == [(UPDATE, "a", b"%d" % i) for i in range(5)]
    assert not queue


def test_past_the_limit_each_topic_keeps_only_its_latest_value_so_the_queue_is_bounded_by_the_topics():
    queue = ReplicationQueue(3)
    for i in range(1000):
        queue.push(UPDATE, f"t{i % 7}", b"%d" % i)
    assert len(queue) == 3 + 7  # the first three in order, then one per topic
    assert queue.folded == 1000 - 10
    sent = drain(queue)
    assert sent[:3] == [(UPDATE, "t0", b"0"), (UPDATE, "t1", b"1"), (UPDATE, "t2", b"2")]
    latest = {path: value for _, path, value in sent}
    assert latest == {f"t{k}": b"%d" % max(i for i in range(1000) if i % 7 == k) for k in range(7)}


def test_once_the_conflated_part_is_sent_operations_wait_in_order_again():
    queue = ReplicationQueue(1)
    for value in (b"1", b"2", b"3"):
        queue.push(UPDATE, "a", value)
    assert drain(queue) == [(UPDATE, "a", b"1"), (UPDATE, "a", b"3")]
    queue.push(UPDATE, "a", b"4")
    queue.push(UPDATE, "b", b"5")  # over the limit again: conflated, but nothing to fold
    assert drain(queue) == [(UPDATE, "a", b"4"), (UPDATE, "b", b"5")]


def test_a_remove_is_kept_before_the_topics_new_value_and_an_add_then_remove_leaves_nothing():
    queue = ReplicationQueue(0)
    queue.push(UPDATE, "a", b"1")
    queue.push(REMOVE, "a", None)  # the secondary may hold a: the remove stays
    queue.push(ADD, "a", b"2")
    queue.push(UPDATE, "a", b"3")
    queue.push(ADD, "new", b"x")
    queue.push(REMOVE, "new", None)  # created and removed while conflated: the secondary never hears of it
    for _ in range(100):  # churn does not grow the queue
        queue.push(ADD, "new", b"y")
        queue.push(REMOVE, "new", None)
    assert len(queue) == 1
    assert drain(queue) == [(REMOVE, "a", None), (ADD, "a", b"3")]


def test_snapshot_end_stays_after_the_snapshot_adds_queued_before_it():
    queue = ReplicationQueue(2)
    for i in range(5):
        queue.push(ADD, f"t{i}", b"v")
    queue.push(SNAPSHOT_END, "", None)
    queue.push(UPDATE, "t4", b"w")  # folded into its add, which stays before snapshot-end
    queue.push(ADD, "t9", b"z")
    sent = drain(queue)
    assert [op for op, _, _ in sent] == [ADD] * 5 + [SNAPSHOT_END, ADD]
    assert sent[4] == (ADD, "t4", b"w") and sent[-1] == (ADD, "t9", b"z")
