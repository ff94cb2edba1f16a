"""topics.selectors: parsing, prefixes, matching per selector type and qualifier, and seed 000's intersection."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import INVALID_FIELD
from subgate.topics.errors import SelectorError
from subgate.topics.selectors import (
    FullPathSelector,
    PathSelector,
    Qualifier,
    SelectorSet,
    SplitPathSelector,
    any_of,
    as_selector,
    intersects,
    parse_selector,
)

M, D, MD = Qualifier.MATCH, Qualifier.DESCENDANTS, Qualifier.MATCH_AND_DESCENDANTS


@pytest.mark.parametrize(
    ("expression", "kind", "canonical", "prefix"),
    [
        # path selectors, with and without the '>' and the qualifiers
        (">a/b/c", PathSelector, ">a/b/c", "a/b/c"),
        ("a/b/c", PathSelector, ">a/b/c", "a/b/c"),
        (">a/b/", PathSelector, ">a/b/", "a/b"),
        (">a/b//", PathSelector, ">a/b//", "a/b"),
        ("a/b//", PathSelector, ">a/b//", "a/b"),
        (">*a", PathSelector, ">*a", "*a"),  # a topic whose name starts with a selector character
        # split-path: the prefix is the leading run of literal patterns
        ("?foo/bar/baz/.*/bing", SplitPathSelector, "?foo/bar/baz/.*/bing", "foo/bar/baz"),
        ("?a/b", SplitPathSelector, "?a/b", "a/b"),
        ("?a/b//", SplitPathSelector, "?a/b//", "a/b"),
        ("?.*/a", SplitPathSelector, "?.*/a", ""),
        ("?a\\.b/c", SplitPathSelector, "?a\\.b/c", ""),  # an escape is not literal: shorter prefix, still sound
        ("?a-b/c d/.*", SplitPathSelector, "?a-b/c d/.*", "a-b/c d"),
        # full-path: literal characters up to the last complete segment
        ("*a/b/c.*", FullPathSelector, "*a/b/c.*", "a/b"),
        ("*a/b", FullPathSelector, "*a/b", "a/b"),
        ("*a/b//", FullPathSelector, "*a/b//", "a/b"),
        ("*a/b/", FullPathSelector, "*a/b/", "a/b"),
        ("*a/b+", FullPathSelector, "*a/b+", "a"),
        ("*a/b?/c", FullPathSelector, "*a/b?/c", "a"),
        ("*a/?b", FullPathSelector, "*a/?b", ""),  # the '/' itself is optional
        ("*a/b{2}/c", FullPathSelector, "*a/b{2}/c", "a"),
        ("*a/b/(c|d)", FullPathSelector, "*a/b/(c|d)", "a/b"),
        ("*a/b|c/d", FullPathSelector, "*a/b|c/d", ""),  # top-level alternation
        ("*(a|b)/c", FullPathSelector, "*(a|b)/c", ""),
        ("*(?i)a/b", FullPathSelector, "*(?i)a/b", ""),  # flags make the letters non-literal
        ("*^a/b", FullPathSelector, "*^a/b", ""),
        ("*a/b/[|]", FullPathSelector, "*a/b/[|]", "a/b"),  # '|' in a class is no alternation
        ("*a/b/[]|]", FullPathSelector, "*a/b/[]|]", "a/b"),  # ']' first in a class is literal
        ("*a/b/[^]|]x", FullPathSelector, "*a/b/[^]|]x", "a/b"),
        ("*a/b/[\\]|]", FullPathSelector, "*a/b/[\\]|]", "a/b"),
        ("*a/b/\\|", FullPathSelector, "*a/b/\\|", "a/b"),
        ("*a/b/(c)|x", FullPathSelector, "*a/b/(c)|x", ""),
        ("*a//b", FullPathSelector, "*a//b", "a"),  # cannot match a valid path; the prefix stays a valid branch
        ("*.*", FullPathSelector, "*.*", ""),
        # selector sets: members split on '////', the prefix common to all members
        ("#>a/b////>a/c", SelectorSet, "#>a/b////>a/c", "a"),
        ("#>a////b", SelectorSet, "#>a////>b", ""),
        ("#?a/b/.*////*a/b/c", SelectorSet, "#?a/b/.*////*a/b/c", "a/b"),
        ("#>a//////>b", SelectorSet, "#>a//////>b", ""),  # the last four slashes separate: '>a//' and '>b'
        ("#a/////b", SelectorSet, "#>a/////>b", ""),
        ("##a////b", SelectorSet, "#>a////>b", ""),  # a nested set is flattened
    ],
)
def test_parse(expression, kind, canonical, prefix):
    selector = parse_selector(expression)
    assert type(selector) is kind
    assert selector.expression == canonical
    assert str(selector) == canonical
    assert selector.prefix == prefix
    assert parse_selector(canonical) == selector  # the canonical expression round-trips


@pytest.mark.parametrize(
    ("expression", "qualifier"),
    [(">a", M), (">a/", D), (">a//", MD), ("?a/.*", M), ("?a/.*/", D), ("?a/.*//", MD), ("*a", M), ("*a/", D)],
)
def test_qualifier(expression, qualifier):
    assert parse_selector(expression).qualifier is qualifier


@pytest.mark.parametrize(
    ("expression", "path", "selected"),
    [
        # path
        (">a/b", "a/b", True),
        (">a/b", "a", False),
        (">a/b", "a/b/c", False),
        (">a/b", "a/bc", False),
        ("a/b", "a/b", True),
        (">a/b/", "a/b", False),
        (">a/b/", "a/b/c", True),
        (">a/b/", "a/b/c/d", True),
        (">a/b/", "a/bc", False),
        (">a/b/", "a", False),
        (">a/b//", "a/b", True),
        (">a/b//", "a/b/c/d", True),
        (">a/b//", "a/bc", False),
        (">a/b//", "a", False),
        # split-path: one fully anchored regex per segment, the qualifier on the segment count
        ("?a/b", "a/b", True),
        ("?a/b", "a/b/c", False),
        ("?a/.*", "a/x", True),
        ("?a/.*", "a", False),
        ("?a/.*", "a/x/y", False),
        ("?a/.*", "b/x", False),
        ("?a/b.*", "a/bcd", True),
        ("?a/b.*", "a/xb", False),  # anchored at the start of the segment
        ("?a/.*b", "a/bx", False),  # and at its end
        ("?a/.*/c", "a/x/c", True),
        ("?a/.*/c", "a/x/d", False),
        ("?a/.*/c", "a/x/c/d", False),
        ("?a|b/c", "b/c", True),
        ("?a|b/c", "ab/c", False),
        ("?[a-c]/x", "b/x", True),
        ("?[a-c]/x", "d/x", False),
        ("?.*", "a", True),
        ("?.*", "a/b", False),
        ("?(?i)A/b", "a/b", True),
        ("?a/.*/", "a/x", False),
        ("?a/.*/", "a/x/y", True),
        ("?a/.*/", "a/x/y/z", True),
        ("?a/.*//", "a/x", True),
        ("?a/.*//", "a/x/y", True),
        ("?a/.*//", "a", False),
        ("?a/.*//", "b/x", False),
        # full-path: the regex against the whole path
        ("*a/.*", "a/x", True),
        ("*a/.*", "a/x/y", True),
        ("*a/.*", "a", False),
        ("*a/.*", "b/a/x", False),
        ("*a", "a", True),
        ("*a", "ba", False),
        ("*a", "a/b", False),
        ("*a|b", "b", True),
        ("*a|b", "c", False),
        ("*.*x", "a/x", True),
        ("*.*x", "a/y", False),
        ("*(?i)a/b", "A/B", True),
        ("*(?i)(?s)a/.*//", "A/x\ny", True),  # several leading flag groups stay in front of the qualifier
        ("*a|b/", "b/x", True),  # the qualifier applies to the whole alternation
        ("*a|b/", "a", False),
        ("*a|b//", "a", True),
        ("*a|b//", "b/x/y", True),
        ("*a|b//", "c/a", False),
        ("*a/.*/", "a/x", False),
        ("*a/.*/", "a/x/y", True),
        ("*a//", "a/x\ny", True),  # descendants are any characters
        ("*a/b//", "a/bc", False),
        # selector sets
        ("#>a////>b", "a", True),
        ("#>a////>b", "b", True),
        ("#>a////>b", "c", False),
        ("#>a////>b", "a/x", False),
        ("#>a//////>b", "a/x", True),
        ("#?a/.*////*b/.*", "b/x/y", True),
        ("#?a/.*////*b/.*", "a/x/y", False),
        ("#a/////b", "a", False),
        ("#a/////b", "a/x", True),
    ],
)
def test_matches(expression, path, selected):
    assert parse_selector(expression).matches(path) is selected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "empty"),
        (">", "at least one segment"),
        (">/a", "start with '/'"),
        ("a//b", "empty segment"),
        (">a///", "end with '/'"),  # '//' is the qualifier, the third slash is left on the path
        ("?", "pattern 1 is empty"),
        ("?a//b", "pattern 2 is empty"),
        ("?a/(b", "bad regular expression"),
        ("*", "needs a regular expression"),
        ("*//", "needs a regular expression"),
        ("*a(", "bad regular expression"),
        ("*a/(?=b)", "bad regular expression"),  # RE2 has no lookaround
        ("*(a)\\1", "bad regular expression"),  # nor backreferences
        ("?a/b{1001}", "bad regular expression"),  # nor counted repetitions above 1,000
        ("#", "empty member"),
        ("#>a////", "empty member"),
        ("#////>a", "empty member"),
        ("#>a////?b/(", "member '?b/('"),
        ("$a", "reserved"),
        ("%a", "reserved"),
        ("&a", "reserved"),
        ("<a", "reserved"),
    ],
)
def test_invalid(expression, reason):
    with pytest.raises(SelectorError) as caught:
        parse_selector(expression)
    assert caught.value.expression == expression  # the error names what the client sent
    assert reason in caught.value.reason
    assert caught.value.condition == INVALID_FIELD
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: PathSelector("a/"), "end with '/'"),
        (lambda: SplitPathSelector(()), "at least one pattern"),
        (lambda: SplitPathSelector(("a/b",)), "contains '/'"),
        (lambda: FullPathSelector(""), "needs a regular expression"),
        (lambda: SelectorSet(()), "at least one selector"),
    ],
)
def test_direct_construction_validates(build, reason):
    with pytest.raises(SelectorError, match=reason):
        build()


def test_constructed_selectors_equal_parsed_ones():
    assert parse_selector("a/b") == PathSelector("a/b")
    assert parse_selector("?a/.*//") == SplitPathSelector(("a", ".*"), MD)
    assert parse_selector("*a/.*/") == FullPathSelector("a/.*", D)
    assert hash(parse_selector("?a/.*")) == hash(SplitPathSelector(("a", ".*")))
    nested = SelectorSet((SelectorSet((PathSelector("a"),)), PathSelector("b")))
    assert nested.members == (PathSelector("a"), PathSelector("b"))
    assert nested == parse_selector("#a////b")


def test_split_path_segment_access():
    selector = parse_selector("?a/b.*/c")
    assert isinstance(selector, SplitPathSelector)
    assert selector.depth == 3
    assert [selector.literal_at(i) for i in range(3)] == ["a", None, "c"]
    assert selector.segment_matches(1, "bx")
    assert not selector.segment_matches(2, "cc")
    assert [selector.accepts_length(n) for n in (2, 3, 4)] == [False, True, False]


def test_any_of_and_as_selector():
    path = parse_selector(">a")
    assert as_selector(path) is path
    assert as_selector("a") == path
    combined = any_of(path, "?b/.*", "#c////d")
    assert combined.expression == "#>a////?b/.*////>c////>d"
    assert combined.prefix == ""


@pytest.mark.parametrize(
    ("expression", "branch", "possible"),
    [
        (">a/b", "", True),
        (">a/b", "a", True),
        (">a/b", "a/b", True),
        (">a/b", "a/b/c", False),  # a path selector never reaches below its path
        (">a/b", "x", False),
        (">a/b/", "a/b/c", True),
        (">a/b//", "a", True),
        (">a/b/", "x", False),
        ("?a/.*", "", True),
        ("?a/.*", "a/x", True),
        ("?a/.*", "a/x/y", False),
        ("?a/.*/", "a/x/y", True),
        ("?a/.*", "b", False),
        ("?a/.*/c", "a/x", True),
        ("?a/b", "a/c", False),
        ("*a/.*", "a/b", True),  # prefix-only for full paths
        ("*a/.*", "", True),
        ("*a/.*", "b", False),
        ("#>x////?a/.*", "a/b", True),
        ("#>x////>y", "z", False),
    ],
)
def test_may_select_within(expression, branch, possible):
    assert parse_selector(expression).may_select_within(branch) is possible


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (">a/b", ">a/b", True),
        (">a", "?a/b/.*", True),
        (">a/b", ">a", True),
        (">a", ">a/b", True),  # prefix-only: '>a' cannot select 'a/b', but the prefixes meet (seed 000)
        (">a/b", ">a/c", False),
        ("*.*", ">x/y", True),  # the root prefix meets everything
        ("?a/.*/c", "?a/b/.*", True),
        ("?a/b/x", "?a/c/x", False),
        ("*a/b/.*", "?a/c/.*", False),
        ("#>a////>b", ">b/c", True),
        ("#>a////>b", ">c", False),  # compared member by member, not through the set's root prefix
        ("#>a////>b", "#>c////>a/x", True),
    ],
)
def test_intersects(a, b, expected):
    assert intersects(parse_selector(a), parse_selector(b)) is expected
    assert intersects(parse_selector(b), parse_selector(a)) is expected


@pytest.mark.parametrize("expression", ["*(a+)+b", "*(.*)*x", "*(a|a)*b", "?(a*)*b", "*(?:a{0,1000}){1000}"])
def test_catastrophic_regexes_match_in_linear_time_or_are_refused(expression):
    """With Python's re, *(a+)+b took 7 s on one path of 26 a's, doubling with each a: RE2 answers at once (the
    test would hit pytest's timeout otherwise), or refuses the pattern as too large."""
    try:
        selector = parse_selector(expression)
    except SelectorError as exc:
        assert "bad regular expression" in exc.reason
        return
    assert not selector.matches("a" * 100_000)
    assert not selector.matches("a/" * 20_000 + "c")


def test_re2_semantics_the_docs_name():
    assert parse_selector(r"*\d+").matches("123") and not parse_selector(r"*\d+").matches("\u0663")  # ASCII \d
    assert parse_selector(r"*\p{Lu}x").matches("Éx")  # Unicode classes, as in Java
    assert parse_selector("*a/(?i)b").matches("a/B")  # an inline flag anywhere, scoped to its group
