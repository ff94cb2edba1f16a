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

``lag`` pairs each journal row with each consumer that reads it; ``lag_by_marks`` gives the same frame from one
aggregation of the journal per address and band between the consumers' marks; ``lag_by_summary`` gives it from
the export's block summary (``pipeline.summary``), reading only the rows of the blocks ``split_blocks`` names (lag
from Parquet uses the last two). ``split_blocks`` and ``branch_rows`` work on plain values already on the driver.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from subgate.pipeline import names as n
from subgate.pipeline.summary import COLUMNS

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
    ``topic`` (the subscription's topic path or topic selector; a queue's name), ``subscription_kind`` (null for a
    queue), ``low_water`` and ``address`` (its cursor's: the topic, or a selector's path prefix)."""
    subs = subscriptions.where(F.col(n.DURABLE) & F.col(n.CURSOR_ID).isNotNull()).alias("s")
    cur = cursors.alias("c")
    durable = subs.join(cur, F.col(f"s.{n.CURSOR_ID}") == F.col(f"c.{n.ID}")).select(
        F.col(f"c.{n.ID}").alias(n.CURSOR_ID),
        F.lit(n.SUBSCRIPTION).alias("kind"),
        F.col(f"s.{n.NAME}").alias("name"),
        F.col(f"s.{n.CLIENT_ID}").alias("client_id"),
        F.col(f"s.{n.TOPIC}").alias("topic"),
        F.col(f"s.{n.KIND}").alias("subscription_kind"),
        F.col(f"c.{n.LOW_WATER}").alias("low_water"),
        F.col(f"c.{n.ADDRESS}").alias(n.ADDRESS),
    )
    queues = cursors.where(F.col(n.OWNER_KIND) == n.QUEUE).select(
        F.col(n.ID).alias(n.CURSOR_ID),
        F.lit(n.QUEUE).alias("kind"),
        F.col(n.OWNER).alias("name"),
        F.lit(None).cast("string").alias("client_id"),
        F.col(n.ADDRESS).alias("topic"),
        F.lit(None).cast("string").alias("subscription_kind"),
        F.col(n.LOW_WATER).alias("low_water"),
        F.col(n.ADDRESS).alias(n.ADDRESS),
    )
    return durable.unionByName(queues)


def path_scope(consumer: DataFrame) -> DataFrame:
    """Which journal addresses each consumer reads (``cursor_id``, ``address``) when none is a topic selector:
    its cursor's address. A selector subscription (its ``topic`` is not its cursor's address) reads every topic
    its selector matches: ``jobs`` adds those pairs (``selector_scope``)."""
    return consumer.where(F.col("topic") == F.col(n.ADDRESS)).select(n.CURSOR_ID, n.ADDRESS)


def _seconds_before(now: datetime, column: str) -> Column:
    """``now - column`` in seconds, to the microsecond (a decimal, then a double)."""
    now_us = int(now.timestamp()) * 1_000_000 + now.microsecond
    return ((F.lit(now_us) - F.unix_micros(F.col(column))) / F.lit(1_000_000.0)).cast("double")


def _rows_of(journal: DataFrame, consumer: DataFrame, scope: DataFrame | None) -> DataFrame:
    """Each consumer's journal rows: ``cursor_id``, ``low_water``, ``id``, ``ts``, ``durable``, ``address``."""
    reads = path_scope(consumer) if scope is None else scope
    positions = consumer.select(n.CURSOR_ID, "low_water")
    return (
        journal.select(n.ID, n.ADDRESS, n.TS, n.DURABLE)
        .join(reads, n.ADDRESS)
        .join(positions, n.CURSOR_ID)
        .select(n.CURSOR_ID, "low_water", n.ID, n.TS, n.DURABLE, n.ADDRESS)
    )


def backlog_rows(
    journal: DataFrame,
    consumer: DataFrame,
    acks: DataFrame,
    *,
    persistent: bool = True,
    scope: DataFrame | None = None,
) -> DataFrame:
    """Each consumer's backlog rows: ``cursor_id``, the journal ``id``, its ``ts`` and ``address``; with
    ``persistent`` False,
    its non-persistent rows too. ``scope``: which addresses each consumer reads (default ``path_scope``)."""
    rows = _rows_of(journal, consumer, scope)
    above = rows.where((F.col(n.ID) > F.col("low_water")) & (F.col(n.DURABLE) if persistent else F.lit(True)))
    accepted = acks.select(F.col(n.CURSOR_ID), F.col(n.MESSAGE_ID).alias(n.ID))
    return above.select(n.CURSOR_ID, n.ID, n.TS, n.ADDRESS).join(accepted, [n.CURSOR_ID, n.ID], "left_anti")


def lag(
    journal: DataFrame, consumer: DataFrame, acks: DataFrame, now: datetime, scope: DataFrame | None = None
) -> DataFrame:
    """One row per consumer (``LAG_COLUMNS``), sorted by kind, topic, name and client-id. ``scope``: which
    addresses each consumer reads (default ``path_scope``).

    One pass: each consumer's persistent rows (above its mark, or of the last hour), marked with its accepts, then
    one aggregation per consumer."""
    recent = (F.col(n.TS) > F.lit(now - HOUR)) & (F.col(n.TS) <= F.lit(now))
    paired = (
        _rows_of(journal.where(F.col(n.DURABLE)), consumer, scope)
        .withColumn("above", F.col(n.ID) > F.col("low_water"))
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
    return _lag_rows(consumer, per_consumer, now)


def _lag_rows(consumer: DataFrame, per_consumer: DataFrame, now: datetime) -> DataFrame:
    """``LAG_COLUMNS`` from the consumers and their sums (``cursor_id``, ``backlog``, ``oldest``, ``in_last_hour``,
    ``recent_backlog``; none for a consumer with no row)."""
    return _finished(consumer.join(per_consumer, n.CURSOR_ID, "left"), now)


def _finished(sums: DataFrame, now: datetime) -> DataFrame:
    """``LAG_COLUMNS``, sorted, from one row per consumer with its columns and its sums (null: none)."""
    out = sums.select(
        *LAG_COLUMNS[:6],
        F.coalesce(F.col("backlog"), F.lit(0)).cast("long").alias("backlog"),
        _seconds_before(now, "oldest").alias("oldest_unaccepted_age_s"),
        F.coalesce(F.col("in_last_hour"), F.lit(0)).cast("long").alias("in_last_hour"),
        (F.coalesce(F.col("in_last_hour"), F.lit(0)) - F.coalesce(F.col("recent_backlog"), F.lit(0)))
        .cast("long")
        .alias("out_last_hour"),
    )
    order = ("kind", "topic", "name", F.col("client_id").asc_nulls_first())
    return out.coalesce(1).sortWithinPartitions(*order)  # small: one row per consumer


def _marks_below(column: str, marks: list[int], inclusive: bool) -> Column:
    """How many of ``marks`` lie below the column (at or below it with ``inclusive``): one SQL expression (the
    marks are integers), built in one call to the JVM rather than a few per mark."""
    compare = ">=" if inclusive else ">"
    terms = [f"CAST(`{column}` {compare} {int(mark)} AS INT)" for mark in marks]
    return F.expr(" + ".join(terms) if terms else "0")


def lag_by_marks(
    journal: DataFrame,
    consumer: DataFrame,
    acks: DataFrame,
    now: datetime,
    marks: list[int],
    scope: DataFrame | None = None,
) -> DataFrame:
    """The frame of ``lag``, without pairing each journal row with each consumer: for few distinct low-water marks
    (``marks``: every consumer's, none null), which split the sequences into bands.

    One aggregation of the journal per address and band (``band_groups``), in which each row some consumer
    accepted (few: accepts lie above the marks) stays a group of its own; then each consumer sums the groups of
    its addresses in the bands above its mark, leaving out the rows it accepted (``consumer_sums``). A row is above
    a mark exactly when its band is at or past the mark's, so the sums are those of ``lag``."""
    return _finished(consumer_sums(band_groups(journal, acks, now, marks), consumer, marks, scope), now)


def _recent(column: str, now: datetime) -> Column:
    """Whether a time lies in the hour before ``now``: after its start, up to ``now``."""
    return (F.col(column) > F.lit(now - HOUR)) & (F.col(column) <= F.lit(now))


def band_groups(journal: DataFrame, acks: DataFrame, now: datetime, marks: list[int]) -> DataFrame:
    """The journal's persistent rows summed per ``address``, ``band`` (how many marks lie below the row) and
    ``acked_by`` (the sorted ids of the cursors that accepted the row, null when none did): ``rows``, ``first_ts``
    (the oldest) and ``recent`` (rows of the hour before ``now``)."""
    accepted = acks.groupBy(F.col(n.MESSAGE_ID).alias("accepted")).agg(
        F.array_sort(F.collect_set(n.CURSOR_ID)).alias("acked_by")
    )
    rows = journal.where(F.col(n.DURABLE)).select(n.ID, n.ADDRESS, n.TS)
    return (
        rows.join(F.broadcast(accepted), F.col(n.ID) == F.col("accepted"), "left")
        .groupBy(n.ADDRESS, _marks_below(n.ID, marks, inclusive=False).alias("band"), "acked_by")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.min(n.TS).alias("first_ts"),
            F.count(F.when(_recent(n.TS, now), F.lit(1))).alias("recent"),
        )
    )


def consumer_sums(
    groups: DataFrame, consumer: DataFrame, marks: list[int], scope: DataFrame | None = None
) -> DataFrame:
    """One row per consumer: its columns (but ``address``) and ``backlog``, ``oldest``, ``in_last_hour`` and
    ``recent_backlog`` (null when it has none) from the groups of ``band_groups`` (any number of groups per key) of
    the addresses it reads (``scope``, default ``path_scope``), in the bands at or past its mark's, leaving out
    the rows it accepted."""
    level = _marks_below("low_water", marks, inclusive=True).alias("level")
    own = [column for column in consumer.columns if column != n.ADDRESS]
    if scope is None:  # each consumer reads its cursor's address
        reads = consumer.where(F.col("topic") == F.col(n.ADDRESS)).select(*own, n.ADDRESS, level)
    else:
        reads = scope.join(consumer.select(*own, level), n.CURSOR_ID)
    accepted = F.array_contains(F.col("acked_by"), F.col(n.CURSOR_ID))
    waiting = (F.col("band") >= F.col("level")) & (F.col("acked_by").isNull() | ~accepted)
    paired = groups.join(F.broadcast(reads), n.ADDRESS).select(
        *own,
        F.when(waiting, F.col("rows")).alias("waiting"),
        F.when(waiting, F.col("first_ts")).alias("waiting_ts"),
        F.col("recent"),
        F.when(waiting, F.col("recent")).alias("recent_waiting"),
    )
    nothing = consumer.select(  # every consumer once, with or without groups
        *own,
        F.lit(None).cast("long").alias("waiting"),
        F.lit(None).cast("timestamp").alias("waiting_ts"),
        *(F.lit(None).cast("long").alias(column) for column in ("recent", "recent_waiting")),
    )
    return (
        paired.unionByName(nothing)
        .groupBy(*own)
        .agg(
            F.sum("waiting").alias("backlog"),
            F.min("waiting_ts").alias("oldest"),
            F.sum("recent").alias("in_last_hour"),
            F.sum("recent_waiting").alias("recent_backlog"),
        )
    )


def split_blocks(
    entries: list[tuple[Any, ...]], accepted: set[int], marks: list[int], since_us: int, now_us: int
) -> set[int]:
    """The blocks of the export's summary (``summary.COLUMNS`` entries) whose rows lag must read: those with an
    entry that holds persistent rows and a mark inside it (``first_id <= mark < last_id``), an ``accepted`` id, or
    persistent rows at or before and after the last hour's start (``since_us``) or its end (``now_us``)
    (microseconds since the epoch, as Spark holds them). Every other entry with persistent rows is counted whole
    (``whole_groups``): each consumer counts all of its persistent rows or none, and they are all recent or none
    is. Pure: plain values in and out, on the driver (the summary is small)."""
    column = {name: index for index, name in enumerate(COLUMNS)}
    first, last, first_ts, last_ts = (column[c] for c in ("first_id", "last_id", "first_ts", "last_ts"))
    block, durable = column["block"], column["durable_rows"]
    ordered_marks, accepts = sorted(marks), sorted(accepted)
    split: set[int] = set()
    for entry in entries:
        if entry[durable] == 0 or entry[block] in split:
            continue
        mark = bisect_left(ordered_marks, entry[first])  # the lowest mark at or above first_id
        accept = bisect_left(accepts, entry[first])  # the lowest accept at or above it
        if (
            (mark < len(ordered_marks) and ordered_marks[mark] < entry[last])
            or (accept < len(accepts) and accepts[accept] <= entry[last])
            or any(entry[first_ts] <= moment < entry[last_ts] for moment in (since_us, now_us))
        ):
            split.add(entry[block])
    return split


def whole_groups(entries: DataFrame, now: datetime, marks: list[int]) -> DataFrame:
    """The groups of ``band_groups`` that summary entries (``summary.SCHEMA``, times as timestamps) outside the
    ``split_blocks`` stand for, without their rows: one per entry, in the band of its lowest id (all its ids are
    in that band), none of it accepted, all of it recent or none."""
    all_recent = (F.col("first_ts") > F.lit(now - HOUR)) & (F.col("last_ts") <= F.lit(now))
    return entries.select(
        F.col("address").alias(n.ADDRESS),
        _marks_below("first_id", marks, inclusive=False).alias("band"),
        F.lit(None).cast("array<bigint>").alias("acked_by"),
        F.col("durable_rows").alias("rows"),
        "first_ts",
        F.when(all_recent, F.col("durable_rows")).otherwise(F.lit(0)).cast("long").alias("recent"),
    )


def lag_by_summary(
    whole: DataFrame,
    rows: DataFrame,
    consumer: DataFrame,
    acks: DataFrame,
    now: datetime,
    marks: list[int],
    scope: DataFrame | None = None,
) -> DataFrame:
    """The frame of ``lag`` from the export's summary: ``whole``, entries outside the ``split_blocks``, counted from
    the summary, and ``rows``: the journal rows of every other entry (their persistent rows at least, and no row
    of a whole entry), counted as ``lag_by_marks`` counts them."""
    groups = whole_groups(whole, now, marks).unionByName(band_groups(rows, acks, now, marks))
    return _finished(consumer_sums(groups, consumer, marks, scope), now)


def branch_rows(lag_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``branch_totals`` of rows already collected (one per consumer: few), on the driver, in the same order:
    plain dicts of ``BRANCH_COLUMNS``."""
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in lag_rows:
        kind, topic = row["kind"], row["topic"]
        branch = topic if kind == n.QUEUE else topic.split("/", 1)[0]
        total = totals.setdefault((branch, kind), {"branch": branch, "kind": kind, "consumers": 0, "backlog": 0,
                                                   "oldest_unaccepted_age_s": None, "in_last_hour": 0,
                                                   "out_last_hour": 0})  # fmt: skip
        total["consumers"] += 1
        for column in ("backlog", "in_last_hour", "out_last_hour"):
            total[column] += row[column]
        age, worst = row["oldest_unaccepted_age_s"], total["oldest_unaccepted_age_s"]
        if age is not None and (worst is None or age > worst):
            total["oldest_unaccepted_age_s"] = age
    return [{column: totals[key][column] for column in BRANCH_COLUMNS} for key in sorted(totals)]


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
