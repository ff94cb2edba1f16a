"""The store's side of the metrics endpoint: a write probe on the journal writer, and the figures read for
``/metrics`` on a thread and a connection of their own.

Owns two things:

* ``read_metrics``, which the journal writer thread runs for ``ReadMetrics`` (``storage.applying``), in order with
  every other write and inside the writer's own transaction: the write probe, so a failing probe is a failing
  commit, which the writer records (``JournalWriter.health``), and ``/healthz`` reports. The probe moves a column
  of the store's lease row (``server_lease``, one row: its ``pid``) one up and back down in the same transaction:
  a real write that takes the store's write lock and goes to its log (SQLite's WAL, PostgreSQL's WAL), and that
  nobody can see (a single ``SET pid = pid`` would not do: SQLite writes nothing for an update that changes
  nothing). On SQLite a full disk shows as soon as the WAL file has to grow, which it does at each probe until a
  checkpoint restarts it. It is a few rows' work, nothing the writer's commits wait on.
* ``FigureReader`` (thread ``subgate-store-figures``): every ``interval`` seconds, on an engine of its own (one
  connection, never the writer's), the journal's row count and every durable subscription's backlog
  (``read_figures``), each pass one read-only transaction that is rolled back. These queries grow with the store
  (a ``count(*)`` over the journal, one backlog query per subscription), so they must not run on the writer,
  where every commit would wait behind them: on SQLite in WAL mode and on PostgreSQL a reader neither blocks nor
  waits for the writer. What it reads is what is committed, as ``subgate bookmarks show`` reads it: the backlog is
  counted by the same query (``catalog.backlog_figures``, from the low-water mark in the store). The latest
  result is one attribute (``latest``: the figures and when they were read), swapped whole, read by the reactor's
  metrics feed without a lock; a failed pass is logged and leaves the previous figures in place.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Connection, Engine, func, select, update

from subgate.engine.records import MetricsRead, StoreFigures, SubscriptionBacklog
from subgate.storage.catalog import backlog_figures, journal_ms
from subgate.storage.models import AckCursor, JournalMessage, ServerLease, Subscription

log = logging.getLogger("subgate.metrics")


def probe_write(conn: Connection) -> None:
    """A write that changes nothing in the end (see the module docstring)."""
    conn.execute(update(ServerLease).values(pid=ServerLease.pid + 1))
    conn.execute(update(ServerLease).values(pid=ServerLease.pid - 1))


def read_metrics(conn: Connection, read: MetricsRead) -> StoreFigures:
    """The writer's part: the write probe only (the figures are ``FigureReader``'s)."""
    probe_write(conn)
    return StoreFigures()


def read_figures(conn: Connection, non_durable_after: int | None) -> StoreFigures:
    """The journal's row count and every durable subscription's backlog, as ``subgate bookmarks show`` counts it
    (rows with ``durable = false`` only above ``non_durable_after``)."""
    rows = conn.scalar(select(func.count()).select_from(JournalMessage)) or 0
    durable = (
        select(Subscription.client_id, Subscription.name, Subscription.topic, AckCursor.id, AckCursor.low_water)
        .join(AckCursor, AckCursor.id == Subscription.cursor_id)
        .where(Subscription.durable.is_(True))
        .order_by(Subscription.id)
    )
    found = []
    for client_id, name, topic, cursor_id, low_water in conn.execute(durable).all():
        count, oldest = backlog_figures(conn, cursor_id, topic, low_water, non_durable_after)
        found.append(SubscriptionBacklog(client_id, name, topic, count, journal_ms(oldest)))
    return StoreFigures(rows, tuple(found))


class FigureReader:
    """See the module docstring. ``start`` once, ``close`` once; ``latest`` from any thread.

    Args:
        engine: an engine of the reader's own (``close`` disposes of it).
        non_durable_after: the journal's end at start-up (``storage.catalog``'s rule for ``durable = false`` rows).
        interval: seconds between passes.
    """

    def __init__(self, engine: Engine, non_durable_after: int | None, interval: float = 5.0) -> None:
        self._engine = engine
        self._non_durable_after = non_durable_after
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="subgate-store-figures", daemon=True)
        self._failing = False
        self.latest: tuple[StoreFigures, float] | None = None  # the figures and when (``time.time``) they were read

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._engine.dispose()

    def read_once(self) -> None:
        """One pass (the thread's loop calls it; tests too)."""
        try:
            with self._engine.connect() as conn:
                figures = read_figures(conn, self._non_durable_after)
                conn.rollback()
        except Exception as exc:  # a store that is down: /healthz says so; keep the last figures
            if not self._failing:
                log.warning("reading the store's figures for /metrics failed: %s", exc)
            self._failing = True
            return
        self._failing = False
        self.latest = (figures, time.time())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self._interval)
