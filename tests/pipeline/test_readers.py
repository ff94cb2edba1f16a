"""The JDBC readers (``subgate.pipeline.readers``) on real stores made by the migrations, SQLite and PostgreSQL.

The SQLite driver's traps (pyspark-notes.md §2): 64-bit ids read as 32-bit ints, DATETIME text read as a date
(the time of day lost) or, forced to TIMESTAMP, with the microseconds taken for milliseconds. The readers must
give both stores' rows with the same types and exact values, and nothing journaled after the job's cut.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from subgate.pipeline import names as n
from subgate.pipeline.readers import Snapshot, UnsupportedStore, jdbc_store, read_journal, read_store, take_snapshot
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import AckCursor, JournalMessage
from tests.pipeline.frames import schema

TS = datetime(2026, 3, 4, 5, 6, 7, 369_572, tzinfo=UTC)
FIRST = 2**33 + 1


def journal_row(id: int, seq: int, ts: datetime) -> dict:
    return dict(
        id=id,
        address="prices/fx",
        node_kind="topic",
        publisher_id="p1",
        publisher_seq=seq,
        bookmark=f"p1|{seq}|",
        ts=ts,
        durable=True,
        priority=4,
        size=321,
        payload=b"\x00" * 321,
    )


@pytest.fixture
def filled(store_url: str) -> str:
    upgrade(store_url)
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), [journal_row(FIRST, 2**62, TS), journal_row(FIRST + 1, 7, TS)])
        conn.execute(
            sa.insert(AckCursor).values(
                id=1, owner_kind="queue", owner="q", address="q", low_water=2**40, updated_at=TS
            )
        )
    engine.dispose()
    return store_url


def test_rows_come_back_with_64_bit_ids_and_microsecond_utc_times_on_both_stores(spark, filled):
    store = jdbc_store(filled)
    snapshot = take_snapshot(spark, store)
    assert snapshot == Snapshot(FIRST, FIRST + 1)
    journal = read_journal(spark, store, snapshot)
    assert journal.schema.simpleString() == spark.createDataFrame([], schema(n.MESSAGES)).schema.simpleString()
    rows = sorted((row.asDict() for row in journal.collect()), key=lambda r: r["id"])
    assert [(r["id"], r["publisher_seq"], r["ts"], r["size"], r["durable"]) for r in rows] == [
        (FIRST, 2**62, TS.replace(tzinfo=None), 321, True),
        (FIRST + 1, 7, TS.replace(tzinfo=None), 321, True),
    ]
    cursors = read_store(spark, store).cursors.collect()
    assert [(c[n.ID], c[n.LOW_WATER]) for c in cursors] == [(1, 2**40)]


def test_rows_journaled_after_the_cut_are_not_read(spark, filled):
    store = jdbc_store(filled)
    snapshot = take_snapshot(spark, store)
    engine = make_engine(filled)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), [journal_row(FIRST + 2, 8, TS)])
    engine.dispose()
    assert read_journal(spark, store, snapshot).count() == 2
    assert take_snapshot(spark, store).last_id == FIRST + 2


def test_sqlite_times_without_a_fraction_are_read_too(spark, tmp_path):
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    upgrade(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), [journal_row(1, 1, TS)])
        conn.execute(sa.text("UPDATE messages SET ts = '2026-03-04 05:06:07'"))
    engine.dispose()
    store = jdbc_store(url)
    (row,) = read_journal(spark, store, take_snapshot(spark, store)).collect()
    assert row[n.TS] == datetime(2026, 3, 4, 5, 6, 7)


def test_store_urls_become_jdbc_urls():
    assert jdbc_store("sqlite:////var/lib/subgate/subgate.db").url == "jdbc:sqlite:/var/lib/subgate/subgate.db"
    pg = jdbc_store("postgresql+psycopg://alice:s%40cret@db.example:6543/subgate")
    assert pg.url == "jdbc:postgresql://db.example:6543/subgate"
    assert pg.properties == {"driver": "org.postgresql.Driver", "user": "alice", "password": "s@cret"}
    with pytest.raises(UnsupportedStore):
        jdbc_store("sqlite://")
    with pytest.raises(UnsupportedStore):
        jdbc_store("mysql://x@y/z")
    with pytest.raises(UnsupportedStore):
        jdbc_store("not a url")
