"""storage.subscriptions on a real database: SQLite and a throwaway PostgreSQL (``store_url``).

Rows are inserted directly with SQLAlchemy Core, the way the journal writer leaves them, and each test frames
its own unit of work (the repository never commits).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from subgate.engine.records import SubscriptionRecord
from subgate.storage.db import session_factory
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Subscription
from subgate.storage.subscriptions import (
    backlog_count,
    delete_subscription,
    find_subscription,
    list_subscriptions,
    reset_runtime,
)
from tests.support.store_rows import cursor_row, message_row, subscription_row

CREATED_MS = 1_767_323_045_123


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return session_factory(engine)


def insert_rows(engine: Engine, model: type, rows: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        conn.execute(insert(model), rows)


def count(engine: Engine, model: type, *where: Any) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(model).where(*where)) or 0


@pytest.fixture
def populated(engine: Engine) -> Engine:
    """Four subscriptions: two of app1, one of app2 on another topic, one global; plus a volatile one."""
    insert_rows(engine, AckCursor, [cursor_row(1, "app1.sub1"), cursor_row(2, "gsub")])
    insert_rows(
        engine,
        Subscription,
        [
            subscription_row(1, "sub1", "app1", cursor_id=1, selector="colour = 'red'", no_local=True, consumers=1),
            subscription_row(2, "sub2", "app1", topic="orders"),
            subscription_row(3, "sub1", "app2", topic="orders", consumers=2),
            subscription_row(4, "gsub", None, cursor_id=2, consumers=3),
            subscription_row(5, "vol", None, kind="shared-volatile", durable=False, consumers=1),
        ],
    )
    return engine


def names(records: list[SubscriptionRecord]) -> list[tuple[str | None, str]]:
    return [(r.client_id, r.name) for r in records]


# -- list and find -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, [(None, "gsub"), (None, "vol"), ("app1", "sub1"), ("app1", "sub2"), ("app2", "sub1")]),
        ({"client_id": "app1"}, [("app1", "sub1"), ("app1", "sub2")]),
        ({"global_only": True}, [(None, "gsub"), (None, "vol")]),
        ({"topic": "orders"}, [("app1", "sub2"), ("app2", "sub1")]),
        ({"client_id": "app2", "topic": "orders"}, [("app2", "sub1")]),
        ({"global_only": True, "topic": "orders"}, []),
        ({"client_id": "nobody"}, []),
    ],
    ids=["all", "client-id", "global", "topic", "client-id+topic", "global+topic", "unknown-client"],
)
def test_list_filters_and_orders_global_first(populated, sessions, filters, expected):
    with sessions() as session:
        assert names(list_subscriptions(session, **filters)) == expected


def test_list_refuses_client_id_with_global_only(populated, sessions):
    with sessions() as session, pytest.raises(ValueError):
        list_subscriptions(session, client_id="app1", global_only=True)


def test_records_carry_every_field(populated, sessions):
    with sessions() as session:
        record = find_subscription(session, "sub1", client_id="app1")
    assert record == SubscriptionRecord(
        id=1,
        kind="durable",
        durable=True,
        client_id="app1",
        name="sub1",
        topic="prices",
        selector="colour = 'red'",
        no_local=True,
        consumers=1,
        cursor_id=1,
        created_ms=CREATED_MS,
    )


@pytest.mark.parametrize(
    ("name", "client_id", "expected_id"),
    [
        ("sub1", "app1", 1),
        ("sub1", "app2", 3),
        ("gsub", None, 4),
        ("sub1", None, None),  # a client's subscription is not global
        ("gsub", "app1", None),  # and a global one belongs to no client
        ("missing", "app1", None),
    ],
)
def test_find_scopes_by_client_id_or_global(populated, sessions, name, client_id, expected_id):
    with sessions() as session:
        record = find_subscription(session, name, client_id=client_id)
    assert (record.id if record else None) == expected_id


def test_find_prefers_the_durable_one_when_a_volatile_one_shares_its_name(engine, sessions):
    # Durable and volatile subscriptions live in separate namespaces (mapping doc §2.8).
    insert_rows(
        engine,
        Subscription,
        [
            subscription_row(7, "s", None, kind="shared-volatile", durable=False),
            subscription_row(8, "s", None, kind="shared-durable"),
        ],
    )
    with sessions() as session:
        record = find_subscription(session, "s", client_id=None)
    assert record is not None and (record.id, record.durable) == (8, True)


# -- delete ------------------------------------------------------------------------------------------------------
def test_delete_removes_the_row_and_its_cursor_acks_and_failures_only(populated, sessions):
    insert_rows(populated, JournalMessage, [message_row(i) for i in range(1, 5)])
    insert_rows(populated, Ack, [{"cursor_id": 1, "message_id": 2}, {"cursor_id": 2, "message_id": 2}])
    insert_rows(
        populated,
        DeliveryFailure,
        [{"cursor_id": 1, "message_id": 3, "failures": 2}, {"cursor_id": 2, "message_id": 3, "failures": 1}],
    )
    with sessions.begin() as session:
        record = find_subscription(session, "sub1", client_id="app1")
        assert record is not None
        delete_subscription(session, record)

    with sessions() as session:
        assert find_subscription(session, "sub1", client_id="app1") is None
        assert find_subscription(session, "sub1", client_id="app2") is not None
    assert count(populated, AckCursor, AckCursor.id == 1) == 0
    assert count(populated, Ack, Ack.cursor_id == 1) == 0
    assert count(populated, DeliveryFailure, DeliveryFailure.cursor_id == 1) == 0
    # Nothing else: the other cursor's rows and the journal stay.
    assert count(populated, AckCursor) == 1
    assert count(populated, Ack) == 1
    assert count(populated, DeliveryFailure) == 1
    assert count(populated, JournalMessage) == 4
    assert count(populated, Subscription) == 4


def test_delete_without_a_cursor(populated, sessions):
    with sessions.begin() as session:
        record = find_subscription(session, "sub2", client_id="app1")
        assert record is not None and record.cursor_id is None
        delete_subscription(session, record)
    assert count(populated, Subscription) == 4
    assert count(populated, AckCursor) == 2


def test_delete_is_undone_with_the_callers_transaction(populated, sessions):
    with sessions() as session:
        record = find_subscription(session, "gsub", client_id=None)
        assert record is not None
        delete_subscription(session, record)
        session.rollback()
    assert count(populated, Subscription) == 5
    assert count(populated, AckCursor) == 2


# -- reset at start-up -------------------------------------------------------------------------------------------
def test_reset_runtime_drops_volatile_subscriptions_and_zeroes_consumers(populated, sessions):
    insert_rows(populated, AckCursor, [cursor_row(3, "vol2")])
    insert_rows(populated, Ack, [{"cursor_id": 3, "message_id": 1}])
    insert_rows(
        populated,
        Subscription,
        [subscription_row(6, "vol2", "app1", kind="shared-volatile", durable=False, cursor_id=3, consumers=4)],
    )
    with sessions.begin() as session:
        removed = reset_runtime(session)
    assert removed == 2
    with sessions() as session:
        records = list_subscriptions(session)
    assert names(records) == [(None, "gsub"), ("app1", "sub1"), ("app1", "sub2"), ("app2", "sub1")]
    assert {r.consumers for r in records} == {0}
    assert all(r.durable for r in records)
    assert count(populated, AckCursor, AckCursor.id == 3) == 0
    assert count(populated, Ack, Ack.cursor_id == 3) == 0
    assert count(populated, AckCursor) == 2

    with sessions.begin() as session:
        assert reset_runtime(session) == 0


# -- backlog -----------------------------------------------------------------------------------------------------
@pytest.fixture
def journal(engine: Engine) -> Engine:
    """Cursor 1 at low-water 2 with acks 4 and 6; messages 1..8 on prices (odd ones red), 9 and 10 elsewhere, 11 a
    non-persistent one on prices."""
    insert_rows(engine, AckCursor, [cursor_row(1, "app1.sub1", low_water=2)])
    payloads = {i: (b"red" if i % 2 else b"blue") for i in range(1, 9)}
    insert_rows(engine, JournalMessage, [message_row(i, payload=payloads[i]) for i in range(1, 9)])
    insert_rows(engine, JournalMessage, [message_row(9, "orders"), message_row(10, "orders")])
    # A non-persistent message journaled while the subscription paged: gone at the next start, not counted.
    insert_rows(engine, JournalMessage, [{**message_row(11, payload=b"red"), "durable": False}])
    insert_rows(engine, Ack, [{"cursor_id": 1, "message_id": 4}, {"cursor_id": 1, "message_id": 6}])
    insert_rows(
        engine,
        Subscription,
        [subscription_row(1, "sub1", "app1", cursor_id=1), subscription_row(2, "nocursor", "app1")],
    )
    return engine


def test_backlog_counts_unacked_messages_of_the_topic_above_low_water(journal, sessions):
    with sessions() as session:
        record = find_subscription(session, "sub1", client_id="app1")
        assert record is not None
        assert backlog_count(session, record, None) == 4  # 3, 5, 7, 8


def test_backlog_with_a_predicate_counts_only_matching_payloads(journal, sessions):
    seen: list[bytes] = []

    def red(payload: bytes) -> bool:
        seen.append(payload)
        return payload == b"red"

    with sessions() as session:
        record = find_subscription(session, "sub1", client_id="app1")
        assert record is not None
        assert backlog_count(session, record, red, batch=2) == 3  # 3, 5, 7
    assert seen == [b"red", b"red", b"red", b"blue"]  # only held messages reach the predicate


def test_backlog_of_a_subscription_without_a_cursor_is_zero(journal, sessions):
    with sessions() as session:
        record = find_subscription(session, "nocursor", client_id="app1")
        assert record is not None
        assert backlog_count(session, record, None) == 0
        assert backlog_count(session, record, lambda _payload: True) == 0
