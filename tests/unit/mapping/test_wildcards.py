"""mapping.wildcards: Artemis wildcard addresses and the Diffusion selectors they mean."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.wildcards import check_address, diffusion_selector, is_wildcard, refuse_as_node
from subgate.topics import parse_selector

# Artemis's own examples (its "Wildcard Syntax" chapter), and the edges: a leading, middle, repeated "#".
CASES = [
    ("news.europe.#", ["news.europe", "news.europe.sport", "news.europe.politics.regional"], ["news.usa", "news"]),
    ("news.*", ["news.europe"], ["news.europe.sport", "news", "news."]),
    ("news.*.sport", ["news.europe.sport", "news.usa.sport"], ["news.europe.politics", "news.sport"]),
    ("news.#.sport", ["news.sport", "news.eu.sport", "news.a.b.sport"], ["news.eu", "newssport", "news.sports"]),
    ("news.#.#", ["news", "news.a.b"], ["newsa"]),
    ("a.b+c.#", ["a.b+c", "a.b+c.d"], ["a.bbc", "a.b+c+d"]),  # regex characters in a word are literal
    ("news.#", ["news", "news.eu"], ["news/eu", "news.eu/x", "a.news"]),  # never across a "/"
]


@pytest.mark.parametrize(("address", "matching", "other"), CASES)
def test_the_selector_selects_what_artemis_matches(address, matching, other):
    selector = parse_selector(diffusion_selector(address))
    assert [path for path in matching if selector.matches(path)] == matching
    assert [path for path in other if selector.matches(path)] == []


@pytest.mark.parametrize(
    ("address", "wildcard"),
    [
        ("news.#", True),
        ("news.*.eu", True),
        ("news", False),
        ("news.eu", False),
        ("news.#x", False),  # "#x" is a word, not a wildcard
        (">news.#", False),  # a Diffusion selector already
        ("*news.#", False),
        ("#>a////>b", False),
        ("a/#", False),  # a Diffusion path
        ("", False),
    ],
)
def test_what_is_a_wildcard(address, wildcard):
    assert is_wildcard(address) is wildcard


def test_another_delimiter():
    assert not is_wildcard("news.#", "/") and is_wildcard("news-#", "-")
    assert parse_selector(diffusion_selector("news-*-x", "-")).matches("news-eu-x")
    assert not parse_selector(diffusion_selector("news-*-x", "-")).matches("news-e-u-x")


def test_check_address_translates_or_refuses_naming_the_selector():
    assert check_address("news.eu", translate=False) == "news.eu"
    assert check_address("news.#", translate=True) == diffusion_selector("news.#")
    with pytest.raises(Refused) as refused:
        check_address("news.#", translate=False)
    assert refused.value.condition == INVALID_FIELD
    assert "'news.#'" in refused.value.description and diffusion_selector("news.#") in refused.value.description


def test_a_wildcard_is_never_a_node():
    refuse_as_node("news.eu")
    with pytest.raises(Refused) as refused:
        refuse_as_node("orders.*")
    assert refused.value.condition == INVALID_FIELD
