"""storage.journal_process and storage.journal_child: the journal writer in a child process, on SQLite and on a
throwaway PostgreSQL (``store_url``), driven through the same ``submit_*`` verbs as the writer thread."""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import OperationalError

from subgate.engine.records import JournalStatsRead, PageRead
from subgate.storage.applying import ReadAnswer
from subgate.storage.db import make_engine, upgrade
from subgate.storage.journal import BatchResult
from subgate.storage.journal_child import portable
from subgate.storage.journal_process import FLUSH_AT, JournalProcess
from subgate.storage.models import JournalMessage
from tests.storage.test_journal import Collector, new_message


class Unpicklable(Exception):
    """An error that does not survive pickling (as some drivers' exceptions)."""

    def __init__(self, text: str, handle: Any) -> None:
        super().__init__(text)
        self.handle = handle


class ProcessJournal:
    """A ``JournalProcess`` on a migrated store; results claimed as the gateway claims them."""

    def __init__(self, store_url: str) -> None:
        self.collector = Collector()
        self.lost: list[str] = []
        self.writer = JournalProcess(store_url, self._notified, on_lost=self.lost.append)
        self._lock = threading.Lock()  # claims from the result thread; the test thread only submits before them

    def _notified(self, result: BatchResult) -> None:
        with self._lock:
            claimed = self.writer.claim(result)
        for token in claimed.tokens:
            if isinstance(token, ReadAnswer):
                token(claimed.error)
        self.collector(claimed)

    def sync(self, name: str) -> BatchResult:
        self.writer.submit_barrier(name)
        self.writer.flush()
        return self.collector.wait_for(name)


@pytest.fixture
def process_journal(engine: Engine, store_url: str) -> Iterator[ProcessJournal]:
    journal = ProcessJournal(store_url)
    journal.writer.start()
    yield journal
    journal.writer.close(timeout=30)


def _rows(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(select(JournalMessage.id).order_by(JournalMessage.id)).scalars())


def test_messages_are_committed_and_their_tokens_come_back_in_order(process_journal, engine):
    writer = process_journal.writer
    for seq in range(1, 41):
        writer.submit_message(new_message(seq), ("token", seq))
    result = process_journal.sync("barrier")
    assert result.error is None
    assert process_journal.collector.tokens == [("token", seq) for seq in range(1, 41)] + ["barrier"]
    assert _rows(engine) == list(range(1, 41))
    assert writer.rows == 41 and writer.batches >= 1  # the child's figures, sent with each result
    assert writer.health is not None and writer.health.ok
    assert writer.batch_sizes.view().count == writer.batches


def test_a_full_buffer_is_sent_without_waiting_for_a_flush(process_journal, engine):
    writer = process_journal.writer
    for seq in range(1, FLUSH_AT + 1):  # no flush() called: the buffer goes when it holds FLUSH_AT operations
        writer.submit_message(new_message(seq), seq)
    process_journal.collector.wait_for(FLUSH_AT)
    assert _rows(engine) == list(range(1, FLUSH_AT + 1))


def test_a_page_read_answers_with_the_rows_committed_before_it(process_journal):
    writer = process_journal.writer
    writer.submit_node(1, "q", "queue", True, False)
    writer.submit_cursor(1, "queue", "q", "q", 0)
    for seq in range(1, 11):
        writer.submit_message(new_message(seq), seq)
    writer.submit_ack(1, 3)
    pages: list[Any] = []
    writer.submit_page(PageRead(1, "q", 0, 10, 100), pages.append)
    process_journal.sync("after-page")
    assert [row.id for row in pages[0]] == [1, 2, 4, 5, 6, 7, 8, 9, 10]
    assert pages[0][0].payload == b"payload-1"


def test_an_operator_read_answers_through_the_process(process_journal):
    writer = process_journal.writer
    writer.submit_node(1, "t", "topic", True, False)
    for seq in range(1, 4):
        writer.submit_message(new_message(seq, "t", node_kind="topic"), seq)
    answers: list[Any] = []
    writer.submit_read(JournalStatsRead(), answers.append)
    process_journal.sync("after-read")
    assert answers[0].total.rows == 3


def test_close_commits_everything_submitted(engine, store_url):
    journal = ProcessJournal(store_url)
    journal.writer.start()
    for seq in range(1, 501):
        journal.writer.submit_message(new_message(seq), seq)
    journal.writer.close(timeout=60)  # no flush, no barrier: close sends the rest, then the stop
    assert _rows(engine) == list(range(1, 501))
    assert journal.lost == []
    assert journal.writer._child is not None and journal.writer._child.returncode == 0


def test_operations_submitted_before_start_go_at_the_first_flush(engine, store_url):
    journal = ProcessJournal(store_url)
    for seq in range(1, FLUSH_AT + 20):  # more than FLUSH_AT: kept while there is no child yet
        journal.writer.submit_message(new_message(seq), seq)
    journal.writer.start()
    try:
        journal.sync("barrier")
    finally:
        journal.writer.close()
    assert _rows(engine) == list(range(1, FLUSH_AT + 20))


def test_a_child_that_dies_is_reported_as_lost(engine, store_url):
    journal = ProcessJournal(store_url)
    journal.writer.start()
    try:
        journal.sync("up")
        pid = journal.writer.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not journal.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal.lost and "exit code -9" in journal.lost[0]
        journal.writer.submit_message(new_message(1), 1)
        journal.writer.flush()  # a write to a writer that is gone: logged, never raised into the reactor
    finally:
        journal.writer.close(timeout=10)


def test_the_child_ignores_sigterm_and_commits_until_the_server_stops_it(process_journal, engine):
    writer = process_journal.writer
    process_journal.sync("up")
    os.kill(writer.pid, signal.SIGTERM)  # a signal to the whole process group reaches the child too
    writer.submit_message(new_message(1), 1)
    process_journal.sync("after-sigterm")
    assert _rows(engine) == [1]
    assert process_journal.lost == []


HOLDER = textwrap.dedent(
    """
    import sys, time
    from subgate.storage.journal_process import JournalProcess
    writer = JournalProcess(sys.argv[1], lambda result: None)
    writer.start()
    print(writer.pid, flush=True)
    time.sleep(120)
    """
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie is dead (not reaped yet)
    except FileNotFoundError:
        return True


def test_the_child_dies_with_the_server(engine, store_url):
    """A ``kill -9`` of the server leaves no writer behind to commit behind the next server's back."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, store_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        assert not _gone(child)
        holder.kill()
        holder.wait(10)
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child)
        assert holder.stderr is not None
        assert b"Traceback" not in holder.stderr.read()  # it ends quietly: no error in the server's log
    finally:
        holder.kill()
        holder.wait(10)


def test_errors_that_do_not_pickle_cross_as_their_text():
    error = Unpicklable("database is locked", threading.Lock())
    read_error = Unpicklable("no such table", threading.Lock())
    result = BatchResult([1, ReadAnswer(2, read_error), ReadAnswer(3, ["row"])], error, 3, [4])
    crossed = pickle.loads(pickle.dumps(portable(result)))
    assert isinstance(crossed.error, RuntimeError) and str(crossed.error) == "database is locked"
    assert crossed.tokens[0] == 1 and crossed.failed == [4]
    assert isinstance(crossed.tokens[1].result, RuntimeError) and str(crossed.tokens[1].result) == "no such table"
    assert crossed.tokens[2].result == ["row"]
    plain = BatchResult([1], OperationalError("stmt", {}, Exception("boom")), 1)
    assert portable(BatchResult([1], None, 1)).error is None
    assert pickle.loads(pickle.dumps(portable(plain))).error is not None


def test_a_result_without_errors_is_sent_as_it_is():
    result = BatchResult([1, 2], None, 2)
    assert portable(result) is result


def test_a_count_of_rows_through_the_process_matches_the_store(process_journal, engine):
    writer = process_journal.writer
    for seq in range(1, 2001):
        writer.submit_message(new_message(seq, payload=bytes(1000)), seq)
        if seq % 100 == 0:
            writer.flush()
    process_journal.sync("barrier")
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(JournalMessage)).scalar() == 2000


def test_a_writer_that_cannot_open_the_store_fails_the_start(tmp_path):
    writer = JournalProcess(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'subgate.db'}", lambda result: None)
    with pytest.raises(RuntimeError, match="the journal writer process did not start"):
        writer.start(timeout=30)
    assert writer._child is not None and writer._child.returncode == 1
    writer.close(timeout=10)


def test_a_launched_writer_that_is_never_started_ends_when_closed(engine, store_url):
    """The server launches the child early and closes it when it gives up before it runs (it could not listen)."""
    writer = JournalProcess(store_url, lambda result: None)
    writer.launch()
    writer.submit_message(new_message(1), 1)  # kept: nothing is sent before start
    writer.close(timeout=30)
    assert writer._child is not None and writer._child.returncode == 0
    assert _rows(engine) == []


def test_sending_never_waits_for_a_store_that_cannot_commit(tmp_path):
    """The reactor's flushes go through while the store is locked (the child's reading thread keeps the pipe
    drained into the writer's queue: the pipe holds about 1 MiB, the flushes here 5 MiB); then everything commits."""
    url = f"sqlite:///{tmp_path / 'subgate.db'}"
    upgrade(url)
    journal = ProcessJournal(url)
    journal.writer.start()
    lock = sqlite3.connect(tmp_path / "subgate.db", isolation_level=None, timeout=30)
    lock.execute("BEGIN EXCLUSIVE")  # no commit can happen until this ends
    try:

        def flood() -> None:
            for seq in range(1, 5001):
                journal.writer.submit_message(new_message(seq, payload=bytes(1024)), seq)
                if seq % 100 == 0:
                    journal.writer.flush()

        sender = threading.Thread(target=flood)
        sender.start()
        sender.join(60)  # a deadlock guard, not a timing: with a full pipe the flushes would wait for the lock
        assert not sender.is_alive(), "a flush waited for the store"
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    try:
        journal.sync("barrier")
        with make_engine(url).connect() as conn:
            assert conn.execute(select(func.count()).select_from(JournalMessage)).scalar() == 5000
    finally:
        journal.writer.close(timeout=60)
