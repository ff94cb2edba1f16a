"""storage.subscription_admin: the operator's subscriptions on the store while no server runs (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, insert

from subgate.engine.selection import compile_selector
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import AckCursor, JournalMessage, Subscription
from subgate.storage.subscription_admin import OfflineRefusal, OfflineSubscriptions
from tests.support.store_rows import cursor_row, message_row, subscription_row


def insert_rows(engine: Engine, model: type, rows: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        conn.execute(insert(model), rows)


@pytest.fixture
def store(engine: Engine, store_url: str):
    insert_rows(engine, AckCursor, [cursor_row(1, "app1.sub1"), cursor_row(2, "app1.busy")])
    insert_rows(
        engine,
        Subscription,
        [
            subscription_row(1, "sub1", "app1", cursor_id=1),
            subscription_row(2, "busy", "app1", cursor_id=2, consumers=1),
            subscription_row(3, "vol", None, kind="shared-volatile", durable=False),
            subscription_row(4, "odd", "app1", selector="this is not a selector ((("),
        ],
    )
    insert_rows(engine, JournalMessage, [message_row(i) for i in range(1, 4)])
    warnings: list[str] = []
    admin = OfflineSubscriptions(store_url, compile_selector, warnings.append)
    yield admin, warnings
    admin.close()


def test_list_counts_backlogs_and_says_when_a_selector_cannot_be_evaluated(store):
    admin, warnings = store
    counted = {c.record.name: c.backlog for c in admin.list(client_id="app1", global_only=False, topic=None)}
    assert counted["sub1"] == 3 and counted["odd"] is None
    assert len(warnings) == 1 and "'odd'" in warnings[0] and "backlog unknown" in warnings[0]


def test_show_names_what_is_missing(store):
    admin, _ = store
    assert admin.show("sub1", "app1").record.cursor_id == 1
    with pytest.raises(OfflineRefusal, match="no subscription 'nope' of client-id 'app1'"):
        admin.show("nope", "app1")


def test_unsubscribe_follows_the_offline_rules(store):
    admin, _ = store
    with pytest.raises(OfflineRefusal, match="not durable"):
        admin.unsubscribe("vol", None)
    with pytest.raises(OfflineRefusal, match="1 active consumer"):
        admin.unsubscribe("busy", "app1")
    admin.unsubscribe("sub1", "app1")
    with pytest.raises(OfflineRefusal, match="no subscription 'sub1'"):
        admin.show("sub1", "app1")


def test_a_store_behind_the_code_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'behind.db'}"
    upgrade(url, "0004")
    with pytest.raises(OfflineRefusal, match="run 'subgate db upgrade'"):
        OfflineSubscriptions(url, compile_selector, print)


def test_an_empty_store_is_the_wrong_place_not_one_to_upgrade(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    make_engine(url).dispose()
    with pytest.raises(OfflineRefusal, match="no server owns a store there") as refused:
        OfflineSubscriptions(url, compile_selector, print)
    assert "db upgrade" not in str(refused.value)
