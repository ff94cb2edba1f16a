"""The bookmark filter's values and where a replay starts (mapping.bookmarks)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from subgate.mapping.bookmarks import (
    Bookmark,
    ReplayPoint,
    Start,
    format_bookmark,
    parse_bookmark,
    parse_replay,
    replay_point,
)
from subgate.mapping.errors import INVALID_FIELD, Refused


def test_the_special_values_and_a_timestamp():
    assert parse_replay("0").start is Start.EPOCH
    assert parse_replay("0|1|").start is Start.NOW
    stamp = parse_replay("20261124T120000")
    assert stamp.start is Start.TIME
    assert stamp.after_ms == int(datetime(2026, 11, 24, 12, tzinfo=UTC).timestamp() * 1000)


def test_a_bookmark_and_a_list_keep_publisher_ids_with_bars():
    one = parse_replay("feed-1|42|")
    assert one.start is Start.BOOKMARKS and one.bookmarks == (Bookmark("feed-1", 42),)
    listed = parse_replay("app/link|7|, a|b|9|")
    assert listed.bookmarks == (Bookmark("app/link", 7), Bookmark("a|b", 9))
    assert parse_bookmark(format_bookmark("x|y", 3)) == Bookmark("x|y", 3)
    assert str(Bookmark("p", 1)) == "p|1|"


@pytest.mark.parametrize(
    "value", ["", "yesterday", "p|1", "|1|", "p|-1|", "p|x|", "20261399T000000", "p|1|,", "p|1|,0|1|", 7]
)
def test_malformed_values_are_refused_with_invalid_field(value):
    with pytest.raises(Refused) as caught:
        parse_replay(value)
    assert caught.value.condition == INVALID_FIELD


def test_a_list_starts_after_its_earliest_bookmark_and_skips_the_later_ones():
    request = parse_replay("a|5|,b|2|,c|9|")
    found = {Bookmark("a", 5): 50, Bookmark("b", 2): 20, Bookmark("c", 9): 90}
    assert replay_point(request, found) == ReplayPoint(20, frozenset({50, 90}))


def test_an_unknown_bookmark_is_refused_naming_it():
    request = parse_replay("a|5|,gone|1|")
    with pytest.raises(Refused) as caught:
        replay_point(request, {Bookmark("a", 5): 50})
    assert caught.value.condition == INVALID_FIELD and "'gone|1|'" in caught.value.description
