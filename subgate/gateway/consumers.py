"""The five consumer link kinds (our senders): each answers its own flow and end.

Owns what differs between consumers once they are attached (``gateway.attach`` makes them):

* ``QueueConsumer``: a consumer of a queue node; at its end its unsettled messages go back and the queue
  dispatches them to the others.
* ``SubscriptionConsumer``: a topic consumer on its subscription's queue; at its end it leaves the
  subscription, which goes too when its kind says so (``mapping.subscriptions``).
* ``SelectorConsumer``: a consumer of a topic selector's private queue; at its end the selector subscription
  leaves the topic tree.
* ``FetchConsumer``: capability ``fetch``, the current values of the matching topics once, then closed.
* ``BrowserConsumer``: distribution-mode copy on a queue (or a subscription's queue): pre-settled copies as far
  as its credit goes (``engine.browsing``), the messages stay.

The hot path (delivering, settling) is the base class's, ``gateway.links.Outbound``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from proton import Condition, Link

from subgate.engine.browsing import Browser
from subgate.engine.nodes import Message, Queue
from subgate.gateway.links import ConnectionState, LinkState, Outbound
from subgate.mapping.errors import INTERNAL_ERROR

if TYPE_CHECKING:
    from subgate.engine.topic_space import SelectorSubscription, TopicSpace
    from subgate.gateway.subscriptions import Subscription, Subscriptions
    from subgate.gateway.transacting import Transacting

log = logging.getLogger("subgate.consumers")


class Closer(Protocol):
    """Who ends a link from the server's side (``gateway.lifecycle.Lifecycle``)."""

    def close_link(self, link_state: LinkState, condition: Condition | None = None) -> None: ...


class _Dispatching(Outbound):
    """A consumer its queue dispatches to: credit arrived, the queue sends what it can; a drain is answered."""

    __slots__ = ()

    def on_flow(self) -> None:
        link = self.link
        self.credit = self.room()  # the credit, up to the unsettled limit (gateway.links.Outbound)
        self.queue.dispatch()
        if link.drain_mode and link.credit > 0:
            link.drained()
        self.credit = self.room()


class QueueConsumer(_Dispatching):
    """A consumer of a queue node."""

    __slots__ = ()

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        queue = self.queue
        queue.remove_consumer(self)
        self.settle_unsettled(abrupt=abrupt)
        queue.dispatch()


class SubscriptionConsumer(_Dispatching):
    """A topic consumer: one of its subscription's consumers (``gateway.subscriptions``)."""

    __slots__ = ("subscription", "subscriptions")

    def __init__(
        self,
        link: Link,
        conn: ConnectionState,
        subscription: Subscription,
        subscriptions: Subscriptions,
        transacting: Transacting,
    ) -> None:
        super().__init__(link, conn, subscription.queue, transacting)
        self.subscription = subscription
        self.subscriptions = subscriptions

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.queue.remove_consumer(self)
        self.settle_unsettled(abrupt=abrupt)
        self.subscriptions.consumer_left(self.subscription, self, closed=closed)


class SelectorConsumer(_Dispatching):
    """A consumer whose address is a topic selector: its private queue takes every matching topic's messages."""

    __slots__ = ("selector_sub", "topics")

    def __init__(
        self, link: Link, conn: ConnectionState, queue: Queue, topics: TopicSpace, transacting: Transacting
    ) -> None:
        super().__init__(link, conn, queue, transacting)
        self.topics = topics
        self.selector_sub: SelectorSubscription | None = None

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.queue.remove_consumer(self)
        self.settle_unsettled(abrupt=abrupt)
        if self.selector_sub is not None:
            self.topics.unsubscribe(self.selector_sub)


class FetchConsumer(Outbound):
    """Capability ``fetch``: ``values`` (the current value of each matching topic) once, then the link closes."""

    __slots__ = ("values", "closer")

    def __init__(
        self,
        link: Link,
        conn: ConnectionState,
        queue: Queue,
        values: deque[Message],
        closer: Closer,
        transacting: Transacting,
    ) -> None:
        super().__init__(link, conn, queue, transacting)
        self.values = values
        self.closer = closer

    def on_flow(self) -> None:
        self.credit = self.usable_credit()
        values = self.values
        while values and self.credit > 0:
            self.deliver_copy(values.popleft())
        if not values:
            self.closer.close_link(self)


class BrowserConsumer(Outbound):
    """A browser: pre-settled copies of a queue's messages, which stay on it (``engine.browsing``)."""

    __slots__ = ("browser", "closer")

    def __init__(
        self,
        link: Link,
        conn: ConnectionState,
        queue: Queue,
        accepts: Callable[[Message], bool] | None,
        closer: Closer,
        transacting: Transacting,
    ) -> None:
        super().__init__(link, conn, queue, transacting)
        self.filter = accepts
        self.closer = closer
        self.browser = Browser(queue, accepts)
        self.browser.on_rows = self._on_rows

    def _on_rows(self) -> None:
        """A journal page read for it came back (inside the journal completions)."""
        try:
            self.browse()
        except Exception:
            log.exception("internal error while browsing %r", self.queue.name)
            self.closer.close_link(self, Condition(INTERNAL_ERROR, "internal error; see the server log"))

    def on_flow(self) -> None:
        self.credit = self.usable_credit()
        self.browse()

    def browse(self) -> None:
        """Copies as far as the credit goes. A drain is answered only once the walk has nothing more to show:
        while a journal page is being read for it, the answer waits for the page (else Qpid JMS would take the
        early answer for the end of the queue)."""
        browser = self.browser
        if self.closed:
            return
        if browser.failed:
            self.closer.close_link(self, Condition(INTERNAL_ERROR, "browsing failed: the journal could not be read"))
            return
        for message in browser.take(self.credit):
            self.deliver_copy(message)
        link = self.link
        if link.drain_mode and link.credit > 0 and not browser.reading:
            link.drained()
        self.credit = self.usable_credit()

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.browser.close()  # a page read still on its way is dropped when it comes back


def on_bytes(matcher: Callable[[bytes], bool] | None) -> Callable[[Message], bool] | None:
    """A consumer's or browser's filter on messages from a compiled selector on their bytes (None: no selector)."""
    if matcher is None:
        return None
    return lambda message: matcher(message.raw)


def take_early_credit(outbound: Outbound) -> None:
    """Credit the client granted before its attach was answered — while the attach was held for the
    missing-topic handlers or for the journal to place a replay, the flow reached the held state — is taken now:
    the client sends no other flow before it gets a message."""
    if outbound.link.credit > 0 and not outbound.closed:
        outbound.on_flow()
