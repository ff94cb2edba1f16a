"""The journal writer's typed operations (``storage.operations``) and their table (``storage.applying.APPLY``).

The table's shape is checked directly; every operation type then goes through the real writer on SQLite and a
throwaway PostgreSQL (``engine`` from tests/storage/conftest.py), the ones test_journal.py and
test_paging_reads.py do not already cover one by one here, and all of them together in one batch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from subgate.engine.records import (
    BookmarkRead,
    JournalStatsRead,
    MetricsRead,
    PageRead,
    ReplayRead,
    RetentionRun,
    SubscriptionRecord,
)
from subgate.storage.applying import APPLY
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Node, Subscription
from subgate.storage.operations import (
    TICKETED,
    Acknowledge,
    AppendMessage,
    Barrier,
    CommitTransaction,
    CreateCursor,
    CreateNode,
    CreateSubscription,
    DropCursor,
    DropNode,
    DropRemoval,
    DropSubscription,
    MoveLowWater,
    Operation,
    ReadBookmark,
    ReadJournalStats,
    ReadMetrics,
    ReadPage,
    ReadReplay,
    RecordFailures,
    RegisterRemoval,
    Retain,
    SetSubscriptionConsumers,
    Ticketed,
)
from subgate.storage.removals import RemovalRecord, list_removal_registrations
from subgate.storage.subscriptions import list_subscriptions
from tests.storage.test_journal import T0, Journal, new_message, with_queue

SAMPLES: list[Operation] = [
    AppendMessage(new_message(1), 1),
    Acknowledge(1, 1),
    CommitTransaction([new_message(2)], [(1, 2)], 2),
    ReadPage(PageRead(1, "q", 0, 10, 5), 3),
    ReadReplay(ReplayRead("t", (("p", 1),), 5), 8),
    Retain(RetentionRun(5, 0, 100, 0), 9),
    ReadBookmark(BookmarkRead("s", "c1"), 5),
    ReadJournalStats(JournalStatsRead(), 6),
    ReadMetrics(MetricsRead(), 7),
    Barrier(4),
    RecordFailures(1, 1, 2),
    MoveLowWater(1, 1),
    CreateNode(1, "q", "queue", True, False),
    DropNode("q"),
    CreateCursor(1, "queue", "q", "q", 0),
    DropCursor(1),
    CreateSubscription(SubscriptionRecord(1, "durable", True, "c1", "s", "t", None, False, 0, 1, T0)),
    SetSubscriptionConsumers(1, 2),
    DropSubscription(1, None),
    RegisterRemoval(1, "a/b", "c1", "link"),
    DropRemoval(1),
]


@pytest.fixture
def journal(engine: Engine) -> Iterator[Journal]:
    """A journal whose writer is not started yet."""
    journal = Journal(engine)
    yield journal
    journal.writer.close(timeout=30)


def subscription(sub_id: int, cursor_id: int | None, name: str = "s") -> SubscriptionRecord:
    return SubscriptionRecord(sub_id, "durable", True, "c1", name, "t", "color = 'red'", True, 1, cursor_id, T0)


# -- the table -----------------------------------------------------------------------------------------------


def test_every_operation_has_one_apply_function_taking_its_own_type():
    kinds = set(typing.get_args(Operation))
    assert {type(op) for op in SAMPLES} == kinds
    assert set(APPLY) == kinds
    for kind, apply in APPLY.items():
        assert typing.get_type_hints(apply)["op"] is kind, apply.__name__


def test_operations_are_frozen_and_slotted():
    for op in SAMPLES:
        assert not hasattr(op, "__dict__"), type(op).__name__
        field = dataclasses.fields(op)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(op, field, None)
    # the two built per message on the reactor set their slots themselves: still equal, hashable and keyword-built
    assert Acknowledge(cursor_id=1, message_id=2) == Acknowledge(1, 2)
    assert hash(Acknowledge(1, 2)) == hash(Acknowledge(1, 2))
    assert AppendMessage(ticket=3, message=new_message(1)) == AppendMessage(new_message(1), 3)
    assert repr(Acknowledge(1, 2)) == "Acknowledge(cursor_id=1, message_id=2)"


def test_the_ticketed_operations_are_exactly_those_that_report_back():
    assert set(TICKETED) == set(typing.get_args(Ticketed))
    assert {type(op) for op in SAMPLES if hasattr(op, "ticket")} == set(TICKETED)


# -- through the real writer -----------------------------------------------------------------------------------


def test_a_transaction_lands_its_messages_and_acks_together(journal: Journal):
    with_queue(journal, 1, 2)
    journal.writer.submit_transaction([new_message(3), new_message(4)], [(1, 1), (1, 2), (1, 1)], "txn")
    result = journal.start_and_sync()
    assert result.tokens == [1, 2, "txn", "barrier-1"]
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3, 4]
    assert journal.rows(Ack) == [(1, 1), (1, 2)]
    assert [m.id for m in journal.backlog(journal.cursor(1))] == [3, 4]


def test_a_failing_transaction_fails_whole_and_alone(journal: Journal):
    with_queue(journal, 1)
    journal.writer.start()
    journal.sync()
    journal.writer.submit_message(new_message(2), "m2")
    journal.writer.submit_transaction([new_message(3), new_message(1)], [(1, 1)], "txn")  # 1 exists already
    result = journal.sync()
    assert result.tokens == ["m2", "barrier-2"]
    assert result.failed == ["txn"]
    assert isinstance(result.error, IntegrityError)
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2]  # not message 3 either
    assert journal.rows(Ack) == []


def test_drop_node_removes_only_that_node(journal: Journal):
    journal.writer.submit_node(1, "q", "queue", True, False)
    journal.writer.submit_node(2, "t", "topic", True, True)
    journal.writer.start()
    journal.sync()
    journal.writer.submit_drop_node("q")
    journal.writer.submit_drop_node("missing")  # nothing to drop: not an error
    assert journal.sync().error is None
    assert [row[:3] for row in journal.rows(Node)] == [(2, "t", "topic")]


def test_removal_registrations_are_recorded_and_dropped(journal: Journal):
    journal.writer.submit_removal_registration(1, "a/b", "c1", "link-1")
    journal.writer.submit_removal_registration(2, "x", None, "link-2")
    journal.writer.start()
    assert journal.sync().error is None
    with journal.sessions() as session:
        assert list_removal_registrations(session) == [
            RemovalRecord(1, "a/b", "c1", "link-1"),
            RemovalRecord(2, "x", None, "link-2"),
        ]
    journal.writer.submit_drop_removal_registration(1)
    journal.sync()
    with journal.sessions() as session:
        assert list_removal_registrations(session) == [RemovalRecord(2, "x", None, "link-2")]


def test_subscriptions_are_created_counted_and_dropped_with_their_cursor(journal: Journal):
    journal.writer.submit_node(1, "t", "topic", True, False)
    for cursor_id in (1, 2):
        journal.writer.submit_cursor(cursor_id, "subscription", f"c1.s{cursor_id}", "t", 0)
    journal.writer.submit_message(new_message(1, "t"), 1)
    journal.writer.submit_subscription(subscription(1, 1, "s1"))
    journal.writer.submit_subscription(subscription(2, 2, "s2"))
    journal.writer.submit_subscription(subscription(3, None, "s3"))
    for cursor_id in (1, 2):
        journal.writer.submit_ack(cursor_id, 1)
        journal.writer.submit_failures(cursor_id, 1, 3)
    journal.writer.submit_subscription_consumers(1, 4)
    assert journal.start_and_sync().error is None
    with journal.sessions() as session:
        assert [(s.id, s.consumers) for s in list_subscriptions(session)] == [(1, 4), (2, 1), (3, 1)]
        assert list_subscriptions(session)[1] == subscription(2, 2, "s2")  # every field, created_ms included
    journal.writer.submit_drop_subscription(1, 1)
    journal.writer.submit_drop_subscription(3, None)
    assert journal.sync().error is None
    with journal.sessions() as session:
        assert [s.id for s in list_subscriptions(session)] == [2]
    assert [row[0] for row in journal.rows(AckCursor)] == [2]
    assert journal.rows(Ack) == [(2, 1)]
    assert journal.rows(DeliveryFailure) == [(2, 1, 3)]


def test_every_operation_type_in_one_batch_in_order(journal: Journal):
    """One batch with each operation type: structural writes and reads keep their place among the rows."""
    answers: list[typing.Any] = []
    writer = journal.writer
    writer.submit_node(1, "q", "queue", True, False)
    writer.submit_node(2, "gone", "queue", True, False)
    writer.submit_cursor(1, "queue", "q", "q", 0)
    writer.submit_cursor(2, "subscription", "c1.s", "q", 0)
    for seq in (1, 2, 3):
        writer.submit_message(new_message(seq), f"m{seq}")
    writer.submit_ack(1, 1)
    writer.submit_failures(1, 2, 5)
    writer.submit_page(PageRead(1, "q", 0, 10, 10), answers.append)  # sees 2 and 3 (1 is acked)
    writer.submit_transaction([new_message(4)], [(1, 3)], "txn")
    writer.submit_low_water(1, 2)
    writer.submit_drop_node("gone")
    writer.submit_subscription(subscription(1, 2))
    writer.submit_subscription_consumers(1, 0)
    writer.submit_removal_registration(1, "a", "c1", "l")
    writer.submit_drop_removal_registration(1)
    writer.submit_drop_subscription(1, 2)
    writer.submit_cursor(3, "queue", "other", "other", 0)
    writer.submit_drop_cursor(3)
    result = journal.start_and_sync()
    assert result.error is None and result.size == 21
    page, *rest = [token for token in result.tokens if not isinstance(token, str)]
    assert rest == []
    page(None)
    assert [(m.id, m.failures) for m in answers[0]] == [(2, 5), (3, 0)]
    assert [t for t in result.tokens if isinstance(t, str)] == ["m1", "m2", "m3", "txn", "barrier-1"]
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3, 4]
    assert journal.rows(Ack) == [(1, 3)]  # the low-water move cleared the ack of 1, not the transaction's of 3
    assert journal.rows(DeliveryFailure) == []
    assert [c.id for c in journal.catalog().cursors] == [1]
    assert journal.cursor(1).low_water == 2
    assert [row[1] for row in journal.rows(Node)] == ["q"]
    assert journal.rows(Subscription) == []
    with journal.sessions() as session:
        assert list_removal_registrations(session) == []
    assert [m.id for m in journal.backlog(journal.cursor(1))] == [4]
