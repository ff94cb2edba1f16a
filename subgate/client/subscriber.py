"""Subscribers with AMPS's bookmark semantics (seed 003) over one receiver link of the client's connection.

A subscription starts at a bookmark value (``EPOCH``, ``NOW``, a UTC time, a bookmark, or a list) sent as the
``subgate-bookmark`` source filter; ``name=`` makes it a JMS durable subscription of the client's client id
(link name = the name; source durable, expiry never). Messages are handed to the application by ``receive``.

With a bookmark store, ``receive`` logs each message's bookmark and drops duplicates (already discarded, or out
of order for its publisher: counted in ``dropped``); ``discard(msg)`` records the discard and settles the
delivery ``accepted``. After a reconnect the ``MemorySubscriptionManager`` re-issues every subscription with its
recovery bookmark (the store's; without a store, the last bookmark received). Messages buffered but not yet
received when the connection drops are forgotten: the server sends them again.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cproton import (
    PN_ACCEPTED,
    pn_delivery_link,
    pn_delivery_partial,
    pn_delivery_pending,
    pn_delivery_readable,
    pn_delivery_settle,
    pn_delivery_update,
    pn_link_advance,
    pn_link_recv,
)
from proton import Condition, Delivery, Link, Session
from proton import Message as AmqpMessage

from subgate.client.bookmarks import parse_bookmark
from subgate.client.errors import ClientError
from subgate.client.reactor import Reactor
from subgate.client.stores import BookmarkStore
from subgate.client.termini import set_bookmark_filter, set_capabilities, set_durable

BOOKMARK_ANNOTATION = "x-opt-bookmark"


@dataclass(frozen=True, eq=False)
class Message:
    """A received message: its body, application properties, bookmark, and the publisher id and seq the bookmark
    names (None when the message was not journaled, so has no bookmark)."""

    body: Any
    properties: dict[str, Any]
    bookmark: str | None
    publisher_id: str | None
    seq: int | None
    annotations: dict[str, Any] = field(repr=False)
    key: int = field(repr=False)


def _to_message(raw: AmqpMessage, key: int) -> Message:
    annotations = {str(k): v for k, v in (raw.annotations or {}).items()}
    bookmark = annotations.get(BOOKMARK_ANNOTATION)
    bookmark = str(bookmark) if bookmark is not None else None
    parsed = parse_bookmark(bookmark) if bookmark is not None else None
    return Message(
        body=raw.body,
        properties=dict(raw.properties or {}),
        bookmark=bookmark,
        publisher_id=parsed[0] if parsed else None,
        seq=parsed[1] if parsed else None,
        annotations=annotations,
        key=key,
    )


@dataclass(frozen=True)
class SubscriptionOptions:
    sub_id: str
    start: str | None = None
    store: BookmarkStore | None = None
    name: str | None = None
    capability: str = "topic"
    prefetch: int = 500
    live: bool = False


class Subscriber:
    """One subscription; see the module's rules."""

    def __init__(
        self, reactor: Reactor, address: str, options: SubscriptionOptions, manager: MemorySubscriptionManager
    ) -> None:
        self.address = address
        self._manager = manager
        self.options = options
        self.sub_id = options.sub_id
        self._reactor = reactor
        self._cond = reactor.cond
        self._queue: deque[Message] = deque()
        self._deliveries: dict[int, Any] = {}  # key -> C pointer of the unsettled delivery (current link)
        self._held: dict[str, int] = {}  # bookmark -> key of its newest delivery, for a message the app holds
        self._next_key = 0
        self._taken = 0
        self._link: Link | None = None
        self._error: ClientError | None = None
        self._closed = False
        self.last_bookmark: str | None = None
        self.attaches = 0

    @property
    def dropped(self) -> int:
        """Duplicates dropped by the bookmark store (discarded already, or out of order)."""
        store = self.options.store
        return store.dropped if store is not None else 0

    # -- application threads ----------------------------------------------------------------------------------

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, or None when ``timeout`` seconds pass first (None: wait as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            message = self._take(deadline)
            if message is None:
                return None
            if self._admit(message):
                if message.bookmark is not None:
                    self.last_bookmark = message.bookmark
                return message

    def _take(self, deadline: float | None) -> Message | None:
        with self._cond:
            while not self._queue:
                if self._error is not None:
                    raise self._error
                if self._closed or self._reactor.closing:
                    raise ClientError(f"the subscription {self.sub_id!r} is closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(1.0 if left is None else min(left, 1.0))
            message = self._queue.popleft()
            self._taken += 1
            if self._taken >= max(1, self.options.prefetch // 2):
                self._taken = 0
                self._reactor.call(self._refill)
            return message

    def _admit(self, message: Message) -> bool:
        store, bookmark = self.options.store, message.bookmark
        if store is None or bookmark is None or store.log(self.sub_id, bookmark):
            return True
        with self._cond:
            if store.is_pending(self.sub_id, bookmark):
                self._held[bookmark] = message.key  # the app holds the earlier copy: its discard settles this one
                return False
        self._reactor.call(lambda: self._settle(message.key))
        return False

    def __iter__(self) -> Iterator[Message]:
        """Every message, blocking; ends when the subscription or the client is closed."""
        while True:
            try:
                message = self.receive(None)
            except ClientError:
                if self._closed or self._reactor.closing:
                    return
                raise
            if message is not None:
                yield message

    def discard(self, message: Message) -> None:
        """The application is done with ``message``: record it in the store and settle it accepted."""
        key = message.key
        if message.bookmark is not None:
            if self.options.store is not None:
                self.options.store.discard(self.sub_id, message.bookmark)
            with self._cond:
                key = self._held.pop(message.bookmark, key)
        self._reactor.call(lambda: self._settle(key))

    def close(self) -> None:
        """Stop receiving. A durable subscription is detached, not deleted: it keeps its position."""
        self._end(unsubscribe=False)

    def unsubscribe(self) -> None:
        """Stop receiving and delete a durable subscription on the server (its link closed, not detached).
        Needs the connection: while it is down there is nothing to delete it through."""
        self._end(unsubscribe=True)

    def _end(self, unsubscribe: bool) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._reactor.call(lambda: self._close_now(unsubscribe))

    def resume_value(self) -> str | None:
        """The bookmark value this subscription is issued with now (store recovery, last received, or start)."""
        store = self.options.store
        recovered = store.recovery_bookmark(self.sub_id) if store is not None else None
        return recovered or self.last_bookmark or self.options.start

    # -- the I/O thread -------------------------------------------------------------------------------------

    def attach(self, session: Session) -> None:
        if self._closed or self._error is not None:
            return
        options = self.options
        name = options.name or f"sub-{self.sub_id}-{uuid.uuid4().hex[:8]}"
        link = session.receiver(name)
        link.source.address = self.address
        set_capabilities(link.source, options.capability, *(["live"] if options.live else []))
        value = self.resume_value()
        if value is not None:
            set_bookmark_filter(link.source, value)
        if options.name is not None:
            set_durable(link.source)
        self._reactor.adopt(link, self)
        self._reactor.take_raw_deliveries(link, self)
        link.open()
        self._link = link
        self.attaches += 1

    def detached(self) -> None:
        self._link = None
        self._deliveries.clear()
        self._held.clear()
        self._queue.clear()  # not yet received by the application: the server sends them again
        self._taken = 0

    def _refill(self) -> None:
        link = self._link
        if link is not None:
            want = self.options.prefetch - link.credit - len(self._queue)
            if want > 0:
                link.flow(want)

    def _settle(self, key: int) -> None:
        delivery = self._deliveries.pop(key, None)
        if delivery is not None:
            pn_delivery_update(delivery, PN_ACCEPTED)
            pn_delivery_settle(delivery)

    def _close_now(self, unsubscribe: bool) -> None:
        link, self._link = self._link, None
        if link is not None:
            self._reactor.drop_raw_deliveries(link)
            if self.options.name is not None and not unsubscribe:
                link.detach()
            else:
                link.close()
        self._deliveries.clear()
        if self in self._manager.subscriptions:
            self._manager.remove(self)

    def on_link_opened(self, link: Link) -> None:
        # Credit only once the attach is answered: the server holds a replaying attach while it looks the
        # bookmark up, and credit sent before its answer is not counted.
        if link == self._link:
            link.flow(self.options.prefetch)

    def on_link_flow(self, link: Link) -> None:
        pass

    def raw_flow(self, link: Any) -> None:
        pass

    def on_delivery(self, delivery: Delivery) -> None:
        if delivery.link == self._link:
            self.raw_delivery(delivery._impl)

    def raw_delivery(self, delivery: Any) -> None:
        """A complete incoming message, read without wrapping the delivery (loop.py); the pointer is kept
        until the application discards the message (proton keeps an unsettled delivery alive)."""
        if not pn_delivery_readable(delivery) or pn_delivery_partial(delivery):
            return
        link = pn_delivery_link(delivery)
        _, data = pn_link_recv(link, pn_delivery_pending(delivery))
        pn_link_advance(link)
        raw = AmqpMessage()
        raw.decode(bytes(data))
        self._next_key += 1
        self._deliveries[self._next_key] = delivery
        self._queue.append(_to_message(raw, self._next_key))
        self._cond.notify_all()

    def on_link_closed(self, link: Link, condition: Condition | None) -> None:
        if link != self._link:
            return
        self._reactor.drop_raw_deliveries(link)
        self._deliveries.clear()
        self._link = None
        described = f"{condition.name}: {condition.description}" if condition else "closed by the server"
        self._error = ClientError(f"subscription {self.sub_id!r} to {self.address!r} ended: {described}")
        self._cond.notify_all()


class MemorySubscriptionManager:
    """Remembers the client's subscriptions and re-issues each, at its recovery bookmark, on every new
    connection (AMPS's default ``SubscriptionManager``). Called on the I/O thread, under the client's lock."""

    def __init__(self) -> None:
        self.subscriptions: list[Subscriber] = []

    def add(self, subscriber: Subscriber) -> None:
        self.subscriptions.append(subscriber)

    def remove(self, subscriber: Subscriber) -> None:
        self.subscriptions.remove(subscriber)

    def attach(self, session: Session) -> None:
        for subscriber in list(self.subscriptions):
            subscriber.attach(session)

    def detached(self) -> None:
        for subscriber in self.subscriptions:
            subscriber.detached()

    def on_link_opened(self, link: Link) -> None:
        pass

    def on_link_flow(self, link: Link) -> None:
        pass

    def on_delivery(self, delivery: Delivery) -> None:
        pass

    def on_link_closed(self, link: Link, condition: Condition | None) -> None:
        pass
