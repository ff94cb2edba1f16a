"""The secondary's side of fan-out on the reactor: replicated topics, lost links, propagated notifications.

Owns what a secondary keeps of its primaries (docs/fanout.md), on the reactor thread:

* the **replicas** of each configured link (``MirrorLink.replicas``): topic nodes marked ``replica_of`` (they
  refuse local publishing, creation and removal with ``amqp:not-allowed``) whose values are the primary's. An
  ``add`` creates the topic (non-durable: the primary owns it) or adopts a local one of that path, an
  ``update`` is published into it through the publish pipeline (``Publishing.inject``: local subscribers,
  fetches and selector subscriptions see it, a durable subscription journals it), a ``remove`` removes it;
* the **snapshot** after each (re)connect: the topics it names are added or updated, and at ``snapshot-end`` the
  replicas it did not name are removed (reconciliation);
* a **lost** link: its replicas stay for ``reconnect_timeout`` seconds, then go unless the link is live again;
* **propagation** to primaries (``upstream``): seed 000's conditions 1 to 3 for each link; a notification in
  flight when the session goes, or asked while there is none, is logged as a warning and counts as proceed;
* the figures of ``subgate fanout status`` (``status``).

Events come from the client thread (``gateway.fanout_client``) through a ``Mailbox``; credit goes back to it once
the messages are applied.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from proton.reactor import ApplicationEvent, EventInjector

from subgate.engine import codec
from subgate.engine.fanout import (
    ADD,
    CONNECTING,
    LIVE,
    LOST,
    REMOVE,
    SNAPSHOT,
    SNAPSHOT_END,
    UPDATE,
    FanoutConfig,
    LagWindow,
    propagates,
)
from subgate.engine.nodes import Topic
from subgate.gateway.router import Router
from subgate.gateway.topic_control import Notice, TopicControl
from subgate.mapping.addresses import TOPIC
from subgate.topics import Selector, is_valid_path

log = logging.getLogger("subgate.fanout")


class Mailbox:
    """Tuples from the client thread to the reactor: one injector wake-up per burst."""

    def __init__(self, injector: EventInjector) -> None:
        self._injector = injector
        self._lock = threading.Lock()
        self._items: list[tuple[Any, ...]] = []

    def put(self, item: tuple[Any, ...]) -> None:
        with self._lock:
            self._items.append(item)
            wake = len(self._items) == 1
        if wake:
            self._injector.trigger(ApplicationEvent("fanout_events"))

    def drain(self) -> list[tuple[Any, ...]]:
        with self._lock:
            items, self._items = self._items, []
        return items


class Client(Protocol):
    def post(self, item: tuple[Any, ...]) -> None: ...


class MirrorLink:
    """One fan-out link as the reactor sees it; also the ``Upstream`` its notifications are propagated over."""

    def __init__(self, index: int, config: FanoutConfig, mirror: FanoutMirror) -> None:
        self.index = index
        self.config = config
        self.selector: Selector = config.parsed_selector
        self.label = f"fan-out link to {config.url} ({config.selector})"
        self.mirror = mirror
        self.state = CONNECTING
        self.generation = 0
        self.replicas: set[str] = set()
        # A hash of each replica's value as last applied (the primary's bytes): a snapshot that names the same value
        # publishes nothing again. A hash, not the bytes: 100,000 topics of 1 KiB would keep 100 MB twice.
        self.values: dict[str, int] = {}
        self.seen: set[str] = set()  # named by the snapshot in progress
        self.received = 0
        self.reconnects = 0
        self.connections = 0
        self.last_error: str | None = None
        self.lost_episode = 0  # the generation whose loss the running reconnection timer is for
        self.lag = LagWindow()
        self.asks: dict[int, Notice] = {}

    @property
    def connected(self) -> bool:
        return self.state in (SNAPSHOT, LIVE)

    def ask(self, notice: Notice) -> None:
        self.mirror.ask(self, notice)


class FanoutMirror:
    """The replicas and fan-out links of a secondary (module docstring); with no links configured it does
    nothing."""

    def __init__(
        self,
        configs: tuple[FanoutConfig, ...],
        router: Router,
        control: TopicControl,
        inject: Callable[[Topic, bytes, str], None],
        remove_topics: Callable[[list[Topic]], object],
        schedule: Callable[[float, Callable[[], None]], None],
    ) -> None:
        self.links = [MirrorLink(index, config, self) for index, config in enumerate(configs)]
        self.router = router
        router.topics.topic_branches.extend(link.selector for link in self.links)
        self.control = control
        self.inject = inject
        self.remove_topics = remove_topics
        self.schedule = schedule
        self.client: Client | None = None
        self.mailbox: Mailbox | None = None
        self._ask_ids = itertools.count(1)

    @property
    def configured(self) -> bool:
        return bool(self.links)

    def connect(self, client: Client, mailbox: Mailbox) -> None:
        self.client = client
        self.mailbox = mailbox

    # -- events from the client thread -----------------------------------------------------------------------
    def drain(self) -> None:
        if self.mailbox is None:
            return
        applied: dict[tuple[int, int], int] = {}
        for item in self.mailbox.drain():
            kind = item[0]
            if kind == "message":
                _, index, generation, op, path, value, ts = item
                self._message(self.links[index], generation, op, path, value, ts)
                applied[(index, generation)] = applied.get((index, generation), 0) + 1  # credit: one per transfer
            elif kind == "batch":
                _, index, generation, operations, ts = item
                link = self.links[index]
                for op, path, value in operations:
                    self._message(link, generation, op, path, value, ts)
                applied[(index, generation)] = applied.get((index, generation), 0) + 1
            elif kind == "state":
                _, index, generation, state, error = item
                self._state(self.links[index], generation, state, error)
            elif kind == "answer":
                _, index, ask_id, outcome, description = item
                self._answer(self.links[index], ask_id, outcome, description)
        if self.client is not None:
            for (index, generation), count in applied.items():
                self.client.post(("credit", index, generation, count))

    def _state(self, link: MirrorLink, generation: int, state: str, error: str | None) -> None:
        link.generation = generation
        if state == SNAPSHOT:
            link.connections += 1
            link.reconnects = link.connections - 1
            link.seen = set()
            link.state = SNAPSHOT
        elif state == LOST:
            link.last_error = error
            if link.connected:  # connected until now: one loss, one timer
                link.lost_episode = generation
                log.warning("fan-out: %s lost (%s): replicas kept for %.1f s", link.label, error,
                            link.config.reconnect_timeout)  # fmt: skip
                self.schedule(link.config.reconnect_timeout, lambda: self._expire(link, generation))
                link.state = LOST
        elif state == CONNECTING and link.state != LOST:
            link.state = CONNECTING  # a lost link shows lost while it retries

    def _expire(self, link: MirrorLink, episode: int) -> None:
        """The reconnection timeout of a lost link passed: its replicas go unless it is connected again."""
        if link.state != LOST or link.lost_episode != episode:
            return
        if link.replicas:
            log.warning("fan-out: %s still lost after %.1f s: removing its %d replicated topics", link.label,
                        link.config.reconnect_timeout, len(link.replicas))  # fmt: skip
            self._remove(link, set(link.replicas))

    def _message(self, link: MirrorLink, generation: int, op: Any, path: Any, value: Any, ts: Any) -> None:
        if generation != link.generation:
            return
        link.received += 1
        if isinstance(ts, int):
            link.lag.add(time.monotonic(), time.time() * 1000 - ts)
        if op == SNAPSHOT_END:
            gone = link.replicas - link.seen
            if gone:
                log.info("fan-out: %s: %d replicas no longer on the primary", link.label, len(gone))
                self._remove(link, gone)
            link.state = LIVE
            log.info("fan-out: %s live with %d replicated topics", link.label, len(link.replicas))
            return
        if not isinstance(path, str) or not is_valid_path(path):
            log.warning("fan-out: %s sent %r for an invalid path %r", link.label, op, path)
            return
        if op in (ADD, UPDATE):
            if link.state == SNAPSHOT:
                link.seen.add(path)
            self._apply(link, path, bytes(value) if value is not None else None, op == UPDATE)
        elif op == REMOVE:
            self._remove(link, {path})
        else:
            log.warning("fan-out: %s sent an unknown operation %r", link.label, op)

    def _apply(self, link: MirrorLink, path: str, value: bytes | None, update: bool) -> None:
        topic = self._replica(link, path)
        if topic is None or value is None:
            return
        digest = hash(value)
        if not update and link.values.get(path) == digest:
            return  # a snapshot naming a value this replica has already
        link.values[path] = digest
        try:
            self.inject(topic, value, f"fanout:{link.config.url}")
        except codec.CodecError as exc:
            log.warning("fan-out: %s sent a malformed value for %r: %s", link.label, path, exc)

    def _replica(self, link: MirrorLink, path: str) -> Topic | None:
        node = self.router.node(path)
        if node is not None and not isinstance(node, Topic):
            log.warning("fan-out: %s replicates %r, a queue here: ignored", link.label, path)
            return None
        if node is not None and node.replica_of is not None and path not in link.replicas:
            return None  # another link's replica: the first link to replicate a path keeps it
        if node is None:
            node = self.router.create(path, TOPIC, durable=False)
        assert isinstance(node, Topic)
        node.replica_of = link.config.url
        link.replicas.add(path)
        return node

    def _remove(self, link: MirrorLink, paths: set[str]) -> None:
        topics = []
        for path in sorted(paths):
            link.replicas.discard(path)
            link.values.pop(path, None)
            node = self.router.node(path)
            if isinstance(node, Topic) and node.replica_of is not None:
                topics.append(node)
        if topics:
            self.remove_topics(topics)

    # -- missing-topic propagation ---------------------------------------------------------------------------
    def upstream(self, selector: Selector) -> tuple[MirrorLink, ...]:
        """The links a notification for ``selector`` goes to (seed 000's conditions 1 to 3)."""
        chosen = []
        selected: list[str] | None = None
        for link in self.links:
            if selected is None:  # the topics here the request selects (walked from its prefix, once)
                selected = [topic.name for topic in self.router.topics.select(selector)]
            if not propagates(link.selector, selector, [path for path in selected if path in link.replicas]):
                continue
            if not link.connected or self.client is None:
                log.warning("fan-out: no session to %s: the missing-topic notification for %r is not propagated",
                            link.config.url, selector.expression)  # fmt: skip
                continue
            chosen.append(link)
        return tuple(chosen)

    def ask(self, link: MirrorLink, notice: Notice) -> None:
        ask_id = next(self._ask_ids)
        link.asks[ask_id] = notice
        held = notice.held
        properties = {"selector": held.selector, "session": held.session, "request": held.request,
                      "server": held.origin}  # fmt: skip
        log.info("fan-out: missing topic %r propagated to %s", held.selector, link.config.url)
        assert self.client is not None
        self.client.post(("ask", link.index, ask_id, properties))

    def _answer(self, link: MirrorLink, ask_id: int, outcome: str, description: str) -> None:
        notice = link.asks.pop(ask_id, None)
        if notice is None:
            return
        if outcome == "lost":
            log.warning("fan-out: session to %s lost while the missing-topic notification for %r was in flight "
                        "(%s): proceeding", link.config.url, notice.held.selector, description)  # fmt: skip
        elif outcome == "refused":
            log.warning("fan-out: %s refused the missing-topic notification for %r (%s): proceeding",
                        link.config.url, notice.held.selector, description)  # fmt: skip
        self.control.answer(notice, proceed=outcome != "cancel", why=f"{link.config.url}: {outcome}")

    # -- status ----------------------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        rows = []
        for link in self.links:
            p50, worst = link.lag.figures(now)
            rows.append({
                "primary": link.config.url,
                "selector": link.config.selector,
                "state": link.state,
                "replicated_topics": len(link.replicas),
                "messages_received": link.received,
                "lag_p50_ms": p50,
                "lag_max_ms": worst,
                "reconnects": link.reconnects,
                "last_error": link.last_error,
            })  # fmt: skip
        return rows
