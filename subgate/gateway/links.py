"""Per-link state on the reactor thread: publishers (our receivers) and consumers (our senders).

Owns the hot path of a link: reading a complete transfer, delivering a message with a fresh tag, and matching a
remote disposition back to the message it settles. Routing and outcome rules live elsewhere.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from cproton import (
    PN_ACCEPTED,
    pn_delivery,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_update,
    pn_link_advance,
    pn_link_send,
)
from proton import Condition, Delivery, Link

from subgate.engine import codec
from subgate.engine.browsing import Browser
from subgate.engine.nodes import Message, Queue, Topic
from subgate.mapping.names import bounded


class ConnectionState:
    """What the broker tracks per AMQP connection."""

    __slots__ = ("connection", "container_id", "user", "links", "closed", "peer", "counted")

    def __init__(self, connection: Any, container_id: str, user: str | None, peer: object) -> None:
        self.connection = connection
        self.container_id = container_id
        self.user = user
        self.links: set[Any] = set()  # the link states of gateway.links and gateway.topic_control
        self.closed = False
        self.peer = peer
        self.counted = False


class Inbound:
    """A publisher: the client's sender, our receiver. ``node`` is None on an anonymous-relay link."""

    __slots__ = ("link", "conn", "node", "publisher_id", "pending", "window", "credit", "closed", "owns", "service")

    def __init__(self, link: Link, conn: ConnectionState, node: Queue | Topic | None, window: int) -> None:
        self.link = link
        self.conn = conn
        self.node = node
        self.publisher_id = f"{conn.container_id}/{link.name}"
        self.pending = 0  # deliveries waiting for their journal commit
        self.window = window
        self.credit = 0  # granted and not used yet: kept here, so the hot path never asks proton (pn_link_credit)
        self.closed = False
        self.owns: str | None = None  # a temporary node this link created and whose lifetime it bounds
        self.service = False  # a link to the $management node

    def top_up(self) -> None:
        """Keep credit + pending at the window, in steps of at least half of it; none while the link's queue is
        full under the policy ``block`` (engine.memory: the broker tops it up again when the queue drains)."""
        missing = self.window - self.credit - self.pending
        if missing >= self.window // 2 and not self.closed:
            node = self.node
            if node is not None and node.blocked:
                return
            self.link.flow(missing)
            self.credit += missing

    def resync(self) -> bool:
        """Take proton's count of the credit as the truth again and top up; True if ours had drifted. The
        housekeeping calls it once a second for publishers with nothing in flight, so a miscount can only ever
        slow a publisher down, never stall it."""
        actual = self.link.credit
        drifted = actual != self.credit
        self.credit = actual
        self.top_up()
        return drifted


class Outbound:
    """A consumer: the client's receiver, our sender, attached to one queue (a topic subscription's or a
    queue node)."""

    __slots__ = (
        "link",
        "conn",
        "queue",
        "subscription",
        "owns",
        "fetch",
        "selector_sub",
        "credit",
        "unsettled",
        "presettled",
        "_tag",
        "closed",
        "browser",
        "filter",
    )

    def __init__(self, link: Link, conn: ConnectionState, queue: Queue, subscription: Any = None) -> None:
        self.link = link
        self.conn = conn
        self.queue = queue
        self.subscription = subscription  # gateway.subscriptions.Subscription for topic consumers
        self.owns: str | None = None
        self.fetch: deque[Message] | None = None  # current values still to send on a fetch link
        self.selector_sub: Any = None  # engine.topic_space.SelectorSubscription
        self.credit = 0
        # Keyed by the C delivery (a cffi pointer; a Delivery wrapper's ``_impl`` compares and hashes equal).
        self.unsettled: dict[Any, Message] = {}
        self.presettled = link.snd_settle_mode == Link.SND_SETTLED
        self._tag = 0
        self.closed = False
        self.browser: Browser | None = None  # set on a browser (distribution-mode copy on a queue)
        self.filter: Any = None

    def accepts(self, message: Message) -> bool:
        return self.filter is None or self.filter(message)

    def deliver(self, message: Message, failures: int) -> None:
        link = self.link
        raw = message.raw
        if failures != message.header_count:
            raw = codec.with_delivery_count(raw, codec.scan(raw), failures)
        self._tag += 1
        # Straight to proton-c: no Delivery wrapper (its settlement comes back as a PN_DELIVERY event, which
        # wraps it then). The tag is a decimal counter, compact and unique per link.
        impl = link._impl
        delivery = pn_delivery(impl, str(self._tag))
        pn_link_send(impl, raw)
        pn_link_advance(impl)
        self.credit -= 1
        if self.presettled:
            pn_delivery_settle(delivery)
            self.queue.discard_delivered(message)
        else:
            self.unsettled[delivery] = message

    def deliver_copy(self, message: Message) -> None:
        """Browsing: a pre-settled copy; the message stays on the queue."""
        self._tag += 1
        link = self.link
        delivery = link.delivery(str(self._tag))
        link.send(message.raw)
        link.advance()
        delivery.settle()
        self.credit -= 1

    def settled_message(self, delivery: Delivery) -> Message | None:
        return self.unsettled.pop(delivery._impl, None)


class Lookup:
    """An unsubscribe lookup link (null source, mapping doc §3): names a durable subscription, carries nothing."""

    __slots__ = ("link", "conn", "key", "closed", "owns")

    def __init__(self, link: Link, conn: ConnectionState, key: Any) -> None:
        self.link = link
        self.conn = conn
        self.key = key
        self.closed = False
        self.owns: str | None = None


class CoordinatorLink:
    """A transaction coordinator link (mapping doc §6.1): the client's sender of declare/discharge controls."""

    __slots__ = ("link", "conn", "closed", "owns")

    def __init__(self, link: Link, conn: ConnectionState) -> None:
        self.link = link
        self.conn = conn
        self.closed = False
        self.owns: str | None = None


def accept(delivery: Delivery) -> None:
    """Settle a delivery as accepted (unless the peer settled it already), straight through proton-c: the
    wrapper's ``update`` first copies its Python-side disposition fields into C, which an accept does not need."""
    impl = delivery._impl
    if not pn_delivery_settled(impl):
        pn_delivery_update(impl, PN_ACCEPTED)
    pn_delivery_settle(impl)


def reject(delivery: Delivery, condition: str, description: str) -> None:
    """Settle a delivery as rejected with an AMQP error (the description bounded: it may quote the message)."""
    delivery.local.condition = Condition(condition, bounded(description))
    delivery.update(Delivery.REJECTED)
    delivery.settle()
