"""The journal writer: one thread that applies the server's store writes in group commits.

Owns the only write path of a running server. The reactor thread calls the ``submit_*`` methods (which only
enqueue and never wait); the writer thread takes everything queued, applies it in one transaction, commits,
and then hands the tokens of what was committed to ``notify`` (the gateway turns that into an
``EventInjector`` event, so completions run back on the reactor thread). Under load a batch grows to whatever
queued up during the previous commit, so the commit rate adapts to the load by itself.

The queue carries typed operations (``storage.operations``: one frozen dataclass per kind of write, built by the
``submit_*`` verbs of ``storage.submissions``), and the writer applies them through one table (``storage.applying``);
this module keeps the thread, the batching, the retries and the connection it holds between batches
(``HeldConnection``). ``storage.journal_process`` runs this same writer in a process of its own.

Writes are idempotent or monotonic where a crash-and-retry could repeat them: cursors only move forward, acks
are a set.

A submission's token (what comes back when it is committed) never reaches the writer thread: the writer keeps it
in a table on the submitting side and queues a ticket number instead; ``claim`` turns a result's tickets back
into tokens on the submitting thread. The gateway's tokens hold proton objects, and proton-c is not
thread-safe: a proton wrapper released on the writer thread (its ``__del__`` calls ``pn_decref``) races the
reactor's own calls into proton-c, which do not hold the GIL.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine

from subgate.metrics.buckets import BATCH_SIZES, COMMIT_SECONDS, Buckets
from subgate.storage.applying import OperationFailed, ReadAnswer, StoreReadFailed, apply_batch
from subgate.storage.high_water import MarkLedger, write_pending
from subgate.storage.operations import READS, TICKETED, Operation
from subgate.storage.submissions import Submissions

log = logging.getLogger("subgate.journal")

_ATTEMPTS = 5
# The writer keeps its connection while batches follow each other closer than this; after a longer pause it hands
# the connection back to the pool and takes one again (on PostgreSQL the pool pings it first, so a connection
# that died while idle is replaced without a failed commit).
HOLD_SECONDS = 1.0
# Group commit under load: after a batch of at least BUSY_BATCH operations, once the next operation is in, the
# writer lets the batch fill (``gather``): it waits GATHER_STEP_SECONDS at a time, at most GATHER_MAX_SECONDS (the
# role of Artemis's journal-buffer-timeout, 3.3 ms on NIO), and commits as soon as a step brought nothing new while
# the reactor was waiting for input (it has nothing more to submit: a publisher whose whole window is in the batch
# is not kept waiting), or at once when a read the reactor waits for is queued. A batch costs the writer about the
# same whatever its size, and costs the reactor the hand-offs of the GIL around the writer's calls to the driver
# (docs/threading.md, rule 6), so batches grow with the load. A lone message (after a small batch) is never held.
BUSY_BATCH = 5
GATHER_STEP_SECONDS = 0.00025
GATHER_MAX_SECONDS = 0.004


def _always() -> bool:
    return True


def _never() -> bool:
    return False


def pause(seconds: float) -> None:
    """The writer's sleep between gather steps (a seam of its own, so a test can record the steps without patching
    ``time.sleep`` for every thread of the process)."""
    time.sleep(seconds)


def back_off(seconds: float) -> None:
    """The writer's wait before it retries a failed commit (a seam of its own, like ``pause``)."""
    time.sleep(seconds)


def gather(
    queued: Callable[[], int],
    limit: int,
    producer_idle: Callable[[], bool] = _always,
    hurry: Callable[[], bool] = _never,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> None:
    """Wait a step at a time while the number of ``queued`` operations may still grow: until a step brings
    nothing new while the producer is idle, ``limit`` operations are queued, GATHER_MAX_SECONDS have passed, or
    something queued is in a ``hurry`` (a read the reactor waits for: a page of a backlog, an operator's read)."""
    sleep = sleep or pause
    clock = clock or time.monotonic
    deadline = clock() + GATHER_MAX_SECONDS
    seen = queued()
    while seen < limit and clock() < deadline and not hurry():
        sleep(GATHER_STEP_SECONDS)
        now = queued()
        if now == seen and producer_idle():
            return
        seen = now


@dataclass(slots=True)
class BatchResult:
    """What one commit did: the tokens it made durable, and those it could not write (with the error). From the
    writer thread they are tickets; ``JournalWriter.claim`` gives the tokens."""

    tokens: list[Any]
    error: BaseException | None
    size: int
    failed: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CommitHealth:
    """How the writer's last commit went (replaced whole after each one, so any thread may read it): ``ok``,
    when (``time.monotonic``), the error when it failed, and when a commit last succeeded (None: never)."""

    ok: bool
    at: float
    error: str | None = None
    last_ok: float | None = None


class HeldConnection:
    """The journal writer's connection: the one it holds while batches keep coming (within ``HOLD_SECONDS`` of
    each other), else a fresh checkout. Under load a checkout per batch cost a round trip on PostgreSQL (the pool's
    ping: one more wait on the socket, with the GIL handed to the reactor and back) and the pool's Python on every
    commit."""

    __slots__ = ("_engine", "_conn", "_used")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._used = 0.0

    def get(self) -> Connection:
        now = time.monotonic()
        if self._conn is not None and now - self._used > HOLD_SECONDS:
            self.release()
        if self._conn is None:
            self._conn = self._engine.connect()
        self._used = now
        return self._conn

    def release(self) -> None:
        """Hand the connection back to the pool (a broken one is dropped there)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # a connection already broken: the pool drops it
                log.debug("journal connection closed with an error: %s", exc)


class JournalWriter(Submissions):
    """Group-commit writer thread. Start with ``start()``, stop with ``close()`` (flushes everything)."""

    def __init__(
        self,
        engine: Engine,
        notify: Callable[[BatchResult], None],
        *,
        max_batch: int = 4000,
    ) -> None:
        super().__init__()
        self._engine = engine
        self._notify = notify
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[Operation | None] = queue.SimpleQueue()  # None: stop
        self._put = self._queue.put
        self._thread = threading.Thread(target=self._run, name="subgate-journal", daemon=True)
        self.batches = 0
        self.rows = 0
        # Written by the writer thread only, read by the metrics endpoint's thread (subgate.metrics).
        self.commit_seconds = Buckets(COMMIT_SECONDS)  # the time of each successful commit of a whole batch
        self.batch_sizes = Buckets(BATCH_SIZES)
        self.health: CommitHealth | None = None  # None until the first commit
        self._connection = HeldConnection(engine)  # writer thread only
        self._marks = MarkLedger()  # touched only by the writer thread
        # Whether the thread that submits operations is idle (``gather``): the server sets it to the reactor's
        # "waiting for input" (gateway.io); read by the writer thread.
        self.producer_idle: Callable[[], bool] = _always
        self._hurrying = lambda: self._hurry

    # -- called on the reactor thread (enqueue only: the submit_* verbs of Submissions) -----------------
    def start(self) -> None:
        self._thread.start()

    def enqueue(self, operations: Sequence[Operation], hurry: bool) -> None:
        """Operations built and ticketed elsewhere (the writer process's pipe: ``storage.journal_process``);
        ``hurry``: a read among them is waited for."""
        if hurry:
            self._hurry = True
        put = self._put
        for op in operations:
            put(op)

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

    # -- the writer thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        stopping = False
        busy = False
        while not stopping:
            batch: list[Operation] = []
            item = self._queue.get()
            if busy:
                gather(self._queue.qsize, self._max_batch, self.producer_idle, self._hurrying)  # let the batch fill
            self._hurry = False
            while True:
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
                if len(batch) >= self._max_batch:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._commit(batch)
            busy = len(batch) >= BUSY_BATCH
        self._connection.release()
        write_pending(self._engine, self._marks)

    def _commit(self, batch: Sequence[Operation]) -> None:
        tokens: list[Any] = []
        failed: list[Any] = []
        error: BaseException | None = None
        alone: list[ReadAnswer] = []  # the answers of reads that failed by themselves
        size = len(batch)
        attempt = 0
        while attempt < _ATTEMPTS:
            try:
                started = time.perf_counter()
                tokens = self._apply(batch)
                self.commit_seconds.observe(time.perf_counter() - started)
                error = None
                break
            except OperationFailed as failure:
                # One operation's own error (a value the store refuses): it fails alone, at once, and the rest is
                # applied again without it, with no back-off (each pass drops one operation: bounded).
                batch = list(batch)
                alone.extend(_failed_alone(batch.pop(failure.index), failure.cause))
            except Exception as exc:  # retried: a store blip must not fail a whole batch of publishers
                error = exc
                self.health = _health_after(self.health, exc)
                attempt += 1
                log.warning("journal commit failed (attempt %d of %d): %s", attempt, _ATTEMPTS, exc)
                back_off(0.05 * 2 ** (attempt - 1))
        if error is not None:
            # Isolate the bad item(s): apply one by one, so every other write still lands.
            tokens, failed, error = self._apply_each(batch)
        tokens.extend(alone)
        self.health = _health_after(self.health, error)
        self.batch_sizes.observe(size)
        self.batches += 1
        self.rows += size
        self._notify(BatchResult(tokens, error, size, failed))

    def _apply_each(self, batch: Sequence[Operation]) -> tuple[list[Any], list[Any], BaseException | None]:
        tokens: list[Any] = []
        failed: list[Any] = []
        error: BaseException | None = None
        for op in batch:
            try:
                tokens.extend(self._apply([op]))
            except Exception as exc:
                error = exc
                log.error("journal write %s failed and was not applied: %s", type(op).__name__, exc)
                if isinstance(op, TICKETED):
                    failed.append(op.ticket)
        return tokens, failed, error

    def _apply(self, batch: Sequence[Operation]) -> list[int | ReadAnswer]:
        try:
            conn = self._connection.get()
            with conn.begin():
                tickets = apply_batch(conn, batch, self._marks)
        except BaseException:
            self._marks.abandoned()
            self._connection.release()  # a retry starts on a connection from the pool (a dead one left it)
            raise
        self._marks.committed()
        return tickets


def _failed_alone(op: Operation, cause: BaseException) -> list[ReadAnswer]:
    """Log an operation the store refused by itself (one line: it is not an outage); a read answers with
    ``StoreReadFailed`` (its token is called with it), a write is dropped."""
    what = f"{type(cause).__name__}: {_first_line(cause)}"
    log.warning("journal %s failed by itself and was not applied (not retried): %s", type(op).__name__, what)
    if isinstance(op, READS):
        return [ReadAnswer(op.ticket, StoreReadFailed(f"the store refused the read: {what}"))]
    return []


def _health_after(previous: CommitHealth | None, error: BaseException | None) -> CommitHealth:
    """The writer's health after a commit that succeeded (``error`` None) or failed."""
    now = time.monotonic()
    if error is None:
        return CommitHealth(True, now, None, now)
    return CommitHealth(False, now, _first_line(error), previous.last_ok if previous is not None else None)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]
