"""Closing the export's days: a day's partition rewritten once into one file when the day is over, then left alone.

Owns the closed-day rule and the swap on the local file system. While a UTC day is open, each export run appends
its rows to the day's partitions (``topic=<address>/day=<YYYY-MM-DD>/``) as one more set of files. A day is
*closed* once the dataset holds a partition of a later day (the journal's ``ts`` is the journaling time, so rows of
an earlier day no longer come once a later one has been exported). The first export run that sees a day closed
rewrites each of its partitions that has more than one file into a single file sorted by journal sequence, and
marks the partition with an empty ``_closed`` file; a closed partition is never written again. Spark skips names
that start with ``_`` or ``.``, so the marker and the hidden work folders are invisible to readers.

The swap is crash-safe: the new file is written to ``.day=<D>.new``, the old partition renamed to
``.day=<D>.old``, the new one renamed into place, the old one deleted; ``repair`` (run first each time) finishes or
undoes a swap that a crash interrupted, so no row is ever missing from, or doubled in, the dataset.
"""

from __future__ import annotations

import shutil
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from subgate.pipeline import names as n
from subgate.pipeline.session import session_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CLOSED = "_closed"
_DAY = "day="
_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"


def int64_timestamps(spark: SparkSession) -> AbstractContextManager[None]:
    """Write Parquet timestamps as INT64 microseconds (Spark's default is INT96, which has no statistics: a filter
    on ``ts`` could not skip a row group or a page). Files written before, with INT96, are still read alike."""
    return session_settings(spark, {_TIMESTAMP_TYPE: "TIMESTAMP_MICROS"})


def partition_day(partition: Path) -> date | None:
    """The UTC day of a ``day=<YYYY-MM-DD>`` folder; None for any other name."""
    if not partition.name.startswith(_DAY):
        return None
    try:
        return date.fromisoformat(partition.name[len(_DAY) :])
    except ValueError:
        return None


def days_to_close(dataset: Path) -> list[Path]:
    """The partitions of days before the newest day in ``dataset`` that are not marked closed yet, in order."""
    partitions = [p for p in dataset.glob(f"topic=*/{_DAY}*") if p.is_dir() and partition_day(p) is not None]
    if not partitions:
        return []
    newest = max(d for d in map(partition_day, partitions) if d is not None)
    return sorted(p for p in partitions if (partition_day(p) or newest) < newest and not (p / CLOSED).exists())


def repair(dataset: Path) -> None:
    """Finish or undo a swap a crash interrupted: an ``.old`` folder whose partition is back in place is deleted,
    one whose partition is missing is put back; leftover ``.new`` folders are deleted."""
    for topic in dataset.glob("topic=*"):
        for old in topic.glob(f".{_DAY}*.old"):
            partition = topic / old.name[1 : -len(".old")]
            if partition.exists():
                shutil.rmtree(old)
            else:
                old.rename(partition)
        for new in topic.glob(f".{_DAY}*.new"):
            shutil.rmtree(new)


def close_days(spark: SparkSession, dataset: Path) -> int:
    """Close every day before the newest one (see the module docstring); returns how many partitions it closed."""
    if not dataset.is_dir():
        return 0
    repair(dataset)
    closing = days_to_close(dataset)
    for partition in closing:
        if len(list(partition.glob("*.parquet"))) > 1:
            _rewrite_as_one_file(spark, partition)
        (partition / CLOSED).touch()
    return len(closing)


def _rewrite_as_one_file(spark: SparkSession, partition: Path) -> None:
    from subgate.pipeline.readers import parquet_schema

    new = partition.with_name(f".{partition.name}.new")
    old = partition.with_name(f".{partition.name}.old")
    rows = spark.read.schema(parquet_schema(n.EXPORT_COLUMNS, partition_columns=False)).parquet(str(partition))
    with int64_timestamps(spark):
        rows.repartition(1).sortWithinPartitions(n.ID).write.mode("overwrite").parquet(str(new))
    (new / "_SUCCESS").unlink(missing_ok=True)
    partition.rename(old)
    new.rename(partition)
    shutil.rmtree(old)
