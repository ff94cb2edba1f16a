"""The export job: the journal to Parquet, partitioned by topic and day, incrementally.

Owns the export's layout and its increment. The dataset is ``DIR/journal/topic=<address>/day=<YYYY-MM-DD>/``
(Spark escapes ``/`` in a topic as ``%2F``), every column of ``messages`` in the files (``names.EXPORT_COLUMNS``),
``day`` the UTC date of ``ts``, timestamps as INT64 microseconds (so a ``ts`` filter uses the files' statistics;
older exports wrote INT96, and a dataset holding both is read alike). A run reads only the rows after the highest
journal sequence already exported
(found in the dataset itself, so a run that failed before its commit leaves nothing to reconcile) up to the cut
taken at its start, and appends them: a day's rows are written by the runs while it is open; the first run after
the day closes rewrites each of its partitions into one file, once, and never touches it again
(``pipeline.closing``). Each run then writes the summary of the rows it added (``pipeline.summary``: per address
and block of sequences, for the lag job), or of every row the summary does not cover yet. ``partitioned`` is the
pure part (no I/O); ``export_journal`` reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from subgate.pipeline import names as n
from subgate.pipeline.closing import close_days, int64_timestamps
from subgate.pipeline.readers import JdbcStore, Snapshot, read_journal, read_parquet, take_snapshot
from subgate.pipeline.summary import block_summary, summarized_through, write_summary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

DATASET = "journal"


def partitioned(journal: DataFrame) -> DataFrame:
    """The journal's rows with the partition columns ``topic`` (the address) and ``day`` (UTC date of ``ts``)."""
    return journal.withColumn("topic", F.col(n.ADDRESS)).withColumn("day", F.to_date(F.col(n.TS)))


@dataclass(frozen=True)
class ExportResult:
    """What a run wrote: ``rows`` journal rows, sequences ``from_id..to_id`` (none when ``rows`` is 0; then
    ``to_id`` is the highest exported before), under ``path``; ``closed``: partitions of days it closed."""

    path: str
    rows: int
    from_id: int | None
    to_id: int
    closed: int = 0

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "rows": self.rows, "from_id": self.from_id, "to_id": self.to_id,
                "closed_partitions": self.closed}  # fmt: skip


def exported_through(spark: SparkSession, dataset: Path) -> int:
    """The highest journal sequence in the dataset (0 when there is none yet)."""
    if not dataset.is_dir() or not any(dataset.glob("topic=*")):
        return 0
    row = read_parquet(spark, str(dataset)).agg(F.max(n.ID).alias("hi")).collect()[0]
    return int(row["hi"] or 0)


def export_journal(spark: SparkSession, store: JdbcStore, out: Path, partitions: int = 2) -> ExportResult:
    """Append the journal rows after the last exported one, up to the cut taken now, to ``out/journal``, and
    summarize what the summary does not cover yet."""
    dataset = out / DATASET
    done = exported_through(spark, dataset)
    snapshot = take_snapshot(spark, store)
    if snapshot.last_id <= done:
        summarize(spark, dataset)
        return ExportResult(str(dataset), 0, None, done, close_days(spark, dataset))
    tail = Snapshot(max(done + 1, snapshot.first_id), snapshot.last_id)
    rows = partitioned(read_journal(spark, store, tail, partitions, n.EXPORT_COLUMNS))
    with int64_timestamps(spark):
        rows.write.mode("append").partitionBy("topic", "day").parquet(str(dataset))
    after, entries = summarize(spark, dataset)
    if after == done and entries:  # the summary of this run's rows counts them
        count, low = sum(e["rows"] for e in entries), min(e["first_id"] for e in entries)
    else:
        written = read_parquet(spark, str(dataset)).where(F.col(n.ID) > done)
        count, low = written.agg(F.count(F.lit(1)), F.min(n.ID)).collect()[0]
    return ExportResult(str(dataset), int(count), int(low), snapshot.last_id, close_days(spark, dataset))


def summarize(spark: SparkSession, dataset: Path) -> tuple[int, list[Row]]:
    """Write the summary of the exported rows above the summary's end (``pipeline.summary``); returns that end and
    the entries written (none when every row was covered)."""
    if not dataset.is_dir() or not any(dataset.glob("topic=*")):
        return 0, []
    after = summarized_through(dataset)
    entries = block_summary(read_parquet(spark, str(dataset)).where(F.col(n.ID) > after)).collect()
    if entries:
        write_summary(dataset, after, max(e["last_id"] for e in entries), entries)
    return after, entries
