"""The audit job's transformations (``subgate.pipeline.audit``) on small hand-built frames, compared whole."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

from subgate.pipeline import audit
from tests.pipeline.frames import BIG, journal, message, publishers

GAP = "STRUCT<first_missing: BIGINT, last_missing: BIGINT, before: STRING, after: STRING>"
AUDIT_SCHEMA = (
    f"publisher_id STRING, numbered STRING, count BIGINT, first_seq BIGINT, last_seq BIGINT, gaps ARRAY<{GAP}>, "
    "duplicates BIGINT, out_of_order BIGINT"
)
GAP_SCHEMA = "publisher_id STRING, first_missing BIGINT, last_missing BIGINT, before STRING, after STRING"


def pattern(spark):
    """gappy: seqs 1 2 3 7 8 10 (4..6 and 9 missing); resend: 1 2 2 3 (one duplicate reached the journal);
    late: 1 2 5 3 4 (3 and 4 journaled after 5); srv: numbered by the server (its seqs are journal ids)."""
    return journal(
        spark,
        message(1, publisher="gappy", seq=1),
        message(2, publisher="gappy", seq=2),
        message(3, publisher="srv", seq=3),
        message(4, publisher="gappy", seq=3),
        message(5, publisher="resend", seq=1),
        message(6, publisher="resend", seq=2),
        message(7, publisher="resend", seq=2),
        message(8, publisher="gappy", seq=7),
        message(9, publisher="gappy", seq=8),
        message(10, publisher="srv", seq=10),
        message(11, publisher="resend", seq=3),
        message(12, publisher="gappy", seq=10),
        message(13, publisher="late", seq=BIG + 1),
        message(14, publisher="late", seq=BIG + 2),
        message(15, publisher="late", seq=BIG + 5),
        message(16, publisher="late", seq=BIG + 3),
        message(17, publisher="late", seq=BIG + 4),
    )


def test_gap_rows_name_the_missing_runs_and_the_bookmarks_on_either_side(spark):
    expected = spark.createDataFrame(
        [
            ("gappy", 4, 6, "gappy|3|", "gappy|7|"),
            ("gappy", 9, 9, "gappy|8|", "gappy|10|"),
            ("srv", 4, 9, "srv|3|", "srv|10|"),  # the raw rule; audit() drops server-numbered publishers' gaps
        ],
        GAP_SCHEMA,
    )
    assertDataFrameEqual(audit.gap_rows(pattern(spark)), expected)


def test_audit_counts_gaps_duplicates_and_out_of_order_rows_per_publisher(spark):
    result = audit.audit(pattern(spark), publishers(spark, "gappy", "resend", "late"))
    expected = spark.createDataFrame(
        [
            (
                "gappy",
                "publisher",
                6,
                1,
                10,
                [(4, 6, "gappy|3|", "gappy|7|"), (9, 9, "gappy|8|", "gappy|10|")],
                0,
                0,
            ),
            ("late", "publisher", 5, BIG + 1, BIG + 5, [], 0, 2),
            ("resend", "publisher", 4, 1, 3, [], 1, 0),
            ("srv", "server", 2, 3, 10, [], 0, 0),
        ],
        AUDIT_SCHEMA,
    )
    assertDataFrameEqual(result, expected, checkRowOrder=True)


def test_a_duplicate_journaled_after_a_higher_seq_is_both(spark):
    rows = journal(
        spark,
        message(1, publisher="p", seq=1),
        message(2, publisher="p", seq=2),
        message(3, publisher="p", seq=1),
    )
    expected = spark.createDataFrame([("p", "publisher", 3, 1, 2, [], 1, 1)], AUDIT_SCHEMA)
    assertDataFrameEqual(audit.audit(rows, publishers(spark, "p")), expected)


def test_an_empty_journal_has_no_publishers(spark):
    result = audit.audit(journal(spark), publishers(spark, "p"))
    assertDataFrameEqual(result, spark.createDataFrame([], AUDIT_SCHEMA))
    assertDataFrameEqual(audit.gap_rows(journal(spark)), spark.createDataFrame([], GAP_SCHEMA))
