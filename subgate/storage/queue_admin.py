"""The operator's durable queues on the store itself, while no server runs (``subgate queues`` offline).

Owns the offline reads and the offline purge. A durable queue is a ``nodes`` row of kind ``queue`` with a journal
cursor (``ack_cursors``, ``owner_kind = 'queue'``); what it holds is its backlog: its journal rows above the
cursor's low-water mark that the cursor has not acked (``catalog.backlog_figures``), counting rows with
``durable = false`` not at all (a server started now would not load them). A purge moves the low-water mark past
the backlog one step at a time (``purge_step``: the next ``limit`` rows), dropping the acks and failure counts
below it, so each step is one short transaction and the caller can show progress; the rows themselves go with
the next retention pass that finds no cursor needing them. Functions take a ``Session`` the caller owns (never
commit) and return plain records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from subgate.storage.catalog import backlog_figures, backlog_ids, journal_ms
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, Node


@dataclass(frozen=True, slots=True)
class StoredQueue:
    """A durable queue as the store holds it: its backlog and the journal time of its oldest row (ms)."""

    name: str
    cursor_id: int
    low_water: int
    depth: int
    oldest_ms: int | None


def list_queues(session: Session) -> list[StoredQueue]:
    """Every durable queue with a cursor, by name."""
    rows = session.execute(
        select(Node.name, AckCursor.id, AckCursor.low_water)
        .join(AckCursor, (AckCursor.owner == Node.name) & (AckCursor.owner_kind == "queue"))
        .where(Node.kind == "queue")
        .order_by(Node.name)
    ).all()
    return [_figures(session, name, cursor_id, low_water) for name, cursor_id, low_water in rows]


def find_queue(session: Session, name: str) -> StoredQueue | None:
    """The durable queue ``name``, or None when the store has no queue (with a cursor) of that name."""
    row = session.execute(
        select(AckCursor.id, AckCursor.low_water)
        .join(Node, (Node.name == AckCursor.owner) & (Node.kind == "queue"))
        .where(AckCursor.owner_kind == "queue", AckCursor.owner == name)
    ).first()
    return None if row is None else _figures(session, name, row[0], row[1])


def _figures(session: Session, name: str, cursor_id: int, low_water: int) -> StoredQueue:
    depth, oldest = backlog_figures(session, cursor_id, name, low_water, None)
    return StoredQueue(name, cursor_id, low_water, depth, journal_ms(oldest))


def purge_step(session: Session, queue: StoredQueue, limit: int) -> int:
    """Discard the next ``limit`` rows of the queue's backlog (``queue`` as read before the first step): the
    low-water mark moves to the last of them. Returns how many rows went (0: the backlog is empty)."""
    low_water = session.scalar(select(AckCursor.low_water).where(AckCursor.id == queue.cursor_id))
    if low_water is None:
        return 0
    ids = backlog_ids(session, queue.cursor_id, queue.name, low_water, limit)
    if not ids:
        return 0
    mark = ids[-1]
    session.execute(
        update(AckCursor).where(AckCursor.id == queue.cursor_id).values(low_water=mark, updated_at=datetime.now(UTC))
    )
    session.execute(delete(Ack).where(Ack.cursor_id == queue.cursor_id, Ack.message_id <= mark))
    session.execute(
        delete(DeliveryFailure).where(DeliveryFailure.cursor_id == queue.cursor_id, DeliveryFailure.message_id <= mark)
    )
    return len(ids)
