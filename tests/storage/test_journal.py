"""storage.journal and storage.catalog on a real database: SQLite and a throwaway PostgreSQL (``store_url``).

The ``JournalWriter`` thread is driven the way the gateway drives it: ``submit_*`` calls, then a barrier token
whose notification says that everything before it is committed. Submitting before ``start()`` puts a whole
scenario into one batch, which makes batch boundaries deterministic where a test depends on them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.exc import IntegrityError

from subgate.engine.records import Catalog, CursorRecord, NewMessage, NodeRecord, PageRead, StoredMessage
from subgate.storage import journal as journal_module
from subgate.storage.catalog import backlog, load_catalog
from subgate.storage.db import session_factory, upgrade
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Node

T0 = 1_790_000_000_123  # ms since epoch, with a millisecond part


class Collector:
    """The writer's ``notify``: keeps every BatchResult and lets the test wait for tokens."""

    def __init__(self) -> None:
        self.results: list[BatchResult] = []
        self._cond = threading.Condition()

    def __call__(self, result: BatchResult) -> None:
        with self._cond:
            self.results.append(result)
            self._cond.notify_all()

    @property
    def tokens(self) -> list[Any]:
        with self._cond:
            return [token for result in self.results for token in result.tokens]

    def wait_for(self, token: Any, timeout: float = 30.0) -> BatchResult:
        with self._cond:
            found = self._cond.wait_for(lambda: any(token in r.tokens for r in self.results), timeout)
            assert found, f"token {token!r} was not notified within {timeout}s"
            return next(r for r in self.results if token in r.tokens)


class Journal:
    """A writer on a migrated store, its notifications, and helpers to read the store back."""

    def __init__(self, engine: Engine, max_batch: int = 4000) -> None:
        self.engine = engine
        self.collector = Collector()
        # The collector sees tokens, as the gateway does after ``claim`` (here on the writer thread: the tokens
        # are plain strings and callables, nothing that must stay on one thread).
        self.writer = JournalWriter(
            engine, lambda result: self.collector(self.writer.claim(result)), max_batch=max_batch
        )
        self.sessions = session_factory(engine)
        self._barriers = 0

    def sync(self) -> BatchResult:
        """Wait until everything submitted so far is committed; returns the barrier's batch result."""
        self._barriers += 1
        token = f"barrier-{self._barriers}"
        self.writer.submit_barrier(token)
        return self.collector.wait_for(token)

    def start_and_sync(self) -> BatchResult:
        """Start the writer with a barrier queued behind everything submitted so far: one batch (up to max_batch)."""
        self._barriers += 1
        token = f"barrier-{self._barriers}"
        self.writer.submit_barrier(token)
        self.writer.start()
        return self.collector.wait_for(token)

    def rows(self, model: Any, *order: Any) -> list[tuple[Any, ...]]:
        table = model.__table__
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(table).order_by(*(order or table.primary_key.columns)))]

    def catalog(self) -> Catalog:
        with self.sessions() as session:
            return load_catalog(session)

    def backlog(self, cursor: CursorRecord, batch: int = 5000) -> list[StoredMessage]:
        with self.sessions() as session:
            return list(backlog(session, cursor, batch))

    def cursor(self, cursor_id: int) -> CursorRecord:
        return next(c for c in self.catalog().cursors if c.id == cursor_id)


def new_message(seq: int, address: str = "q", **fields: Any) -> NewMessage:
    values: dict[str, Any] = {
        "id": seq,
        "address": address,
        "node_kind": "queue",
        "publisher_id": "c1/snd",
        "publisher_seq": seq,
        "bookmark": f"c1/snd|{seq}|",
        "ts_ms": T0 + seq,
        "expires_ms": None,
        "deliver_ms": None,
        "durable": True,
        "priority": 4,
        "payload": f"payload-{seq}".encode(),
    }
    values.update(fields)
    return NewMessage(**values)


@pytest.fixture
def journal(engine: Engine) -> Iterator[Journal]:
    """A journal whose writer is not started yet (``journal.writer.start()`` when the batch is queued)."""
    journal = Journal(engine)
    yield journal
    if journal.writer._thread.is_alive():
        journal.writer.close(timeout=30)


def small_batches(engine: Engine) -> Journal:
    return Journal(engine, max_batch=7)


# -- messages and notification order ----------------------------------------------------------------------------


def test_messages_are_committed_and_tokens_notified_in_order(engine):
    journal = small_batches(engine)
    for seq in range(1, 41):
        journal.writer.submit_message(new_message(seq), ("token", seq))
    journal.writer.start()
    try:
        journal.sync()
    finally:
        journal.writer.close()
    results = journal.collector.results
    assert journal.collector.tokens == [("token", seq) for seq in range(1, 41)] + ["barrier-1"]
    assert all(r.error is None for r in results)
    assert [r.size for r in results] == [7, 7, 7, 7, 7, 6]  # max_batch bounds every group commit
    assert (journal.writer.batches, journal.writer.rows) == (6, 41)
    assert [row[0] for row in journal.rows(JournalMessage)] == list(range(1, 41))


def test_message_row_holds_every_field(journal):
    journal.writer.start()
    journal.writer.submit_message(
        new_message(
            7,
            address="orders",
            publisher_id="client-a/link-1",
            publisher_seq=3,
            bookmark="client-a/link-1|3|",
            expires_ms=T0 + 60_000,
            deliver_ms=T0 + 5_000,
            durable=False,
            priority=9,
            payload=b"\x00\x53\x77\xa1\x02hi",
        ),
        "m7",
    )
    journal.sync()
    with journal.sessions() as session:
        row = session.scalars(select(JournalMessage)).one()
        assert (row.id, row.address, row.node_kind, row.publisher_id, row.publisher_seq, row.bookmark) == (
            7,
            "orders",
            "queue",
            "client-a/link-1",
            3,
            "client-a/link-1|3|",
        )
        assert (row.durable, row.priority, row.size, row.payload) == (False, 9, 7, b"\x00\x53\x77\xa1\x02hi")
        assert _aware(row.ts) == datetime.fromtimestamp((T0 + 7) / 1000, tz=UTC)
        assert _aware(row.expires_at) == datetime.fromtimestamp((T0 + 60_000) / 1000, tz=UTC)
        assert _aware(row.deliver_at) == datetime.fromtimestamp((T0 + 5_000) / 1000, tz=UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite hands timestamps back naive (they were written in UTC)."""
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


# -- nodes and cursors -----------------------------------------------------------------------------------------


def test_nodes_and_cursors_are_created_and_read_back(journal):
    journal.writer.submit_node(1, "orders", "queue", True, True)
    journal.writer.submit_cursor(1, "queue", "orders", "orders", 0)
    journal.writer.submit_node(2, "prices", "topic", True, False)
    journal.writer.submit_cursor(5, "subscription", "c1.sub", "prices", 17)
    journal.writer.start()
    assert journal.sync().error is None
    catalog = journal.catalog()
    assert catalog.nodes == [
        NodeRecord(1, "orders", "queue", True, True),
        NodeRecord(2, "prices", "topic", True, False),
    ]
    assert catalog.cursors == [
        CursorRecord(1, "queue", "orders", "orders", 0),
        CursorRecord(5, "subscription", "c1.sub", "prices", 17),
    ]
    assert (catalog.max_node_id, catalog.max_cursor_id, catalog.max_message_id) == (2, 5, 0)


def test_empty_store_catalog(journal):
    assert journal.catalog() == Catalog(nodes=[], cursors=[], max_message_id=0, max_node_id=0, max_cursor_id=0)


# -- acks, low water, failures ---------------------------------------------------------------------------------


def with_queue(journal: Journal, *seqs: int, low_water: int = 0) -> None:
    journal.writer.submit_node(1, "q", "queue", True, False)
    journal.writer.submit_cursor(1, "queue", "q", "q", low_water)
    for seq in seqs:
        journal.writer.submit_message(new_message(seq), seq)


def test_acks_remove_messages_from_the_backlog(journal):
    with_queue(journal, 1, 2, 3, 4, 5)
    journal.writer.submit_ack(1, 2)
    journal.writer.submit_ack(1, 4)
    journal.writer.submit_ack(1, 4)  # acks are a set: a repeat in the same batch is stored once
    journal.writer.start()
    assert journal.sync().error is None
    assert journal.rows(Ack) == [(1, 2), (1, 4)]
    assert [m.id for m in journal.backlog(journal.cursor(1))] == [1, 3, 5]


def test_acks_in_later_batches(journal):
    with_queue(journal, 1, 2, 3)
    journal.writer.start()
    journal.sync()
    for seq in (3, 1):
        journal.writer.submit_ack(1, seq)
        journal.sync()
    assert [m.id for m in journal.backlog(journal.cursor(1))] == [2]


def test_low_water_moves_forward_and_clears_acks_and_failures_at_or_below_it(journal):
    with_queue(journal, 1, 2, 3, 4, 5, 6)
    journal.writer.submit_ack(1, 3)
    journal.writer.submit_ack(1, 5)
    journal.writer.submit_failures(1, 2, 1)
    journal.writer.submit_failures(1, 4, 2)
    journal.writer.submit_failures(1, 6, 3)
    journal.writer.start()
    journal.sync()
    journal.writer.submit_low_water(1, 4)
    journal.sync()
    assert journal.cursor(1).low_water == 4
    assert journal.rows(Ack) == [(1, 5)]
    assert journal.rows(DeliveryFailure) == [(1, 6, 3)]
    assert [(m.id, m.failures) for m in journal.backlog(journal.cursor(1))] == [(6, 3)]
    # never backwards: an older low water changes nothing
    journal.writer.submit_low_water(1, 2)
    journal.sync()
    assert journal.cursor(1).low_water == 4
    assert journal.rows(Ack) == [(1, 5)]


def test_low_water_after_acks_in_the_same_batch_clears_them(journal):
    """Acks queued before a low-water move are written first, so the move deletes them."""
    with_queue(journal, 1, 2, 3)
    journal.writer.submit_ack(1, 1)
    journal.writer.submit_ack(1, 3)
    journal.writer.submit_low_water(1, 2)
    assert journal.start_and_sync().size == 9  # node, cursor, 3 messages, 2 acks, low water, barrier: one batch
    assert journal.rows(Ack) == [(1, 3)]
    assert [m.id for m in journal.backlog(journal.cursor(1))] == []


def test_low_water_only_touches_its_own_cursor(journal):
    with_queue(journal, 1, 2)
    journal.writer.submit_cursor(2, "subscription", "other", "q", 0)
    for cursor_id in (1, 2):
        journal.writer.submit_ack(cursor_id, 1)
        journal.writer.submit_failures(cursor_id, 2, 1)
    journal.writer.submit_low_water(1, 2)
    journal.writer.start()
    journal.sync()
    assert [c.low_water for c in journal.catalog().cursors] == [2, 0]
    assert journal.rows(Ack) == [(2, 1)]
    assert journal.rows(DeliveryFailure) == [(2, 2, 1)]


@pytest.mark.parametrize("same_batch", [True, False])
def test_failure_counts_are_upserted(journal, same_batch):
    with_queue(journal, 1, 2)
    if not same_batch:
        journal.writer.start()
        journal.sync()
    journal.writer.submit_failures(1, 1, 1)
    journal.writer.submit_failures(1, 1, 2)
    journal.writer.submit_failures(1, 2, 5)
    journal.writer.submit_failures(1, 1, 3)
    if same_batch:
        journal.writer.start()
    journal.sync()
    assert journal.rows(DeliveryFailure) == [(1, 1, 3), (1, 2, 5)]
    assert [(m.id, m.failures) for m in journal.backlog(journal.cursor(1))] == [(1, 3), (2, 5)]


def test_drop_cursor_removes_it_with_its_acks_and_failures(journal):
    with_queue(journal, 1, 2, 3)
    journal.writer.submit_cursor(2, "subscription", "keep", "q", 0)
    for cursor_id in (1, 2):
        journal.writer.submit_ack(cursor_id, 1)
        journal.writer.submit_failures(cursor_id, 2, 4)
    journal.writer.start()
    journal.sync()
    journal.writer.submit_drop_cursor(1)
    journal.sync()
    assert [c.id for c in journal.catalog().cursors] == [2]
    assert journal.rows(Ack) == [(2, 1)]
    assert journal.rows(DeliveryFailure) == [(2, 2, 4)]
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3]  # the journal itself stays


# -- failures of the writer itself ------------------------------------------------------------------------------


def test_a_failing_item_is_isolated_and_reported_and_the_writer_goes_on(journal):
    seed = Journal(journal.engine)
    seed.writer.submit_message(new_message(1), "first")
    seed.writer.start()
    seed.writer.close()
    # One batch: a good message, a duplicate journal id (primary key), another good message, an ack, a barrier.
    journal.writer.submit_message(new_message(2), "good-2")
    journal.writer.submit_message(new_message(1), "duplicate-1")
    journal.writer.submit_message(new_message(3), "good-3")
    journal.writer.submit_ack(99, 1)
    result = journal.start_and_sync()
    # The batch is retried, then applied item by item: only the bad items fail, everything else lands.
    assert result.tokens == ["good-2", "good-3", "barrier-1"]
    assert result.failed == ["duplicate-1"]
    assert isinstance(result.error, IntegrityError)
    assert result.size == 5
    assert journal.collector.results == [result]  # reported once
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3]
    # the writer keeps working
    journal.writer.submit_message(new_message(4), "next-4")
    assert journal.sync().error is None
    assert journal.collector.wait_for("next-4").error is None
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3, 4]


def test_a_failing_batch_of_acks_reports_to_its_barrier(journal):
    journal.writer.submit_ack(42, 1)  # no such cursor: the foreign key refuses it
    result = journal.start_and_sync()
    assert result.tokens == ["barrier-1"]  # the barrier still passes: only the bad ack is dropped
    assert result.failed == []
    assert isinstance(result.error, IntegrityError)
    assert journal.rows(Ack) == []


# -- close -----------------------------------------------------------------------------------------------------


def test_a_lost_database_connection_is_a_blip_the_batch_is_retried_on_a_new_one(postgres_url, caplog):
    """PostgreSQL writes rows with binary COPY on the driver connection: when the server ends that connection,
    the error must still reach the writer as SQLAlchemy's, the connection must leave the pool, and the retry
    must land every row of the batch, messages and acks alike."""
    upgrade(postgres_url)
    journal = Journal(create_engine(postgres_url))  # no pre-ping: the COPY itself meets the dead connection
    journal.writer.submit_cursor(1, "queue", "q", "q", 0)
    journal.writer.submit_message(new_message(1), "m1")
    assert journal.start_and_sync().error is None
    killer = create_engine(postgres_url)  # a connection of its own, not one from the writer's pool
    with killer.connect() as conn:  # ends every other backend of this database: the writer's
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND datname = current_database()"
            )
        )
    killer.dispose()
    journal.writer.submit_message(new_message(2), "m2")
    journal.writer.submit_ack(1, 1)
    result = journal.sync()
    assert result.error is None and result.tokens == ["m2", "barrier-2"]
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2]
    assert journal.rows(Ack) == [(1, 1)]
    assert "journal commit failed (attempt 1 of 5)" in caplog.text and "attempt 2" not in caplog.text
    journal.writer.close()
    journal.engine.dispose()


def test_the_writer_keeps_its_connection_while_batches_follow_and_takes_a_fresh_one_after_a_pause(engine, monkeypatch):
    """Under load a checkout per batch cost a round trip on PostgreSQL (the pool's ping) and the pool's Python on
    every commit; after a pause the writer goes back to the pool, so a connection that died while idle is replaced
    before it is used."""
    checkouts: list[int] = []
    event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    journal = Journal(engine)
    journal.writer.start()
    for seq in range(1, 4):
        journal.writer.submit_message(new_message(seq), seq)
        assert journal.sync().error is None
    assert len(checkouts) == 1 and engine.pool.checkedout() == 1  # held across the batches
    monkeypatch.setattr(journal_module, "HOLD_SECONDS", 0.0)
    time.sleep(0.01)
    journal.writer.submit_message(new_message(4), 4)
    assert journal.sync().error is None
    assert len(checkouts) == 2  # handed back after the pause, taken again
    journal.writer.close()
    assert engine.pool.checkedout() == 0  # handed back when the writer stops
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3, 4]


def after_a_busy_batch(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> tuple[Journal, list[float]]:
    """A started writer that has just committed one busy batch (BUSY_BATCH operations and more), and the sleeps
    it takes from now on (recorded, not slept)."""
    sleeps: list[float] = []
    monkeypatch.setattr(journal_module, "pause", lambda seconds: sleeps.append(seconds))
    journal = Journal(engine)
    for seq in range(1, journal_module.BUSY_BATCH + 1):
        journal.writer.submit_message(new_message(seq), seq)
    assert journal.start_and_sync().size == journal_module.BUSY_BATCH + 1  # one busy batch
    assert sleeps == []
    return journal, sleeps


def test_after_a_busy_batch_the_writer_waits_a_moment_for_the_next_one_to_fill(engine, monkeypatch):
    """Group commit under load: after a batch of at least BUSY_BATCH operations the writer lets the next batch fill
    (``gather``: here one step, which brings nothing new) before it takes it; after a small batch it does not."""
    journal, sleeps = after_a_busy_batch(engine, monkeypatch)
    journal.writer.submit_message(new_message(100), 100)
    assert journal.sync().error is None  # taken after a pause: a small batch
    assert sleeps == [journal_module.GATHER_STEP_SECONDS]
    journal.writer.submit_message(new_message(101), 101)
    assert journal.sync().error is None  # after a small batch: at once
    assert sleeps == [journal_module.GATHER_STEP_SECONDS]
    journal.writer.close()


def test_a_page_read_is_not_kept_waiting_by_the_group_commit(engine, monkeypatch):
    """After a busy batch the writer gathers, but not when a read the reactor waits for (a backlog's page) is
    queued: the read is taken at once."""
    journal, sleeps = after_a_busy_batch(engine, monkeypatch)
    journal.writer.submit_page(PageRead(0, "q", 0, 10, 10), lambda rows: None)
    assert journal.sync().error is None
    assert sleeps == []  # taken without a pause
    journal.writer.close()


class ArrivingOperations:
    """A fake writer queue for ``gather``: ``arrivals[i]`` operations come in during the i-th step of its wait, on
    a fake clock that each step moves on; ``busy`` steps see the producer at work (not idle)."""

    def __init__(self, arrivals: list[int], busy: int = 0, hurry_from: int = 10**9) -> None:
        self.arrivals, self.busy, self.queued, self.now, self.steps = arrivals, busy, 1, 0.0, 0
        self.hurry_from = hurry_from  # from this step on, a read is queued

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.queued += self.arrivals[self.steps] if self.steps < len(self.arrivals) else 0
        self.steps += 1

    def gather(self, limit: int = 4000) -> int:
        journal_module.gather(
            lambda: self.queued,
            limit,
            producer_idle=lambda: self.steps > self.busy,
            hurry=lambda: self.steps >= self.hurry_from,
            sleep=self.sleep,
            clock=lambda: self.now,
        )
        return self.steps


def test_the_writer_gathers_while_operations_may_still_come_and_no_longer():
    """A publisher whose whole window is in the batch is not kept waiting: the first step that brings nothing new
    while the producer (the reactor) is idle ends the wait. A pause while it is busy does not; a steady stream
    waits GATHER_MAX_SECONDS, or until ``limit`` operations are queued, or until a read is queued (the reactor
    waits for its answer: a backlog's page, say)."""
    assert ArrivingOperations([0]).gather() == 1
    assert ArrivingOperations([7, 3, 0, 5]).gather() == 3
    assert ArrivingOperations([7, 0, 0, 5, 0], busy=3).gather() == 5  # steps 2 and 3: the reactor was busy
    steps = round(journal_module.GATHER_MAX_SECONDS / journal_module.GATHER_STEP_SECONDS)
    assert ArrivingOperations([10] * 1000).gather() == steps
    assert ArrivingOperations([0] * 1000, busy=10_000).gather() == steps
    assert ArrivingOperations([10] * 1000).gather(limit=25) == 3  # 1 + 10 + 10 + 10 queued: enough
    assert ArrivingOperations([10] * 1000, hurry_from=2).gather() == 2
    assert ArrivingOperations([10] * 1000, hurry_from=0).gather() == 0


def test_close_flushes_everything_queued(engine):
    journal = small_batches(engine)
    journal.writer.start()
    for seq in range(1, 501):
        journal.writer.submit_message(new_message(seq), seq)
    journal.writer.submit_node(1, "q", "queue", True, False)
    journal.writer.submit_cursor(1, "queue", "q", "q", 0)
    journal.writer.submit_ack(1, 500)
    journal.writer.close(timeout=60)
    assert not journal.writer._thread.is_alive()
    assert journal.collector.tokens == list(range(1, 501))
    assert all(r.error is None for r in journal.collector.results)
    assert len(journal.rows(JournalMessage)) == 500
    assert journal.rows(Ack) == [(1, 500)]
    assert journal.writer.rows == 503


def test_close_of_a_queue_submitted_before_start(engine):
    journal = Journal(engine)
    for seq in (1, 2):
        journal.writer.submit_message(new_message(seq), seq)
    journal.writer.start()
    journal.writer.close()
    assert journal.collector.tokens == [1, 2]


# -- catalog and backlog ---------------------------------------------------------------------------------------


def test_backlog_is_exactly_the_unacknowledged_messages_of_its_address(journal):
    journal.writer.submit_node(1, "q", "queue", True, False)
    journal.writer.submit_node(2, "t", "topic", True, False)
    journal.writer.submit_cursor(1, "queue", "q", "q", 2)  # messages up to 2 are discarded already
    journal.writer.submit_cursor(2, "subscription", "c1.sub", "t", 0)
    messages = {
        1: ("q", None, None),
        2: ("q", T0 + 10, None),
        3: ("q", T0 + 20, None),
        4: ("t", None, None),
        5: ("q", None, T0 + 30),
        6: ("q", T0 + 40, T0 + 50),
        7: ("t", T0 + 60, None),
        8: ("q", None, None),
    }
    for seq, (address, expires, deliver) in messages.items():
        journal.writer.submit_message(new_message(seq, address, expires_ms=expires, deliver_ms=deliver), seq)
    journal.writer.submit_ack(1, 5)
    journal.writer.submit_ack(2, 3)  # another cursor's ack does not hide the message from cursor 1
    journal.writer.submit_failures(1, 6, 2)
    journal.writer.submit_failures(1, 8, 1)
    journal.writer.submit_failures(2, 3, 7)
    journal.writer.start()
    assert journal.sync().error is None
    queue_backlog = journal.backlog(journal.cursor(1))
    pub = "c1/snd"  # new_message default
    assert queue_backlog == [
        StoredMessage(3, b"payload-3", 0, T0 + 20, None, pub),
        StoredMessage(6, b"payload-6", 2, T0 + 40, T0 + 50, pub),
        StoredMessage(8, b"payload-8", 1, None, None, pub),
    ]
    assert journal.backlog(journal.cursor(1), batch=1) == queue_backlog
    assert journal.backlog(journal.cursor(2)) == [
        StoredMessage(4, b"payload-4", 0, None, None, pub),
        StoredMessage(7, b"payload-7", 0, T0 + 60, None, pub),
    ]
    assert journal.catalog().max_message_id == 8


def test_backlog_of_a_cursor_with_nothing_left(journal):
    with_queue(journal, 1, 2)
    journal.writer.submit_low_water(1, 2)
    journal.writer.start()
    journal.sync()
    assert journal.backlog(journal.cursor(1)) == []


def test_store_is_readable_by_operators(journal):
    """The column names are a contract (operators, the Spark pipeline): spot-check them with plain SQL."""
    with_queue(journal, 1)
    journal.writer.start()
    journal.sync()
    with journal.engine.connect() as conn:
        row = conn.execute(text("SELECT id, address, node_kind, bookmark, size FROM messages")).one()
        assert tuple(row) == (1, "q", "queue", "c1/snd|1|", len(b"payload-1"))
        assert conn.execute(text("SELECT owner, low_water FROM ack_cursors")).one() == ("q", 0)
    assert journal.rows(Node)[0][:3] == (1, "q", "queue")
    assert journal.rows(AckCursor)[0][:5] == (1, "queue", "q", "q", 0)
