"""The pipeline's lag and audit jobs: read the store (``readers``: the journal by JDBC or from the Parquet export),
apply the transformations (``lag``, ``audit``), and hand back plain rows for the command line to print or write.

Owns each job's wiring and the rows' JSON shape; the rules live in the transformation modules. A job is
``run_*(spark, store, ...)``: the SparkSession and the clock are passed in, so the same job runs in the embedded
``local[*]`` session, in a test's shared session and under ``spark-submit`` on a cluster.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subgate.pipeline import audit, lag, report, retention, summary, volume
from subgate.pipeline import names as n
from subgate.pipeline.readers import (
    JdbcStore,
    Snapshot,
    StoreTables,
    parquet_blocks,
    parquet_lag_window,
    read_store,
    read_store_with_parquet,
    summary_frame,
)
from subgate.pipeline.session import session_settings
from subgate.pipeline.summary import Summary, read_summary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Row = dict[str, Any]


@dataclass(frozen=True)
class LagResult:
    """Rows of ``lag.LAG_COLUMNS`` per consumer and of ``lag.BRANCH_COLUMNS`` per branch, at a journal cut."""

    snapshot: Snapshot
    rows: list[Row]
    branches: list[Row]


@dataclass(frozen=True)
class AuditResult:
    """Rows of ``audit.AUDIT_COLUMNS`` (``gaps`` as ``[first_missing, last_missing]`` pairs, and
    ``gap_bookmarks`` as ``[before, after]`` pairs beside them), at a journal cut."""

    snapshot: Snapshot
    rows: list[Row]


def collect(df: DataFrame) -> list[Row]:
    """A frame's rows as plain dicts (nested rows too)."""
    return [row.asDict(recursive=True) for row in df.collect()]


def _tables(
    spark: SparkSession, store: JdbcStore, partitions: int, parquet: str | None, exported: Summary | None = None
) -> StoreTables:
    """The journal from the store (JDBC), or from the Parquet export at ``parquet`` (up to what its summary
    ``exported`` covers, when given); the small tables from the store either way."""
    if parquet is not None:
        return read_store_with_parquet(spark, store, parquet, exported)
    return read_store(spark, store, partitions)


def selector_scope(
    spark: SparkSession,
    journal: DataFrame,
    consumers: DataFrame,
    topics: list[str] | None = None,
    consumer_rows: list[Row] | None = None,
) -> DataFrame | None:
    """Which addresses each consumer reads when some are durable subscriptions on topic selectors (None when
    none is): the path consumers' own addresses, and for each selector subscription every topic in the journal
    its selector matches (``subgate.topics`` decides, on the driver, over the journal's distinct topics, or over
    ``topics`` when given; ``consumer_rows``: the consumers already collected). The connection's read permission,
    which the server also applies, is not known here."""
    from pyspark.sql import functions as F

    if consumer_rows is None:
        consumer_rows = collect(consumers.where(F.col("topic") != F.col(n.ADDRESS)))
    selected = [row for row in consumer_rows if row["topic"] != row[n.ADDRESS]]
    if not selected:
        return None
    from subgate.topics.errors import SelectorError
    from subgate.topics.selectors import parse_selector

    if topics is None:
        found = journal.where(F.col(n.NODE_KIND) == "topic").select(n.ADDRESS).distinct().collect()
        topics = [row[n.ADDRESS] for row in found]
    pairs: list[tuple[int, str]] = []
    for row in selected:
        try:
            selector = parse_selector(row["topic"])
        except SelectorError:  # not a selector the server would take: it reads nothing
            continue
        pairs += [(row[n.CURSOR_ID], address) for address in topics if selector.matches(address)]
    extra = spark.createDataFrame(pairs, f"{n.CURSOR_ID} BIGINT, {n.ADDRESS} STRING")
    return lag.path_scope(consumers).unionByName(extra)


ADAPTIVE = "spark.sql.adaptive.enabled"
MARKS_FOR_BANDS = 64  # up to this many distinct low-water marks, lag from Parquet sums bands (``lag.lag_by_marks``)


def run_lag(
    spark: SparkSession, store: JdbcStore, now: datetime, partitions: int = 2, parquet: str | None = None
) -> LagResult:
    """One pass over the journal (only the columns the plan needs are read); the branch totals from its small
    result. From Parquet, with the export's summary and few distinct low-water marks: the summary's blocks that
    hold no mark, no accept and no start or end of the last hour are counted from the summary, and only the rows
    of the others are read (``lag.lag_by_summary``); without a summary, only the rows lag can count are read
    (``parquet_lag_window``) and summed per address and band (``lag.lag_by_marks``): the same answer for a
    fraction of the work (docs/pipeline.md, "Lag from Parquet"). Its plans are then small, and adaptive
    execution, which would run each of their exchanges as a job of its own, is off."""
    with session_settings(spark, {ADAPTIVE: "false"}) if parquet is not None else nullcontext():
        return _lag(spark, store, now, partitions, parquet)


def _lag(spark: SparkSession, store: JdbcStore, now: datetime, partitions: int, parquet: str | None) -> LagResult:
    exported = read_summary(Path(parquet)) if parquet is not None else None
    tables = _tables(spark, store, partitions, parquet, exported)
    consumers = lag.consumers(tables.subscriptions, tables.cursors).cache()
    try:
        listed = collect(consumers)  # read once: the marks and the selectors from it, the plans from the cache
        lows = [row["low_water"] for row in listed]
        marks = sorted(set(lows)) if lows and None not in lows else None
        if parquet is not None and marks is not None and exported is not None and len(marks) <= MARKS_FOR_BANDS:
            rows = _lag_from_summary(spark, parquet, exported, tables, (consumers, listed), now, marks)
        elif parquet is not None and marks is not None:  # read only what lag can count (above the lowest mark...)
            journal = parquet_lag_window(spark, parquet, tables.snapshot, marks[0], now - lag.HOUR, now)
            scope = selector_scope(spark, journal, consumers, consumer_rows=listed)
            if len(marks) <= MARKS_FOR_BANDS:
                rows = lag.lag_by_marks(journal, consumers, tables.acks, now, marks, scope)
            else:
                rows = lag.lag(journal, consumers, tables.acks, now, scope)
        else:
            scope = selector_scope(spark, tables.journal, consumers, consumer_rows=listed)
            rows = lag.lag(tables.journal, consumers, tables.acks, now, scope)
        lag_rows = collect(rows)
    finally:
        consumers.unpersist()
    return LagResult(tables.snapshot, lag_rows, lag.branch_rows(lag_rows))


def _lag_from_summary(
    spark: SparkSession,
    parquet: str,
    exported: Summary,
    tables: StoreTables,
    consumers: tuple[DataFrame, list[Row]],
    now: datetime,
    marks: list[int],
) -> DataFrame:
    """``lag.lag_by_summary``: the rows of the blocks ``lag.split_blocks`` names read from the export, every other
    entry of the summary counted from the summary."""
    from pyspark.sql.types import TimestampType

    column = {name: index for index, name in enumerate(summary.COLUMNS)}
    address, block, durable, first_ts, last_ts, topic_rows = (
        column[c] for c in ("address", "block", "durable_rows", "first_ts", "last_ts", "topic_rows")
    )
    topics = sorted({e[address] for e in exported.entries if e[topic_rows] > 0})
    scope = selector_scope(spark, tables.journal, consumers[0], topics, consumers[1])
    accepted = {row[0] for row in tables.acks.select(n.MESSAGE_ID).distinct().collect()}
    since_us, now_us = (TimestampType().toInternal(moment) for moment in (now - lag.HOUR, now))  # as Spark reads them
    split = lag.split_blocks(exported.entries, accepted, marks, since_us, now_us)
    counted = [e for e in exported.entries if e[block] not in split and e[durable] > 0]
    read = [e for e in exported.entries if e[block] in split and e[durable] > 0]
    days = sorted({day for e in read for day in summary.utc_days(e[first_ts], e[last_ts])})
    rows = parquet_blocks(spark, parquet, sorted(split), days, exported.through)
    return lag.lag_by_summary(summary_frame(spark, counted), rows, consumers[0], tables.acks, now, marks, scope)


def run_audit(spark: SparkSession, store: JdbcStore, partitions: int = 2, parquet: str | None = None) -> AuditResult:
    tables = _tables(spark, store, partitions, parquet)
    journal = tables.journal.cache()
    try:
        rows = [audit_json(row) for row in collect(audit.audit(journal, tables.publishers))]
        return AuditResult(tables.snapshot, rows)
    finally:
        journal.unpersist()


def audit_json(row: Row) -> Row:
    """An audit row as ``--json`` prints it: each gap as a ``[first_missing, last_missing]`` pair."""
    gaps = row["gaps"] or []
    return {
        **row,
        "gaps": [[gap["first_missing"], gap["last_missing"]] for gap in gaps],
        "gap_bookmarks": [[gap["before"], gap["after"]] for gap in gaps],
    }


@dataclass(frozen=True)
class RetentionResult:
    """Rows of ``retention.PLAN_COLUMNS`` per address, and the plan ``subgate journal compact --plan`` applies."""

    snapshot: Snapshot
    rows: list[Row]
    plan: dict[str, Any]


def run_retention(
    spark: SparkSession,
    store: JdbcStore,
    now: datetime,
    retention_ms: int,
    partitions: int = 2,
    parquet: str | None = None,
) -> RetentionResult:
    tables = _tables(spark, store, partitions, parquet)
    journal = tables.journal.cache()
    try:
        cursors = collect(tables.cursors)
        consumers = lag.consumers(tables.subscriptions, tables.cursors)
        cutoff = now - timedelta(milliseconds=retention_ms)
        scope = selector_scope(spark, journal, consumers)
        rows = collect(retention.retention_plan(journal, consumers, tables.acks, cutoff, scope))
    finally:
        journal.unpersist()
    return RetentionResult(tables.snapshot, rows, compaction_plan(tables.snapshot, now, retention_ms, cursors, rows))


def compaction_plan(
    snapshot: Snapshot, now: datetime, retention_ms: int, cursors: list[Row], rows: list[Row]
) -> dict[str, Any]:
    """The plan file: what may be deleted per address, and the positions it was computed from (the store's
    cursors then: ``journal compact`` refuses the plan when one was created since or set back)."""
    return {
        "plan": "subgate-journal-compaction",
        "version": 1,
        "created_at": now.isoformat().replace("+00:00", "Z"),
        "retention_ms": retention_ms,
        "journal_cut": snapshot.last_id,
        "cursors": [
            {"id": c["id"], "owner": c["owner"], "address": c["address"], "low_water": c["low_water"]}
            for c in sorted(cursors, key=lambda c: c["id"])
        ],
        "delete": [
            {"topic": r["topic"], "kind": r["kind"], "through": r["delete_through"], "rows": r["free_rows"]}
            for r in rows
            if r["delete_through"] is not None
        ],
    }


def run_report(
    spark: SparkSession, store: JdbcStore, now: datetime, partitions: int = 2, parquet: str | None = None
) -> tuple[Snapshot, str]:
    """The HTML page of ``report``: lag, audit and the journal's volume per topic and day, from one read."""
    tables = _tables(spark, store, partitions, parquet)
    journal = tables.journal.cache()
    try:
        consumers = lag.consumers(tables.subscriptions, tables.cursors)
        scope = selector_scope(spark, journal, consumers)
        lag_rows = collect(lag.lag(journal, consumers, tables.acks, now, scope))
        audit_rows = [audit_json(row) for row in collect(audit.audit(journal, tables.publishers))]
        volume_rows = collect(volume.volume(journal))
    finally:
        journal.unpersist()
    page = report.render(lag_rows, audit_rows, volume_rows, generated=now, cut=tables.snapshot.last_id)
    return tables.snapshot, page
