"""The subscription index: which subscriptions a topic path reaches, without testing every selector.

Owns the publish side of matching. ``TopicTree.select`` answers "which topics does this selector select" (a
subscribe or a fetch); this module answers the opposite question, asked on every publish and whenever a topic is
created: "which of the subscribed selectors select this path". ``K`` is whatever identifies a subscription to
the caller (its link); the index knows nothing of links, messages or the tree, and never sees topic values.

Shape: a trie, like ``TopicTree``, that holds the selectors instead of the topics. Every topic a selector can
select lies at or below its path prefix (``topics.selectors``), so a selector is filed at its prefix node, and
``matching("a/b/c")`` walks from the root down that path and looks at nothing off it: selectors filed under
other branches cost nothing. Split-path selectors go further down (after nats ``sublist``, whose ``*`` nodes
become regex edges here): each pattern is an edge, a literal one a child by name, a regex one a child by its
pattern text, so ``?a/.*/c`` is filed at ``a`` → ``.*`` → ``c``. Selectors sharing a pattern at a node share
the edge, and the walk tests each regex edge on its way once per path, however many selectors lie behind it.
Each node keeps four buckets:

| bucket  | holds                          | selects the path when                                  |
|---------|--------------------------------|--------------------------------------------------------|
| exact   | ``>p``, ``?p1/…/pn``           | the walk ends at this node (no test)                   |
| below   | ``>p/``, ``?p1/…/pn/``         | the path goes on below this node (no test)             |
| subtree | ``>p//``, ``?p1/…/pn//``       | the walk reaches this node (no test)                   |
| tested  | full-path ``*regex``           | ``selector.matches(path)`` says so                     |

A full-path regex cannot be taken apart by segment, so it sits at its prefix node and is tested against every
path that walks through it. A selector set is filed member by member, each under its own prefix (a set's
common prefix is often the root); members of one set that are tested at the same node are tested as one set,
and the set's key is reported once.

Cost of ``matching(path)``: for each segment, one dictionary look-up and one ``fullmatch`` per regex edge on
each node the walk has reached; plus the buckets of those nodes; plus one ``matches`` per full-path selector on
them. A regex edge can send the walk down several branches at once, but only where selectors were filed.
Regex edges at the root and full-path selectors with a short prefix (``*.*x``, ``*a|b``) are tested for every
path: the fewer, the better. ``examined`` counts the bucket entries on the walks (the candidates) and
``evaluated`` the regex tests (edges and full-path ``matches``), both cumulative, so tests and benchmarks can
check cost without timings.

Decisions: ``add`` with a key already indexed replaces that key's selector; ``remove`` of an unknown key returns
False; nodes left empty by ``remove`` are pruned, so the index holds a node only on the way to some selector.
A subscription to a topic that does not exist yet is indexed like any other (its topic may be created later).
Not thread-safe: the caller owns it from one thread, as it owns the tree.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeAlias, TypeVar

from subgate.topics.paths import SEPARATOR, split_path
from subgate.topics.regex import Regex
from subgate.topics.selectors import PathSelector, Qualifier, Selector, SelectorSet, SplitPathSelector, as_selector

K = TypeVar("K", bound=Hashable)

# How a selector is filed: the edges from the root (True = a regex edge, by pattern text) and the bucket.
_Edge: TypeAlias = tuple[bool, str]
_Place: TypeAlias = tuple[tuple[_Edge, ...], Qualifier | None]  # None: the tested bucket


class _Node(Generic[K]):
    __slots__ = ("below", "children", "exact", "patterns", "subtree", "tested")

    def __init__(self) -> None:
        self.children: dict[str, _Node[K]] = {}
        self.patterns: dict[str, tuple[Regex, _Node[K]]] = {}
        # dicts used as ordered sets: an empty dict is smaller than an empty set, and most buckets stay empty
        self.exact: dict[K, None] = {}
        self.below: dict[K, None] = {}
        self.subtree: dict[K, None] = {}
        self.tested: dict[K, Selector] = {}

    def bucket(self, qualifier: Qualifier) -> dict[K, None]:
        if qualifier is Qualifier.MATCH:
            return self.exact
        return self.below if qualifier is Qualifier.DESCENDANTS else self.subtree

    def size(self) -> int:
        return len(self.exact) + len(self.below) + len(self.subtree) + len(self.tested)

    def is_empty(self) -> bool:
        return not self.children and not self.patterns and self.size() == 0

    def discard(self, key: K) -> None:
        for bucket in (self.exact, self.below, self.subtree, self.tested):
            bucket.pop(key, None)

    def child(self, edge: _Edge) -> _Node[K]:
        is_regex, label = edge
        return self.patterns[label][1] if is_regex else self.children[label]

    def make_child(self, edge: _Edge) -> _Node[K]:
        is_regex, label = edge
        if not is_regex:
            return self.children.setdefault(label, _Node())
        if label not in self.patterns:
            self.patterns[label] = (Regex(label), _Node())  # compiles: the selector compiled it already
        return self.patterns[label][1]

    def drop_child(self, edge: _Edge) -> None:
        is_regex, label = edge
        del (self.patterns if is_regex else self.children)[label]


class SelectorIndex(Generic[K]):
    """Subscribed selectors by key, filed by path prefix so that matching a path walks only its ancestors."""

    def __init__(self) -> None:
        self._root: _Node[K] = _Node()
        self._selectors: dict[K, Selector] = {}
        self.examined = 0
        self.evaluated = 0

    def __len__(self) -> int:
        return len(self._selectors)

    def __contains__(self, key: object) -> bool:
        return key in self._selectors

    def __iter__(self) -> Iterator[K]:
        return iter(self._selectors)

    def selector(self, key: K) -> Selector | None:
        """The selector indexed under ``key``, or None."""
        return self._selectors.get(key)

    def add(self, selector: Selector | str, key: K) -> None:
        """Index ``selector`` under ``key`` (replacing the selector ``key`` had, if any).

        Raises:
            SelectorError: ``selector`` is an expression that does not parse; the index is left unchanged.
        """
        parsed = as_selector(selector)
        self.remove(key)
        self._selectors[key] = parsed
        tested: dict[tuple[_Edge, ...], list[Selector]] = {}
        for member in _members(parsed):
            route, qualifier = _place(member)
            if qualifier is None:
                tested.setdefault(route, []).append(member)
            else:
                self._node(route).bucket(qualifier)[key] = None
        for route, group in tested.items():
            self._node(route).tested[key] = group[0] if len(group) == 1 else SelectorSet(tuple(group))

    def remove(self, key: K) -> bool:
        """Drop the selector indexed under ``key``. Returns False if there was none."""
        selector = self._selectors.pop(key, None)
        if selector is None:
            return False
        for route in {_place(member)[0] for member in _members(selector)}:
            self._unplace(route, key)
        return True

    def matching(self, path: str) -> set[K]:
        """The keys whose selector selects the topic path ``path`` (whether or not that topic exists).

        Raises:
            TopicPathError: ``path`` is not a valid topic path.
        """
        segments = split_path(path)
        found: set[K] = set()
        reached = [self._root]
        self._collect(self._root, path, False, found)  # the root "" is never a topic path itself
        last = len(segments)
        for depth, segment in enumerate(segments, start=1):
            reached = self._step(reached, segment)
            if not reached:
                break  # no selector lies further down this path
            for node in reached:
                self._collect(node, path, depth == last, found)
        return found

    def _step(self, reached: list[_Node[K]], segment: str) -> list[_Node[K]]:
        """The nodes one edge below ``reached`` whose edge accepts ``segment``."""
        following: list[_Node[K]] = []
        for node in reached:
            child = node.children.get(segment)
            if child is not None:
                following.append(child)
            if node.patterns:
                self.evaluated += len(node.patterns)
                following.extend(child for regex, child in node.patterns.values() if regex.fullmatch(segment))
        return following

    def _collect(self, node: _Node[K], path: str, at_path: bool, found: set[K]) -> None:
        found.update(node.exact if at_path else node.below)
        found.update(node.subtree)
        tested = node.tested
        self.examined += node.size()
        if tested:
            self.evaluated += len(tested)
            found.update(key for key, selector in tested.items() if selector.matches(path))

    def _node(self, route: tuple[_Edge, ...]) -> _Node[K]:
        """The node at the end of ``route``, created with the nodes on the way as needed."""
        node = self._root
        for edge in route:
            node = node.make_child(edge)
        return node

    def _unplace(self, route: tuple[_Edge, ...], key: K) -> None:
        """Take ``key`` out of the node at the end of ``route`` and prune the nodes this leaves empty."""
        trail = [self._root]
        for edge in route:
            trail.append(trail[-1].child(edge))  # present: ``add`` filed the key there
        trail[-1].discard(key)
        for depth in range(len(trail) - 1, 0, -1):
            if not trail[depth].is_empty():
                break
            trail[depth - 1].drop_child(route[depth - 1])


def _members(selector: Selector) -> tuple[Selector, ...]:
    """A set's members (already flat), without duplicates; or the selector alone."""
    members = selector.members if isinstance(selector, SelectorSet) else (selector,)
    return tuple(dict.fromkeys(members))


def _place(selector: Selector) -> _Place:
    """Where a (non-set) selector is filed: its route of edges, and its bucket's qualifier (None: tested)."""
    if isinstance(selector, SplitPathSelector):
        route = tuple(
            (False, literal) if (literal := selector.literal_at(index)) is not None else (True, pattern)
            for index, pattern in enumerate(selector.patterns)
        )
        return route, selector.qualifier
    literal_route = tuple((False, segment) for segment in selector.prefix.split(SEPARATOR) if segment)
    return literal_route, selector.qualifier if isinstance(selector, PathSelector) else None
