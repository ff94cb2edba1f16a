"""Hostile JMS selectors (issue 19 item 2): each is refused with a ``SelectorError`` naming the limit, or parses
and evaluates, never raising anything else. Costs are checked by counting, never by timing."""

from __future__ import annotations

import pytest

from subgate.mapping.selectors import SelectorError, parse
from subgate.mapping.selectors.evaluation import wildcard_cost
from subgate.mapping.selectors.parser import MAX_WILDCARD_COST
from subgate.mapping.selectors.tokens import STRING, Token


def _cost(pattern: str, escape: str | None = None) -> int:
    return wildcard_cost(Token(STRING, pattern, 0, f"'{pattern}'"), escape)


def test_a_decimal_literal_too_long_for_int_is_out_of_range_not_a_value_error():
    # Found while writing the atheris jms target: int() refuses more than 4,300 digits with a plain ValueError.
    with pytest.raises(SelectorError, match="out of range for a long"):
        parse("n = " + "1" * 5000)
    with pytest.raises(SelectorError, match="out of range for a long"):
        parse("n = 0" + "7" * 4400)
    assert parse("n = " + "0" * 40 + "17").evaluate(lambda name: 15) is True  # leading zeros: octal 17


@pytest.mark.parametrize(
    ("pattern", "cost"),
    [("a_b", 0), ("%a_b", 0), ("a_b%", 0), ("%a_b%", 3), ("%ab%cd%", 0), ("%a_%_b%x", 4), ("%a\\_b%", 0)],
)
def test_wildcard_cost_counts_searched_runs_with_an_underscore(pattern, cost):
    assert _cost(pattern, "\\") == cost


def test_like_runs_with_underscores_are_bounded_over_the_whole_selector():
    run = "_" + "a" * (MAX_WILDCARD_COST - 1)
    assert parse(f"s LIKE '%{run}%'").evaluate(lambda name: "x" + run.replace("_", "y") + "z") is True
    with pytest.raises(SelectorError, match=f"more than {MAX_WILDCARD_COST} characters"):
        parse(f"s LIKE '%{run}a%'")
    with pytest.raises(SelectorError, match=f"more than {MAX_WILDCARD_COST} characters"):
        parse(" OR ".join([f"s LIKE '%{run[:100]}%'"] * 3))


@pytest.mark.parametrize(
    "text",
    [
        "(" * 65 + "a" + ")" * 65,
        "NOT " * 65 + "a",
        "-" * 65 + "n > 0",
        "n" + " + n" * 300 + " > 0",
    ],
)
def test_nesting_and_depth_are_refused_with_the_limit_not_a_recursion_error(text):
    with pytest.raises(SelectorError, match="nested more than|levels of operators"):
        parse(text)


def test_a_long_flat_chain_is_one_level():
    assert parse(" AND ".join(["a"] * 2000)).evaluate(lambda name: True) is True


def test_a_huge_in_list_is_a_set():
    values = ", ".join(f"'{i}'" for i in range(1500))
    assert parse(f"s IN ({values})").evaluate(lambda name: "1499") is True
