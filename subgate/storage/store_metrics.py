"""The store's side of the metrics endpoint: a write probe, and the figures read for ``/metrics``.

Owns ``read_metrics``, which the journal writer thread runs for ``ReadMetrics`` (``storage.applying``), in order
with every other write and inside the writer's own transaction: so a failing probe is a failing commit, which the
writer records (``JournalWriter.health``), and ``/healthz`` reports. The probe moves a column of the store's
lease row (``server_lease``, one row: its ``pid``) one up and back down in the same transaction: a real write
that takes the store's write lock and goes to its log (SQLite's WAL, PostgreSQL's WAL), and that nobody can see
(a single ``SET pid = pid`` would not do: SQLite writes nothing for an update that changes nothing). On SQLite a
full disk shows as soon as the WAL file has to grow, which it does at each probe until a checkpoint restarts it.
The backlog of a durable subscription is counted by the query ``subgate bookmarks show`` runs
(``catalog._backlog_conditions``, from the low-water mark in the store), so the two agree.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select, update

from subgate.engine.records import MetricsRead, StoreFigures, SubscriptionBacklog
from subgate.storage.catalog import backlog_figures, journal_ms
from subgate.storage.models import AckCursor, JournalMessage, ServerLease, Subscription


def probe_write(conn: Connection) -> None:
    """A write that changes nothing in the end (see the module docstring)."""
    conn.execute(update(ServerLease).values(pid=ServerLease.pid + 1))
    conn.execute(update(ServerLease).values(pid=ServerLease.pid - 1))


def read_metrics(conn: Connection, read: MetricsRead) -> StoreFigures:
    """Probe, then (when ``read.figures``) the journal's row count and every durable subscription's backlog."""
    probe_write(conn)
    if not read.figures:
        return StoreFigures()
    rows = conn.scalar(select(func.count()).select_from(JournalMessage)) or 0
    durable = (
        select(Subscription.client_id, Subscription.name, Subscription.topic, AckCursor.id, AckCursor.low_water)
        .join(AckCursor, AckCursor.id == Subscription.cursor_id)
        .where(Subscription.durable.is_(True))
        .order_by(Subscription.id)
    )
    found = []
    for client_id, name, topic, cursor_id, low_water in conn.execute(durable).all():
        count, oldest = backlog_figures(conn, cursor_id, topic, low_water, read.non_durable_after)
        found.append(SubscriptionBacklog(client_id, name, topic, count, journal_ms(oldest)))
    return StoreFigures(rows, tuple(found))
