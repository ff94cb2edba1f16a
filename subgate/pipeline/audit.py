"""The audit job's transformations: did any publisher lose or repeat messages on its way into the journal.

Pure: ``DataFrame -> DataFrame``; no I/O, no SparkSession made here. Per publisher id (``messages.publisher_id``):

- **count**, **first_seq**, **last_seq**: its journal rows, and the lowest and highest ``publisher_seq``.
- **gaps**: every run of seqs missing between first_seq and last_seq, as ``first_missing``..``last_missing``,
  with the bookmarks of the rows on either side (``before``, ``after``: where a replay around the hole starts).
  Seqs below the first one kept are not a gap (retention deletes from the bottom; a publisher may start anywhere).
- **duplicates**: rows whose seq another row of the same publisher already has (the server drops re-sends it
  recognises, so a duplicate here reached the journal: its mark was lost, or the server numbered it).
- **out_of_order**: rows journaled (by journal sequence) after a row of the same publisher with a higher seq.
- **numbered**: ``publisher`` when the publisher numbers its messages (``x-opt-publisher-seq``: it has a
  high-water mark in ``publishers``), ``server`` when the server does (the seq is the journal sequence, so
  the other publishers' rows between its own are no gap: it has none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from subgate.pipeline import names as n

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

AUDIT_COLUMNS = (
    "publisher_id",
    "numbered",
    "count",
    "first_seq",
    "last_seq",
    "gaps",
    "duplicates",
    "out_of_order",
)
GAP_COLUMNS = ("publisher_id", "first_missing", "last_missing", "before", "after")
PUBLISHER = "publisher"
SERVER = "server"


def _seqs(journal: DataFrame) -> DataFrame:
    """Each publisher's distinct seqs in order: ``copies`` (rows with it), its bookmark, and the previous seq
    and bookmark (null for the first)."""
    distinct = journal.groupBy(n.PUBLISHER_ID, n.PUBLISHER_SEQ).agg(
        F.count(F.lit(1)).alias("copies"), F.min(n.BOOKMARK).alias(n.BOOKMARK)
    )
    order = Window.partitionBy(n.PUBLISHER_ID).orderBy(n.PUBLISHER_SEQ)
    return distinct.select(
        n.PUBLISHER_ID,
        n.PUBLISHER_SEQ,
        "copies",
        n.BOOKMARK,
        F.lag(n.PUBLISHER_SEQ).over(order).alias("previous"),
        F.lag(n.BOOKMARK).over(order).alias("before"),
    )


def _after_a_gap() -> Column:
    return F.col(n.PUBLISHER_SEQ) - F.col("previous") > 1


def gap_rows(journal: DataFrame) -> DataFrame:
    """One row per gap (``GAP_COLUMNS``): seqs ``first_missing..last_missing`` of ``publisher_id`` are missing
    between the rows with bookmarks ``before`` and ``after``."""
    return (
        _seqs(journal)
        .where(_after_a_gap())
        .select(n.PUBLISHER_ID, *_gap_fields(), F.col(n.BOOKMARK).alias("after"))
        .select(*GAP_COLUMNS)
    )


def _gap_fields() -> list[Column]:
    return [
        (F.col("previous") + 1).alias("first_missing"),
        (F.col(n.PUBLISHER_SEQ) - 1).alias("last_missing"),
        F.col("before"),
    ]


def out_of_order_rows(journal: DataFrame) -> DataFrame:
    """The rows journaled after a row of the same publisher with a higher seq: ``publisher_id``, ``id``, seq."""
    earlier = Window.partitionBy(n.PUBLISHER_ID).orderBy(n.ID).rowsBetween(Window.unboundedPreceding, -1)
    marked = journal.select(n.PUBLISHER_ID, n.ID, n.PUBLISHER_SEQ, F.max(n.PUBLISHER_SEQ).over(earlier).alias("top"))
    return marked.where(F.col(n.PUBLISHER_SEQ) < F.col("top")).select(n.PUBLISHER_ID, n.ID, n.PUBLISHER_SEQ)


def audit(journal: DataFrame, publishers: DataFrame) -> DataFrame:
    """One row per publisher id (``AUDIT_COLUMNS``), sorted by id; ``gaps`` is an array of structs
    (``first_missing``, ``last_missing``, ``before``, ``after``) in seq order.

    Counts and gaps come from one pass over each publisher's distinct seqs; the out-of-order rows from one pass
    in journal order."""
    gap = F.struct(*_gap_fields(), F.col(n.BOOKMARK).alias("after"))
    summary = (
        _seqs(journal)
        .groupBy(n.PUBLISHER_ID)
        .agg(
            F.sum("copies").alias("count"),
            F.min(n.PUBLISHER_SEQ).alias("first_seq"),
            F.max(n.PUBLISHER_SEQ).alias("last_seq"),
            F.sum(F.col("copies") - 1).alias("duplicates"),
            F.sort_array(F.collect_list(F.when(_after_a_gap(), gap))).alias("gaps"),
        )
    )
    marked = publishers.select(n.PUBLISHER_ID, F.lit(True).alias("has_mark"))
    disorder = out_of_order_rows(journal).groupBy(n.PUBLISHER_ID).agg(F.count(F.lit(1)).alias("out_of_order"))
    empty = F.array().cast(summary.schema["gaps"].dataType)
    return (
        summary.join(marked, n.PUBLISHER_ID, "left")
        .join(disorder, n.PUBLISHER_ID, "left")
        .select(
            n.PUBLISHER_ID,
            F.when(F.col("has_mark").isNotNull(), F.lit(PUBLISHER)).otherwise(F.lit(SERVER)).alias("numbered"),
            F.col("count").cast("long").alias("count"),
            "first_seq",
            "last_seq",
            F.when(F.col("has_mark").isNotNull(), F.col("gaps")).otherwise(empty).alias("gaps"),
            F.col("duplicates").cast("long").alias("duplicates"),
            F.coalesce(F.col("out_of_order"), F.lit(0)).cast("long").alias("out_of_order"),
        )
        .orderBy(n.PUBLISHER_ID)
    )
