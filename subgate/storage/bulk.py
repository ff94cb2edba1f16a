"""The journal's hot writes (message rows, ack rows, publishers' high-water marks), the fastest way each driver
offers.

Owns the per-dialect bulk write of a group commit. Everything else the writer does goes through SQLAlchemy
Core; these two run once per batch with hundreds to thousands of rows, and under load their cost is paid
twice: as CPU in the database and as time the writer thread holds the GIL while the reactor waits for it.

- PostgreSQL (psycopg 3): ``COPY ... FROM STDIN (FORMAT BINARY)``. Measured on this machine with 1 KiB
  payloads (200 to 1,000 rows per transaction): ≈2.3 µs of Python per row and ≈4 µs of server CPU, against
  ≈8 µs and ≈7.5 µs for ``executemany`` of an ``INSERT`` (which psycopg already pipelines), and worse for a
  single ``INSERT ... SELECT unnest(...)``. COPY keeps constraint checks, so a duplicate key fails the batch
  exactly as the ``INSERT`` did.
- SQLite: multi-row ``INSERT ... VALUES`` statements of up to 256 rows, one or two a batch (why: ``_sqlite_insert``).
- Any other driver: one driver-level ``executemany``.

Either way the values are plain tuples, as the column types would bind them (no SQLAlchemy per-row dicts and
bind processors).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import chain
from typing import Any

from sqlalchemy.exc import DBAPIError

from subgate.engine.records import NewMessage
from subgate.storage.models import Ack, JournalMessage, Publisher

_MESSAGES = JournalMessage.__tablename__
_ACKS = Ack.__tablename__
_PUBLISHERS = Publisher.__tablename__
_MESSAGE_COLUMNS = (
    "id, address, node_kind, publisher_id, publisher_seq, bookmark, ts, expires_at, deliver_at, durable, priority, "
    "size, payload"
)
# PostgreSQL types of those columns, in order (binary COPY sends each value in its type's wire format).
_MESSAGE_PG_TYPES = (
    "int8",
    "varchar",
    "varchar",
    "varchar",
    "int8",
    "varchar",
    "timestamptz",
    "timestamptz",
    "timestamptz",
    "bool",
    "int2",
    "int4",
    "bytea",
)
_ACK_PG_TYPES = ("int4", "int8")
_SQLITE_CHUNKS = (256, 128, 64)  # rows per SQLite statement for the bulk of a large batch, largest first
_SQLITE_EXACT = 64  # a batch (or what is left of one) up to this many rows: at most two statements
_SQLITE_STEP = 8  # ... one of a multiple of this many rows, one of fewer


def insert_messages(conn: Any, messages: Sequence[NewMessage]) -> None:
    """Append ``messages`` to the journal inside the connection's open transaction."""
    if _is_psycopg(conn):
        copy_sql = f"COPY {_MESSAGES} ({_MESSAGE_COLUMNS}) FROM STDIN (FORMAT BINARY)"
        with _copy(conn, copy_sql, _MESSAGE_PG_TYPES) as copy:
            for m in messages:
                copy.write_row(_message_row(m, utc_from_ms))
        return
    if conn.dialect.name == "sqlite":
        _sqlite_insert(conn, _MESSAGES, _MESSAGE_COLUMNS, 13, [_message_row(m, _sqlite_ts) for m in messages])
        return
    marks = ", ".join(["%s"] * 13)
    rows = [_message_row(m, utc_from_ms) for m in messages]
    conn.exec_driver_sql(f"INSERT INTO {_MESSAGES} ({_MESSAGE_COLUMNS}) VALUES ({marks})", rows)


def insert_acks(conn: Any, acks: Sequence[tuple[int, int]]) -> None:
    """Record ``(cursor_id, message_id)`` acknowledgements; repeats within ``acks`` are written once."""
    rows = list(dict.fromkeys(acks))
    if _is_psycopg(conn):
        with _copy(conn, f"COPY {_ACKS} (cursor_id, message_id) FROM STDIN (FORMAT BINARY)", _ACK_PG_TYPES) as copy:
            for row in rows:
                copy.write_row(row)
        return
    if conn.dialect.name == "sqlite":
        _sqlite_insert(conn, _ACKS, "cursor_id, message_id", 2, rows)
        return
    conn.exec_driver_sql(f"INSERT INTO {_ACKS} (cursor_id, message_id) VALUES (%s, %s)", rows)


def _message_row(m: NewMessage, ts: Any) -> tuple[Any, ...]:
    return (
        m.id,
        m.address,
        m.node_kind,
        m.publisher_id,
        m.publisher_seq,
        m.bookmark,
        ts(m.ts_ms),
        ts(m.expires_ms),
        ts(m.deliver_ms),
        m.durable,
        m.priority,
        len(m.payload),
        m.payload,
    )


def upsert_high_water(conn: Any, marks: dict[str, tuple[int, int]]) -> None:
    """Raise each publisher's high-water mark (``publisher id -> (seq, ms)``), never lowering one: one
    statement per batch, on the driver's connection (``_execute``; through SQLAlchemy Core it cost ≈250 µs a
    commit, through ``exec_driver_sql`` ≈10 µs, on the driver ≈4 µs)."""
    if conn.dialect.name == "sqlite":
        rows: list[tuple[Any, ...]] = [(pid, seq, _sqlite_ts(ms)) for pid, (seq, ms) in marks.items()]
        statement = (
            f"INSERT INTO {_PUBLISHERS} (publisher_id, last_seq, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (publisher_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq), "
            "updated_at = excluded.updated_at"
        )
    else:
        rows = [(pid, seq, utc_from_ms(ms)) for pid, (seq, ms) in marks.items()]
        statement = (
            f"INSERT INTO {_PUBLISHERS} (publisher_id, last_seq, updated_at) VALUES (%s, %s, %s) "
            f"ON CONFLICT (publisher_id) DO UPDATE SET last_seq = GREATEST({_PUBLISHERS}.last_seq, "
            "EXCLUDED.last_seq), updated_at = EXCLUDED.updated_at"
        )
    if len(rows) == 1:
        _execute(conn, statement, rows[0])
    else:
        _execute(conn, statement, rows, many=True)


def _sqlite_insert(conn: Any, table: str, columns: str, width: int, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with multi-row ``INSERT ... VALUES (...), (...)`` statements: at most two for a batch of up
    to ``_SQLITE_EXACT`` rows (``sqlite_statement_sizes``), chunks of ``_SQLITE_CHUNKS`` rows first for a larger one.

    ``executemany`` steps SQLite once per row, and Python's sqlite3 module drops and retakes the GIL around every
    step (and around the calls that bind and reset a statement): with the reactor thread doing the same around
    each call into proton-c, the two threads hand the GIL back and forth per row, and each hand-off wakes the
    other thread (on a VM, an interrupt between processors). One statement per up to 256 rows steps once per
    chunk. Measured here with a thread making GIL-releasing cffi calls alongside (1 KiB rows, 500 per batch):
    ≈3.5× the rows per second for the writer and a quarter of the slow-down for the other thread. A batch under
    load holds a few dozen rows: fewer statements than the fixed sizes 256/64/16/4/1 gave (16 + 4 + 4 + 1 for 25
    rows) cut the reactor's wake-ups (docs/performance.md, issue 13). One statement of each batch's exact size
    did best, but sqlite3 keeps every shape prepared per connection (64 shapes: ≈2.7 MB in all); 17 shapes (1 to 7,
    8 to 64 by 8, 128, 256) fit its default cache of 128 statements in about the memory the fixed sizes took.
    No statement exceeds the connection's variable limit.
    """
    most = conn.connection.driver_connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width
    start = 0
    for size in sqlite_statement_sizes(len(rows), most):
        statement = _values_statement(table, columns, width, size)
        _execute(conn, statement, tuple(chain.from_iterable(rows[start : start + size])))
        start += size


def sqlite_statement_sizes(total: int, most: int) -> list[int]:
    """The rows of each statement that inserts ``total`` rows, at most ``most`` a statement (the variable limit
    over the row's width): chunks of ``_SQLITE_CHUNKS`` rows while more than ``_SQLITE_EXACT`` are left, then the
    rest as a multiple of ``_SQLITE_STEP`` rows and what remains below it (25 rows: 24 + 1)."""
    sizes: list[int] = []
    left = total
    for size in _SQLITE_CHUNKS:
        if size <= most:
            while left > _SQLITE_EXACT and left >= size:
                sizes.append(size)
                left -= size
    while left > 0:
        size = min(left, most, _SQLITE_EXACT)
        if size >= _SQLITE_STEP:
            size -= size % _SQLITE_STEP
        sizes.append(size)
        left -= size
    return sizes


@cache
def _values_statement(table: str, columns: str, width: int, rows: int) -> str:
    one = "(" + ", ".join("?" * width) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([one] * rows)


def _is_psycopg(conn: Any) -> bool:
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"


@contextmanager
def _copy(conn: Any, statement: str, types: Sequence[str]) -> Iterator[Any]:
    """A binary COPY on the psycopg connection under ``conn`` (same transaction). Driver errors come out as
    SQLAlchemy's (``IntegrityError``, ``OperationalError``...) like every other statement's; after a lost
    connection, the transaction's rollback fails and SQLAlchemy drops the connection from the pool."""
    with _driver(conn, statement) as raw, raw.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(types)
        yield copy


@contextmanager
def _driver(conn: Any, statement: str) -> Iterator[Any]:
    """The driver's connection under ``conn`` (same transaction); a driver error in the block comes out as
    SQLAlchemy's, as from ``exec_driver_sql``."""
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        yield conn.connection.driver_connection
    except dbapi_error as exc:
        raise DBAPIError.instance(statement, None, exc, dbapi_error, dialect=conn.dialect) from exc


def _execute(conn: Any, statement: str, parameters: Any, *, many: bool = False) -> None:
    """Run one statement on the driver's connection under ``conn`` (same transaction), without SQLAlchemy's
    execution context: about 6 µs less per statement, paid by the writer thread while it holds the GIL (the
    reactor waits for it), several times per group commit. Errors come out as SQLAlchemy's, as from
    ``exec_driver_sql``. Only for statements that need no result and no SQLAlchemy events (there are none)."""
    with _driver(conn, statement) as raw:
        if many:
            cursor = raw.cursor()
            try:
                cursor.executemany(statement, parameters)
            finally:
                cursor.close()
        else:
            raw.execute(statement, parameters).close()


def utc_from_ms(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as an aware UTC ``datetime`` (how the columns bind on PostgreSQL)."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, tz=UTC)


def _sqlite_ts(ms: int | None) -> str | None:
    """A timestamp as SQLAlchemy's SQLite DATETIME stores it: ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC."""
    if ms is None:
        return None
    seconds, millis = divmod(ms, 1000)
    return f"{_utc_second(seconds)}{millis * 1000:06d}"


@lru_cache(maxsize=64)
def _utc_second(seconds: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.`` of a second: formatted once for the rows of a second (a third of the cost a row,
    paid by the journal writer while it holds the GIL)."""
    return time.strftime("%Y-%m-%d %H:%M:%S.", time.gmtime(seconds))
