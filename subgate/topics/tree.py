"""The topic tree: a trie of path segments, generic over the current value stored at each topic.

Owns which topics exist, each topic's current value (the last message published to it, kept for fetch and for
late subscribers) and how a selector is evaluated against the tree. It knows nothing of links, sessions or
messages: ``V`` is whatever the caller stores, ``None`` until a value is set.

Shape (after nats ``sublist``): each node holds ``children`` by segment, whether it is a topic, its value and
``count``, the number of topics in its subtree including itself. A node exists only while some topic lies at or
below it: adding ``a/b/c`` creates the intermediate nodes ``a`` and ``a/b`` (not topics), and removals prune
nodes whose count drops to zero. ``count`` makes ``len``, ``count(branch)`` and "has descendants" cost the depth
of the path, not the size of the tree.

Selection walks from the selector's prefix node, never scans a list of topics:
- path selector: descend to the node (cost = depth), then its subtree only when a qualifier asks for it;
- split-path: descend through the literal prefix, then level by level, following a literal pattern by a
  dictionary look-up and testing a regex pattern against that node's children only;
- full-path: descend to the prefix node and test every topic below it (regexes cannot prune);
- set: each member in turn, each topic yielded once.
``nodes_visited`` counts every node a walk touches, so tests can check cost without timings.

Decisions: ``add`` on an existing topic returns False and leaves its value; ``remove`` removes one topic and
keeps its descendants (Diffusion's remove-branch is ``remove_branch``); results come in insertion order,
depth first. Iterating ``select``/``paths`` while changing the tree is not supported: take a list first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from subgate.topics.errors import UnknownTopicError
from subgate.topics.paths import SEPARATOR, split_branch, split_path
from subgate.topics.selectors import (
    FullPathSelector,
    PathSelector,
    Qualifier,
    Selector,
    SelectorSet,
    SplitPathSelector,
    as_selector,
)

V = TypeVar("V")


class _Node(Generic[V]):
    __slots__ = ("children", "count", "is_topic", "value")

    def __init__(self) -> None:
        self.children: dict[str, _Node[V]] = {}
        self.is_topic = False
        self.value: V | None = None
        self.count = 0


class TopicTree(Generic[V]):
    """Topics by path, with a current value each. Paths follow ``topics.paths``; branches may be the root ``""``."""

    def __init__(self) -> None:
        self._root: _Node[V] = _Node()
        self.nodes_visited = 0

    def __len__(self) -> int:
        return self._root.count

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str) or not path:
            return False
        node = self._find(path.split(SEPARATOR))
        return node is not None and node.is_topic

    def add(self, path: str, value: V | None = None) -> bool:
        """Create the topic ``path`` with an initial value.

        Returns:
            True if created; False if the topic already existed (its value is left as it was).
        Raises:
            TopicPathError: the path is invalid.
        """
        trail = [self._root]
        for segment in split_path(path):
            trail.append(trail[-1].children.setdefault(segment, _Node()))
        node = trail[-1]
        if node.is_topic:
            return False
        node.is_topic, node.value = True, value
        for step in trail:
            step.count += 1
        return True

    def get(self, path: str) -> V | None:
        """The current value of a topic (None if none set yet). Raises UnknownTopicError, TopicPathError."""
        return self._topic(path).value

    def set_value(self, path: str, value: V | None) -> None:
        """Make ``value`` the current value of a topic (a publish). Raises UnknownTopicError, TopicPathError."""
        self._topic(path).value = value

    def remove(self, path: str) -> bool:
        """Remove one topic; its descendants stay. Returns False if there was no topic there."""
        trail = self._trail(split_path(path))
        if trail is None or not trail[-1].is_topic:
            return False
        trail[-1].is_topic, trail[-1].value = False, None
        self._uncount(trail, path.split(SEPARATOR), 1)
        return True

    def remove_branch(self, path: str) -> list[str]:
        """Remove a topic and every topic below it. Returns the removed paths (empty if none)."""
        segments = split_path(path)
        trail = self._trail(segments)
        if trail is None:
            return []
        removed = [topic for topic, _ in self._subtree(trail[-1], list(segments), include_self=True)]
        del trail[-2].children[segments[-1]]
        self._uncount(trail[:-1], list(segments[:-1]), len(removed))
        return removed

    def remove_selected(self, selector: Selector | str) -> list[str]:
        """Remove each topic a selector selects (not its descendants, unless the selector selects them too)."""
        selected = list(self.select(selector))
        for path in selected:
            self.remove(path)
        return selected

    def count(self, branch: str = "") -> int:
        """The number of topics at or below ``branch`` (the whole tree for ``""``)."""
        node = self._find(split_branch(branch))
        return 0 if node is None else node.count

    def children(self, branch: str = "") -> list[str]:
        """The segment names directly below ``branch``, whether or not they are topics themselves."""
        node = self._find(split_branch(branch))
        return [] if node is None else list(node.children)

    def paths(self, branch: str = "") -> Iterator[str]:
        """Every topic path at or below ``branch``, depth first."""
        segments = split_branch(branch)
        node = self._find(segments)
        if node is None:
            return iter(())
        return (path for path, _ in self._subtree(node, list(segments), include_self=True))

    def closest(self, path: str) -> str | None:
        """The deepest topic that is ``path`` or an ancestor of it, or None. Cost: the depth of ``path``."""
        node, found = self._root, None
        segments = split_branch(path)
        for depth, segment in enumerate(segments, start=1):
            child = node.children.get(segment)
            if child is None:
                break
            node = self._visit(child)
            if node.is_topic:
                found = depth
        return None if found is None else SEPARATOR.join(segments[:found])

    def select(self, selector: Selector | str) -> Iterator[str]:
        """The topic paths a selector selects, found by walking from its prefix. Raises SelectorError."""
        return (path for path, _ in self._select(as_selector(selector)))

    def select_items(self, selector: Selector | str) -> Iterator[tuple[str, V | None]]:
        """Like ``select``, with each topic's current value (what a fetch sends)."""
        return ((path, node.value) for path, node in self._select(as_selector(selector)))

    def _select(self, selector: Selector) -> Iterator[tuple[str, _Node[V]]]:
        if isinstance(selector, SelectorSet):
            seen: set[str] = set()
            for member in selector.members:
                for path, node in self._select(member):
                    if path not in seen:
                        seen.add(path)
                        yield path, node
            return
        segments = selector.prefix.split(SEPARATOR) if selector.prefix else []
        start = self._find(segments)
        if start is None:
            return
        if isinstance(selector, PathSelector):
            yield from self._qualified(start, segments, selector.qualifier)
        elif isinstance(selector, SplitPathSelector):
            yield from self._split(selector, start, segments)
        else:
            yield from self._full(selector, start, segments)

    def _qualified(self, node: _Node[V], segments: list[str], qualifier: Qualifier) -> Iterator[tuple[str, _Node[V]]]:
        if qualifier is Qualifier.MATCH:
            if node.is_topic:
                yield SEPARATOR.join(segments), node
            return
        yield from self._subtree(node, segments, include_self=qualifier is Qualifier.MATCH_AND_DESCENDANTS)

    def _split(self, selector: SplitPathSelector, start: _Node[V], prefix: list[str]) -> Iterator[tuple[str, _Node[V]]]:
        stack = [(start, prefix)]
        while stack:
            node, segments = stack.pop()
            level = len(segments)
            if level == selector.depth:
                yield from self._qualified(node, segments, selector.qualifier)
                continue
            literal = selector.literal_at(level)
            if literal is not None:
                child = node.children.get(literal)
                candidates = [] if child is None else [(literal, self._visit(child))]
            else:
                candidates = [(name, self._visit(child)) for name, child in node.children.items()]
                candidates = [(name, child) for name, child in candidates if selector.segment_matches(level, name)]
            stack.extend((child, [*segments, name]) for name, child in reversed(candidates))

    def _full(self, selector: FullPathSelector, start: _Node[V], prefix: list[str]) -> Iterator[tuple[str, _Node[V]]]:
        for path, node in self._subtree(start, prefix, include_self=True):
            if selector.matches(path):
                yield path, node

    def _subtree(self, top: _Node[V], segments: list[str], include_self: bool) -> Iterator[tuple[str, _Node[V]]]:
        """Topics in ``top``'s subtree (``segments`` is its path), depth first in insertion order."""
        if include_self and top.is_topic:
            yield SEPARATOR.join(segments), top
        stack = [(child, [*segments, name]) for name, child in reversed(top.children.items())]
        while stack:
            node, path = stack.pop()
            self._visit(node)
            if node.is_topic:
                yield SEPARATOR.join(path), node
            stack.extend((child, [*path, name]) for name, child in reversed(node.children.items()))

    def _topic(self, path: str) -> _Node[V]:
        node = self._find(split_path(path))
        if node is None or not node.is_topic:
            raise UnknownTopicError(path)
        return node

    def _find(self, segments: tuple[str, ...] | list[str]) -> _Node[V] | None:
        trail = self._trail(segments)
        return None if trail is None else trail[-1]

    def _trail(self, segments: tuple[str, ...] | list[str]) -> list[_Node[V]] | None:
        """The nodes from the root down to ``segments``, or None if the path is not in the tree."""
        trail = [self._root]
        for segment in segments:
            child = trail[-1].children.get(segment)
            if child is None:
                return None
            trail.append(self._visit(child))
        return trail

    def _uncount(self, trail: list[_Node[V]], segments: list[str], removed: int) -> None:
        """Subtract ``removed`` topics along ``trail`` (root first) and prune the nodes left empty."""
        for node in trail:
            node.count -= removed
        for depth in range(len(trail) - 1, 0, -1):
            if trail[depth].count > 0:
                break  # an ancestor holds at least as many topics as its descendant
            del trail[depth - 1].children[segments[depth - 1]]

    def _visit(self, node: _Node[V]) -> _Node[V]:
        self.nodes_visited += 1
        return node
