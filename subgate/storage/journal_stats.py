"""Operator reads of the journal: a subscription's bookmark, and the journal's figures per topic branch.

Owns the one implementation of each query. Two callers share it: the offline commands (``subgate bookmarks
show`` and ``subgate journal stats`` on the store, while no server runs) and the journal writer thread, which
runs the same functions for a running server's ``$management`` (``storage.operations.ReadBookmark`` and
``ReadJournalStats``, applied by ``storage.applying``). Functions take a ``Connection`` the caller owns (never
commit) and return plain records from ``engine.records``.

A bookmark is a durable subscription's journal cursor (``ack_cursors``): its low-water mark, the ``acks`` rows
above it, and the backlog: the journal rows of the subscription's topic above the low-water mark that the cursor
has not acked, before the subscription's selector and no-local filter (those are applied when the rows are
delivered), counted by ``catalog.count_backlog`` (the count recovery makes too): rows with ``durable = false``
count only above ``BookmarkRead.non_durable_after``, or not at all when it is None.

The figures group the journal by branch (``branch_of``): a topic's address by its first path segment
(``prices/fx/EURUSD`` is in ``prices``), a queue by its whole name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, func, select

from subgate.engine.records import (
    Bookmark,
    BookmarkRead,
    BranchFigures,
    JournalEnd,
    JournalFigures,
    JournalPosition,
    JournalStats,
)
from subgate.storage.catalog import count_backlog
from subgate.storage.models import Ack, AckCursor, JournalMessage
from subgate.storage.subscription_admin import describe
from subgate.storage.subscriptions import lookup_statement, subscription_record

QUEUE = "queue"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_IDS_PER_QUERY = 500  # ids in one ``IN (...)`` when reading the ends' timestamps


# -- bookmarks ----------------------------------------------------------------------------------------------------
def read_bookmark(conn: Connection, read: BookmarkRead) -> Bookmark | None:
    """The bookmark of subscription ``read.name`` of ``read.client_id`` (None = global); None when there is no
    such subscription. A durable and a shared-volatile subscription of one name: the durable one."""
    row = conn.execute(lookup_statement(read.name, read.client_id)).first()
    if row is None:
        return None
    record = subscription_record(row)
    low_water = None
    if record.cursor_id is not None:
        low_water = conn.scalar(select(AckCursor.low_water).where(AckCursor.id == record.cursor_id))
    if record.cursor_id is None or low_water is None:
        return Bookmark(record, None)
    accepted, highest = conn.execute(
        select(func.count(), func.max(Ack.message_id)).where(Ack.cursor_id == record.cursor_id)
    ).one()
    backlog = count_backlog(conn, record.cursor_id, record.topic, low_water, None, read.non_durable_after)
    return Bookmark(record, JournalPosition(low_water, accepted or 0, highest, backlog))


def missing_bookmark(bookmark: Bookmark | None, name: str, client_id: str | None) -> str | None:
    """Why there is no bookmark to show (the sentence the operator reads), or None when there is one."""
    if bookmark is None:
        return f"no {describe(name, client_id)}"
    if bookmark.position is None and bookmark.subscription.durable:  # its cursor row is gone: a damaged store
        return f"{describe(name, client_id)} has no journal cursor in the store, so no bookmark"
    if bookmark.position is None:
        return (
            f"{describe(name, client_id)} is {bookmark.subscription.kind}, not durable: it has no journal cursor, "
            "so no bookmark (its messages are held in memory only)"
        )
    return None


# -- journal figures --------------------------------------------------------------------------------------------
def branch_of(address: str, node_kind: str) -> str:
    """The branch a journal row is counted under: a queue's whole name, a topic's first path segment."""
    return address if node_kind == QUEUE else address.split("/", 1)[0]


@dataclass(slots=True)
class _Tally:
    rows: int = 0
    bytes: int = 0
    oldest: int | None = None
    newest: int | None = None

    def add(self, rows: int, size: int, oldest: int, newest: int) -> None:
        self.rows += rows
        self.bytes += size
        self.oldest = oldest if self.oldest is None else min(self.oldest, oldest)
        self.newest = newest if self.newest is None else max(self.newest, newest)

    def figures(self, stamps: dict[int, int]) -> JournalFigures:
        oldest = None if self.oldest is None else JournalEnd(self.oldest, stamps[self.oldest])
        newest = None if self.newest is None else JournalEnd(self.newest, stamps[self.newest])
        return JournalFigures(self.rows, self.bytes, oldest, newest)


def journal_stats(conn: Connection) -> JournalStats:
    """Rows, bytes, oldest and newest row of the whole journal and of each branch (``branch_of``).

    One pass over the journal grouped by address (portable SQL; the branches are folded here), then one look-up
    of the ends' timestamps.
    """
    per_address = select(
        JournalMessage.address,
        JournalMessage.node_kind,
        func.count(),
        func.coalesce(func.sum(JournalMessage.size), 0),
        func.min(JournalMessage.id),
        func.max(JournalMessage.id),
    ).group_by(JournalMessage.address, JournalMessage.node_kind)
    total = _Tally()
    branches: dict[tuple[str, str], _Tally] = {}
    for address, kind, rows, size, oldest, newest in conn.execute(per_address):
        total.add(rows, size, oldest, newest)
        branches.setdefault((branch_of(address, kind), kind), _Tally()).add(rows, size, oldest, newest)
    ends = {end for tally in branches.values() for end in (tally.oldest, tally.newest) if end is not None}
    stamps = _timestamps(conn, ends)
    return JournalStats(
        total.figures(stamps),
        tuple(BranchFigures(branch, kind, tally.figures(stamps)) for (branch, kind), tally in sorted(branches.items())),
    )


def _timestamps(conn: Connection, ids: Iterable[int]) -> dict[int, int]:
    """The ``ts`` (ms since the epoch) of each journal row in ``ids``."""
    wanted = sorted(ids)
    stamps: dict[int, int] = {}
    for start in range(0, len(wanted), _IDS_PER_QUERY):
        chunk = wanted[start : start + _IDS_PER_QUERY]
        query = select(JournalMessage.id, JournalMessage.ts).where(JournalMessage.id.in_(chunk))
        stamps.update((row_id, _ms(ts)) for row_id, ts in conn.execute(query))
    return stamps


def _ms(value: datetime) -> int:
    if value.tzinfo is None:  # SQLite hands timestamps back naive; they were written in UTC
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)  # exact, unlike timestamp() * 1000
