"""Page reads of a durable queue's backlog (``storage.catalog.read_page`` through ``JournalWriter.submit_page``)
and the start-up helpers (``backlog(after=...)``, ``backlog_count``), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from subgate.engine.records import PageRead, StoredMessage
from subgate.storage.catalog import backlog, backlog_count
from subgate.storage.db import make_engine, upgrade
from tests.storage.test_journal import Journal, new_message, with_queue


@pytest.fixture
def journal(store_url: str) -> Iterator[Journal]:
    upgrade(store_url)
    engine: Engine = make_engine(store_url)
    journal = Journal(engine)
    yield journal
    if journal.writer._thread.is_alive():
        journal.writer.close(timeout=30)
    engine.dispose()


class Answer:
    """A page token: records what it was called with."""

    def __init__(self) -> None:
        self.outcome: Any = None

    def __call__(self, outcome: Any) -> None:
        self.outcome = outcome


def run_token(store: Journal, answer: Answer) -> None:
    """The reactor's side: call every callable token of the notified batches, as the broker does."""
    result = store.sync()
    for batch in store.collector.results:
        for token in batch.tokens:
            if callable(token) and getattr(token, "token", None) is answer:
                token(None)
    assert result.error is None


def test_a_page_read_sees_what_was_submitted_before_it(journal):
    with_queue(journal, 1, 2, 3, 4, 5, 6)
    journal.writer.submit_message(new_message(7, address="other"), 7)
    journal.writer.submit_ack(1, 3)
    answer = Answer()
    journal.writer.submit_page(PageRead(1, "q", 1, 6, 10), answer)
    journal.writer.start()
    run_token(journal, answer)
    rows = answer.outcome
    assert all(isinstance(r, StoredMessage) for r in rows)
    assert [r.id for r in rows] == [2, 4, 5, 6]  # above 1, acked 3 left out, another address left out
    assert rows[0].payload == b"payload-2"
    assert rows[0].publisher_id == "c1/snd"


def test_a_page_read_stops_at_its_limit_and_its_upper_bound(journal):
    with_queue(journal, *range(1, 21))
    journal.writer.start()
    journal.sync()
    limited, bounded = Answer(), Answer()
    journal.writer.submit_page(PageRead(1, "q", 5, 20, 3), limited)
    journal.writer.submit_page(PageRead(1, "q", 15, 17, 10), bounded)
    run_token(journal, limited)
    run_token(journal, bounded)
    assert [r.id for r in limited.outcome] == [6, 7, 8]
    assert [r.id for r in bounded.outcome] == [16, 17]


def test_a_page_read_brings_failure_counts(journal):
    with_queue(journal, 1, 2, 3)
    journal.writer.submit_failures(1, 2, 4)
    answer = Answer()
    journal.writer.submit_page(PageRead(1, "q", 0, 3, 10), answer)
    journal.writer.start()
    run_token(journal, answer)
    assert [(r.id, r.failures) for r in answer.outcome] == [(1, 0), (2, 4), (3, 0)]


def test_start_up_reads_above_a_position_and_counts_the_rest(journal):
    with_queue(journal, *range(1, 11), low_water=2)
    journal.writer.submit_ack(1, 6)
    journal.writer.start()
    journal.sync()
    cursor = journal.cursor(1)
    with journal.sessions() as session:
        assert [m.id for m in backlog(session, cursor, after=4)] == [5, 7, 8, 9, 10]
        assert [m.id for m in backlog(session, cursor, after=0)] == [3, 4, 5, 7, 8, 9, 10]  # low water wins
        assert backlog_count(session, cursor, 4, 9) == 4  # 5, 7, 8, 9
        assert backlog_count(session, cursor, 0, 100) == 7


def test_non_durable_rows_count_only_above_the_start_up_boundary(journal):
    """Rows with durable = false (non-persistent messages journaled to keep their place while a queue paged) are
    left out of reads and counts at or below ``non_durable_after`` (the journal's end at start-up)."""
    journal.writer.submit_node(1, "q", "queue", True, False)
    journal.writer.submit_cursor(1, "queue", "q", "q", 0)
    for seq in range(1, 11):
        journal.writer.submit_message(new_message(seq, durable=seq % 2 == 0), seq)
    journal.writer.start()
    journal.sync()
    cursor = journal.cursor(1)
    with journal.sessions() as session:
        assert [m.id for m in backlog(session, cursor, non_durable_after=6)] == [2, 4, 6, 7, 8, 9, 10]
        assert [m.id for m in backlog(session, cursor, after=7, non_durable_after=6)] == [8, 9, 10]
        assert [m.id for m in backlog(session, cursor)] == list(range(1, 11))
        assert backlog_count(session, cursor, 0, 10, 6) == 7
        assert backlog_count(session, cursor, 0, 10) == 10
    old, new = Answer(), Answer()
    journal.writer.submit_page(PageRead(1, "q", 0, 10, 5, non_durable_after=6), old)
    journal.writer.submit_page(PageRead(1, "q", 4, 10, 10), new)
    run_token(journal, old)
    run_token(journal, new)
    assert [r.id for r in old.outcome] == [2, 4, 6, 7, 8]
    assert [r.id for r in new.outcome] == [5, 6, 7, 8, 9, 10]
