"""Reading the JMS filters of a consumer source (mapping.filters)."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.filters import (
    NO_LOCAL_CODE,
    NO_LOCAL_SYMBOL,
    SELECTOR_CODE,
    SELECTOR_SYMBOL,
    FilterRequest,
    read_filters,
)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, FilterRequest()),
        ({"jms-selector": (SELECTOR_CODE, "a = 1")}, FilterRequest("a = 1", False, frozenset({"jms-selector"}))),
        ({"sel": (SELECTOR_SYMBOL, "a = 1")}, FilterRequest("a = 1", False, frozenset({"sel"}))),
        ({"jms-selector": (SELECTOR_CODE, "   ")}, FilterRequest(None, False, frozenset({"jms-selector"}))),
        ({"no-local": (NO_LOCAL_CODE, "NoLocalFilter{}")}, FilterRequest(None, True, frozenset({"no-local"}))),
        ({"nl": (NO_LOCAL_SYMBOL, [])}, FilterRequest(None, True, frozenset({"nl"}))),
        (
            {"jms-selector": (SELECTOR_CODE, "b"), "no-local": (NO_LOCAL_CODE, "NoLocalFilter{}")},
            FilterRequest("b", True, frozenset({"jms-selector", "no-local"})),
        ),
        # matched by descriptor, not by key; unknown descriptors ignored
        ({"jms-selector": (0x1234, "x")}, FilterRequest()),
        ({"no-local": ("some:other:filter", "x")}, FilterRequest()),
        ({"jms-selector": (True, "x")}, FilterRequest()),
        ({"jms-selector": (None, "x")}, FilterRequest()),
    ],
)
def test_read_filters(filters, expected):
    assert read_filters(filters) == expected


def test_selector_must_be_a_string():
    with pytest.raises(Refused) as refused:
        read_filters({"jms-selector": (SELECTOR_CODE, 42)})
    assert refused.value.condition == INVALID_FIELD


def test_the_bookmark_filter_by_descriptor_or_as_a_bare_string_under_its_key():
    described = read_filters({"start": ("subgate:bookmark:string", "0|1|")})
    assert described.replay is not None and described.replay.value == "0|1|" and described.replay_key == "start"
    bare = read_filters({"subgate-bookmark": (None, "0")})
    assert bare.replay is not None and bare.replay.value == "0"
    assert read_filters({"other": (None, "0")}).replay is None
    with pytest.raises(Refused):
        read_filters({"subgate-bookmark": ("subgate:bookmark:string", "nonsense")})
