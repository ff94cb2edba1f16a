"""The report's journal volume: rows and bytes per topic and UTC day. Pure: ``DataFrame -> DataFrame``, no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from subgate.pipeline import names as n

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

VOLUME_COLUMNS = ("topic", "kind", "day", "rows", "bytes")


def volume(journal: DataFrame) -> DataFrame:
    """One row per address and day of ``ts`` (``VOLUME_COLUMNS``), sorted by day then topic."""
    return (
        journal.groupBy(F.col(n.ADDRESS).alias("topic"), F.col(n.NODE_KIND).alias("kind"), F.to_date(n.TS).alias("day"))
        .agg(F.count(F.lit(1)).cast("long").alias("rows"), F.sum(n.SIZE).cast("long").alias("bytes"))
        .select(*VOLUME_COLUMNS)
        .orderBy("day", "topic", "kind")
    )
