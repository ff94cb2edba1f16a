"""topics.index: the prefix-indexed subscription side of matching agrees with Selector.matches, at lower cost."""

from __future__ import annotations

import random

import pytest

from subgate.topics.errors import SelectorError, TopicPathError
from subgate.topics.index import SelectorIndex
from subgate.topics.selectors import parse_selector

PATHS = ["a", "a/b", "a/b/c", "a/b/c/d", "a/bc", "a/x/c", "b", "b/y", "A/B", "x/y/z"]

# (expression, the paths of PATHS it selects)
CASES = [
    (">a/b", ["a/b"]),
    ("a/b", ["a/b"]),
    (">a/b/", ["a/b/c", "a/b/c/d"]),
    (">a/b//", ["a/b", "a/b/c", "a/b/c/d"]),
    (">nowhere", []),
    ("?a/.*/c", ["a/b/c", "a/x/c"]),
    ("?a/b.*", ["a/b", "a/bc"]),
    ("?a/b/", ["a/b/c", "a/b/c/d"]),
    ("?.*/y//", ["b/y", "x/y/z"]),
    ("*a/b.*", ["a/b", "a/b/c", "a/b/c/d", "a/bc"]),
    ("*a/.*/c", ["a/b/c", "a/x/c"]),
    ("*b|x/y/z", ["b", "x/y/z"]),
    ("*a/b//", ["a/b", "a/b/c", "a/b/c/d"]),
    ("#>a////>b/y", ["a", "b/y"]),
    ("#>a/b/////?.*/y", ["a/b/c", "a/b/c/d", "b/y"]),
    ("#?a/b.*////*a/x/.*", ["a/b", "a/bc", "a/x/c"]),  # two tested members under one prefix
    ("#>a////>a", ["a"]),  # a duplicate member
]


@pytest.fixture
def index() -> SelectorIndex[str]:
    built: SelectorIndex[str] = SelectorIndex()
    for expression, _ in CASES:
        built.add(expression, expression)
    return built


@pytest.mark.parametrize(("expression", "selected"), CASES)
def test_each_selector_type_alone(expression, selected):
    index: SelectorIndex[int] = SelectorIndex()
    index.add(expression, 1)
    assert [path for path in PATHS if index.matching(path)] == selected
    assert all(index.matching(path) in (set(), {1}) for path in PATHS)


def test_matching_agrees_with_every_selector(index):
    for path in PATHS:
        expected = {expression for expression, selected in CASES if path in selected}
        assert index.matching(path) == expected, path


def test_parsed_selectors_and_any_keys():
    index: SelectorIndex[tuple[str, int]] = SelectorIndex()
    index.add(parse_selector("?a/b.*"), ("link", 1))
    assert index.matching("a/bc") == {("link", 1)}


def test_add_replaces_the_selector_of_a_key(index):
    index.add(">b", ">a/b")
    assert index.selector(">a/b") == parse_selector(">b")
    assert ">a/b" not in index.matching("a/b")
    assert ">a/b" in index.matching("b")
    assert len(index) == len(CASES)


def test_a_bad_expression_leaves_the_index_as_it_was(index):
    with pytest.raises(SelectorError):
        index.add("?a/(", ">a/b")
    assert index.selector(">a/b") == parse_selector(">a/b")
    assert ">a/b" in index.matching("a/b")


@pytest.mark.parametrize("path", ["", "/a", "a/", "a//b"])
def test_invalid_paths_are_refused(index, path):
    with pytest.raises(TopicPathError):
        index.matching(path)


def test_remove(index):
    assert index.remove("#>a////>b/y")
    assert not index.remove("#>a////>b/y")
    assert "#>a////>b/y" not in index
    assert index.selector("#>a////>b/y") is None
    assert index.matching("b/y") == {"?.*/y//", "#>a/b/////?.*/y"}
    assert index.matching("a") == {"#>a////>a"}


def test_removing_everything_prunes_every_node(index):
    for expression, _ in CASES:
        assert index.remove(expression)
    assert len(index) == 0
    assert list(index) == []
    assert index._root.is_empty()


def test_removing_keeps_nodes_still_in_use():
    index: SelectorIndex[str] = SelectorIndex()
    index.add(">a/b/c", "deep")
    index.add(">a/b//", "mid")
    index.add(">a/b/c//", "deep2")
    index.remove("deep")
    assert index.matching("a/b/c") == {"mid", "deep2"}
    index.remove("mid")
    assert index.matching("a/b/c") == {"deep2"}
    assert index.matching("a/b") == set()


def test_iteration_and_membership(index):
    assert list(index) == [expression for expression, _ in CASES]
    assert ">a/b" in index
    assert ">zzz" not in index


def test_cost_only_the_walk_from_the_root_is_examined():
    index: SelectorIndex[int] = SelectorIndex()
    for key in range(100):
        index.add(f">other/{key}", key)  # a different branch: never looked at for a/b/c
    index.add(">a", 100)
    index.add(">a/b/", 101)
    index.add("?a/b/.*", 102)  # filed at a -> b -> regex edge ".*"
    index.add("*.*/c", 103)  # prefix "": tested for every path
    assert index.matching("a/b/c") == {101, 102, 103}
    assert (index.examined, index.evaluated) == (4, 2)  # entries of "", a, a/b, a/b/.*; the edge and *.*/c
    assert index.matching("zzz/q") == set()  # stops where the trie does
    assert (index.examined, index.evaluated) == (5, 3)


def test_split_paths_share_their_regex_edges():
    index: SelectorIndex[int] = SelectorIndex()
    for key in range(50):
        index.add(f"?desk/fx-.*/instrument/{key}", key)
    index.add("?desk/fx-.*/instrument/[0-4]//", 50)
    index.add("?desk/rates-.*/instrument/.*", 51)
    assert index.matching("desk/fx-3/instrument/7") == {7}
    assert index.evaluated == 3  # the edges fx-.* and rates-.*, then [0-4] once: not 52 selectors
    assert index.matching("desk/fx-3/instrument/3/leg") == {50}
    assert index.matching("desk/rates-1/instrument/7") == {51}
    for key in range(52):
        index.remove(key)
    assert index._root.is_empty()  # regex edges are pruned like literal ones


def test_a_path_may_follow_several_edges_at_once():
    index: SelectorIndex[str] = SelectorIndex()
    for expression in ("?a/b", "?a/.*", "?a/[ab]", "?.*/b", ">a/b", "?.*/.*/", "*a/b"):
        index.add(expression, expression)
    assert index.matching("a/b") == {"?a/b", "?a/.*", "?a/[ab]", "?.*/b", ">a/b", "*a/b"}
    assert index.matching("a/b/c") == {"?.*/.*/"}
    assert index.matching("c/b") == {"?.*/b"}


def test_agrees_with_a_scan_on_random_trees():
    rng = random.Random(7)
    segments = ["a", "b", "c", "ab"]
    paths = sorted({"/".join(rng.choices(segments, k=rng.randint(1, 5))) for _ in range(300)})
    forms = [">{}", ">{}/", ">{}//", "?{}", "?{}/", "?{}//", "*{}", "*{}.*", "*{}//", "#>{}////?.*/b////*{}/"]
    regexes = ["b", ".", "[ab]", "a?b", ".*"]
    selectors = {}
    index: SelectorIndex[int] = SelectorIndex()
    for key in range(600):
        base = rng.choice(paths)
        if rng.random() < 0.6:
            base = "/".join(rng.choice(regexes) if rng.random() < 0.4 else part for part in base.split("/"))
        expression = rng.choice(forms).format(base, base)
        selectors[key] = parse_selector(expression)
        index.add(expression, key)
    for key in rng.sample(range(600), 200):  # removals leave the rest intact
        index.remove(key)
        del selectors[key]
    for path in paths + ["a/b/c/d/a/b", "z"]:
        assert index.matching(path) == {key for key, selector in selectors.items() if selector.matches(path)}, path
