"""Bookmark values, the recovery rule and the out-of-order filter (seed 003), without I/O."""

from __future__ import annotations

import pytest

from subgate.client.bookmarks import (
    EPOCH,
    NOW,
    SeqFilter,
    is_message_bookmark,
    is_start_value,
    parse_bookmark,
    recovery_point,
    recovery_value,
    time_bookmark,
)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("feed-1|7|", ("feed-1", 7)),
        ("app/link|1002|", ("app/link", 1002)),
        ("a|b|3|", ("a|b", 3)),  # the seq is the last field; the id may hold '|'
        (EPOCH, None),
        (NOW, None),
        ("20260102T030405", None),
        ("feed|x|", None),
        ("|3|", None),
        ("feed|3", None),
    ],
)
def test_parse_bookmark(value, parsed):
    assert parse_bookmark(value) == parsed


def test_start_values_and_message_bookmarks_are_told_apart():
    assert is_start_value(EPOCH) and is_start_value(NOW) and is_start_value("20260102T030405")
    assert not is_start_value("p|1|")
    assert is_message_bookmark("p|1|") and not is_message_bookmark("p|1|,p|3|") and not is_message_bookmark(NOW)


@pytest.mark.parametrize(
    ("start", "entries", "value"),
    [
        (None, [], None),
        (EPOCH, [], EPOCH),
        (EPOCH, [("p|1|", False), ("p|2|", True)], EPOCH),  # nothing discarded before: the start, filter locally
        ("p|3|", [], "p|3|"),
        ("p|3|", [("p|4|", False), ("p|5|", True), ("p|6|", False), ("p|7|", True)], "p|3|,p|5|,p|7|"),
    ],
)
def test_recovery_value_resumes_after_the_last_before_the_earliest_undiscarded(start, entries, value):
    assert recovery_value(start, entries) == value


def test_seq_filter_drops_what_is_not_above_the_highest_seen_per_publisher_and_counts_it():
    seen = SeqFilter()
    assert [seen.admit(b) for b in ("p|1000|", "p|1002|", "p|999|", "q|5|", "p|1002|", "p|1003|")] == [
        True,
        True,
        False,  # seed 003's example: 1000, 1002, then 999 is dropped
        True,
        False,
        True,
    ]
    assert seen.dropped == 2
    assert seen.admit("not a bookmark") is True


def test_a_recovery_point_is_a_utc_time_the_margin_before_now_rounded_down():
    assert time_bookmark(0) == "19700101T000000"
    assert recovery_point(1_700_000_002.9, margin=2.0) == "20231114T221320"  # 1_700_000_000.9 UTC
    assert is_start_value(recovery_point(1_700_000_000.0))
