"""engine.backlog and the queue's side of it: the backlog limit of a durable queue (messages held, paged-out ones
included), the policy table, ``backlog_full`` from the limit to the resume mark, a topic full while a durable
subscription is, and the server's memory gauge (engine.memory.HighWater) counted from take to discard.

Pure and fast: no proton, no store (issue 19, item 3).
"""

from __future__ import annotations

import pytest

from subgate.engine import backlog
from subgate.engine.address_rules import AddressRules
from subgate.engine.backlog import BacklogLimit
from subgate.engine.memory import BLOCK, FAIL, Answer, HighWater, MemoryLimit, Sender
from subgate.engine.nodes import Queue, Topic
from subgate.mapping.address_settings import AddressSettingsError
from tests.unit.engine.test_memory import ACCEPT, Taker, msg


def durable(limit: int = 10, policy: str = BLOCK, *, page: int = 0, gauge: HighWater | None = None) -> Queue:
    queue = Queue("d", durable=True)
    queue.limit_memory(MemoryLimit(backlog=BacklogLimit(limit, policy), gauge=gauge or HighWater()))
    if page:
        queue.use_journal_pages(page, lambda *args: None)
    return queue


@pytest.mark.parametrize(
    ("policy", "sender", "depth", "expected"),
    [
        (FAIL, Sender.LINK, 9, Answer.TAKE),
        (FAIL, Sender.LINK, 10, Answer.REJECT),
        (FAIL, Sender.RELAY, 10, Answer.REJECT),
        (BLOCK, Sender.LINK, 19, Answer.TAKE),  # credit granted before it filled, up to twice the limit
        (BLOCK, Sender.LINK, 20, Answer.REJECT),
        (BLOCK, Sender.RELAY, 10, Answer.REJECT),
    ],
)
def test_the_policy_table(policy, sender, depth, expected):
    assert backlog.answer(BacklogLimit(10, policy), sender, depth) is expected


def test_no_limit_takes_everything_and_policies_are_checked():
    assert backlog.answer(BacklogLimit(), Sender.RELAY, 10**9) is Answer.TAKE
    with pytest.raises(ValueError):
        BacklogLimit(10, "drop")
    with pytest.raises(ValueError):
        BacklogLimit(-1)


@pytest.mark.parametrize(("policy", "resume"), [(BLOCK, 8), (FAIL, 9)])
def test_full_at_the_limit_including_paged_out_messages_until_the_resume_mark(policy, resume):
    queue = durable(10, policy, page=4)
    for seq in range(1, 10):
        queue.push(msg(seq, journaled=True))
    assert queue.depth == 9 and queue.paging and not queue.backlog_full
    queue.push(msg(10, journaled=True))
    assert queue.backlog_full
    assert backlog.refusal(queue, Sender.RELAY) is not None
    taker = Taker(10)
    queue.add_consumer(taker)
    queue.dispatch()
    for message in taker.got[: 10 - resume - 1]:
        queue.settle(message, ACCEPT, taker)
    assert queue.depth == resume + 1 and queue.backlog_full
    queue.settle(taker.got[10 - resume - 1], ACCEPT, taker)
    assert queue.depth == resume and not queue.backlog_full


def test_a_temporary_queue_has_no_backlog_limit():
    queue = Queue("t", durable=False)
    queue.limit_memory(MemoryLimit(backlog=BacklogLimit(1)))
    for seq in range(1, 5):
        queue.push(msg(seq))
    assert not queue.backlog_full


def test_a_topic_is_full_while_a_durable_subscription_is_and_tells_its_publishers_when_not():
    topic = Topic("t")
    sub = durable(2, BLOCK)
    sub.on_backlog = lambda queue, full: backlog.subscription_changed(topic, queue, full)
    topic.subscribe(sub)
    unblocked: list[Topic] = []
    topic.on_unblocked = unblocked.append
    topic.publish(msg(1, journaled=True))
    assert not topic.backlog_full
    topic.publish(msg(2, journaled=True))
    assert topic.backlog_full and backlog.withholds(topic)
    assert backlog.refusal(topic, Sender.LINK) is None  # granted credit is honoured up to twice the limit
    assert backlog.refusal(topic, Sender.RELAY) is not None
    topic.unsubscribe(sub)  # a full subscription that goes does not leave its topic blocked
    assert not topic.backlog_full and unblocked == [topic]


def test_the_gauge_counts_every_body_held_and_releases_at_the_low_water_mark():
    gauge = HighWater(100)
    released: list[bool] = []
    gauge.on_unblocked = lambda: released.append(True)
    queue = durable(0, gauge=gauge)
    for seq in range(1, 11):
        queue.push(msg(seq, journaled=seq % 2 == 0, size=10))
    assert gauge.bytes == 100 and gauge.blocked
    taker = Taker(2)
    queue.add_consumer(taker)
    queue.dispatch()
    assert gauge.bytes == 100  # delivered and not settled: still held
    queue.settle(taker.got[0], ACCEPT, taker)
    assert gauge.blocked and not released  # 90 bytes: above the low-water mark
    queue.settle(taker.got[1], ACCEPT, taker)
    assert not gauge.blocked and released == [True] and gauge.bytes == 80  # down to 80 %


def test_address_settings_change_the_servers_limit_per_pattern_and_check_the_policy():
    rules = AddressRules(("capped.#:max_backlog_messages=3", "loose.#:backlog_full_policy=fail"), ".", BacklogLimit(9))
    capped, loose, other = (durable(0) for _ in range(3))
    capped.name = capped.address = "capped.a"
    loose.name = loose.address = "loose.a"
    for queue in (capped, loose, other):
        rules.govern(queue)
    assert capped.backlog == BacklogLimit(3, BLOCK)
    assert loose.backlog == BacklogLimit(9, FAIL)
    assert other.backlog == BacklogLimit(9, BLOCK)
    with pytest.raises(AddressSettingsError, match="block or fail"):
        AddressRules(("x:backlog_full_policy=drop",))


def test_a_message_shared_by_several_subscriptions_counts_once_on_the_gauge():
    gauge = HighWater(1000)
    topic = Topic("t")
    first, second = durable(0, gauge=gauge), durable(0, gauge=gauge)
    topic.subscribe(first)
    topic.subscribe(second)
    topic.publish(msg(1, size=100))
    assert gauge.bytes == 100
    first.purge()
    assert gauge.bytes == 100  # the other subscription still holds it
    second.purge()
    assert gauge.bytes == 0
