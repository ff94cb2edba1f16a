"""The retention job's transformation: per topic (and queue), how much of the journal may be deleted.

Pure: ``DataFrame -> DataFrame``; no I/O. The rule is the server's (docs/bookmarks.md, "Retention";
``mapping.retention``): a row may go when it is older than the retention period and every queue and durable
subscription of its address has accepted it. The plan keeps the journal contiguous per address: ``delete_through``
is the highest sequence such that every row of the address at or below it may go, so that a replay from the
oldest row left misses nothing; rows further up that could go one by one wait for the rows below them.

A row blocks when it is not old enough (``ts`` after ``cutoff``) or when a consumer of its address has it above
its low-water mark without an accept (persistent or not: a running server may still deliver a non-persistent
row). Addresses without consumers go by age alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from subgate.pipeline import names as n
from subgate.pipeline.lag import backlog_rows, path_scope

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PLAN_COLUMNS = ("topic", "kind", "consumers", "rows", "bytes", "delete_through", "free_rows", "free_bytes")


def retention_plan(
    journal: DataFrame, consumer: DataFrame, acks: DataFrame, cutoff: datetime, scope: DataFrame | None = None
) -> DataFrame:
    """One row per address in the journal (``PLAN_COLUMNS``), sorted by topic then kind: its rows and bytes, the
    sequence up to which every row may be deleted (null: none may) and the rows and bytes that frees. ``scope``:
    which addresses each consumer reads (default ``lag.path_scope``)."""
    held = backlog_rows(journal, consumer, acks, persistent=False, scope=scope).select(n.ADDRESS, n.ID)
    young = journal.where(F.col(n.TS) > F.lit(cutoff)).select(n.ADDRESS, n.ID)
    first_blocked = held.unionByName(young).groupBy(n.ADDRESS).agg(F.min(n.ID).alias("blocked"))
    reads = path_scope(consumer) if scope is None else scope
    counted = reads.groupBy(n.ADDRESS).agg(F.count(F.lit(1)).alias("consumers"))
    per_address = (
        journal.join(first_blocked, n.ADDRESS, "left")
        .withColumn("free", F.col("blocked").isNull() | (F.col(n.ID) < F.col("blocked")))
        .groupBy(n.ADDRESS, n.NODE_KIND)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(n.SIZE).alias("bytes"),
            F.max(F.when(F.col("free"), F.col(n.ID))).alias("delete_through"),
            F.count(F.when(F.col("free"), F.lit(1))).alias("free_rows"),
            F.sum(F.when(F.col("free"), F.col(n.SIZE)).otherwise(F.lit(0))).alias("free_bytes"),
        )
    )
    return (
        per_address.join(counted, n.ADDRESS, "left")
        .select(
            F.col(n.ADDRESS).alias("topic"),
            F.col(n.NODE_KIND).alias("kind"),
            F.coalesce(F.col("consumers"), F.lit(0)).cast("long").alias("consumers"),
            F.col("rows").cast("long").alias("rows"),
            F.col("bytes").cast("long").alias("bytes"),
            F.col("delete_through").cast("long").alias("delete_through"),
            F.col("free_rows").cast("long").alias("free_rows"),
            F.col("free_bytes").cast("long").alias("free_bytes"),
        )
        .orderBy("topic", "kind")
    )
