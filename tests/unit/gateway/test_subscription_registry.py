"""The running server's subscriptions (gateway.subscriptions): filters, store writes, delete, restore."""

from __future__ import annotations

from subgate.engine.nodes import Message, Topic
from subgate.engine.records import SubscriptionRecord
from subgate.gateway.subscriptions import Subscriptions, subscription_filter
from subgate.mapping.subscriptions import DURABLE, VOLATILE, Details, Kind, SubscriptionKey
from tests.unit.gateway.test_router import make_router


def message(seq: int, origin: str | None = None, raw: bytes = b"") -> Message:
    return Message(seq, raw, origin=origin)


def test_filter_takes_only_messages_after_its_start():
    accepts = subscription_filter(10, None, None)
    assert not accepts(message(10))
    assert accepts(message(11))


def test_filter_no_local_by_container_id():
    accepts = subscription_filter(0, "app1", None)
    assert not accepts(message(1, "app1"))
    assert accepts(message(2, "app2"))
    assert accepts(message(3, None))  # recovered or management messages have no origin


def test_filter_applies_the_selector_to_the_raw_bytes():
    accepts = subscription_filter(0, None, lambda raw: raw == b"yes")
    assert accepts(message(1, raw=b"yes"))
    assert not accepts(message(2, raw=b"no"))


def setup() -> tuple[Subscriptions, Topic, list[tuple]]:
    router = make_router()
    topic = router.create("prices", "topic", durable=True)
    assert isinstance(topic, Topic)
    calls = router.writer.calls  # type: ignore[attr-defined]
    return Subscriptions(router, router.writer, router.pager), topic, calls


def test_durable_subscription_gets_a_cursor_a_row_and_journals_the_topic():
    subs, topic, calls = setup()
    key = SubscriptionKey(DURABLE, "app1", "s")
    sub = subs.create(Kind.DURABLE, key, Details("prices", None, False), topic, "app1", None, "s")
    assert subs.get(key) is sub and subs.named() == [sub]
    assert topic.durable_subscriptions == 1
    assert sub.cursor is not None and sub.cursor.cursor_id in subs.router.tracked
    kinds = [c[0] for c in calls]
    assert "submit_cursor" in kinds and "submit_subscription" in kinds
    record = next(c[1] for c in calls if c[0] == "submit_subscription")
    assert (record.kind, record.client_id, record.name, record.durable) == ("durable", "app1", "s", True)

    consumer = object()
    subs.add_consumer(sub, consumer)
    assert sub.existing().consumers == 1
    subs.remove_consumer(sub, consumer)
    subs.remove_consumer(sub, consumer)  # twice: no second write
    assert [c for c in calls if c[0] == "submit_subscription_consumers"] == [
        ("submit_subscription_consumers", sub.id, 1),
        ("submit_subscription_consumers", sub.id, 0),
    ]

    topic.publish(message(subs.router.last_seq + 1))
    assert sub.queue.depth == 1
    subs.delete(sub)
    assert subs.get(key) is None and topic.subscriptions == [] and topic.durable_subscriptions == 0
    assert sub.queue.depth == 0
    assert calls[-1] == ("submit_drop_subscription", sub.id, sub.cursor.cursor_id)
    assert sub.cursor.cursor_id not in subs.router.tracked


def test_plain_and_volatile_subscriptions_have_no_cursor():
    subs, topic, calls = setup()
    plain = subs.create(Kind.PLAIN, None, Details("prices", None, False), topic, "c1", None, "link-1")
    assert plain.cursor is None and plain.id == 0 and subs.named() == []
    key = SubscriptionKey(VOLATILE, None, "v")
    volatile = subs.create(Kind.SHARED_VOLATILE, key, Details("prices", None, False), topic, "c1", None, "v|x")
    assert volatile.cursor is None and subs.get(key) is volatile
    assert topic.durable_subscriptions == 0
    consumer = object()
    subs.add_consumer(plain, consumer)  # unnamed: nothing stored
    assert not [c for c in calls if c[0] == "submit_subscription_consumers"]
    subs.delete(plain)
    assert calls[-1][0] != "submit_drop_subscription"


def test_restore_rebuilds_a_durable_subscription():
    subs, topic, _ = setup()
    record = SubscriptionRecord(7, "shared-durable", True, None, "g", "prices", "a > 1", True, 0, 3, 1000)
    sub = subs.restore(record, topic, None)
    assert sub.key == SubscriptionKey(DURABLE, None, "g")
    assert sub.kind is Kind.SHARED_DURABLE and sub.details == Details("prices", "a > 1", True)
    assert sub.cursor is not None and sub.cursor.cursor_id == 3
    assert topic.durable_subscriptions == 1
    # ids continue after the restored one
    key = SubscriptionKey(DURABLE, "c", "n")
    assert subs.create(Kind.DURABLE, key, Details("prices", None, False), topic, "c", None, "n").id == 8
