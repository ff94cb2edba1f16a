"""The Parquet export (``subgate.pipeline.export``): its partition columns, its layout and its increment, on a
real store (SQLite and PostgreSQL), and the jobs giving the same answer from the export as from the store."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from pyspark.testing import assertDataFrameEqual

from subgate.pipeline import names as n
from subgate.pipeline.export import export_journal, partitioned
from subgate.pipeline.jobs import run_audit, run_lag
from subgate.pipeline.readers import jdbc_store, read_parquet
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import Ack, AckCursor, JournalMessage, Publisher, Subscription
from tests.pipeline.frames import journal, message
from tests.pipeline.test_readers import journal_row

MIDNIGHT = datetime(2026, 3, 4, 23, 59, 59, 999_999, tzinfo=UTC)
NEXT_DAY = datetime(2026, 3, 5, 0, 0, 0, 1, tzinfo=UTC)


def test_partition_columns_are_the_address_and_the_utc_day(spark):
    rows = journal(spark, message(1, "prices/fx", ts=MIDNIGHT), message(2, "2026", ts=NEXT_DAY))
    result = partitioned(rows).select(n.ID, "topic", "day")
    expected = spark.createDataFrame(
        [(1, "prices/fx", MIDNIGHT.date()), (2, "2026", NEXT_DAY.date())], "id BIGINT, topic STRING, day DATE"
    )
    assertDataFrameEqual(result, expected)


def add_rows(url: str, *rows: dict) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.insert(JournalMessage), list(rows))
    engine.dispose()


def row(id: int, address: str, seq: int, ts: datetime) -> dict:
    return {**journal_row(id, seq, ts), "address": address, "publisher_id": "p", "bookmark": f"p|{seq}|"}


def test_export_appends_only_new_rows_and_the_jobs_answer_the_same_from_it(spark, store_url, tmp_path):
    upgrade(store_url)
    add_rows(store_url, row(1, "prices/fx", 1, MIDNIGHT), row(2, "2026", 2, NEXT_DAY), row(3, "prices/fx", 4, NEXT_DAY))
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="subscription", owner="a.s", address="prices/fx",
                                                 low_water=0, updated_at=MIDNIGHT))  # fmt: skip
        conn.execute(sa.insert(Ack).values(cursor_id=1, message_id=3))
        conn.execute(sa.insert(Subscription).values(id=1, kind="durable", durable=True, client_id="a", name="s",
                                                    topic="prices/fx", cursor_id=1, created_at=MIDNIGHT))  # fmt: skip
        conn.execute(sa.insert(Publisher).values(publisher_id="p", last_seq=4, updated_at=MIDNIGHT))
    engine.dispose()
    store = jdbc_store(store_url)

    first = export_journal(spark, store, tmp_path)
    assert (first.rows, first.from_id, first.to_id) == (3, 1, 3)
    folders = sorted(str(p.relative_to(tmp_path / "journal")) for p in (tmp_path / "journal").glob("topic=*/day=*"))
    assert folders == [
        "topic=2026/day=2026-03-05",
        "topic=prices%2Ffx/day=2026-03-04",
        "topic=prices%2Ffx/day=2026-03-05",
    ]
    again = export_journal(spark, store, tmp_path)
    assert (again.rows, again.from_id, again.to_id) == (0, None, 3)

    add_rows(store_url, row(4, "prices/fx", 5, NEXT_DAY), row(5, "prices/fx", 9, NEXT_DAY))
    more = export_journal(spark, store, tmp_path)
    assert (more.rows, more.from_id, more.to_id) == (2, 4, 5)
    exported = read_parquet(spark, str(tmp_path / "journal"))
    assert sorted((r[n.ID], r["topic"], r[n.TS], bytes(r[n.PAYLOAD])) for r in exported.collect()) == [
        (i, t, ts.replace(tzinfo=None), b"\x00" * 321)
        for i, t, ts in [(1, "prices/fx", MIDNIGHT), (2, "2026", NEXT_DAY), (3, "prices/fx", NEXT_DAY),
                         (4, "prices/fx", NEXT_DAY), (5, "prices/fx", NEXT_DAY)]
    ]  # fmt: skip

    now = datetime(2026, 3, 5, 0, 30, tzinfo=UTC)
    dataset = str(tmp_path / "journal")
    from_store, from_parquet = run_lag(spark, store, now), run_lag(spark, store, now, parquet=dataset)
    assert from_parquet == from_store
    assert [(r["backlog"], r["in_last_hour"], r["out_last_hour"]) for r in from_store.rows] == [(3, 4, 1)]
    audited = run_audit(spark, store)
    assert run_audit(spark, store, parquet=dataset) == audited
    assert audited.rows[0]["gaps"] == [[3, 3], [6, 8]]


def test_volume_counts_rows_and_bytes_per_topic_and_utc_day(spark):
    from subgate.pipeline.volume import volume

    rows = journal(spark, message(1, "a", ts=MIDNIGHT), message(2, "a", ts=NEXT_DAY), message(3, "a", ts=NEXT_DAY))
    expected = spark.createDataFrame(
        [("a", "topic", MIDNIGHT.date(), 1, 100), ("a", "topic", NEXT_DAY.date(), 2, 200)],
        "topic STRING, kind STRING, day DATE, rows BIGINT, bytes BIGINT",
    )
    assertDataFrameEqual(volume(rows), expected, checkRowOrder=True)
    assertDataFrameEqual(volume(journal(spark)), spark.createDataFrame([], expected.schema))


DAY_AFTER = datetime(2026, 3, 6, 8, 0, tzinfo=UTC)


def test_a_closed_day_is_written_once_as_one_file(spark, store_url, tmp_path):
    from subgate.pipeline.closing import CLOSED

    upgrade(store_url)
    store = jdbc_store(store_url)
    dataset = tmp_path / "journal"
    day1 = dataset / "topic=prices%2Ffx" / "day=2026-03-04"
    add_rows(store_url, row(1, "prices/fx", 1, MIDNIGHT))
    assert export_journal(spark, store, tmp_path).closed == 0
    add_rows(store_url, row(2, "prices/fx", 2, MIDNIGHT), row(3, "2026", 3, MIDNIGHT))
    assert export_journal(spark, store, tmp_path).closed == 0
    assert len(list(day1.glob("*.parquet"))) >= 2  # the open day: one more set of files per run
    assert not (day1 / CLOSED).exists()

    add_rows(store_url, row(4, "prices/fx", 4, NEXT_DAY))
    third = export_journal(spark, store, tmp_path)
    assert third.closed == 2  # both topics' 2026-03-04
    files = list(day1.glob("*.parquet"))
    assert len(files) == 1 and (day1 / CLOSED).exists()
    assert [r[n.ID] for r in spark.read.parquet(str(files[0])).collect()] == [1, 2]  # in journal order
    day2 = dataset / "topic=prices%2Ffx" / "day=2026-03-05"
    assert not (day2 / CLOSED).exists()
    assert not [p for p in dataset.rglob(".*") if p.name.endswith((".new", ".old"))]

    closed_file = files[0].stat()
    add_rows(store_url, row(5, "prices/fx", 5, NEXT_DAY), row(6, "prices/fx", 6, DAY_AFTER))
    fourth = export_journal(spark, store, tmp_path)
    assert fourth.closed == 1  # 2026-03-05; 2026-03-04 is not touched again
    assert list(day1.glob("*.parquet")) == files and files[0].stat().st_mtime_ns == closed_file.st_mtime_ns
    exported = read_parquet(spark, str(dataset))
    assert sorted((r[n.ID], r["topic"]) for r in exported.collect()) == [
        (1, "prices/fx"), (2, "prices/fx"), (3, "2026"), (4, "prices/fx"), (5, "prices/fx"), (6, "prices/fx")
    ]  # fmt: skip


def test_a_swap_cut_short_by_a_crash_is_finished_or_undone(tmp_path):
    from subgate.pipeline.closing import repair

    topic = tmp_path / "topic=a"
    (topic / "day=2026-03-04").mkdir(parents=True)
    (topic / ".day=2026-03-04.old").mkdir()  # crashed after the new partition went into place
    (topic / ".day=2026-03-05.old").mkdir()  # crashed between the two renames
    (topic / ".day=2026-03-05.old" / "part-0.parquet").write_bytes(b"rows")
    (topic / ".day=2026-03-05.new").mkdir()
    repair(tmp_path)
    assert sorted(p.name for p in topic.iterdir()) == ["day=2026-03-04", "day=2026-03-05"]
    assert (topic / "day=2026-03-05" / "part-0.parquet").read_bytes() == b"rows"


def test_lag_from_parquet_reads_above_the_lowest_mark_and_the_last_hour_and_answers_the_same(
    spark, store_url, tmp_path
):
    from datetime import timedelta

    now = datetime(2026, 3, 6, 0, 20, tzinfo=UTC)
    minutes = [50, 40, 30, 10, 5]  # rows 2..6, this many minutes before now (the first three on the day before)
    upgrade(store_url)
    add_rows(
        store_url,
        row(1, "prices/fx", 1, now - timedelta(days=2)),
        *(row(i, "prices/fx", i, now - timedelta(minutes=m)) for i, m in enumerate(minutes, start=2)),
        row(7, "other", 7, now - timedelta(minutes=1)),
    )
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="subscription", owner="a.s", address="prices/fx",
                                                 low_water=3, updated_at=now))  # fmt: skip
        # the lowest mark is 3: rows 2 and 3 (the day before, within the hour) are read for the hour's figures only
        conn.execute(sa.insert(AckCursor).values(id=2, owner_kind="queue", owner="other", address="other",
                                                 low_water=6, updated_at=now))  # fmt: skip
        conn.execute(sa.insert(Ack).values(cursor_id=1, message_id=4))
        conn.execute(sa.insert(Subscription).values(id=1, kind="durable", durable=True, client_id="a", name="s",
                                                    topic="prices/fx", cursor_id=1, created_at=now))  # fmt: skip
    engine.dispose()
    store = jdbc_store(store_url)
    export_journal(spark, store, tmp_path)
    dataset = str(tmp_path / "journal")

    from_store, from_parquet = run_lag(spark, store, now), run_lag(spark, store, now, parquet=dataset)
    assert from_parquet == from_store
    figures = {r["name"]: (r["backlog"], r["in_last_hour"], r["out_last_hour"]) for r in from_store.rows}
    # prices/fx: 1..3 are at or below the mark, 4 is acked, 5 and 6 wait; 2..6 came in the last hour, 2..4 are out
    assert figures == {"s": (2, 5, 3), "other": (1, 1, 0)}


def test_timestamps_are_int64_and_an_export_begun_with_int96_files_answers_the_same(spark, store_url, tmp_path):
    from subgate.pipeline.readers import Snapshot, read_journal

    now = datetime(2026, 3, 5, 0, 30, tzinfo=UTC)
    upgrade(store_url)
    add_rows(store_url, *(row(i, "prices/fx", i, NEXT_DAY.replace(minute=i)) for i in (1, 2, 3)))
    store = jdbc_store(store_url)
    dataset = tmp_path / "journal"  # rows 1..3 as an older export wrote them: INT96 timestamps
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    partitioned(read_journal(spark, store, Snapshot(1, 3), 1, n.EXPORT_COLUMNS)).write.partitionBy(
        "topic", "day"
    ).parquet(str(dataset))
    add_rows(store_url, *(row(i, "prices/fx", i, NEXT_DAY.replace(minute=i)) for i in (4, 5)))
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="queue", owner="prices/fx", address="prices/fx",
                                                 low_water=4, updated_at=now))  # fmt: skip
    engine.dispose()
    assert export_journal(spark, store, tmp_path).rows == 2

    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    kinds = []
    for file in sorted(dataset.glob("topic=*/day=*/*.parquet")):  # the files' own physical type of ts
        footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
            hadoop, jvm.org.apache.hadoop.fs.Path(str(file))
        )
        kinds.append(footer.getFileMetaData().getSchema().getType(n.TS).asPrimitiveType().getPrimitiveTypeName().name())
    assert sorted(kinds) == ["INT64", "INT96"]
    stamps = read_parquet(spark, str(dataset)).orderBy(n.ID).select(n.TS).collect()
    assert [r[n.TS] for r in stamps] == [NEXT_DAY.replace(minute=i, tzinfo=None) for i in range(1, 6)]
    # the hour's rows at or below the lowest mark (4) come from both kinds of files, filtered on ts
    from_store, from_parquet = run_lag(spark, store, now), run_lag(spark, store, now, parquet=str(dataset))
    assert from_parquet == from_store
    assert [(r["backlog"], r["in_last_hour"]) for r in from_store.rows] == [(1, 5)]


def test_session_settings_hold_for_the_block_and_are_put_back(spark):
    from subgate.pipeline.session import session_settings

    key, unset = "spark.sql.adaptive.enabled", "spark.subgate.test.unset"
    before = spark.conf.get(key)
    with session_settings(spark, {key: "false", unset: "x"}):
        assert spark.conf.get(key) == "false" and spark.conf.get(unset) == "x"
    assert spark.conf.get(key) == before
    assert spark.conf.get(unset, None) is None


def test_each_run_writes_the_summary_of_what_it_added_and_a_failed_one_is_caught_up(
    spark, sqlite_url, tmp_path, monkeypatch
):
    from pyspark.sql.types import TimestampType

    from subgate.pipeline import export
    from subgate.pipeline.summary import COLUMNS, read_summary

    now = datetime(2026, 3, 5, 0, 30, tzinfo=UTC)
    upgrade(sqlite_url)
    add_rows(
        sqlite_url, row(1, "prices/fx", 1, MIDNIGHT), row(2, "2026", 2, NEXT_DAY), row(3, "prices/fx", 3, NEXT_DAY)
    )
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(AckCursor).values(id=1, owner_kind="queue", owner="prices/fx", address="prices/fx",
                                                 low_water=1, updated_at=now))  # fmt: skip
        conn.execute(sa.insert(Ack).values(cursor_id=1, message_id=4))
    engine.dispose()
    store, dataset = jdbc_store(sqlite_url), tmp_path / "journal"
    export_journal(spark, store, tmp_path)
    first = read_summary(dataset)
    assert first is not None and first.through == 3 and first.extent == (1, 3)
    ts = [TimestampType().toInternal(moment) for moment in (MIDNIGHT, NEXT_DAY)]
    assert COLUMNS[:2] == ("address", "block") and sorted(first.entries) == [
        ("2026", 0, 2, 2, 1, 321, 1, 1, ts[1], ts[1]),
        ("prices/fx", 0, 1, 3, 2, 642, 2, 2, ts[0], ts[1]),
    ]

    add_rows(sqlite_url, row(4, "prices/fx", 4, NEXT_DAY), row(5, "2026", 5, NEXT_DAY))
    with monkeypatch.context() as patched:  # the run dies after writing its rows, before their summary
        patched.setattr(export, "summarize", lambda spark, dataset: (_ for _ in ()).throw(OSError("disk full")))
        try:
            export_journal(spark, store, tmp_path)
        except OSError:
            pass
    assert read_summary(dataset).through == 3  # type: ignore[union-attr]
    behind = run_lag(spark, store, now, parquet=str(dataset))
    assert behind.snapshot.last_id == 3  # lag reads up to what the summary covers: one consistent cut
    caught_up = export_journal(spark, store, tmp_path)
    assert (caught_up.rows, caught_up.to_id) == (0, 5)
    summary = read_summary(dataset)
    assert summary is not None and summary.through == 5 and len(summary.entries) == 4
    assert sorted(p.name for p in (dataset / "_summary").iterdir()) == [
        f"{0:020d}-{3:020d}.json",
        f"{3:020d}-{5:020d}.json",
    ]
    assert run_lag(spark, store, now, parquet=str(dataset)) == run_lag(spark, store, now)
