"""The lag job's transformations: who is behind, per durable subscription and per queue, and per topic branch.

Pure: ``DataFrame -> DataFrame`` with the frames and the job's clock passed in; no I/O, no SparkSession made here.

- A **consumer** of the journal is a durable subscription (``subscriptions`` row with ``durable`` and a cursor)
  or a queue (an ``ack_cursors`` row with ``owner_kind = 'queue'``). Its position is its cursor: the low-water
  sequence plus the ``acks`` above it (docs/bookmarks.md, "Positions").
- **backlog**: journal rows of its topic (``messages.address``) above the low-water mark that it has not acked,
  persistent ones only (``durable``), as ``subgate bookmarks show`` counts them on the store (a non-persistent row
  is dropped by the next server start). The selector and no-local are not applied (they are applied when rows
  are delivered).
- **oldest_unaccepted_age_s**: ``now`` minus the journal time of the oldest backlog row, in seconds (null when
  the backlog is empty).
- **in_last_hour**: persistent rows journaled on its topic in the hour before ``now``; **out_last_hour**: those of
  them no longer in its backlog (accepted, or below its start). The store keeps no time of an accept, so "out" is
  counted by when the rows came in.
- **branch totals**: the consumers grouped by branch (a topic's first path segment, a queue's whole name).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from subgate.pipeline import names as n

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

LAG_COLUMNS = (
    "kind",
    "name",
    "client_id",
    "topic",
    "subscription_kind",
    "low_water",
    "backlog",
    "oldest_unaccepted_age_s",
    "in_last_hour",
    "out_last_hour",
)
BRANCH_COLUMNS = (
    "branch",
    "kind",
    "consumers",
    "backlog",
    "oldest_unaccepted_age_s",
    "in_last_hour",
    "out_last_hour",
)
HOUR = timedelta(hours=1)


def consumers(subscriptions: DataFrame, cursors: DataFrame) -> DataFrame:
    """One row per journal consumer: ``cursor_id``, ``kind`` (subscription or queue), ``name``, ``client_id``,
    ``topic``, ``subscription_kind`` (null for a queue) and ``low_water``."""
    subs = subscriptions.where(F.col(n.DURABLE) & F.col(n.CURSOR_ID).isNotNull()).alias("s")
    cur = cursors.alias("c")
    durable = subs.join(cur, F.col(f"s.{n.CURSOR_ID}") == F.col(f"c.{n.ID}")).select(
        F.col(f"c.{n.ID}").alias(n.CURSOR_ID),
        F.lit(n.SUBSCRIPTION).alias("kind"),
        F.col(f"s.{n.NAME}").alias("name"),
        F.col(f"s.{n.CLIENT_ID}").alias("client_id"),
        F.col(f"c.{n.ADDRESS}").alias("topic"),
        F.col(f"s.{n.KIND}").alias("subscription_kind"),
        F.col(f"c.{n.LOW_WATER}").alias("low_water"),
    )
    queues = cursors.where(F.col(n.OWNER_KIND) == n.QUEUE).select(
        F.col(n.ID).alias(n.CURSOR_ID),
        F.lit(n.QUEUE).alias("kind"),
        F.col(n.OWNER).alias("name"),
        F.lit(None).cast("string").alias("client_id"),
        F.col(n.ADDRESS).alias("topic"),
        F.lit(None).cast("string").alias("subscription_kind"),
        F.col(n.LOW_WATER).alias("low_water"),
    )
    return durable.unionByName(queues)


def _seconds_before(now: datetime, column: str) -> Column:
    """``now - column`` in seconds, to the microsecond (a decimal, then a double)."""
    now_us = int(now.timestamp()) * 1_000_000 + now.microsecond
    return ((F.lit(now_us) - F.unix_micros(F.col(column))) / F.lit(1_000_000.0)).cast("double")


def backlog_rows(journal: DataFrame, consumer: DataFrame, acks: DataFrame, *, persistent: bool = True) -> DataFrame:
    """Each consumer's backlog rows: ``cursor_id``, the journal ``id`` and its ``ts``; with ``persistent`` False,
    its non-persistent rows too."""
    rows = (journal.where(F.col(n.DURABLE)) if persistent else journal).select(n.ID, n.ADDRESS, n.TS).alias("m")
    cons = consumer.select(n.CURSOR_ID, "topic", "low_water").alias("k")
    above = rows.join(
        cons, (F.col(f"m.{n.ADDRESS}") == F.col("k.topic")) & (F.col(f"m.{n.ID}") > F.col("k.low_water"))
    ).select(F.col(f"k.{n.CURSOR_ID}").alias(n.CURSOR_ID), F.col(f"m.{n.ID}").alias(n.ID), F.col(f"m.{n.TS}"))
    accepted = acks.select(F.col(n.CURSOR_ID), F.col(n.MESSAGE_ID).alias(n.ID))
    return above.join(accepted, [n.CURSOR_ID, n.ID], "left_anti")


def lag(journal: DataFrame, consumer: DataFrame, acks: DataFrame, now: datetime) -> DataFrame:
    """One row per consumer (``LAG_COLUMNS``), sorted by kind, topic, name and client-id.

    One pass: each consumer's persistent rows (above its mark, or of the last hour), marked with its accepts, then
    one aggregation per consumer."""
    recent = (F.col(n.TS) > F.lit(now - HOUR)) & (F.col(n.TS) <= F.lit(now))
    rows = journal.where(F.col(n.DURABLE)).select(n.ID, n.ADDRESS, n.TS).alias("m")
    cons = consumer.select(n.CURSOR_ID, "topic", "low_water").alias("k")
    paired = (
        rows.join(cons, F.col(f"m.{n.ADDRESS}") == F.col("k.topic"))
        .select(
            F.col(f"k.{n.CURSOR_ID}").alias(n.CURSOR_ID),
            F.col(f"m.{n.ID}").alias(n.ID),
            F.col(f"m.{n.TS}").alias(n.TS),
            (F.col(f"m.{n.ID}") > F.col("k.low_water")).alias("above"),
        )
        .where(F.col("above") | recent)
    )
    accepted = acks.select(F.col(n.CURSOR_ID), F.col(n.MESSAGE_ID).alias(n.ID), F.lit(True).alias("acked"))
    waiting = F.col("above") & F.col("acked").isNull()
    per_consumer = (
        paired.join(accepted, [n.CURSOR_ID, n.ID], "left")
        .groupBy(n.CURSOR_ID)
        .agg(
            F.count(F.when(waiting, F.lit(1))).alias("backlog"),
            F.min(F.when(waiting, F.col(n.TS))).alias("oldest"),
            F.count(F.when(recent, F.lit(1))).alias("in_last_hour"),
            F.count(F.when(recent & waiting, F.lit(1))).alias("recent_backlog"),
        )
    )
    out = consumer.join(per_consumer, n.CURSOR_ID, "left").select(
        *consumer.columns,
        F.coalesce(F.col("backlog"), F.lit(0)).cast("long").alias("backlog"),
        _seconds_before(now, "oldest").alias("oldest_unaccepted_age_s"),
        F.coalesce(F.col("in_last_hour"), F.lit(0)).cast("long").alias("in_last_hour"),
        (F.coalesce(F.col("in_last_hour"), F.lit(0)) - F.coalesce(F.col("recent_backlog"), F.lit(0)))
        .cast("long")
        .alias("out_last_hour"),
    )
    return out.select(*LAG_COLUMNS).orderBy("kind", "topic", "name", F.col("client_id").asc_nulls_first())


def branch_of(kind: Column, topic: Column) -> Column:
    """A queue's whole name; a topic's first path segment."""
    return F.when(kind == n.QUEUE, topic).otherwise(F.split(topic, "/", 2).getItem(0))


def branch_totals(lag_rows: DataFrame) -> DataFrame:
    """The lag rows summed per branch and kind (``BRANCH_COLUMNS``): the worst oldest age, the sums of the rest."""
    return (
        lag_rows.withColumn("branch", branch_of(F.col("kind"), F.col("topic")))
        .groupBy("branch", "kind")
        .agg(
            F.count(F.lit(1)).alias("consumers"),
            F.sum("backlog").cast("long").alias("backlog"),
            F.max("oldest_unaccepted_age_s").alias("oldest_unaccepted_age_s"),
            F.sum("in_last_hour").cast("long").alias("in_last_hour"),
            F.sum("out_last_hour").cast("long").alias("out_last_hour"),
        )
        .select(*BRANCH_COLUMNS)
        .orderBy("branch", "kind")
    )
