"""Reads of the journal that place a replay.

Owns the queries behind ``ReplayRead`` (run by the journal writer, after everything submitted before it is
committed): a bookmark's journal sequence (by ``publisher_id, publisher_seq``, the index
``ix_messages_publisher``), the last sequence journaled at or before a time (a binary search over the primary
key: journal sequences are handed out in time order, so no index on ``ts`` is needed), the lowest retained
sequence and a row count for depth. (The publishers' high-water marks: ``storage.high_water``.)
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, func, select

from subgate.engine.records import ReplayAnswer, ReplayRead
from subgate.storage.models import JournalMessage

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
