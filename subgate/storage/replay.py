"""Reads of the journal that place a replay, and the publishers' high-water marks (duplicate detection).

Owns the queries behind ``ReplayRead`` (run by the journal writer, after everything submitted before it is
committed): a bookmark's journal sequence (by ``publisher_id, publisher_seq``, the index
``ix_messages_publisher``), the last sequence journaled at or before a time (a binary search over the primary
key: journal sequences are handed out in time order, so no index on ``ts`` is needed), the lowest retained
sequence and a row count for depth. Also the high-water marks: read at start-up, raised in the transaction that
writes the messages (``raise_high_water``), so that a crash cannot separate a message from its mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from subgate.engine.records import NewMessage, ReplayAnswer, ReplayRead
from subgate.storage.bulk import upsert_high_water
from subgate.storage.models import JournalMessage, Publisher

_MAX_PROBES = 80  # a binary search over 64-bit sequences ends well within this


def resolve_replay(conn: Connection, read: ReplayRead) -> ReplayAnswer:
    found: dict[tuple[str, int], int] = {}
    for publisher_id, seq in dict.fromkeys(read.bookmarks):
        row = conn.execute(
            select(func.min(JournalMessage.id)).where(
                JournalMessage.publisher_id == publisher_id, JournalMessage.publisher_seq == seq
            )
        ).scalar()
        if row is not None:
            found[(publisher_id, seq)] = int(row)
    oldest = conn.execute(select(func.min(JournalMessage.id))).scalar() or 0
    after = last_at_or_before(conn, read.at_ms, oldest) if read.at_ms is not None else 0
    starts = ([after] if read.at_ms is not None else []) + list(found.values())
    start = min(starts, default=0)
    rows = conn.execute(
        select(func.count()).where(JournalMessage.address == read.address, JournalMessage.id > start)
    ).scalar()
    return ReplayAnswer(found, after, int(oldest), int(rows or 0))


def last_at_or_before(conn: Connection, at_ms: int, oldest: int) -> int:
    """The highest journal sequence whose row was journaled at or before ``at_ms`` (0 when none was)."""
    moment = _comparable(datetime.fromtimestamp(at_ms / 1000.0, tz=UTC))
    low, high = oldest, conn.execute(select(func.max(JournalMessage.id))).scalar() or 0
    if not low or _first_from(conn, low)[1] > moment:
        return 0
    # Invariant: the row at or after ``low`` is at or before the moment; every row above ``high`` is after it.
    for _ in range(_MAX_PROBES):
        if low >= high:
            break
        middle = (low + high + 1) // 2
        seq, ts = _first_from(conn, middle)
        if seq <= high and ts <= moment:
            low = seq
        else:
            high = middle - 1
    return low


def _first_from(conn: Connection, seq: int) -> tuple[int, datetime]:
    """The first row at or above ``seq``: its sequence and time (times compared as the store returns them)."""
    row = conn.execute(
        select(JournalMessage.id, JournalMessage.ts)
        .where(JournalMessage.id >= seq)
        .order_by(JournalMessage.id)
        .limit(1)
    ).first()
    if row is None:
        return seq, datetime.max.replace(tzinfo=None)
    return int(row[0]), _comparable(row[1])


def _comparable(ts: datetime) -> datetime:
    return ts.replace(tzinfo=None) if ts.tzinfo is not None else ts


def high_water_marks(session: Session) -> dict[str, int]:
    """Every publisher's high-water mark (start-up)."""
    return {row.publisher_id: row.last_seq for row in session.scalars(select(Publisher))}


def raise_high_water(conn: Any, messages: Sequence[NewMessage]) -> None:
    """Raise the high-water mark of each publisher that numbered ``messages`` itself (``tracked``), inside the
    transaction that writes them; a mark never goes down."""
    marks: dict[str, tuple[int, int]] = {}
    for m in messages:
        if m.tracked:
            current = marks.get(m.publisher_id)
            if current is None or m.publisher_seq > current[0]:
                marks[m.publisher_id] = (m.publisher_seq, m.ts_ms)
    if marks:
        upsert_high_water(conn, marks)
