"""topics.tree: topics, current values, removal and pruning, and selection by walking from the prefix."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import NOT_FOUND
from subgate.topics.errors import SelectorError, TopicPathError, UnknownTopicError
from subgate.topics.selectors import parse_selector
from subgate.topics.tree import TopicTree

TOPICS = ["a", "a/b", "a/b/c", "a/x/c", "a/x/c/d", "b/y", "A/B"]


@pytest.fixture
def tree() -> TopicTree[str]:
    built: TopicTree[str] = TopicTree()
    for path in TOPICS:
        built.add(path, path.upper())
    return built


def test_add_and_current_values(tree):
    assert len(tree) == len(TOPICS)
    assert tree.get("a/b") == "A/B"
    assert not tree.add("a/b", "other")  # already there: the value stays
    assert tree.get("a/b") == "A/B"
    tree.set_value("a/b", "published")
    assert tree.get("a/b") == "published"
    assert tree.add("n/e/w")
    assert tree.get("n/e/w") is None  # no value until one is published


@pytest.mark.parametrize("path", ["a/x", "zzz", "a/b/c/d"])  # an intermediate node is not a topic
def test_unknown_topics(tree, path):
    assert path not in tree
    with pytest.raises(UnknownTopicError) as caught:
        tree.get(path)
    assert caught.value.condition == NOT_FOUND
    assert caught.value.path == path
    with pytest.raises(KeyError):
        tree.set_value(path, "v")


@pytest.mark.parametrize("path", ["", "/a", "a/", "a//b"])
def test_invalid_paths_are_refused(tree, path):
    assert path not in tree
    with pytest.raises(TopicPathError):
        tree.add(path)
    with pytest.raises(TopicPathError):
        tree.remove(path)
    with pytest.raises(TopicPathError):
        tree.remove_branch(path)


def test_contains(tree):
    assert "a/x/c" in tree
    assert "a/x" not in tree
    assert 42 not in tree


def test_count_children_and_paths(tree):
    assert tree.count() == 7
    assert tree.count("a") == 5
    assert tree.count("a/x") == 2  # not a topic itself, two below it
    assert tree.count("nope") == 0
    assert tree.children() == ["a", "b", "A"]
    assert tree.children("a") == ["b", "x"]
    assert tree.children("nope") == []
    assert list(tree.paths()) == TOPICS[:5] + ["b/y", "A/B"]
    assert list(tree.paths("a/x")) == ["a/x/c", "a/x/c/d"]
    assert list(tree.paths("nope")) == []
    with pytest.raises(TopicPathError):
        tree.paths("a/")  # checked when called, not when iterated


def test_remove_keeps_descendants_and_prunes(tree):
    assert tree.remove("a/x/c")
    assert "a/x/c" not in tree
    assert "a/x/c/d" in tree
    assert tree.count("a/x") == 1
    assert not tree.remove("a/x/c")  # gone already
    assert not tree.remove("a/x")  # an intermediate node
    assert not tree.remove("q/r")
    assert tree.remove("a/x/c/d")
    assert tree.children("a") == ["b"]  # the empty 'x' branch is pruned
    assert tree.remove("b/y")
    assert tree.children() == ["a", "A"]
    assert len(tree) == 4


def test_remove_leaf_under_a_topic_keeps_the_topic(tree):
    assert tree.remove("a/b/c")
    assert "a/b" in tree
    assert tree.children("a/b") == []


def test_remove_branch(tree):
    assert tree.remove_branch("a/x") == ["a/x/c", "a/x/c/d"]  # a branch need not be a topic itself
    assert tree.children("a") == ["b"]
    assert tree.remove_branch("a") == ["a", "a/b", "a/b/c"]
    assert tree.children() == ["b", "A"]
    assert tree.remove_branch("a") == []
    assert len(tree) == 2
    assert tree.remove_branch("b/y") == ["b/y"]
    assert tree.children() == ["A"]  # the parent left empty is pruned as well
    assert tree.count() == 1


def test_remove_selected(tree):
    assert tree.remove_selected("?a/.*") == ["a/b"]  # a/x is no topic; a/b/c stays
    assert sorted(tree.remove_selected("*.*/c//")) == ["a/b/c", "a/x/c", "a/x/c/d"]
    assert list(tree.paths()) == ["a", "b/y", "A/B"]


def test_closest(tree):
    assert tree.closest("a/b/c/z") == "a/b/c"
    assert tree.closest("a/x/q") == "a"  # a/x is not a topic
    assert tree.closest("a") == "a"
    assert tree.closest("z/y") is None
    assert tree.closest("") is None


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        (">a/b", ["a/b"]),
        (">a/x", []),  # an intermediate node is not a topic
        (">nope", []),
        (">a/x/", ["a/x/c", "a/x/c/d"]),
        (">a/b//", ["a/b", "a/b/c"]),
        (">a/b/c/", []),
        (">a/", ["a/b", "a/b/c", "a/x/c", "a/x/c/d"]),
        ("?a/.*/c", ["a/b/c", "a/x/c"]),
        ("?a/.*/c/", ["a/x/c/d"]),
        ("?a/.*/c//", ["a/b/c", "a/x/c", "a/x/c/d"]),
        ("?.*/.*", ["a/b", "b/y", "A/B"]),
        ("?a/.*/q", []),  # literal after a regex: a look-up that finds nothing
        ("?a/b/c", ["a/b/c"]),
        ("?z/.*", []),
        ("?a", ["a"]),
        ("*a/.*", ["a/b", "a/b/c", "a/x/c", "a/x/c/d"]),
        ("*(?i)a/b", ["a/b", "A/B"]),
        ("*.*/c", ["a/b/c", "a/x/c"]),
        ("*a/x//", ["a/x/c", "a/x/c/d"]),
        ("*zz/.*", []),
        ("#>a/b////?a/.*////a/b/c", ["a/b", "a/b/c"]),  # each topic once, in member order
        ("#>b/y////>a", ["b/y", "a"]),
    ],
)
def test_select(tree, expression, selected):
    assert list(tree.select(expression)) == selected
    assert list(tree.select(parse_selector(expression))) == selected
    assert sorted(path for path in tree.paths() if parse_selector(expression).matches(path)) == sorted(selected)


def test_select_items_gives_current_values(tree):
    tree.set_value("a/x/c", "latest")
    assert list(tree.select_items("?a/.*/c")) == [("a/b/c", "A/B/C"), ("a/x/c", "latest")]


def test_select_parses_when_called(tree):
    with pytest.raises(SelectorError):
        tree.select("?a/(")
    with pytest.raises(SelectorError):
        tree.select_items("")


def test_values_are_generic():
    tree: TopicTree[dict[str, int]] = TopicTree()
    tree.add("counts", {"n": 1})
    value = tree.get("counts")
    assert value == {"n": 1}


def _scale_tree() -> TopicTree[int]:
    """100,000 topics: 100 regions x 100 desks x 10 instruments."""
    tree: TopicTree[int] = TopicTree()
    for region in range(100):
        for desk in range(100):
            for instrument in range(10):
                tree.add(f"r{region}/d{desk}/i{instrument}", instrument)
    return tree


def test_selection_cost_does_not_grow_with_the_tree():
    tree = _scale_tree()
    assert len(tree) == 100_000

    def visits(expression: str) -> tuple[list[str], int]:
        before = tree.nodes_visited
        selected = list(tree.select(expression))
        return selected, tree.nodes_visited - before

    selected, cost = visits(">r42/d7/i3")
    assert selected == ["r42/d7/i3"]
    assert cost == 3  # the depth of the path, nothing else

    selected, cost = visits(">r42/d7//")
    assert len(selected) == 10
    assert cost <= 2 + 10  # the path, then its own subtree only

    selected, cost = visits("?r42/d7/i[0-4]")
    assert len(selected) == 5
    assert cost <= 2 + 10  # the literal prefix, then the children of one node

    selected, cost = visits("?r42/.*/i3")
    assert len(selected) == 100
    assert cost <= 1 + 100 + 100  # one region, its desks, one look-up per desk

    selected, cost = visits("#>r1/d1/i1////>r99/d99/i9")
    assert selected == ["r1/d1/i1", "r99/d99/i9"]
    assert cost == 6
