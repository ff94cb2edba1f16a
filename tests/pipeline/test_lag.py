"""The lag job's transformations (``subgate.pipeline.lag``) on small hand-built frames, compared whole."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType
from pyspark.testing import assertDataFrameEqual

from subgate.pipeline import lag, summary
from subgate.pipeline import names as n
from subgate.pipeline.readers import summary_frame
from tests.pipeline.frames import BIG, NOW, acks, ago, cursors, journal, message, subscriptions

CONSUMER_SCHEMA = (
    "cursor_id BIGINT, kind STRING, name STRING, client_id STRING, topic STRING, subscription_kind STRING, "
    "low_water BIGINT, address STRING"
)
LAG_SCHEMA = (
    "kind STRING, name STRING, client_id STRING, topic STRING, subscription_kind STRING, low_water BIGINT, "
    "backlog BIGINT, oldest_unaccepted_age_s DOUBLE, in_last_hour BIGINT, out_last_hour BIGINT"
)


def by_marks(journal, consumer, accepted, now, scope=None):
    """``lag.lag_by_marks`` with the consumers' own marks: it must give ``lag.lag``'s frame."""
    marks = sorted({row["low_water"] for row in consumer.select("low_water").collect()})
    return lag.lag_by_marks(journal, consumer, accepted, now, marks, scope)


def by_summary(journal, consumer, accepted, now, scope=None):
    """``lag.lag_by_summary`` over the journal's own summary, reading the rows of the split blocks as the Parquet
    path does (``readers.parquet_blocks``): it must give ``lag.lag``'s frame."""
    marks = sorted({row["low_water"] for row in consumer.select("low_water").collect()})
    entries = [tuple(row) for row in summary.block_summary(journal).collect()]
    accepted_ids = {row[n.MESSAGE_ID] for row in accepted.collect()}
    since_us, now_us = (TimestampType().toInternal(moment) for moment in (now - lag.HOUR, now))
    split = lag.split_blocks(entries, accepted_ids, marks, since_us, now_us)
    block, durable = summary.COLUMNS.index("block"), summary.COLUMNS.index("durable_rows")
    whole = summary_frame(journal.sparkSession, [e for e in entries if e[block] not in split and e[durable] > 0])
    rows = journal.where(F.floor(F.col(n.ID) / summary.BLOCK).isin(sorted(split)))
    return lag.lag_by_summary(whole, rows, consumer, accepted, now, marks, scope)


BOTH = pytest.mark.parametrize("lag_of", [lag.lag, by_marks, by_summary], ids=["pairs", "bands", "summary"])


def consumer_frames(spark):
    subs = subscriptions(
        spark,
        (1, "durable", True, "app1", "s1", "prices/fx", 10),
        (2, "shared-durable", True, None, "g1", "prices/fx", 11),
        (3, "shared-volatile", False, None, "v1", "prices/fx", None),
        (4, "durable", True, "app2", "lost", "prices/fx", None),  # its cursor row is gone: not a consumer
    )
    curs = cursors(
        spark,
        (10, "subscription", "app1.s1", "prices/fx", BIG + 2),
        (11, "subscription", "g1", "prices/fx", 0),
        (12, "queue", "jobs/a", "jobs/a", BIG),
    )
    return subs, curs


def test_consumers_are_durable_subscriptions_with_a_cursor_and_queues(spark):
    subs, curs = consumer_frames(spark)
    expected = spark.createDataFrame(
        [
            (10, "subscription", "s1", "app1", "prices/fx", "durable", BIG + 2, "prices/fx"),
            (11, "subscription", "g1", None, "prices/fx", "shared-durable", 0, "prices/fx"),
            (12, "queue", "jobs/a", None, "jobs/a", None, BIG, "jobs/a"),
        ],
        CONSUMER_SCHEMA,
    )
    assertDataFrameEqual(lag.consumers(subs, curs), expected)


@BOTH
def test_backlog_counts_unaccepted_persistent_rows_above_the_position_with_out_of_order_accepts(spark, lag_of):
    subs, curs = consumer_frames(spark)
    rows = journal(
        spark,
        message(BIG + 1, ts=ago(7200)),  # below s1's low-water mark
        message(BIG + 2, ts=ago(7000)),
        message(BIG + 3, ts=ago(3000.000_001)),  # s1's oldest unaccepted: microseconds count
        message(BIG + 4, ts=ago(2000)),  # s1 accepted it out of order (BIG + 3 is still held)
        message(BIG + 5, ts=ago(1000), durable=False),  # non-persistent: not a backlog row
        message(BIG + 6, ts=ago(10)),
        message(BIG + 7, "prices/fx/deeper", ts=ago(5)),  # another topic
        message(BIG + 8, "jobs/a", ts=ago(4000.5), kind="queue"),
        message(BIG + 9, "jobs/a", ts=ago(1), kind="queue"),
    )
    accepted = acks(spark, (10, BIG + 4), (11, BIG + 6), (11, BIG + 1), (12, BIG + 9))
    result = lag_of(rows, lag.consumers(subs, curs), accepted, NOW)
    expected = spark.createDataFrame(
        [
            ("queue", "jobs/a", None, "jobs/a", None, BIG, 1, 4000.5, 1, 1),
            ("subscription", "g1", None, "prices/fx", "shared-durable", 0, 3, 7000.0, 3, 1),
            ("subscription", "s1", "app1", "prices/fx", "durable", BIG + 2, 2, 3000.000001, 3, 1),
        ],
        LAG_SCHEMA,
    )
    assertDataFrameEqual(result, expected, checkRowOrder=True)


@BOTH
def test_an_empty_journal_leaves_every_consumer_with_no_backlog_and_no_age(spark, lag_of):
    subs, curs = consumer_frames(spark)
    result = lag_of(journal(spark), lag.consumers(subs, curs), acks(spark), NOW)
    expected = spark.createDataFrame(
        [
            ("queue", "jobs/a", None, "jobs/a", None, BIG, 0, None, 0, 0),
            ("subscription", "g1", None, "prices/fx", "shared-durable", 0, 0, None, 0, 0),
            ("subscription", "s1", "app1", "prices/fx", "durable", BIG + 2, 0, None, 0, 0),
        ],
        LAG_SCHEMA,
    )
    assertDataFrameEqual(result, expected, checkRowOrder=True)


@BOTH
def test_no_consumers_no_rows(spark, lag_of):
    result = lag_of(journal(spark, message(1)), lag.consumers(subscriptions(spark), cursors(spark)), acks(spark), NOW)
    assertDataFrameEqual(result, spark.createDataFrame([], LAG_SCHEMA))


def test_branch_totals_sum_per_first_path_segment_and_per_queue(spark):
    rows = spark.createDataFrame(
        [
            ("queue", "jobs/a", None, "jobs/a", None, 0, 1, 40.0, 1, 0),
            ("subscription", "s1", "app1", "prices/fx", "durable", 0, 2, 30.5, 3, 1),
            ("subscription", "s2", None, "prices", "shared-durable", 0, 5, 90.25, 4, 0),
            ("subscription", "s3", "app1", "orders", "durable", 0, 0, None, 0, 0),
        ],
        LAG_SCHEMA,
    )
    expected = spark.createDataFrame(
        [
            ("jobs/a", "queue", 1, 1, 40.0, 1, 0),
            ("orders", "subscription", 1, 0, None, 0, 0),
            ("prices", "subscription", 2, 7, 90.25, 7, 1),
        ],
        "branch STRING, kind STRING, consumers BIGINT, backlog BIGINT, oldest_unaccepted_age_s DOUBLE, "
        "in_last_hour BIGINT, out_last_hour BIGINT",
    )
    assertDataFrameEqual(lag.branch_totals(rows), expected, checkRowOrder=True)


@BOTH
def test_a_selector_subscription_reads_every_topic_its_selector_matches(spark, lag_of):
    from subgate.pipeline.jobs import selector_scope

    subs = subscriptions(spark, (1, "durable", True, "app1", "all", "?prices/.*", 10))
    curs = cursors(spark, (10, "subscription", "app1.all", "prices", 1), (12, "queue", "q", "q", 0))
    rows = journal(
        spark,
        message(1, "prices/fx", ts=ago(10)),  # at the mark
        message(2, "prices/fx", ts=ago(9)),
        message(3, "prices", ts=ago(8)),  # the prefix itself: '?prices/.*' needs a second segment
        message(4, "prices/eq", ts=ago(7)),
        message(5, "orders", ts=ago(6)),
        message(6, "q", ts=ago(5), kind="queue"),
    )
    consumer = lag.consumers(subs, curs)
    scope = selector_scope(spark, rows, consumer)
    expected_scope = spark.createDataFrame(
        [(10, "prices/fx"), (10, "prices/eq"), (12, "q")], "cursor_id BIGINT, address STRING"
    )
    assertDataFrameEqual(scope, expected_scope)
    expected = spark.createDataFrame(
        [
            ("queue", "q", None, "q", None, 0, 1, 5.0, 1, 0),
            ("subscription", "all", "app1", "?prices/.*", "durable", 1, 2, 9.0, 3, 1),
        ],
        LAG_SCHEMA,
    )
    assertDataFrameEqual(lag_of(rows, consumer, acks(spark), NOW, scope), expected, checkRowOrder=True)


@BOTH
def test_accepts_of_other_consumers_and_recent_rows_below_a_mark(spark, lag_of):
    """Rows one consumer accepted still wait for another; a recent row below a mark counts in the hour only."""
    subs, curs = consumer_frames(spark)
    rows = journal(
        spark,
        message(BIG + 1, ts=ago(100)),  # below s1's mark, of the last hour; g1 accepted it
        message(BIG + 2, ts=ago(50)),  # at s1's mark; g1's oldest of the hour
        message(BIG + 3, ts=ago(4000)),  # above both marks; s1 accepted it, g1's oldest
        message(BIG + 4, ts=ago(30)),  # both accepted it
        message(BIG + 5, "jobs/a", ts=ago(20), kind="queue"),  # s1's cursor "accepted" it: not the queue's accept
    )
    accepted = acks(spark, (11, BIG + 1), (10, BIG + 3), (10, BIG + 4), (11, BIG + 4), (10, BIG + 5))
    expected = spark.createDataFrame(
        [
            ("queue", "jobs/a", None, "jobs/a", None, BIG, 1, 20.0, 1, 0),
            ("subscription", "g1", None, "prices/fx", "shared-durable", 0, 2, 4000.0, 3, 2),
            ("subscription", "s1", "app1", "prices/fx", "durable", BIG + 2, 0, None, 3, 3),
        ],
        LAG_SCHEMA,
    )
    assertDataFrameEqual(lag_of(rows, lag.consumers(subs, curs), accepted, NOW), expected, checkRowOrder=True)


def test_branch_rows_on_the_driver_are_the_branch_totals(spark):
    rows = [
        {"kind": "queue", "topic": "jobs/a", "backlog": 1, "oldest_unaccepted_age_s": 40.0, "in_last_hour": 1,
         "out_last_hour": 0},
        {"kind": "subscription", "topic": "prices/fx", "backlog": 2, "oldest_unaccepted_age_s": None,
         "in_last_hour": 3, "out_last_hour": 1},
        {"kind": "subscription", "topic": "prices", "backlog": 5, "oldest_unaccepted_age_s": 90.25,
         "in_last_hour": 4, "out_last_hour": 0},
        {"kind": "subscription", "topic": "prices/eq", "backlog": 0, "oldest_unaccepted_age_s": 10.5,
         "in_last_hour": 0, "out_last_hour": 0},
        {"kind": "subscription", "topic": "orders", "backlog": 0, "oldest_unaccepted_age_s": None,
         "in_last_hour": 0, "out_last_hour": 0},
    ]  # fmt: skip
    assert lag.branch_rows(rows) == [
        {"branch": "jobs/a", "kind": "queue", "consumers": 1, "backlog": 1, "oldest_unaccepted_age_s": 40.0,
         "in_last_hour": 1, "out_last_hour": 0},
        {"branch": "orders", "kind": "subscription", "consumers": 1, "backlog": 0, "oldest_unaccepted_age_s": None,
         "in_last_hour": 0, "out_last_hour": 0},
        {"branch": "prices", "kind": "subscription", "consumers": 3, "backlog": 7, "oldest_unaccepted_age_s": 90.25,
         "in_last_hour": 7, "out_last_hour": 1},
    ]  # fmt: skip
    frame = spark.createDataFrame(
        [(r["kind"], "n", None, r["topic"], None, 0, r["backlog"], r["oldest_unaccepted_age_s"], r["in_last_hour"],
          r["out_last_hour"]) for r in rows],
        LAG_SCHEMA,
    )  # fmt: skip
    assert [row.asDict() for row in lag.branch_totals(frame).collect()] == lag.branch_rows(rows)


B = summary.BLOCK


def spread_journal(spark):
    """Rows in five blocks: whole ones above and below every mark, of the hour and not; split ones."""
    return journal(
        spark,
        message(5, ts=ago(90_000)),  # block 0: below both marks, old (whole)
        message(7, "jobs/a", ts=ago(80_000), kind="queue"),
        message(B + 1, ts=ago(5000)),  # block 1: g1's mark (B + 2) inside it (split)
        message(B + 3, ts=ago(4000)),
        message(2 * B, ts=ago(7000)),  # block 2: above both marks, none of the hour (whole)
        message(2 * B + 9, ts=ago(3700), durable=False),
        message(2 * B + 10, ts=ago(3601)),
        message(3 * B + 4, ts=ago(3599)),  # block 3: all of the hour, above both marks (whole)
        message(3 * B + 8, ts=ago(100)),
        message(3 * B + 9, "jobs/a", ts=ago(50), kind="queue"),
        message(4 * B, ts=ago(3700)),  # block 4: the hour's start inside it (split)
        message(4 * B + 1, ts=ago(1)),
        message(5 * B + 2, ts=ago(20)),  # block 5: an accept inside it (split)
        message(5 * B + 3, ts=ago(10)),
        message(6 * B + 1, ts=ago(-30)),  # block 6: after now, above both marks (whole)
    )


def test_the_summary_counts_whole_blocks_and_reads_the_split_ones(spark):
    subs = subscriptions(spark, (1, "durable", True, "app1", "s1", "prices/fx", 10), (2, "durable", True, "a", "g1",
                                                                                     "prices/fx", 11))  # fmt: skip
    curs = cursors(spark, (10, "subscription", "app1.s1", "prices/fx", 0), (11, "subscription", "g1", "prices/fx",
                   B + 2), (12, "queue", "jobs/a", "jobs/a", 7))  # fmt: skip
    rows, accepted = spread_journal(spark), acks(spark, (10, 5 * B + 3), (12, 3 * B + 9))
    consumer = lag.consumers(subs, curs)
    entries = [tuple(row) for row in summary.block_summary(rows).collect()]
    since_us, now_us = (TimestampType().toInternal(moment) for moment in (NOW - lag.HOUR, NOW))
    assert lag.split_blocks(entries, {5 * B + 3, 3 * B + 9}, [0, 7, B + 2], since_us, now_us) == {1, 3, 4, 5}
    # block 3 holds the queue's accept; without it, it is counted whole
    assert lag.split_blocks(entries, {5 * B + 3}, [0, 7, B + 2], since_us, now_us) == {1, 4, 5}
    expected = spark.createDataFrame(
        [
            ("queue", "jobs/a", None, "jobs/a", None, 7, 0, None, 1, 1),
            ("subscription", "g1", "a", "prices/fx", "durable", B + 2, 10, 7000.0, 5, 0),
            ("subscription", "s1", "app1", "prices/fx", "durable", 0, 11, 90_000.0, 5, 1),
        ],
        LAG_SCHEMA,
    )
    for lag_of in (lag.lag, by_summary):
        assertDataFrameEqual(lag_of(rows, consumer, accepted, NOW), expected, checkRowOrder=True)


def test_the_block_summary_of_a_journal(spark):
    rows = journal(
        spark,
        message(BIG + 1, ts=ago(30)),
        message(BIG + 2, ts=ago(40), durable=False),
        message(BIG + 3, ts=ago(20)),
        message(BIG + B, "jobs/a", ts=ago(10), kind="queue", durable=False),
    )
    first_block = BIG // B
    micros = lambda seconds: TimestampType().toInternal(ago(seconds))  # noqa: E731
    expected = spark.createDataFrame(
        [
            ("prices/fx", first_block, BIG + 1, BIG + 3, 3, 300, 3, 2, micros(30), micros(20)),
            ("jobs/a", first_block + 1, BIG + B, BIG + B, 1, 100, 0, 0, None, None),
        ],
        summary.SCHEMA,
    )
    assertDataFrameEqual(summary.block_summary(rows), expected)
