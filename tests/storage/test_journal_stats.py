"""storage.journal_stats on SQLite and a throwaway PostgreSQL (``engine``): a subscription's bookmark and the
journal's figures, read directly on a connection (the offline commands' path) and through the journal writer's
``submit_read`` (the running server's path), which must see what was submitted before it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from subgate.engine.records import (
    Bookmark,
    BookmarkRead,
    BranchFigures,
    JournalEnd,
    JournalFigures,
    JournalPosition,
    JournalStats,
    JournalStatsRead,
)
from subgate.storage.applying import StoreReadFailed
from subgate.storage.journal_stats import branch_of, journal_stats, missing_bookmark, read_bookmark
from subgate.storage.models import Ack, AckCursor, JournalMessage, Subscription
from tests.storage.test_journal import Journal, new_message
from tests.support.store_rows import cursor_row, message_row, subscription_row

BASE = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
BASE_MS = int(BASE.timestamp() * 1000)


def at(seconds: int) -> datetime:
    return BASE + timedelta(seconds=seconds)


def row(id: int, address: str, *, kind: str = "topic", size: int = 10, durable: bool = True) -> dict[str, Any]:
    """A journal row whose ``ts`` is ``BASE`` + 10 s per id, so each end's timestamp names its row."""
    return {**message_row(id, address, b"p" * size), "node_kind": kind, "ts": at(10 * id), "durable": durable}


def ms(id: int) -> int:
    return BASE_MS + 10_000 * id


def seed(engine: Engine, messages: list[dict[str, Any]], **tables: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        if tables.get("cursors"):
            conn.execute(insert(AckCursor), tables["cursors"])
        if messages:
            conn.execute(insert(JournalMessage), messages)
        if tables.get("acks"):
            conn.execute(insert(Ack), tables["acks"])
        if tables.get("subscriptions"):
            conn.execute(insert(Subscription), tables["subscriptions"])


def bookmark(engine: Engine, name: str, client_id: str | None, non_durable_after: int | None = None) -> Any:
    with engine.connect() as conn:
        return read_bookmark(conn, BookmarkRead(name, client_id, non_durable_after))


@pytest.fixture
def subscribed(engine: Engine) -> Engine:
    """sub1 of app1 on prices (cursor 1, low-water 2, acks 4 and 6); journal: 1..8 on prices, 9 on prices/fx
    (another address), 10 on orders; 11 and 12 on prices are non-persistent (durable = false), 12 acked."""
    seed(
        engine,
        [row(i, "prices") for i in range(1, 9)]
        + [row(9, "prices/fx"), row(10, "orders")]
        + [row(11, "prices", durable=False), row(12, "prices", durable=False)],
        cursors=[cursor_row(1, "subscription/1", "prices", low_water=2), cursor_row(2, "subscription/2", "orders")],
        acks=[{"cursor_id": 1, "message_id": m} for m in (4, 6, 12)],
        subscriptions=[
            subscription_row(1, "sub1", "app1", cursor_id=1),
            subscription_row(2, "sub1", None, topic="orders", cursor_id=2),
            subscription_row(3, "vol", "app1", kind="shared-volatile", durable=False),
        ],
    )
    return engine


# -- bookmarks ----------------------------------------------------------------------------------------------------
def test_a_bookmark_is_the_low_water_mark_the_acks_above_it_and_the_backlog(subscribed):
    found = bookmark(subscribed, "sub1", "app1")
    assert isinstance(found, Bookmark)
    assert (found.subscription.id, found.subscription.topic, found.subscription.kind) == (1, "prices", "durable")
    # backlog: 3, 5, 7, 8 (above 2, not acked, persistent, this address only)
    assert found.position == JournalPosition(low_water=2, accepted_above=3, highest_accepted=12, backlog=4)


@pytest.mark.parametrize(
    ("non_durable_after", "backlog"),
    [(None, 4), (10, 5), (11, 4), (12, 4), (0, 5), (2, 5)],
    ids=["offline:none", "below-11", "at-11", "above-both", "journal-non-persistent", "at-low-water"],
)
def test_non_persistent_rows_count_only_above_non_durable_after(subscribed, non_durable_after, backlog):
    """The rule of catalog._backlog_stmt: durable = false rows count above non_durable_after (12 is acked)."""
    found = bookmark(subscribed, "sub1", "app1", non_durable_after)
    assert found.position.backlog == backlog


def test_the_backlog_follows_acks_and_the_low_water_mark(subscribed):
    with subscribed.begin() as conn:
        conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 3}, {"cursor_id": 1, "message_id": 5}])
    assert bookmark(subscribed, "sub1", "app1").position == JournalPosition(2, 5, 12, 2)  # 7 and 8 left
    with subscribed.begin() as conn:
        conn.execute(AckCursor.__table__.update().where(AckCursor.id == 1).values(low_water=8))
        conn.execute(Ack.__table__.delete().where(Ack.cursor_id == 1, Ack.message_id <= 8))
    assert bookmark(subscribed, "sub1", "app1").position == JournalPosition(8, 1, 12, 0)


def test_global_and_client_id_scopes_are_apart(subscribed):
    global_ = bookmark(subscribed, "sub1", None)
    assert global_.subscription.id == 2 and global_.subscription.client_id is None
    assert global_.position == JournalPosition(0, 0, None, 1)  # 10 on orders
    assert bookmark(subscribed, "sub1", "app2") is None
    assert bookmark(subscribed, "nope", None) is None


def test_a_shared_volatile_subscription_has_no_position(subscribed):
    found = bookmark(subscribed, "vol", "app1")
    assert found.subscription.kind == "shared-volatile" and found.position is None
    assert missing_bookmark(found, "vol", "app1") == (
        "subscription 'vol' of client-id 'app1' is shared-volatile, not durable: it has no journal cursor, so no "
        "bookmark (its messages are held in memory only)"
    )
    assert missing_bookmark(None, "vol", None) == "no global subscription 'vol'"
    assert missing_bookmark(bookmark(subscribed, "sub1", "app1"), "sub1", "app1") is None


def test_a_durable_subscription_whose_cursor_row_is_gone_has_no_position(engine):
    seed(engine, [row(1, "t")], subscriptions=[subscription_row(1, "s", "a", topic="t", cursor_id=None)])
    found = bookmark(engine, "s", "a")
    assert found.position is None
    assert missing_bookmark(found, "s", "a") == (
        "subscription 's' of client-id 'a' has no journal cursor in the store, so no bookmark"
    )


def test_the_durable_subscription_wins_over_a_volatile_one_of_the_same_name(engine):
    seed(
        engine,
        [row(1, "t")],
        cursors=[cursor_row(1, "subscription/2", "t")],
        subscriptions=[
            subscription_row(1, "s", "a", topic="t", kind="shared-volatile", durable=False),
            subscription_row(2, "s", "a", topic="t", kind="shared-durable", cursor_id=1),
        ],
    )
    found = bookmark(engine, "s", "a")
    assert found.subscription.id == 2 and found.position == JournalPosition(0, 0, None, 1)


# -- journal figures --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "kind", "branch"),
    [
        ("prices/fx/EURUSD", "topic", "prices"),
        ("prices", "topic", "prices"),
        ("a//b", "topic", "a"),
        ("jobs/eu", "queue", "jobs/eu"),
        ("orders", "queue", "orders"),
    ],
)
def test_branch_of(address, kind, branch):
    assert branch_of(address, kind) == branch


def test_an_empty_journal(engine):
    with engine.connect() as conn:
        assert journal_stats(conn) == JournalStats(JournalFigures(0, 0, None, None), ())


def test_figures_per_branch_with_the_ends_timestamps(engine):
    seed(
        engine,
        [
            row(1, "prices/fx/EURUSD", size=5),
            row(2, "orders", kind="queue", size=7),
            row(3, "prices/eq", size=11),
            row(4, "jobs/eu", kind="queue", size=13),
            row(5, "orders", size=17),  # a topic called like the queue: a branch of its own kind
            row(6, "prices", size=19, durable=False),
            row(7, "jobs/eu", kind="queue", size=23),
        ],
    )
    with engine.connect() as conn:
        stats = journal_stats(conn)
    assert stats.total == JournalFigures(7, 95, JournalEnd(1, ms(1)), JournalEnd(7, ms(7)))
    assert stats.branches == (
        BranchFigures("jobs/eu", "queue", JournalFigures(2, 36, JournalEnd(4, ms(4)), JournalEnd(7, ms(7)))),
        BranchFigures("orders", "queue", JournalFigures(1, 7, JournalEnd(2, ms(2)), JournalEnd(2, ms(2)))),
        BranchFigures("orders", "topic", JournalFigures(1, 17, JournalEnd(5, ms(5)), JournalEnd(5, ms(5)))),
        BranchFigures("prices", "topic", JournalFigures(3, 35, JournalEnd(1, ms(1)), JournalEnd(6, ms(6)))),
    )


def test_the_ends_timestamps_are_read_for_many_branches(engine):
    """More ends (600 ids) than one IN (...) look-up holds (500): branch tK holds rows 2K-1 and 2K."""
    seed(engine, [row(i, f"t{(i + 1) // 2}/x", size=1) for i in range(1, 601)])
    with engine.connect() as conn:
        stats = journal_stats(conn)
    assert len(stats.branches) == 300 and stats.total.rows == 600
    for figures in stats.branches:
        k = int(figures.branch[1:])
        oldest, newest = 2 * k - 1, 2 * k
        assert figures.figures == JournalFigures(2, 2, JournalEnd(oldest, ms(oldest)), JournalEnd(newest, ms(newest)))


# -- through the journal writer (the running server's path) -------------------------------------------------------
def test_reads_through_the_writer_see_what_was_submitted_before_them(engine):
    seed(
        engine,
        [],
        cursors=[cursor_row(1, "subscription/1", "prices")],
        subscriptions=[subscription_row(1, "sub1", "app1", cursor_id=1)],
    )
    journal = Journal(engine)
    answers: dict[str, Any] = {}
    writer = journal.writer
    for seq in (1, 2, 3):
        writer.submit_message(new_message(seq, "prices/fx", node_kind="topic"), f"m{seq}")
        writer.submit_message(new_message(seq + 10, "prices", node_kind="topic"), f"m{seq + 10}")
    writer.submit_ack(1, 11)
    writer.submit_read(BookmarkRead("sub1", "app1", non_durable_after=None), lambda r: answers.update(bookmark=r))
    writer.submit_read(BookmarkRead("nope", None), lambda r: answers.update(missing=r))
    writer.submit_read(JournalStatsRead(), lambda r: answers.update(stats=r))
    writer.submit_ack(1, 12)  # after the reads: not seen by them
    try:
        result = journal.start_and_sync()
        assert result.error is None
        for token in result.tokens:
            if not isinstance(token, str):
                token(None)  # the reactor's side (gateway.completions): a claimed ReadAnswer calls its token
    finally:
        writer.close(timeout=30)
    assert answers["bookmark"].position == JournalPosition(0, 1, 11, 2)
    assert answers["missing"] is None
    stats = answers["stats"]
    assert (stats.total.rows, stats.total.oldest.id, stats.total.newest.id) == (6, 1, 13)
    assert [(b.branch, b.kind, b.figures.rows) for b in stats.branches] == [("prices", "topic", 6)]


def test_a_failed_read_hands_its_token_the_error(engine, monkeypatch):
    import subgate.storage.applying as applying

    def broken(conn: Any) -> JournalStats:
        raise RuntimeError("disk on fire")

    slept: list[float] = []
    monkeypatch.setattr(applying, "journal_stats", broken)
    monkeypatch.setattr("subgate.storage.journal.back_off", slept.append)  # the writer's retry backoff
    journal = Journal(engine)
    outcome: list[Any] = []
    journal.writer.submit_read(JournalStatsRead(), outcome.append)
    journal.writer.submit_message(new_message(1), "m1")
    try:
        result = journal.start_and_sync()
    finally:
        journal.writer.close(timeout=30)
    # Not a store outage: the read failed by itself, at once (no retry, no back-off), and the message landed with
    # the rest of the batch; the read's token gets the error as its answer.
    assert not [r for r in journal.collector.results if r.failed or r.error] and not slept
    (answer,) = [t for r in journal.collector.results for t in r.tokens if not isinstance(t, str)]
    assert "m1" in [t for r in journal.collector.results for t in r.tokens]
    answer(None)
    assert isinstance(outcome[0], StoreReadFailed) and "disk on fire" in str(outcome[0])
    assert result.error is None
