"""The metrics endpoint's store side on a real database (SQLite and PostgreSQL): the writer's write probe
(``storage.store_metrics``), its commit histograms and health; the figure reader's backlog against the one
``bookmarks show`` counts (``journal_stats.read_bookmark``), read on its own engine while the writer holds a write
transaction open (it neither waits for the writer nor makes it wait)."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, insert, select, text

from subgate.engine.records import BookmarkRead, MetricsRead, StoreFigures
from subgate.storage.db import make_engine, session_factory
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.journal_stats import read_bookmark
from subgate.storage.lease import claim, this_process
from subgate.storage.models import Ack, AckCursor, JournalMessage, ServerLease, Subscription
from subgate.storage.store_metrics import FigureReader
from tests.support.store_rows import cursor_row, message_row, subscription_row


class Results:
    """The writer's ``notify`` (writer thread): keeps the results for the test thread to claim."""

    def __init__(self) -> None:
        self.results: list[BatchResult] = []
        self.cond = threading.Condition()

    def __call__(self, result: BatchResult) -> None:
        with self.cond:
            self.results.append(result)
            self.cond.notify_all()

    def answer(self, writer: JournalWriter, read: MetricsRead) -> Any:
        """Submit ``read``, wait for its batch, claim it here (the submitting thread) and return what it read."""
        got: list[Any] = []
        writer.submit_read(read, got.append)
        with self.cond:
            assert self.cond.wait_for(lambda: bool(self.results), 30)
            results, self.results = self.results, []
        for result in results:
            for token in writer.claim(result).tokens:
                token(None)
        return got[0]


def seed(engine: Engine) -> None:
    sessions = session_factory(engine)
    with sessions() as session:
        claim(session, this_process("token-1", "s", "127.0.0.1", 5672), 0, 60_000)
        session.commit()
    with engine.begin() as conn:
        conn.execute(insert(AckCursor), [cursor_row(1, "app1.sub1", low_water=1)])
        conn.execute(insert(JournalMessage), [message_row(i, "prices", b"x") for i in range(1, 7)])
        conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 3}])
        conn.execute(insert(Subscription), [subscription_row(1, "sub1", "app1", cursor_id=1)])


def test_the_writer_only_probes_and_leaves_the_lease_as_it_was(engine: Engine):
    seed(engine)
    pid_before = _pid(engine)
    results = Results()
    writer = JournalWriter(engine, results)
    writer.start()
    try:
        first = results.answer(writer, MetricsRead())
        second = results.answer(writer, MetricsRead())
    finally:
        writer.close()
    assert first == second == StoreFigures()
    assert _pid(engine) == pid_before
    assert writer.health is not None and writer.health.ok and writer.health.last_ok is not None
    assert writer.commit_seconds.view().count == 2
    assert writer.batch_sizes.view().total == 2


def test_the_figure_reader_matches_the_bookmark_beside_an_open_write(engine: Engine):
    seed(engine)
    reader = FigureReader(make_engine(engine.url.render_as_string(hide_password=False)), 0, interval=3600)
    try:
        assert reader.latest is None
        with engine.begin() as writing:  # a write transaction held open, as the writer's batch would be
            writing.execute(insert(JournalMessage), [message_row(7, "prices", b"x")])
            reader.read_once()  # does not wait for it, and does not see it
            assert reader.latest is not None
            before, read_at = reader.latest
        reader.read_once()
        after, _ = reader.latest
    finally:
        reader.close()
    assert (before.journal_rows, before.subscriptions[0].backlog, after.journal_rows) == (6, 4, 7)
    assert read_at > 0
    (sub,) = after.subscriptions
    with engine.connect() as conn:
        bookmark = read_bookmark(conn, BookmarkRead("sub1", "app1", 0))
    assert bookmark is not None and bookmark.position is not None
    assert (sub.client_id, sub.name, sub.topic, sub.backlog) == ("app1", "sub1", "prices", bookmark.position.backlog)
    assert sub.backlog == 5  # 2..7 above the low-water mark 1, less the ack of 3
    assert sub.oldest_ms is not None


def test_the_figure_reader_keeps_its_last_figures_when_the_store_fails(engine: Engine):
    seed(engine)
    reader = FigureReader(make_engine(engine.url.render_as_string(hide_password=False)), 0, interval=3600)
    try:
        reader.read_once()
        kept = reader.latest
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE subscriptions"))
        reader.read_once()
        assert reader.latest is kept
    finally:
        reader.close()


def _pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(ServerLease.pid))
