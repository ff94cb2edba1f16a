"""The metrics endpoint's store side on a real database (SQLite and PostgreSQL): the writer's write probe and
store figures (``storage.store_metrics``), its commit histograms and health, and the backlog it counts against
the one ``bookmarks show`` counts (``journal_stats.read_bookmark``)."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, insert, select

from subgate.engine.records import BookmarkRead, MetricsRead, StoreFigures
from subgate.storage.db import session_factory
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.journal_stats import read_bookmark
from subgate.storage.lease import claim, this_process
from subgate.storage.models import Ack, AckCursor, JournalMessage, ServerLease, Subscription
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


def test_probe_and_figures_match_the_bookmark_and_leave_the_lease_as_it_was(engine: Engine):
    sessions = session_factory(engine)
    with sessions() as session:
        claim(session, this_process("token-1", "s", "127.0.0.1", 5672), 0, 60_000)
        session.commit()
    with engine.begin() as conn:
        conn.execute(insert(AckCursor), [cursor_row(1, "app1.sub1", low_water=1)])
        conn.execute(insert(JournalMessage), [message_row(i, "prices", b"x") for i in range(1, 7)])
        conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 3}])
        conn.execute(insert(Subscription), [subscription_row(1, "sub1", "app1", cursor_id=1)])
    pid_before = _pid(engine)
    results = Results()
    writer = JournalWriter(engine, results)
    writer.start()
    try:
        figures = results.answer(writer, MetricsRead(0))
        probe_only = results.answer(writer, MetricsRead(0, figures=False))
    finally:
        writer.close()
    assert isinstance(figures, StoreFigures) and figures.journal_rows == 6
    (sub,) = figures.subscriptions
    with engine.connect() as conn:
        bookmark = read_bookmark(conn, BookmarkRead("sub1", "app1", 0))
    assert bookmark is not None and bookmark.position is not None
    assert (sub.client_id, sub.name, sub.topic, sub.backlog) == ("app1", "sub1", "prices", bookmark.position.backlog)
    assert sub.backlog == 4  # 2..6 above the low-water mark 1, less the ack of 3
    assert sub.oldest_ms is not None
    assert probe_only == StoreFigures()
    assert _pid(engine) == pid_before
    assert writer.health is not None and writer.health.ok and writer.health.last_ok is not None
    assert writer.commit_seconds.view().count == 2
    assert writer.batch_sizes.view().total == 2


def _pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.scalar(select(ServerLease.pid))
