"""The running server's topic subscriptions: create, resume, replace, delete, restore (reactor thread).

Owns the ``Subscription`` objects behind topic consumers: each is a private ``Queue`` subscribed to a ``Topic``
with a filter (start sequence, no-local, JMS selector). Named subscriptions (durable and shared volatile, keyed
per ``mapping.subscriptions``) are written to the store through the journal writer; durable ones get a journal
cursor so their backlog survives restarts. Which action an attach takes is decided by
``mapping.subscriptions``; this module only carries it out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from subgate.engine import backlog
from subgate.engine.nodes import Message, Queue, Topic, now_ms
from subgate.engine.ports import JournalPort
from subgate.engine.records import StoredMessage, SubscriptionRecord
from subgate.engine.topic_space import SelectorSubscription
from subgate.gateway.paging import Pager, RowFilter, row_filter
from subgate.gateway.replay import Placed
from subgate.gateway.router import JournalCursor, Router
from subgate.mapping.subscriptions import (
    Details,
    Existing,
    Kind,
    SubscriptionKey,
    decide_unsubscribe,
    queue_name,
    removed_on_detach,
)
from subgate.topics import Selector

log = logging.getLogger("subgate.subscriptions")

Matcher = Callable[[bytes], bool]


class Subscription:
    """One subscription: its identity, what it selects, its queue and its consumer links."""

    __slots__ = (
        "id", "key", "kind", "details", "queue", "topic", "consumers", "cursor", "created_ms", "origin_id",
        "selector_sub",
    )  # fmt: skip

    def __init__(
        self,
        sub_id: int,
        key: SubscriptionKey | None,
        kind: Kind,
        details: Details,
        queue: Queue,
        topic: Topic,
        cursor: JournalCursor | None,
        created_ms: int,
        origin_id: str,
    ) -> None:
        self.id = sub_id
        self.key = key
        self.kind = kind
        self.details = details
        self.queue = queue
        self.topic = topic
        self.consumers: list[object] = []
        self.cursor = cursor
        self.created_ms = created_ms
        self.origin_id = origin_id  # container-id whose messages no-local drops
        # On a topic selector: what feeds the queue from the topics it matches; ``topic`` is then a stand-in
        # named by the selector, outside the tree (docs/jms.md, "Durable subscriptions on topic selectors").
        self.selector_sub: SelectorSubscription | None = None

    def existing(self) -> Existing:
        return Existing(self.kind, self.details, len(self.consumers))

    def record(self) -> SubscriptionRecord:
        key = self.key
        assert key is not None
        return SubscriptionRecord(
            id=self.id,
            kind=self.kind.value,
            durable=self.kind.durable,
            client_id=key.client_id,
            name=key.name,
            topic=self.details.topic,
            selector=self.details.selector,
            no_local=self.details.no_local,
            consumers=len(self.consumers),
            cursor_id=self.cursor.cursor_id if self.cursor else None,
            created_ms=self.created_ms,
        )


def subscription_filter(start_seq: int, no_local_id: str | None, matcher: Matcher | None) -> Callable[[Message], bool]:
    """What a subscription takes from its topic: messages published after it was created, not from its own
    ClientID/connection when no-local, and matching its selector."""

    def accepts(message: Message) -> bool:
        if message.seq <= start_seq:
            return False
        if no_local_id is not None:
            if message.origin == no_local_id:
                return False
        return matcher is None or matcher(message.raw)

    return accepts


def _split(topic: Topic | Selector) -> tuple[Selector | None, Topic]:
    """A selector and the stand-in topic named by it (outside the tree), or no selector and the topic."""
    if isinstance(topic, Topic):
        return None, topic
    return topic, Topic(topic.expression, durable=False)


def selected(
    selector: Selector, readable: Callable[[str], bool] | None, base: RowFilter | None
) -> Callable[[StoredMessage], bool]:
    """A selector subscription's journal rows: those of the topics it matches and may read, then ``base``."""

    def accepts(stored: StoredMessage) -> bool:
        address = stored.address or ""
        if not selector.matches(address) or (readable is not None and not readable(address)):
            return False
        return base is None or base(stored)

    return accepts


class Subscriptions:
    """All subscriptions of the running server, named ones by key."""

    def __init__(self, router: Router, journal: JournalPort, pager: Pager, next_id: int = 0) -> None:
        self.router = router
        self._journal = journal
        self._pager = pager
        self.by_key: dict[SubscriptionKey, Subscription] = {}
        self._next_id = next_id

    def get(self, key: SubscriptionKey | None) -> Subscription | None:
        return None if key is None else self.by_key.get(key)

    def create(
        self,
        kind: Kind,
        key: SubscriptionKey | None,
        details: Details,
        topic: Topic | Selector,
        container_id: str,
        matcher: Matcher | None,
        label: str,
        replay: Placed | None = None,
        live: bool = False,
        readable: Callable[[str], bool] | None = None,
    ) -> Subscription:
        """A new subscription on ``topic`` (or on every topic a selector matches, also those created later, that
        ``readable`` lets through); named ones are recorded in the store (durable ones with a cursor).

        With ``replay`` it starts there (``gateway.replay``): the journal's messages of the topic between that
        start and now are read in pages, like a durable queue's backlog, and every later one arrives live; the
        page window takes both in journal order, so the seam has no gap and no duplicate. A durable one's
        position starts there too (its low-water mark, and the later bookmarks a list names as accepted above
        it), so that a restart resumes the replay. A ``live`` one gets journaled messages before their commit
        (``Topic.publish_live``)."""
        router = self.router
        selector, topic = _split(topic)
        sub_id = 0
        if key is not None:
            self._next_id += 1
            sub_id = self._next_id
        name = f"{topic.name}#{sub_id}" if key is not None else f"{topic.name}#{container_id}/{label}"
        queue = Queue(name, durable=kind.durable)
        queue.limit_memory(router.memory_limit)
        router.rules.govern(queue, topic.name)
        start = router.last_seq
        if replay is not None and replay.point.after >= start:
            replay = None  # nothing journaled lies between its start and now: live only
        cursor = None
        if kind.durable:
            low_water = replay.point.after if replay is not None else start
            address = selector.prefix if selector is not None else topic.name
            cursor = router.new_cursor("subscription", f"subscription/{sub_id}", address, low_water)
            for seq in sorted(replay.point.skip) if replay is not None else ():
                cursor.discarded(seq)
            router.track_cursor(cursor, queue)
            queue.cursor = cursor
            topic.durable_subscriptions += 1
        sub = Subscription(sub_id, key, kind, details, queue, topic, cursor, now_ms(), container_id)
        no_local_id = container_id if details.no_local else None
        if cursor is not None or replay is not None:
            # A durable one's skipped bookmarks are acks of its cursor already; a volatile one filters them.
            skip = replay.point.skip if replay is not None and cursor is None else frozenset()
            self._attach_pages(sub, selector, row_filter(no_local_id, matcher, skip), replay is not None, readable)
        self._feed(sub, selector, subscription_filter(start, no_local_id, matcher), live, readable)
        if replay is not None:
            queue.page_from(replay.point.after, start, replay.rows)
        if key is not None:
            self.by_key[key] = sub
            self._journal.submit_subscription(sub.record())
            fields = {"event": "subscription-created", "subscription": key.describe(), "topic": topic.name}
            log.info("created %s on topic %r", key.describe(), topic.name, extra=fields)
        return sub

    def _attach_pages(
        self,
        sub: Subscription,
        selector: Selector | None,
        accepts: RowFilter | None,
        replaying: bool,
        readable: Callable[[str], bool] | None,
    ) -> None:
        """Page ``sub``'s queue from the journal: its topic's rows, or a selector's (every topic under its path
        prefix that it matches and may read)."""
        cursor_id = sub.cursor.cursor_id if sub.cursor is not None else 0
        if selector is None:
            self._pager.attach(sub.queue, cursor_id, sub.topic.name, accepts, replaying=replaying)
            sub.queue.on_paging = sub.topic.queue_paging
            if sub.queue.durable:
                sub.queue.on_backlog = functools.partial(backlog.subscription_changed, sub.topic)
            return
        self._pager.attach(
            sub.queue, cursor_id, selector.prefix, selected(selector, readable, accepts), replaying=replaying,
            prefix=True,
        )  # fmt: skip

    def _feed(
        self,
        sub: Subscription,
        selector: Selector | None,
        accepts: Callable[[Message], bool],
        live: bool,
        readable: Callable[[str], bool] | None,
    ) -> None:
        """Subscribe ``sub``'s queue to its topic, or to every topic its selector matches (``TopicSpace``)."""
        if selector is None:
            sub.topic.subscribe(sub.queue, accepts, live=live)
        else:
            sub.selector_sub = self.router.topics.subscribe(selector, sub.queue, accepts, readable)

    def restore(self, record: SubscriptionRecord, topic: Topic | Selector, matcher: Matcher | None) -> Subscription:
        """A durable subscription read back from the store at start-up (its backlog is pushed by the caller); on a
        topic selector, fed by every topic it matches (no READ_TOPIC filter: that was checked when it was made)."""
        assert record.cursor_id is not None
        selector, topic = _split(topic)
        key = SubscriptionKey("durable", record.client_id, record.name)
        details = Details(record.topic, record.selector, record.no_local)
        queue = Queue(f"{topic.name}#{record.id}", durable=True)
        queue.limit_memory(self.router.memory_limit)
        self.router.rules.govern(queue, topic.name)
        cursor = JournalCursor(record.cursor_id, self._journal)
        queue.cursor = cursor
        self.router.track_cursor(cursor, queue)
        topic.durable_subscriptions += 1
        origin_id = record.client_id or ""
        kind = Kind(record.kind)
        sub = Subscription(record.id, key, kind, details, queue, topic, cursor, record.created_ms, origin_id)
        no_local_id = origin_id if record.no_local and record.client_id is not None else None
        self._feed(sub, selector, subscription_filter(0, no_local_id, matcher), False, None)
        self._attach_pages(sub, selector, row_filter(no_local_id, matcher), False, None)
        self.by_key[key] = sub
        self._next_id = max(self._next_id, record.id)
        return sub

    def replay_selector(
        self,
        queue: Queue,
        selector: Selector,
        readable: Callable[[str], bool] | None,
        no_local_id: str | None,
        matcher: Matcher | None,
        replay: Placed,
        start: int,
    ) -> None:
        """A topic selector consumer's replay: the journal's rows of every topic it selects (and may read), from
        ``replay`` up to ``start``, in journal order, read in pages under the selector's path prefix; later
        messages arrive live through its topics. Nothing to read when the replay starts at ``start``."""
        if replay.point.after >= start:
            return
        accepts = selected(selector, readable, row_filter(no_local_id, matcher, replay.point.skip))
        self._pager.attach(queue, 0, selector.prefix, accepts, replaying=True, prefix=True)
        queue.page_from(replay.point.after, start, replay.rows)

    def add_consumer(self, sub: Subscription, consumer: object) -> None:
        sub.consumers.append(consumer)
        self._consumers_changed(sub)

    def remove_consumer(self, sub: Subscription, consumer: object) -> None:
        if consumer in sub.consumers:
            sub.consumers.remove(consumer)
            self._consumers_changed(sub)

    def consumer_left(self, sub: Subscription, consumer: object, *, closed: bool) -> None:
        """A consumer's link ended: it leaves ``sub``, which goes too when its kind says so (a volatile one's
        last consumer, a durable one closed with no consumer left: ``mapping.subscriptions``)."""
        self.remove_consumer(sub, consumer)
        if removed_on_detach(sub.kind, closed, len(sub.consumers)):
            self.delete(sub)

    def unsubscribe(self, key: SubscriptionKey) -> None:
        """A lookup link named by ``key`` was closed: delete the subscription (mapping doc §3.2).

        Raises:
            Refused: amqp:resource-locked while it has consumers; amqp:not-found when there is none.
        """
        sub = self.get(key)
        decide_unsubscribe(key, sub.existing() if sub is not None else None)
        assert sub is not None
        self.delete(sub)

    def _consumers_changed(self, sub: Subscription) -> None:
        if sub.key is not None and self.by_key.get(sub.key) is sub:
            self._journal.submit_subscription_consumers(sub.id, len(sub.consumers))

    def delete(self, sub: Subscription) -> None:
        """Remove a subscription and everything it holds (unsubscribe, replace, last volatile consumer gone)."""
        topic = sub.topic
        topic.unsubscribe(sub.queue)
        if sub.selector_sub is not None:
            self.router.topics.unsubscribe(sub.selector_sub)
        sub.queue.purge()
        if sub.cursor is not None:
            topic.durable_subscriptions -= 1
            self.router.untrack_cursor(sub.cursor)
            # Deliveries still out (e.g. acknowledged in an open transaction) may settle later: the dropped
            # cursor must not be written to again.
            sub.queue.cursor = None
        if sub.key is not None and self.by_key.get(sub.key) is sub:
            del self.by_key[sub.key]
            self._journal.submit_drop_subscription(sub.id, sub.cursor.cursor_id if sub.cursor else None)
            log.info(
                "removed %s",
                sub.key.describe(),
                extra={"event": "subscription-removed", "subscription": sub.key.describe()},
            )

    def named(self) -> list[Subscription]:
        return list(self.by_key.values())

    def by_queue_name(self, topic: str, name: str) -> Subscription | None:
        """The named subscription of ``topic`` whose queue Artemis would call ``name`` (``mapping.subscriptions.
        queue_name``), if any."""
        for sub in self.by_key.values():
            if sub.key is not None and sub.topic.name == topic and queue_name(sub.key, sub.kind) == name:
                return sub
        return None
