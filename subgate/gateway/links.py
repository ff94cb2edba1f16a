"""Per-link state on the reactor thread: the base of every link kind, publishers (our receivers), the base of
consumers (our senders), lookups and coordinators.

Owns the hot path of a link: reading a complete transfer, delivering a message with a fresh tag, and matching a
remote disposition back to the message it settles. Routing and outcome rules live elsewhere.

Every link kind derives from ``LinkState`` and answers the broker's three events itself (``on_delivery``,
``on_flow``, ``on_end``), so the broker dispatches without asking what kind a link is. The kinds hold the
collaborator that does their work (the publish pipeline, the transactions, the subscriptions), passed in when
the attach handler (``gateway.attach``) makes them. The five consumer kinds are in ``gateway.consumers``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from cproton import (
    PN_ACCEPTED,
    pn_delivery,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_update,
    pn_link_advance,
    pn_link_send,
)
from proton import Condition, Connection, Delivery, Link

from subgate.engine import backlog, codec
from subgate.engine.codec import AnnotationMemo
from subgate.engine.duplicates import PUBLISHER_SEQ
from subgate.engine.endpoint_limits import CreatedTopics, EndpointLimits, sendable
from subgate.engine.memory import HighWater
from subgate.engine.nodes import Message, Queue, Topic
from subgate.engine.repeats import refused_as
from subgate.engine.transactions import TRANSACTIONAL_STATE
from subgate.mapping.errors import Refused
from subgate.mapping.names import bounded
from subgate.mapping.outcomes import MODIFIED, settle_outcome, settle_unsettled

if TYPE_CHECKING:
    from subgate.gateway.subscriptions import Subscriptions
    from subgate.gateway.transacting import Transacting
    from subgate.mapping.subscriptions import SubscriptionKey

log = logging.getLogger("subgate.links")
Node = Queue | Topic
_OUTCOME_NAMES: dict[Any, str] = {
    Delivery.ACCEPTED: "accepted",
    Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released",
    Delivery.MODIFIED: MODIFIED,
}


class ConnectionState:
    """What the broker tracks per AMQP connection."""

    __slots__ = (
        "connection", "container_id", "user", "links", "closed", "peer", "counted", "id", "opened_ms", "sessions",
        "topics", "limits", "output", "output_limit", "parked",
    )  # fmt: skip

    def __init__(
        self,
        connection: Connection,
        container_id: str,
        user: str | None,
        peer: object,
        topic_exists: Callable[[Topic], bool],
        limits: EndpointLimits,
        output_limit: int = 1 << 62,
    ) -> None:
        self.connection = connection
        self.limits = limits  # what it may hold (engine.endpoint_limits)
        self.container_id = container_id
        self.user = user
        self.links: set[LinkState] = set()  # the link states of gateway.links, .consumers and .topic_control
        self.closed = False
        self.peer = peer
        self.counted = False
        self.id = 0  # numbered by ``lifecycle.Connections.add`` (the operator's handle: ``subgate connections``)
        self.opened_ms = int(time.time() * 1000)
        self.sessions = 0  # open sessions counted against max-sessions-per-connection (gateway.lifecycle)
        # Topics this connection created that may still exist (max-topics-per-connection, engine.endpoint_limits).
        self.topics: CreatedTopics[Topic] = CreatedTopics(topic_exists)
        # Bytes of transfers handed to proton that the socket has not taken (added by ``Outbound.deliver``, set
        # to the truth by ``gateway.channel_io`` after each write); past ``output_limit`` its consumers are
        # ``parked`` (no more messages) until the socket takes half of it: a consumer that stops reading its
        # socket does not make the server buffer for it without bound.
        self.output = 0
        self.output_limit = output_limit
        self.parked: list[Outbound] = []

    def output_taken(self, pending: int) -> None:
        """The socket has taken all but ``pending`` bytes of this connection's output: parked consumers go on
        once that is down to half the limit."""
        self.output = pending
        if self.parked and pending <= self.output_limit // 2:
            parked, self.parked = self.parked, []
            for outbound in parked:
                if not outbound.closed:
                    outbound.on_flow()  # reads the link's credit again and takes messages

    def adopt(self, link_state: LinkState) -> None:
        """``link_state`` is now the state of its proton link (found by ``gateway.loop`` from the link) and one
        of this connection's links."""
        link_state.link._sg = link_state  # type: ignore[attr-defined]  # our attribute on proton's wrapper
        self.links.add(link_state)

    def forget(self, link_state: LinkState) -> None:
        self.links.discard(link_state)


class LinkState:
    """The base of every link kind: its proton link, its connection, whether it ended, and the temporary node
    whose lifetime it bounds. The ``on_*`` methods are the broker's events; by default a kind ignores them."""

    __slots__ = ("link", "conn", "closed", "owns", "__weakref__")  # weakly cached by gateway.loop
    consumer = False  # a consumer (Outbound): gateway.broker's fast path settles its plain accepts itself

    def __init__(self, link: Link, conn: ConnectionState) -> None:
        self.link = link
        self.conn = conn
        self.closed = False
        self.owns: str | None = None

    def on_delivery(self, delivery: Delivery) -> None:
        """A transfer arrived or a disposition changed on this link."""

    def on_flow(self) -> None:
        """The link's credit or drain changed."""

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        """The link ended (``closed``: detach with closed=true; ``abrupt``: its session or connection went)."""

    def withdraw(self) -> None:
        """First step of ending several links at once: stop taking messages (``gateway.lifecycle``)."""

    def uses(self, nodes: Mapping[int, Node]) -> Node | None:
        """The node of ``nodes`` (keyed by the id of the node or of a queue it owns) this link uses, if any."""
        return None

    def on_unblocked(self, node: Queue | Topic | None) -> None:
        """``node`` drained below its low-water mark after withholding credit (engine.memory, engine.backlog); or,
        None, the server's memory did (engine.memory.HighWater)."""

    def on_tick(self) -> None:
        """The housekeeping's periodic pass."""


class Receiving(Protocol):
    """The publish pipeline as a publisher link sees it (``gateway.publish.Publishing``)."""

    def receive(self, inbound: Inbound, delivery: Delivery) -> None: ...

    def manage(self, inbound: Inbound, delivery: Delivery) -> None: ...


class Inbound(LinkState):
    """A publisher: the client's sender, our receiver. ``node`` is None on an anonymous-relay link."""

    __slots__ = (
        "node", "publisher_id", "pending", "window", "credit", "service", "pipeline", "annotations", "gauge",
        "slots", "queued", "active", "withdrawn", "revoked",
    )  # fmt: skip

    def __init__(
        self,
        link: Link,
        conn: ConnectionState,
        node: Queue | Topic | None,
        window: int,
        pipeline: Receiving | None = None,
        gauge: HighWater | None = None,
        *,
        service: bool = False,
    ) -> None:
        super().__init__(link, conn)
        self.pipeline = pipeline
        self.gauge = gauge or HighWater()  # the server's memory mark (engine.memory_mark): credit is reserved on it
        self.slots = 0  # the credit last reserved on the gauge
        self.queued = False  # waiting on the gauge for room (engine.memory_mark.Waiter)
        self.active = False  # a transfer came, or credit was granted, since the last tick
        self.withdrawn = 0  # credit taken back at the last tick, still reserved for what was on the wire
        self.revoked = 0  # of it, transfers that may still come past the credit (until the next tick)
        self.node = node
        self.publisher_id = f"{conn.container_id}/{link.name}"
        self.pending = 0  # deliveries waiting for their journal commit
        self.window = window
        self.credit = 0  # granted and not used yet: kept here, so the hot path never asks proton (pn_link_credit)
        self.service = service  # a link to the $management node: not counted on the gauge
        if not service:
            self.gauge.join()
        self.annotations = AnnotationMemo(PUBLISHER_SEQ)  # its messages' annotation map, decoded once (codec.memo)

    def on_delivery(self, delivery: Delivery) -> None:
        pipeline = self.pipeline
        assert pipeline is not None
        if self.service:
            pipeline.manage(self, delivery)
        else:
            pipeline.receive(self, delivery)

    def uses(self, nodes: Mapping[int, Node]) -> Node | None:
        node = self.node
        return None if node is None else nodes.get(id(node))

    def on_unblocked(self, node: Queue | Topic | None) -> None:
        if node is None or self.node is node:
            self.top_up()

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        """Its unused credit leaves the gauge (what it has in the journal stays held there until answered)."""
        if not self.service:
            self.credit = 0
            self.gauge.leave(self.slots + self.withdrawn)
            self.slots = self.withdrawn = 0

    def on_tick(self) -> None:
        if not self.service:
            self.reclaim()
        if not self.pending and not self.closed and self.resync():
            log.warning("publisher link %r: credit count had drifted; resynchronised", self.link.name)

    def reclaim(self) -> None:
        """Once a tick: while publisher links wait for room on the memory mark, an idle link's credit is taken back
        (a flow with a lower link-credit, as AMQP 1.0 2.6.7 lets a receiver do) and the link waits in line itself.
        Its reservation is kept one more tick for transfers already on the wire, which are taken meanwhile."""
        gauge = self.gauge
        if self.withdrawn:
            gauge.reserved -= self.withdrawn * gauge.unit
            self.withdrawn = self.revoked = 0
            if gauge.waiting and not gauge.blocked:
                gauge.wake()
        credit = self.credit
        if not self.active and credit > 0 and gauge.waiting and not self.closed and not self.queued:
            self.link.flow(-credit)
            self.credit = 0
            self.slots -= credit  # the reservation moves to ``withdrawn`` for one tick
            self.withdrawn = self.revoked = credit
            gauge.wait(self)
        self.active = False

    def top_up(self) -> None:
        """Keep credit + pending at the window, in steps of at least half of it; none while the link's node is
        full under the policy ``block`` (engine.memory, engine.backlog): the broker tops it up again when it
        drains. Except on a link to ``$management``, the credit is reserved on the server's memory mark first
        (engine.memory_mark; its messages in the journal are held bytes there): at most the link's share, in
        steps of at least half of it (or of the window), a grant only as far as the room left, none while the
        server is blocked; a link that gets nothing for want of room waits on the gauge."""
        credit = self.credit
        if credit < 0:
            credit = 0
        if self.service:
            missing = self.window - credit - self.pending
            if missing >= self.window // 2 and not self.closed:
                self.link.flow(missing)
                self.credit += missing
            return
        gauge = self.gauge
        if credit != self.slots:  # credit used (or resynchronised): its reservation follows
            freed = credit < self.slots
            gauge.reserved += (credit - self.slots) * gauge.unit
            self.slots = credit
            if freed and gauge.waiting and not gauge.blocked:
                gauge.wake()
        window, share = self.window, gauge.share
        missing = window - credit - self.pending
        wanted = missing if missing < share - credit else share - credit
        # In steps of at least half the window or half the share, the smaller (not a flow frame per message).
        step = window // 2 if window <= share else share // 2
        if wanted >= step and wanted > 0 and not self.closed:
            node = self.node
            if node is not None and (node.blocked or backlog.withholds(node)):
                return
            granted = gauge.grant(credit, wanted)
            if granted:
                self.link.flow(granted)
                self.credit += granted
                self.slots += granted
                self.active = True  # not idle before it had a tick to use it (reclaim)
                gauge.reserved += granted * gauge.unit
            elif not gauge.blocked:
                gauge.wait(self)

    def resync(self) -> bool:
        """Take proton's count of the credit as the truth again and top up; True if ours had drifted. The
        housekeeping calls it once a second for publishers with nothing in flight, so a miscount can only ever
        slow a publisher down, never stall it."""
        actual = self.link.credit
        drifted = actual != self.credit
        self.credit = actual
        self.top_up()
        return drifted


class Outbound(LinkState):
    """The base of the five consumer kinds (``gateway.consumers``): the client's receiver, our sender, attached
    to one queue (a topic subscription's, a selector's, a queue node, a fetch's or a browsed one). Owns the hot
    path: delivering with a fresh tag and finding the message a disposition settles."""

    __slots__ = ("queue", "transacting", "credit", "unsettled", "presettled", "_tag", "filter", "max_unsettled", "held")
    consumer = True

    def __init__(self, link: Link, conn: ConnectionState, queue: Queue, transacting: Transacting) -> None:
        super().__init__(link, conn)
        self.queue = queue
        self.transacting = transacting
        self.credit = 0
        # Keyed by the C delivery (a cffi pointer; a Delivery wrapper's ``_impl`` compares and hashes equal).
        self.unsettled: dict[Any, Message] = {}
        self.presettled = link.snd_settle_mode == Link.SND_SETTLED
        self._tag = 0
        self.filter: Callable[[Message], bool] | None = None
        # At ``max_unsettled`` deliveries not settled the link is ``held``: ``credit`` (what the queue sees) is 0
        # though the client's credit is not, until a settlement frees room (``resume``; engine.endpoint_limits).
        self.max_unsettled = conn.limits.max_unsettled_per_link
        self.held = False

    def room(self) -> int:
        """What the link may be sent now: the client's credit (0 while parked behind its connection's socket), up
        to what the unsettled limit leaves."""
        credit = self.usable_credit()
        room = sendable(credit, len(self.unsettled), self.max_unsettled)
        self.held = room < credit
        return room

    def resume(self) -> None:
        """A settlement on a held link freed room under the unsettled limit: its queue sends again."""
        self.held = False
        self.credit = self.room()
        if self.credit > 0 and not self.closed:
            self.queue.dispatch()

    def uses(self, nodes: Mapping[int, Node]) -> Node | None:
        return nodes.get(id(self.queue))

    def withdraw(self) -> None:
        self.queue.remove_consumer(self)

    def on_delivery(self, delivery: Delivery) -> None:
        """The consumer settled a message other than with a plain ``accepted`` (that one is settled on
        ``gateway.broker``'s fast path, the one path for it): released, rejected, modified, or an outcome
        under a transaction."""
        remote = delivery.remote_state
        if not remote and not delivery.settled:
            return
        self._settle(delivery, remote)
        if self.held:
            self.resume()

    def _settle(self, delivery: Delivery, remote: Any) -> None:
        message = self.unsettled.pop(delivery._impl, None)
        if message is None:
            delivery.settle()
            return
        if remote == TRANSACTIONAL_STATE:
            self.transacting.enlist_ack(self, delivery, message)
            return
        outcome = _OUTCOME_NAMES.get(remote)
        if outcome == MODIFIED:
            remote_state = delivery.remote
            settlement = settle_outcome(
                outcome, failed=bool(remote_state.failed), undeliverable_here=bool(remote_state.undeliverable)
            )
        else:
            settlement = settle_outcome(outcome)
        delivery.settle()
        self.queue.settle(message, settlement, self)

    def settle_unsettled(self, *, abrupt: bool) -> None:
        """The link ended: what the consumer had not settled goes back to (or leaves) its queue."""
        settlement = settle_unsettled(abrupt)
        queue = self.queue
        for message in sorted(self.unsettled.values(), key=lambda m: m.seq):
            queue.settle(message, settlement, None)
        self.unsettled.clear()

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
        conn = self.conn
        conn.output += len(raw)
        if conn.output > conn.output_limit:
            self.park()
        if self.presettled:
            pn_delivery_settle(delivery)
            self.queue.discard_delivered(message)
        else:
            unsettled = self.unsettled
            unsettled[delivery] = message
            if len(unsettled) >= self.max_unsettled:
                self.credit = 0  # held (max-unsettled-per-link): the client's credit waits for settlements
                self.held = True

    def deliver_copy(self, message: Message) -> None:
        """Browsing: a pre-settled copy; the message stays on the queue."""
        self._tag += 1
        link = self.link
        delivery = link.delivery(str(self._tag))
        link.send(message.raw)
        link.advance()
        delivery.settle()
        self.credit -= 1
        conn = self.conn
        conn.output += len(message.raw)
        if conn.output > conn.output_limit:
            self.park()

    def usable_credit(self) -> int:
        """The link's credit, or 0 while it is parked behind its connection's socket (``park``)."""
        parked = self.conn.parked
        return 0 if parked and self in parked else self.link.credit

    def park(self) -> None:
        """Its connection's socket is behind (ConnectionState.output): no more messages until it catches up."""
        self.credit = 0
        if self not in self.conn.parked:
            self.conn.parked.append(self)


class Lookup(LinkState):
    """An unsubscribe lookup link (null source, mapping doc §3): names a durable subscription, carries nothing;
    closing it unsubscribes."""

    __slots__ = ("key", "subscriptions")

    def __init__(self, link: Link, conn: ConnectionState, key: SubscriptionKey, subscriptions: Subscriptions) -> None:
        super().__init__(link, conn)
        self.key = key
        self.subscriptions = subscriptions

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        if not closed:
            return
        try:
            self.subscriptions.unsubscribe(self.key)
        except Refused as refusal:
            log.info("unsubscribe refused: %s", refusal.description, extra=refused_as("unsubscribe-refused"))
            self.link.condition = Condition(refusal.condition, refusal.description)


class CoordinatorLink(LinkState):
    """A transaction coordinator link (mapping doc §6.1): the client's sender of declare/discharge controls."""

    __slots__ = ("transacting",)

    def __init__(self, link: Link, conn: ConnectionState, transacting: Transacting) -> None:
        super().__init__(link, conn)
        self.transacting = transacting

    def on_delivery(self, delivery: Delivery) -> None:
        self.transacting.control(self, delivery)

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.transacting.coordinator_ended(self)


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
