"""The running server's topic tree: which topic nodes exist as paths, and selector subscriptions over them.

Owns the link between the pure engine (``topics``: tree, Diffusion selectors, the prefix index) and the topic
nodes of ``engine.nodes``. Every topic node whose name is a valid topic path is in the tree, except temporary
topics (``$temp.…``), which belong to the connection that made them. A selector
subscription is one private queue subscribed to every topic its selector matches, including topics created
later: a new topic asks the index which selectors reach it, so the cost does not grow with the number of
subscriptions whose prefix lies elsewhere. No proton, no store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from subgate.engine.nodes import Message, Queue, Topic
from subgate.mapping.addresses import TOPIC, is_temporary
from subgate.topics import PathSelector, Qualifier, Selector, SelectorIndex, TopicTree, is_valid_path, parse_selector
from subgate.topics.errors import TopicsError

SELECTOR_STARTS = ("#", "?", "*", ">")


def selector_address(address: str) -> Selector | None:
    """The topic selector an address asks for, or None when it names one plain topic (a JMS topic name).

    Addresses starting with ``>``, ``?``, ``*`` or ``#``, or ending in a descendant qualifier (``/``, ``//``)
    are selectors; a bare path without a qualifier is the plain topic it names.

    Raises:
        topics.errors.SelectorError: the address looks like a selector but is not a valid one.
    """
    if not address.startswith(SELECTOR_STARTS) and not address.endswith("/"):
        return None
    selector = parse_selector(address)
    if isinstance(selector, PathSelector) and selector.qualifier is Qualifier.MATCH:
        return None
    return selector


def fetch_selector(address: str) -> Selector:
    """Any address as a selector, plain topic names included (fetch works on both).

    Raises:
        topics.errors.SelectorError: an invalid selector.
    """
    return parse_selector(address)


Readable = Callable[[str], bool]


class TopicWatcher(Protocol):
    """Told of every topic that enters or leaves the tree (the fan-out feeds of ``gateway.fanout_feed``)."""

    def topic_added(self, topic: Topic) -> None: ...

    def topic_removed(self, topic: Topic) -> None: ...


class SelectorSubscription:
    """A private queue fed by every topic a selector matches and ``readable`` lets through (READ_TOPIC)."""

    __slots__ = ("key", "selector", "queue", "accepts", "readable", "topics")

    def __init__(
        self,
        key: int,
        selector: Selector,
        queue: Queue,
        accepts: Callable[[Message], bool],
        readable: Readable | None = None,
    ) -> None:
        self.key = key
        self.selector = selector
        self.queue = queue
        self.accepts = accepts
        self.readable = readable
        self.topics: list[Topic] = []

    def takes(self, topic: Topic) -> bool:
        return self.readable is None or self.readable(topic.name)


class TopicSpace:
    def __init__(self) -> None:
        self.tree: TopicTree[Topic] = TopicTree()
        self.index: SelectorIndex[int] = SelectorIndex()
        self.subscriptions: dict[int, SelectorSubscription] = {}
        self.watchers: list[TopicWatcher] = []
        # Selectors of the fan-out links replicating from or to this server (docs/fanout.md): an address one of
        # them matches is a topic when its attach names no node type.
        self.topic_branches: list[Selector] = []
        self._next = 0

    def added(self, topic: Topic) -> None:
        """A topic node was created: put it in the tree and feed it to the selector subscriptions it matches."""
        if not is_valid_path(topic.name) or is_temporary(topic.name):
            return  # a temporary topic is its connection's alone: no selector, fetch or tree listing reaches it
        self.tree.add(topic.name, topic)
        for key in self.index.matching(topic.name):
            sub = self.subscriptions[key]
            if sub.takes(topic):
                topic.subscribe(sub.queue, sub.accepts)
                sub.topics.append(topic)
        for watcher in self.watchers:
            watcher.topic_added(topic)

    def default_kind(self, address: str, otherwise: str) -> str:
        """The kind of a new node whose attach names none: a topic inside a branch a fan-out link replicates
        (``topic_branches``), else ``otherwise`` (``--default-node-type``)."""
        branches = self.topic_branches
        if branches and any(selector.matches(address) for selector in branches):
            return TOPIC
        return otherwise

    def removed(self, topic: Topic) -> None:
        """A topic node is gone: out of the tree, and no selector subscription is fed by it any more (they stay,
        and get the topic again if it is created anew)."""
        if topic.name in self.tree and self.tree.get(topic.name) is topic:
            self.tree.remove(topic.name)
            for watcher in self.watchers:
                watcher.topic_removed(topic)
        for sub in self.subscriptions.values():
            if topic in sub.topics:
                sub.topics.remove(topic)
                topic.unsubscribe(sub.queue)

    def select(self, selector: Selector) -> list[Topic]:
        """The topics a selector matches now (walking the tree from the selector's prefix)."""
        return [topic for _, topic in self.tree.select_items(selector) if topic is not None]

    def selects_any(self, selector: Selector) -> bool:
        """Whether a selector matches at least one topic now (stops at the first)."""
        return any(topic is not None for _, topic in self.tree.select_items(selector))

    def branch(self, path: str) -> list[Topic]:
        """The topics at and below ``path``."""
        topics = (self.tree.get(p) for p in self.tree.paths(path))
        return [topic for topic in topics if topic is not None]

    def subscribe(
        self, selector: Selector, queue: Queue, accepts: Callable[[Message], bool], readable: Readable | None = None
    ) -> SelectorSubscription:
        self._next += 1
        sub = SelectorSubscription(self._next, selector, queue, accepts, readable)
        self.subscriptions[sub.key] = sub
        self.index.add(selector, sub.key)
        for topic in self.select(selector):
            if sub.takes(topic):
                topic.subscribe(queue, accepts)
                sub.topics.append(topic)
        return sub

    def unsubscribe(self, sub: SelectorSubscription) -> None:
        if self.subscriptions.pop(sub.key, None) is None:
            return
        self.index.remove(sub.key)
        for topic in sub.topics:
            topic.unsubscribe(sub.queue)
        sub.topics.clear()
        sub.queue.purge()


__all__ = ["SelectorSubscription", "TopicSpace", "TopicsError", "fetch_selector", "selector_address"]
