"""The primary's side of fan-out: replication links and the link that carries propagated notifications.

Owns, on the reactor thread, what a primary serves to its secondaries (docs/fanout.md; the primary needs no
configuration):

* ``ReplicateLink``: a secondary's receiver whose source carries the capability ``replicate`` and whose address
  is a topic selector. It gets a snapshot — an ``add`` per matching topic its principal may read (READ_TOPIC),
  with the topic's current value as the body — then ``snapshot-end``, then every ``add``, ``update`` (each
  message published to a replicated topic) and ``remove`` as it happens. Messages are sent pre-settled, as far
  as the secondary's credit goes; the rest waits in ``pending`` (``engine.fanout_queue``: in order up to
  ``--fanout-queue-limit``, then only the latest value per topic). The attach needs SELECT_TOPIC on the
  selector's path prefix.
* ``ReplicationFeeds``: the topic-tree watcher (``engine.topic_space.TopicWatcher``) that tells every open
  ``ReplicateLink`` of topics created and removed, removals of remove-with-session included.
* ``PropagationLink``: a secondary's sender to ``$subgate/fanout/missing-topic``; each transfer is one
  propagated missing-topic notification, decided by ``gateway.missing_topics`` and answered by its settlement.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from proton import Delivery, Link
from proton import Message as ProtonMessage

from subgate.engine.fanout import (
    ADD,
    BATCH,
    BATCH_BYTES,
    BATCH_OPERATIONS,
    OP,
    PATH,
    REMOVE,
    SNAPSHOT_END,
    TIMESTAMP,
    UPDATE,
    encode_batch,
)
from subgate.engine.fanout_queue import ReplicationQueue
from subgate.engine.nodes import Message, Topic
from subgate.engine.topic_space import TopicSpace
from subgate.gateway.links import ConnectionState, LinkState
from subgate.gateway.termini import accept_attach
from subgate.topics import Selector

log = logging.getLogger("subgate.fanout")


def encode(op: str, path: str, value: bytes | None) -> bytes:
    """One replication message (docs/fanout.md, "Wire"): subject and ``op`` = the kind, ``path``, ``ts`` (the
    primary's time in ms), and the value's bytes (a whole AMQP message as the primary holds it) as a data
    section."""
    properties: dict[str, object] = {OP: op, TIMESTAMP: int(time.time() * 1000)}
    if path:
        properties[PATH] = path
    message = ProtonMessage(subject=op, properties=properties)
    if value is not None:
        message.inferred = True
        message.body = value
    return bytes(message.encode())


class ReplicateLink(LinkState):
    """One secondary's replication of one selector (module docstring)."""

    __slots__ = ("selector", "readable", "feeds", "pending", "watched", "sent", "batched", "transfers", "_tag")

    def __init__(
        self,
        link: Link,
        conn: ConnectionState,
        selector: Selector,
        readable: Callable[[str], bool],
        feeds: Feeds,
        limit: int = 100_000,
        batched: bool = False,
    ) -> None:
        super().__init__(link, conn)
        self.selector = selector
        self.readable = readable
        self.feeds = feeds
        self.pending = ReplicationQueue(limit)
        self.watched: dict[str, Topic] = {}
        self.sent = 0  # operations
        self.transfers = 0
        self.batched = batched  # the secondary offered ``replicate-batch``
        self._tag = 0

    def snapshot(self, space: TopicSpace) -> None:
        """Every matching topic with its current value, then ``snapshot-end``."""
        for topic in space.select(self.selector):
            if self.readable(topic.name):
                self._watch(topic)
                self.pending.push(ADD, topic.name, topic.current.raw if topic.current is not None else None)
        self.pending.push(SNAPSHOT_END, "", None)
        log.info(
            "fan-out: replicating %r to %r: snapshot of %d topics",
            self.selector.expression,
            self.conn.container_id,
            len(self.watched),
        )
        self.pump()

    def _watch(self, topic: Topic) -> None:
        self.watched[topic.name] = topic
        topic.feeds.append(self.forward)

    def topic_added(self, topic: Topic) -> None:
        if topic.name not in self.watched and self.selector.matches(topic.name) and self.readable(topic.name):
            self._watch(topic)
            self.pending.push(ADD, topic.name, topic.current.raw if topic.current is not None else None)
            self._queued()

    def topic_removed(self, topic: Topic) -> None:
        if self.watched.get(topic.name) is topic:
            self._unwatch(topic)
            self.pending.push(REMOVE, topic.name, None)
            self._queued()

    def _unwatch(self, topic: Topic) -> None:
        del self.watched[topic.name]
        if self.forward in topic.feeds:
            topic.feeds.remove(self.forward)

    def forward(self, topic: Topic, message: Message) -> None:
        """A message published to a replicated topic (``Topic.publish``)."""
        self.pending.push(UPDATE, topic.name, message.raw)
        self._queued()

    def _queued(self) -> None:
        """An operation was queued: sent now, or (a batching secondary) at the end of the reactor's burst of
        events (``ReplicationFeeds.flush``), so that one transfer carries what the burst produced. A full batch
        (or the queue's ordered limit, when lower) goes at once."""
        if not self.batched or len(self.pending) >= min(BATCH_OPERATIONS, self.pending.limit):
            self.pump()
        else:
            self.feeds.dirty.add(self)

    def pump(self) -> None:
        """Send what is pending as far as the credit goes (pre-settled): one operation per transfer, or batches."""
        link = self.link
        pending = self.pending
        while link.credit > 0 and not self.closed:
            if self.batched:
                batch = self._take_batch()
                if not batch:
                    break
                body = encode(BATCH, "", encode_batch(batch)) if len(batch) > 1 else encode(*batch[0])
                self.sent += len(batch)
            else:
                item = pending.pop()
                if item is None:
                    break
                body = encode(*item)
                self.sent += 1
            self._tag += 1
            delivery = link.delivery(f"r{self._tag}")
            link.send(body)
            link.advance()
            delivery.settle()
            self.transfers += 1

    def _take_batch(self) -> list[tuple[str, str, bytes | None]]:
        batch: list[tuple[str, str, bytes | None]] = []
        size = 0
        pending = self.pending
        while len(batch) < BATCH_OPERATIONS and size < BATCH_BYTES:
            item = pending.pop()
            if item is None:
                break
            batch.append(item)
            size += len(item[1]) + (len(item[2]) if item[2] is not None else 0)
        return batch

    def on_flow(self) -> None:
        self.pump()
        if self.link.drain_mode and not self.pending:
            self.link.drained()

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.closed = True
        self.feeds.dirty.discard(self)
        for topic in list(self.watched.values()):
            self._unwatch(topic)
        self.pending.clear()
        self.feeds.forget(self)
        log.info("fan-out: replication of %r to %r ended", self.selector.expression, self.conn.container_id)


class Feeds(Protocol):
    dirty: set[ReplicateLink]

    def forget(self, link: ReplicateLink) -> None: ...


class ReplicationFeeds:
    """The open replication links of this server, told of every topic created or removed (module docstring)."""

    def __init__(self, space: TopicSpace, limit: int = 100_000) -> None:
        self.space = space
        self.limit = limit  # --fanout-queue-limit: operations held in order per link before conflating
        self.links: list[ReplicateLink] = []
        self.dirty: set[ReplicateLink] = set()  # batching links with operations queued in this burst
        space.watchers.append(self)

    def flush(self) -> bool:
        """The end of a burst of reactor events: send what the batching links queued. True when something was
        (the reactor processes the events that caused before it waits)."""
        if not self.dirty:
            return False
        dirty, self.dirty = self.dirty, set()
        for link in dirty:
            try:
                link.pump()
            except Exception:  # noqa: BLE001 - the event loop calls this: one link must not stop it
                log.exception(
                    "fan-out: replication of %r to %r failed", link.selector.expression, link.conn.container_id
                )
                link.link.close()
        return True

    def status(self) -> list[dict[str, Any]]:
        """Per open replication link (``$management`` type ``fanout``, ``feeds``): the secondary, the selector,
        the operations sent and pending, and how many were folded into a later value (conflation)."""
        return [
            {
                "secondary": link.conn.container_id,
                "selector": link.selector.expression,
                "sent": link.sent,
                "transfers": link.transfers,
                "batched": link.batched,
                "pending": len(link.pending),
                "conflated": link.pending.folded,
                "credit": link.link.credit,
            }
            for link in self.links
        ]

    def open(
        self,
        link: Link,
        conn: ConnectionState,
        selector: Selector,
        readable: Callable[[str], bool],
        batched: bool = False,
    ) -> ReplicateLink:
        """Answer a ``replicate`` attach (its principal may select the selector's prefix) and start the
        snapshot; ``batched``: the secondary offered ``replicate-batch``."""
        replicate = ReplicateLink(link, conn, selector, readable, self, self.limit, batched)
        self.links.append(replicate)
        self.space.topic_branches.append(selector)
        conn.adopt(replicate)
        accept_attach(link)
        replicate.snapshot(self.space)
        return replicate

    def forget(self, link: ReplicateLink) -> None:
        if link in self.links:
            self.links.remove(link)
            self.space.topic_branches.remove(link.selector)

    def topic_added(self, topic: Topic) -> None:
        for link in self.links:
            link.topic_added(topic)

    def topic_removed(self, topic: Topic) -> None:
        for link in self.links:
            link.topic_removed(topic)


class Asked(Protocol):
    """Who decides a propagated notification (``gateway.missing_topics.MissingTopics``)."""

    def propagated(self, link: PropagationLink, delivery: Delivery, raw: bytes) -> None: ...


def open_propagation(link: Link, conn: ConnectionState, asked: Asked) -> PropagationLink:
    """Answer a secondary's attach to ``$subgate/fanout/missing-topic`` and grant its window."""
    propagation = PropagationLink(link, conn, asked)
    conn.adopt(propagation)
    accept_attach(link)
    propagation.top_up()
    return propagation


class PropagationLink(LinkState):
    """A secondary's sender of propagated missing-topic notifications: each transfer is answered by settling it
    (docs/fanout.md, "Notification flow")."""

    __slots__ = ("asked", "window")

    def __init__(self, link: Link, conn: ConnectionState, asked: Asked, window: int = 100) -> None:
        super().__init__(link, conn)
        self.asked = asked
        self.window = window

    def top_up(self) -> None:
        missing = self.window - self.link.credit
        if missing > 0:
            self.link.flow(missing)

    def on_delivery(self, delivery: Delivery) -> None:
        if not delivery.readable or delivery.partial:
            return
        raw = self.link.recv(delivery.pending)
        self.link.advance()
        self.top_up()
        if raw is not None and not delivery.aborted:
            self.asked.propagated(self, delivery, raw)
