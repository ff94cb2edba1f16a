"""Publishers' high-water marks in the store (duplicate detection, docs/bookmarks.md "Duplicate detection").

Owns how a mark is kept so that a crash cannot separate it from its messages, without a write of the
``publishers`` table in every journal batch:

- The journal rows are the marks. A message its publisher numbered carries ``publisher_id`` and
  ``publisher_seq`` in its row, written in the batch's transaction, so a publisher's mark is the highest
  ``publisher_seq`` of its rows (one seek on the index ``ix_messages_publisher``).
- The ``publishers`` table names every publisher that numbers its messages (its row is written in the
  transaction of the first batch that holds one of its messages) and keeps a floor: ``last_seq`` is raised
  at most once a second by the journal writer (``MarkLedger``), when the writer stops, and, from the rows
  about to go, by every deletion of journal rows (``fold_deleted``: retention, compaction), in the deleting
  transaction.
- At start-up (``high_water_marks``) a publisher's mark is the higher of its floor and its rows' highest seq.

So the hot path writes the table about once a second instead of once a batch: each write is one more
statement in the commit, and on SQLite one more page in the WAL (measured in the server: ≈50 µs of the
writer's CPU a batch, plus the hand-offs of the GIL around its calls).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, Select, bindparam, func, select, update
from sqlalchemy.orm import Session

from subgate.engine.records import NewMessage
from subgate.storage.bulk import upsert_high_water
from subgate.storage.models import JournalMessage, Publisher, table_of

log = logging.getLogger("subgate.journal")

FLUSH_SECONDS = 1.0  # the longest a committed mark waits before the publishers table shows it
_PUBLISHERS = table_of(Publisher)

Marks = dict[str, tuple[int, int]]  # publisher id -> (seq, journal time in ms)


def high_water_marks(session: Session) -> dict[str, int]:
    """Every numbering publisher's high-water mark (start-up): its floor or its rows' highest seq."""
    highest = (
        select(func.max(JournalMessage.publisher_seq))
        .where(JournalMessage.publisher_id == Publisher.publisher_id)
        .scalar_subquery()
    )
    rows = session.execute(select(Publisher.publisher_id, Publisher.last_seq, highest)).all()
    return {publisher_id: max(floor, int(top or 0)) for publisher_id, floor, top in rows}


def _merge(into: Marks, marks: Marks) -> None:
    for publisher_id, mark in marks.items():
        current = into.get(publisher_id)
        if current is None or mark[0] > current[0]:
            into[publisher_id] = mark


class MarkLedger:
    """The journal writer's view of the ``publishers`` table (writer thread only): which publishers have a row,
    and the marks committed since the table was last written.

    Per transaction: ``stage`` the marks of the messages it writes (``write`` decides whether the table is
    written in it), then ``committed`` or ``abandoned`` once the transaction's fate is known."""

    __slots__ = ("_known", "_dirty", "_staged", "_wrote", "_written_at", "_clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._known: set[str] | None = None  # read from the table in the first transaction that needs it
        self._dirty: Marks = {}  # committed, not in the table yet
        self._staged: Marks = {}  # this transaction's
        self._wrote = False
        self._clock = clock
        self._written_at = clock()

    def stage(self, messages: Sequence[NewMessage]) -> None:
        """The highest seq (and its time) of each publisher that numbered some of ``messages`` itself
        (``tracked``), written in this transaction."""
        staged = self._staged
        for m in reversed(messages):  # a publisher's later messages come later: its mark is usually the first seen
            if m.tracked:
                current = staged.get(m.publisher_id)
                if current is None or m.publisher_seq > current[0]:
                    staged[m.publisher_id] = (m.publisher_seq, m.ts_ms)

    def write(self, conn: Connection, *, now: bool = False) -> None:
        """Inside the transaction, before its commit: write the marks when a staged publisher has no row yet
        (its row must commit with its first messages), the last write is ``FLUSH_SECONDS`` old, or ``now`` (the
        writer's stop)."""
        staged = self._staged
        if not staged and not self._dirty:
            return
        known = self._known_ids(conn)
        if not now and not self._due() and all(publisher_id in known for publisher_id in staged):
            return
        marks = dict(self._dirty)
        _merge(marks, staged)
        upsert_high_water(conn, marks)
        self._wrote = True

    def committed(self) -> None:
        if self._wrote:
            assert self._known is not None  # (the committed marks waiting in _dirty were known already)
            self._known.update(self._staged)
            self._dirty.clear()
            self._written_at = self._clock()
        else:
            _merge(self._dirty, self._staged)
        self._staged = {}
        self._wrote = False

    def abandoned(self) -> None:
        """The transaction rolled back: what it staged was not written, and no row it wrote exists."""
        self._staged = {}
        self._wrote = False

    def pending(self) -> bool:
        """Committed marks the table does not show yet (written at the writer's stop)."""
        return bool(self._dirty)

    def _due(self) -> bool:
        return self._clock() - self._written_at >= FLUSH_SECONDS

    def _known_ids(self, conn: Connection) -> set[str]:
        if self._known is None:
            self._known = set(conn.execute(select(Publisher.publisher_id)).scalars())
        return self._known


def write_pending(engine: Engine, ledger: MarkLedger) -> None:
    """At the writer's stop: the committed marks the publishers table does not show yet, in a transaction of
    their own (a failure is logged: the journal's rows still hold the marks, the next start reads them there)."""
    if not ledger.pending():
        return
    try:
        with engine.begin() as conn:
            ledger.write(conn, now=True)
    except Exception as exc:
        ledger.abandoned()
        log.warning("publishers' high-water marks not written at the stop: %s", exc)
        return
    ledger.committed()


def fold_deleted(conn: Connection, doomed: Select[Any]) -> None:
    """Before journal rows go (retention, compaction), in the same transaction: raise each numbering
    publisher's floor to the highest seq among them, so that its mark survives its rows. (The publishers the
    server numbers, one per link, have no row: theirs are left out.)"""
    highest = conn.execute(
        select(JournalMessage.publisher_id, func.max(JournalMessage.publisher_seq))
        .where(JournalMessage.id.in_(doomed), JournalMessage.publisher_id.in_(select(Publisher.publisher_id)))
        .group_by(JournalMessage.publisher_id)
    ).all()
    if not highest:
        return
    conn.execute(
        update(_PUBLISHERS)
        .where(_PUBLISHERS.c.publisher_id == bindparam("pid"), _PUBLISHERS.c.last_seq < bindparam("seq"))
        .values(last_seq=bindparam("seq")),
        [{"pid": publisher_id, "seq": int(seq)} for publisher_id, seq in highest],
    )
