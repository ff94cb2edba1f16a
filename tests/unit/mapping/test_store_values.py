"""The rules for client values that become store query parameters (mapping.store_values), and their use by the
bookmark parser (mapping.bookmarks) and the subscription key (mapping.subscriptions)."""

from __future__ import annotations

import pytest

from subgate.mapping.bookmarks import Bookmark, parse_replay
from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.store_values import (
    MAX_SEQ,
    check_registration,
    check_seq,
    check_text,
    parse_seq,
    seq_problem,
    text_problem,
)
from subgate.mapping.subscriptions import Details, SubscribeRequest, key_for


@pytest.mark.parametrize("value", [0, 1, MAX_SEQ])
def test_sequence_numbers_in_range_pass(value):
    assert seq_problem("seq", value) is None and check_seq("seq", value) == value


@pytest.mark.parametrize("value", [-1, MAX_SEQ + 1, 2**64, True, "7", 1.0, None])
def test_sequence_numbers_out_of_range_or_not_integers_are_refused_naming_the_range(value):
    with pytest.raises(Refused) as caught:
        check_seq("x-seq", value)
    assert caught.value.condition == INVALID_FIELD
    assert caught.value.description.startswith("x-seq must be an integer from 0 to 9223372036854775807")


def test_digits_are_judged_by_their_count_before_they_are_read():
    assert parse_seq("s", "0009223372036854775807") == MAX_SEQ
    assert parse_seq("s", "000") == 0
    assert parse_seq("s", "12a") is None and parse_seq("s", "١٢") is None and parse_seq("s", "") is None
    for digits in ("9223372036854775808", "1" + "0" * 19, "9" * 100_000):  # 100,000 digits: no int() of them
        with pytest.raises(Refused, match="from 0 to 9223372036854775807"):
            parse_seq("s", digits)


@pytest.mark.parametrize(
    "value, problem",
    [
        ("ok", None),
        ("é" * 512, None),
        ("", "1 to 512 characters, not 0"),
        ("x" * 513, "1 to 512 characters, not 513"),
        ("a\x00b", "U+0000"),
        ("a\udc80", "lone surrogate"),
        (b"bytes", "must be a string, not bytes"),
    ],
)
def test_text_the_store_cannot_hold_is_refused(value, problem):
    found = text_problem("name", value, 512)
    assert found is None if problem is None else problem in found
    if problem is not None:
        with pytest.raises(Refused):
            check_text("name", value, 512)


@pytest.mark.parametrize(
    "value, named",
    [
        ("p|9223372036854775808|", "its sequence number must be an integer from 0 to 9223372036854775807"),
        ("p|" + "9" * 5000 + "|", "its sequence number"),
        ("ok|1|,p|99999999999999999999|", "'p|99999999999999999999|'"),
        ("p\x00q|1|", "its publisher id must not contain U+0000"),
        ("x" * 513 + "|1|", "its publisher id must be 1 to 512 characters"),
    ],
)
def test_a_bookmark_the_store_cannot_look_up_is_refused_naming_the_filter(value, named):
    with pytest.raises(Refused) as caught:
        parse_replay(value)
    assert caught.value.condition == INVALID_FIELD
    assert caught.value.description.startswith("subgate-bookmark ") and named in caught.value.description


def test_the_edges_of_the_range_are_bookmarks():
    request = parse_replay(f"p|{MAX_SEQ}|,q|0|,{'x' * 512}|1|")
    assert request.bookmarks == (Bookmark("p", MAX_SEQ), Bookmark("q", 0), Bookmark("x" * 512, 1))


def test_a_subscription_key_the_store_cannot_keep_is_refused():
    def request(name: str, container_id: str) -> SubscribeRequest:
        return SubscribeRequest(name, container_id, True, frozenset(), Details("t", None, False))

    assert key_for(request("s" * 512, "c" * 512)) is not None
    assert key_for(request("s", "")) is not None  # an empty container-id is the connection's: taken
    with pytest.raises(Refused, match="subscription name must be 1 to 512"):
        key_for(request("s" * 513, "c"))
    with pytest.raises(Refused, match="ClientID"):
        key_for(request("s", "c\x00"))


def test_a_removal_registration_the_store_cannot_keep_is_refused():
    check_registration("", "link")
    check_registration("c" * 256, "l" * 1024)
    with pytest.raises(Refused, match="container-id of a remove-with-session registration must be 1 to 256"):
        check_registration("c" * 257, "link")
    with pytest.raises(Refused, match="U\\+0000"):
        check_registration("c", "l\x00")
