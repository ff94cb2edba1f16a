"""topics.handlers: which missing-topic handlers are notified (most specific path, one handler per path)."""

from __future__ import annotations

import pytest

from subgate.topics.errors import TopicPathError
from subgate.topics.handlers import MissingTopicHandlers, Notification
from subgate.topics.selectors import parse_selector


@pytest.fixture
def handlers() -> MissingTopicHandlers[str]:
    registry: MissingTopicHandlers[str] = MissingTopicHandlers()
    for path, handler in [("A", "top"), ("A/B", "ab"), ("A/B/C", "abc"), ("A/X", "ax"), ("Z", "z")]:
        registry.register(path, handler)
    return registry


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        # seed 000's example: a subscription to the missing A/D reaches the handler on A
        (">A/D", ["A"]),
        # the most specific path containing the selector wins; the ones above it are not notified
        (">A/B/D", ["A/B"]),
        (">A/B/C/D/E", ["A/B/C"]),
        (">A/B", ["A/B"]),
        (">A", ["A"]),  # a path selector never reaches the branches below it
        # no registered path above: nobody, unless the selector reaches a branch below
        (">Q/R", []),
        ("?Q/.*", []),
        # a selector reaching into more specific branches below its prefix also notifies those
        ("?A/.*", ["A", "A/B", "A/X"]),
        ("?A/B.*", ["A", "A/B"]),
        ("?A/.*/C", ["A", "A/B", "A/B/C", "A/X"]),  # A/X/C could exist
        (">A/B//", ["A/B", "A/B/C"]),
        (">A/B/", ["A/B", "A/B/C"]),
        ("*A/.*", ["A", "A/B", "A/B/C", "A/X"]),  # full-path: prefix-only (seed 000)
        ("*.*", ["A", "A/B", "A/B/C", "A/X", "Z"]),  # the root prefix: every branch
        ("#>Z/1////>A/B/9", ["Z", "A/B"]),  # a set: each member on its own, not by the common (root) prefix
        ("#>A/B/9////?A/.*", ["A/B", "A", "A/X"]),  # each path once
    ],
)
def test_candidates(handlers, expression, paths):
    assert sorted(handlers.candidates(expression)) == sorted(paths)
    assert sorted(handlers.candidates(parse_selector(expression))) == sorted(paths)


def test_covering_path_comes_first(handlers):
    assert handlers.candidates("?A/B/.*//") == ["A/B", "A/B/C"]


def test_one_handler_per_path_round_robin():
    registry: MissingTopicHandlers[str] = MissingTopicHandlers()
    for handler in ("h1", "h2", "h3"):
        registry.register("prices", handler)
    registry.register("prices/fx", "fx")
    chosen = [registry.choose(">prices/eq") for _ in range(4)]
    assert chosen == [
        [Notification("prices", "h1")],
        [Notification("prices", "h2")],
        [Notification("prices", "h3")],
        [Notification("prices", "h1")],
    ]
    assert registry.choose(">prices/fx/EURUSD") == [Notification("prices/fx", "fx")]
    assert registry.choose("?prices/.*") == [Notification("prices", "h2"), Notification("prices/fx", "fx")]


def test_candidates_does_not_rotate():
    registry: MissingTopicHandlers[str] = MissingTopicHandlers()
    registry.register("a", "h1")
    registry.register("a", "h2")
    registry.candidates(">a/b")
    assert registry.handlers("a") == ("h1", "h2")
    registry.choose(">a/b")
    assert registry.handlers("a") == ("h2", "h1")


def test_deregistered_handler_leaves_the_rotation():
    registry: MissingTopicHandlers[str] = MissingTopicHandlers()
    for handler in ("h1", "h2", "h3"):
        registry.register("a", handler)
    assert registry.choose(">a/x") == [Notification("a", "h1")]
    assert registry.deregister("a", "h2")
    assert [registry.choose(">a/x")[0].handler for _ in range(3)] == ["h3", "h1", "h3"]


def test_register_and_deregister(handlers):
    assert not handlers.register("A", "top")  # already there
    assert handlers.register("A", "second")
    assert handlers.handlers("A") == ("top", "second")
    assert handlers.handlers("nowhere") == ()
    assert not handlers.deregister("A", "nobody")
    assert not handlers.deregister("Z", "top")  # registered, but not on that path
    assert handlers.deregister("A/X", "ax")
    assert "A/X" not in handlers.paths()
    assert handlers.choose(">A/X/1") == [Notification("A", "top")]  # the next most specific path takes over


def test_deregister_all(handlers):
    handlers.register("Q", "ab")
    assert handlers.deregister_all("ab") == ["A/B", "Q"]
    assert handlers.deregister_all("ab") == []
    assert handlers.paths() == ["A", "A/B/C", "A/X", "Z"]
    assert handlers.choose(">A/B/1") == [Notification("A", "top")]


def test_a_handler_on_several_paths(handlers):
    handlers.register("Z", "ab")
    assert handlers.deregister("Z", "ab")
    assert handlers.choose(">A/B/x") == [Notification("A/B", "ab")]


@pytest.mark.parametrize("path", ["/A", "A/", "A//B"])
def test_invalid_path(handlers, path):
    with pytest.raises(TopicPathError):
        handlers.register(path, "h")


@pytest.mark.parametrize(
    ("expression", "paths"),
    [
        (">A/D", ["A"]),  # seed 000: the handler on A, not the one on the root
        (">Q/R", [""]),  # nothing more specific: the root
        ("?Q/.*", [""]),
        ("*.*", ["", "A", "A/B", "A/B/C", "A/X", "Z"]),
        ("#>Q////>A/B/1", ["", "A/B"]),
    ],
)
def test_a_handler_on_the_root_covers_what_nothing_more_specific_does(handlers, expression, paths):
    handlers.register("", "root")
    assert handlers.candidates(expression) == paths
    assert "" in handlers.paths() and handlers.paths()[0] == ""


def test_root_handlers_rotate_and_deregister():
    registry: MissingTopicHandlers[str] = MissingTopicHandlers()
    assert registry.register("", "r1") and registry.register("", "r2")
    assert not registry.register("", "r1")
    assert [n.handler for n in registry.choose(">x")] == ["r1"]
    assert [n.handler for n in registry.choose(">x")] == ["r2"]
    assert registry.handlers("") == ("r1", "r2")
    assert registry.deregister_all("r1") == [""]
    assert registry.deregister("", "r2")
    assert registry.paths() == [] and registry.handlers("") == () and registry.candidates(">x") == []
