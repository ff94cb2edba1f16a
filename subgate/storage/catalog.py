"""Reads of the store at start-up and by the CLI: nodes, cursors, backlogs.

Functions take a ``Session`` owned by the caller and return plain records from ``engine.records``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, func, or_, select
from sqlalchemy.orm import Session

from subgate.engine.records import Catalog, CursorRecord, NodeRecord, PageRead, StoredMessage
from subgate.storage.high_water import high_water_marks
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Node, Subscription


def load_catalog(session: Session) -> Catalog:
    nodes = [
        NodeRecord(n.id, n.name, n.kind, n.durable, n.auto_created)
        for n in session.scalars(select(Node).order_by(Node.id))
    ]
    cursors = [
        CursorRecord(c.id, c.owner_kind, c.owner, c.address, c.low_water)
        for c in session.scalars(select(AckCursor).order_by(AckCursor.id))
    ]
    max_message_id = session.scalar(select(func.max(JournalMessage.id))) or 0
    return Catalog(
        nodes=nodes,
        cursors=cursors,
        max_message_id=max_message_id,
        max_node_id=max((n.id for n in nodes), default=0),
        max_cursor_id=max((c.id for c in cursors), default=0),
        max_subscription_id=session.scalar(select(func.max(Subscription.id))) or 0,
        publishers=high_water_marks(session),
    )


def _backlog_conditions(
    cursor_id: int,
    address: str,
    after: int,
    upto: int | None = None,
    non_durable_after: int | None = 0,
    prefix: bool = False,
) -> list[ColumnElement[bool]]:
    """Which journal rows are a cursor's backlog: those of ``address`` above ``after`` (and up to ``upto``) that it
    has not acked; rows with ``durable = false`` only above ``non_durable_after`` (non-persistent messages written
    before the last start are gone), none of them when it is None (what a server started now would keep). With
    ``prefix``, ``address`` is a topic path prefix and the rows are those of every topic at or under it (a topic
    selector's replay)."""
    # The acks looked at are bounded like the rows: PostgreSQL hashes the whole subquery once per statement, and
    # a drained queue's acks (with the dead ones a delete leaves until VACUUM) sit below ``after``.
    acked = select(Ack.message_id).where(Ack.cursor_id == cursor_id, Ack.message_id > after)
    if upto is not None:
        acked = acked.where(Ack.message_id <= upto)
    conditions = [
        _under(address) if prefix else JournalMessage.address == address,
        JournalMessage.id > after,
        JournalMessage.id.not_in(acked),
    ]
    if non_durable_after is None:
        conditions.append(JournalMessage.durable.is_(True))
    elif non_durable_after > after:
        conditions.append(or_(JournalMessage.durable.is_(True), JournalMessage.id > non_durable_after))
    if upto is not None:
        conditions.append(JournalMessage.id <= upto)
    return conditions


def _backlog_stmt(
    cursor_id: int,
    address: str,
    after: int,
    upto: int | None = None,
    non_durable_after: int = 0,
    prefix: bool = False,
) -> Select[Any]:
    """A cursor's backlog rows (``_backlog_conditions``), in order, as recovery and page reads take them."""
    failures = (
        select(DeliveryFailure.failures)
        .where(DeliveryFailure.cursor_id == cursor_id, DeliveryFailure.message_id == JournalMessage.id)
        .scalar_subquery()
    )
    return (
        select(
            JournalMessage.id,
            JournalMessage.payload,
            failures,
            JournalMessage.expires_at,
            JournalMessage.deliver_at,
            JournalMessage.publisher_id,
            JournalMessage.address,
        )
        .where(*_backlog_conditions(cursor_id, address, after, upto, non_durable_after, prefix))
        .order_by(JournalMessage.id)
    )


def count_backlog(
    conn: Connection | Session,
    cursor_id: int,
    address: str,
    after: int,
    upto: int | None = None,
    non_durable_after: int | None = 0,
    prefix: bool = False,
) -> int:
    """How many rows a cursor's backlog holds (``_backlog_conditions``), counted without reading them."""
    conditions = _backlog_conditions(cursor_id, address, after, upto, non_durable_after, prefix)
    return conn.scalar(select(func.count()).select_from(JournalMessage).where(*conditions)) or 0


def backlog_figures(
    conn: Connection | Session, cursor_id: int, address: str, after: int, non_durable_after: int | None = 0
) -> tuple[int, datetime | None]:
    """The rows ``count_backlog`` counts, and the journal time of the oldest of them (None when there is none),
    in one query."""
    conditions = _backlog_conditions(cursor_id, address, after, None, non_durable_after)
    count, oldest = conn.execute(select(func.count(), func.min(JournalMessage.ts)).where(*conditions)).one()
    return count or 0, oldest


def backlog_ids(conn: Connection | Session, cursor_id: int, address: str, after: int, limit: int) -> list[int]:
    """The ids of the first ``limit`` rows of a cursor's backlog above ``after`` (durable rows only: what a server
    started now would keep), in order."""
    conditions = _backlog_conditions(cursor_id, address, after, None, None)
    return list(conn.scalars(select(JournalMessage.id).where(*conditions).order_by(JournalMessage.id).limit(limit)))


def _under(prefix: str) -> ColumnElement[bool]:
    """Rows of the topics at or under the path ``prefix`` (every topic for "")."""
    topic = JournalMessage.node_kind == "topic"
    if not prefix:
        return topic
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    below = JournalMessage.address.like(escaped + "/%", escape="\\")
    return and_(topic, or_(JournalMessage.address == prefix, below))


def _stored(row: Any) -> StoredMessage:
    return StoredMessage(row[0], row[1], row[2] or 0, _ms(row[3]), _ms(row[4]), row[5], row[6])


def backlog(
    session: Session,
    cursor: CursorRecord,
    batch: int = 5000,
    *,
    after: int | None = None,
    non_durable_after: int = 0,
    prefix: bool = False,
) -> Iterator[StoredMessage]:
    """The journaled messages of ``cursor.address`` above the low-water mark (or above ``after``, when higher)
    that the cursor has not acked; rows with ``durable = false`` only above ``non_durable_after`` (at start-up:
    the journal's highest id, so none of them)."""
    low = cursor.low_water if after is None else max(after, cursor.low_water)
    stmt = _backlog_stmt(cursor.id, cursor.address, low, None, non_durable_after, prefix)
    stmt = stmt.execution_options(yield_per=batch)
    for row in session.execute(stmt):
        yield _stored(row)


def backlog_count(
    session: Session, cursor: CursorRecord, after: int, upto: int, non_durable_after: int = 0, prefix: bool = False
) -> int:
    """How many backlog rows ``backlog`` would give above ``after`` up to ``upto`` (before any filter)."""
    low = max(after, cursor.low_water)
    return count_backlog(session, cursor.id, cursor.address, low, upto, non_durable_after, prefix)


def overtaking(
    session: Session,
    cursor: CursorRecord,
    after: int,
    upto: int,
    above: int,
    limit: int,
    non_durable_after: int = 0,
    prefix: bool = False,
) -> list[StoredMessage]:
    """Up to ``limit`` backlog rows above ``after`` (to ``upto``) with a priority above ``above``, highest priority
    first: at start-up, what must not wait behind the first page of a paging queue."""
    stmt = _backlog_stmt(cursor.id, cursor.address, max(after, cursor.low_water), upto, non_durable_after, prefix)
    stmt = stmt.where(JournalMessage.priority > above).order_by(None)
    stmt = stmt.order_by(JournalMessage.priority.desc(), JournalMessage.id).limit(limit)
    return [_stored(row) for row in session.execute(stmt)]


def read_page(conn: Connection, read: PageRead) -> list[StoredMessage]:
    """One page of a backlog (``PageRead``), on a connection the caller owns (the journal writer's)."""
    stmt = _backlog_stmt(read.cursor_id, read.address, read.after, read.upto, read.non_durable_after, read.prefix)
    return [_stored(row) for row in conn.execute(stmt.limit(read.limit))]


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands timestamps back naive; they were written in UTC
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


journal_ms = _ms
"""A journal timestamp as ms since the epoch (SQLite's naive ones read as UTC); None stays None."""
