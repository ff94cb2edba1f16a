"""The broker's proton handler: connection, session, link and delivery events, kept thin.

Each ``on_*`` method reads the proton objects into plain values, asks a rule (``mapping``) or the node engine
(``gateway.nodes`` through ``gateway.router``), and writes the answer back. This is a flat handler set directly
on the container (no ``MessagingHandler`` stack): one Python call per event. Journal completions arrive as the
``journal_committed`` application event from the writer thread.

Refusals: a ``Refused`` from a rule becomes an AMQP error on the link, delivery or connection; anything else
that escapes a handler is a bug, logged, and answered with ``amqp:internal-error`` on the object it concerns.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from cproton import PN_ACCEPTED, pn_delivery_remote_state, pn_delivery_settle
from proton import Condition, Delivery, Endpoint, Link, symbol
from proton.reactor import Container

from gateway import codec, management
from gateway.io import connection_channel
from gateway.links import ConnectionState, CoordinatorLink, Inbound, Lookup, Outbound, accept, reject
from gateway.nodes import Message, Queue, Topic, now_ms
from gateway.router import Router
from gateway.selection import compile_selector
from gateway.settings import Settings
from gateway.subscriptions import Subscriptions, subscription_filter
from gateway.termini import (
    TerminusRequest,
    accept_attach,
    accept_consumer,
    answer_lookup,
    read_terminus,
    refuse_attach,
)
from gateway.topic_space import TopicsError, fetch_selector, selector_address
from gateway.transacting import Transacting
from gateway.transactions import TRANSACTIONAL_STATE
from mapping.addresses import QUEUE, dynamic_kind, kind_from_capabilities, kind_from_jms_dest, temporary_address
from mapping.errors import (
    INTERNAL_ERROR,
    INVALID_FIELD,
    MESSAGE_SIZE_EXCEEDED,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    Refused,
)
from mapping.filters import FilterRequest, read_filters
from mapping.outcomes import MODIFIED, settle_outcome, settle_unsettled
from mapping.selectors import SelectorError
from mapping.subscriptions import (
    Action,
    Details,
    SubscribeRequest,
    decide_lookup,
    decide_subscribe,
    decide_unsubscribe,
    key_for,
    lookup_key,
    lookup_source_capabilities,
    removed_on_detach,
)

log = logging.getLogger("subgate.broker")
RESOURCE_DELETED = "amqp:resource-deleted"

VERSION = "0.1.0"
OFFERED_CAPABILITIES = ["sole-connection-for-container", "DELAYED_DELIVERY", "SHARED-SUBS", "ANONYMOUS-RELAY"]
SOLE_CONNECTION = "sole-connection-for-container"
DECODE_ERROR = "amqp:decode-error"


_ACCEPTED = settle_outcome("accepted")
_OUTCOME_NAMES = {
    Delivery.ACCEPTED: "accepted",
    Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released",
    Delivery.MODIFIED: MODIFIED,
}


def guarded(method: Callable[[Broker, Any], None]) -> Callable[[Broker, Any], None]:
    """Event handlers never let an exception out: a bug is logged and the endpoint it concerns is closed with
    ``amqp:internal-error``, while the server keeps serving every other connection."""

    def handler(self: Broker, event: Any) -> None:
        try:
            method(self, event)
        except Exception:
            log.exception("internal error in %s", method.__name__)
            _close_after_bug(event)

    handler.__name__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


def _close_after_bug(event: Any) -> None:
    try:
        endpoint = event.link or event.session or event.connection
        if endpoint is not None and not endpoint.state & Endpoint.LOCAL_CLOSED:
            endpoint.condition = Condition(INTERNAL_ERROR, "internal error; see the server log")
            endpoint.close()
    except Exception:
        log.exception("could not close the endpoint after an internal error")


class _Timer:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback

    @guarded
    def on_timer_task(self, event: Any) -> None:
        self.callback()


def _topic_selector(parse: Callable[[str], Any], address: str) -> Any:
    """``parse`` (selector_address or fetch_selector) with an invalid selector refused as invalid-field."""
    try:
        return parse(address)
    except TopicsError as exc:
        raise Refused(INVALID_FIELD, f"invalid topic selector: {exc}") from None


def _compile(selector: str | None) -> Callable[[bytes], bool] | None:
    try:
        return compile_selector(selector)
    except SelectorError as exc:
        raise Refused(INVALID_FIELD, f"invalid JMS selector {selector!r}: {exc}") from None


class Broker:
    """The container's handler (see the module docstring)."""

    def __init__(
        self, settings: Settings, router: Router, container: Container, subscriptions: Subscriptions | None = None
    ) -> None:
        self.settings = settings
        self.router = router
        self.subscriptions = subscriptions or Subscriptions(router)
        self.transacting = Transacting(router, self._route)
        self.container = container
        self.connections: set[ConnectionState] = set()
        self._containers: dict[str, int] = {}
        self._scheduled: dict[str, int] = {}
        self.stopping = False
        self.published = 0
        self.on_stopped: Callable[[], None] | None = None

    # -- timers ----------------------------------------------------------------------------------------------
    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        self.container.schedule(max(0.0, delay), _Timer(callback))

    def start_housekeeping(self) -> None:
        self.schedule(self.settings.expiry_sweep_interval, self._housekeeping)

    def _housekeeping(self) -> None:
        now = now_ms()
        for node in list(self.router.nodes.values()):
            queues = node.subscriptions if isinstance(node, Topic) else [node]
            for queue in queues:
                queue.expire_due(now)
        for state in self.connections:
            for link_state in state.links:
                if type(link_state) is Inbound and not link_state.pending and not link_state.closed:
                    if link_state.resync():
                        log.warning("publisher link %r: credit count had drifted; resynchronised", link_state.link.name)
        for cursor, queue in self.router.tracked.values():
            if cursor.acks_since_low_water:
                self.router.writer.submit_low_water(cursor.cursor_id, self.router.safe_low_water(queue))
                cursor.acks_since_low_water = 0
        if not self.stopping:
            self.schedule(self.settings.expiry_sweep_interval, self._housekeeping)

    def watch_schedule(self, queue: Queue) -> None:
        def on_schedule(at_ms: int) -> None:
            current = self._scheduled.get(queue.name)
            if current is not None and current <= at_ms:
                return
            self._scheduled[queue.name] = at_ms
            self.schedule((at_ms - now_ms()) / 1000.0, release)

        def release() -> None:
            self._scheduled.pop(queue.name, None)
            following = queue.release_scheduled()
            if following is not None:
                on_schedule(following)

        queue.on_schedule = on_schedule
        due = queue.next_due()
        if due is not None:  # messages held before the queue was watched (recovered at start-up)
            on_schedule(due)

    # -- connections -----------------------------------------------------------------------------------------
    @guarded
    def on_connection_remote_open(self, event: Any) -> None:
        connection = event.connection
        channel = connection_channel(connection)
        container_id = connection.remote_container or ""
        state = ConnectionState(
            connection, container_id, channel.user if channel else None, channel.peer if channel else None
        )
        connection._sg = state
        connection.container = self.settings.name
        desired = {str(c) for c in (connection.remote_desired_capabilities or ())}
        if SOLE_CONNECTION in desired and self._containers.get(container_id, 0) > 0:
            log.info("refusing connection: container-id %r already connected", container_id)
            connection.properties = {symbol("amqp:connection-establishment-failed"): True}
            connection.open()
            connection.condition = Condition(
                INVALID_FIELD,
                f"ClientID {container_id} already in use",
                {symbol("invalid-field"): symbol("container-id")},
            )
            connection.close()
            state.closed = True
            return
        if self.stopping:
            connection.open()
            connection.condition = Condition("amqp:connection:forced", "server shutting down")
            connection.close()
            state.closed = True
            return
        self._containers[container_id] = self._containers.get(container_id, 0) + 1
        state.counted = True
        self.connections.add(state)
        connection.offered_capabilities = [symbol(c) for c in OFFERED_CAPABILITIES]
        connection.properties = {symbol("product"): "subgate", symbol("version"): VERSION}
        connection.open()

    @guarded
    def on_connection_remote_close(self, event: Any) -> None:
        connection = event.connection
        self._end_connection(connection)
        if not connection.state & Endpoint.LOCAL_CLOSED:
            connection.close()

    @guarded
    def on_transport_tail_closed(self, event: Any) -> None:
        connection = event.connection
        if connection is not None:
            self._end_connection(connection)

    @guarded
    def on_transport_closed(self, event: Any) -> None:
        connection = event.connection
        if connection is not None:
            self._end_connection(connection)

    def _end_connection(self, connection: Any) -> None:
        state: ConnectionState | None = getattr(connection, "_sg", None)
        if state is None or state.closed:
            return
        state.closed = True
        self.connections.discard(state)
        if state.counted:
            remaining = self._containers.get(state.container_id, 1) - 1
            if remaining:
                self._containers[state.container_id] = remaining
            else:
                self._containers.pop(state.container_id, None)
        self._end_links(list(state.links), abrupt=True)
        state.links.clear()

    # -- sessions --------------------------------------------------------------------------------------------
    @guarded
    def on_session_remote_open(self, event: Any) -> None:
        session = event.session
        session.incoming_capacity = 64 * 1024 * 1024
        session.open()

    @guarded
    def on_session_remote_close(self, event: Any) -> None:
        session = event.session
        state: ConnectionState | None = getattr(session.connection, "_sg", None)
        if state is not None:
            ending = [ls for ls in state.links if ls.link.session == session]
            self._end_links(ending, abrupt=True)
            state.links.difference_update(ending)
        if not session.state & Endpoint.LOCAL_CLOSED:
            session.close()

    def _end_links(self, ending: list[Any], *, abrupt: bool) -> None:
        """End several links at once (session end, connection loss): their consumers leave their queues first,
        so a message returned by one of them (or by a rolled-back transaction) is not handed to another link
        that is about to end too, and counted twice."""
        for link_state in ending:
            if isinstance(link_state, Outbound):
                link_state.queue.remove_consumer(link_state)
        for link_state in ending:
            self._end_link(link_state, abrupt=abrupt, closed=False)

    # -- links -----------------------------------------------------------------------------------------------
    @guarded
    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        state: ConnectionState | None = getattr(link.connection, "_sg", None)
        if state is None or state.closed:
            return
        try:
            if link.is_receiver:
                self._open_publisher(link, state)
            else:
                self._open_consumer(link, state)
        except Refused as refusal:
            log.info("refused attach %r from %s: %s", link.name, state.container_id, refusal.description)
            refuse_attach(link, refusal.condition, refusal.description)
        except Exception:
            log.exception("attach %r failed", link.name)
            refuse_attach(link, INTERNAL_ERROR, "internal error while attaching")

    def _open_publisher(self, link: Link, state: ConnectionState) -> None:
        target = read_terminus(link.remote_target)
        if target.coordinator:
            coordinator = CoordinatorLink(link, state)
            link._sg = coordinator
            state.links.add(coordinator)
            accept_attach(link)
            self.transacting.open_coordinator(coordinator)
            return
        node = None
        service = target.address == management.ADDRESS
        if target.dynamic:
            node = self._create_temporary(target)
        elif target.present and target.address and not service:
            decision = self.router.decide(target.address, kind_from_capabilities(target.capabilities))
            node = self.router.node_for(decision)
            self._watch_node(node)
        inbound = Inbound(link, state, node, self.settings.credit_window)
        inbound.service = service
        if target.dynamic and node is not None:
            inbound.owns = node.name
        link._sg = inbound
        state.links.add(inbound)
        link.max_message_size = self.settings.max_message_size
        accept_attach(link, node.name if target.dynamic and node is not None else None)
        inbound.top_up()  # the whole window

    def _open_consumer(self, link: Link, state: ConnectionState) -> None:
        source = read_terminus(link.remote_source)
        if not source.present:
            self._open_lookup(link, state)
            return
        filters = read_filters(source.filters)
        if not source.dynamic and source.address and kind_from_capabilities(source.capabilities) != QUEUE:
            if "fetch" in source.capabilities:
                self._open_fetch(link, state, source.address)
                return
            selector = _topic_selector(selector_address, source.address)
            if selector is not None:
                self._open_selector_consumer(link, state, source, selector, filters)
                return
        if source.dynamic:
            node = self._create_temporary(source)
        elif not source.address:
            raise Refused(INVALID_FIELD, "a source address is required")
        else:
            node = self.router.node_for(self.router.decide(source.address, kind_from_capabilities(source.capabilities)))
            self._watch_node(node)
        matcher = _compile(filters.selector)
        if isinstance(node, Topic):
            outbound = self._subscribe(link, state, source, node, filters, matcher)
            no_local = filters.no_local
        else:
            outbound = Outbound(link, state, node)
            if matcher is not None:
                outbound.filter = lambda message: matcher(message.raw)
            outbound.browse = source.distribution_mode == 1  # copy on a queue means browse (mapping §2.2)
            if not outbound.browse:
                node.add_consumer(outbound)
            no_local = False  # no-local applies to topics only
        if source.dynamic:
            outbound.owns = node.name
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, node.name if source.dynamic else None, filters.selector, no_local)

    def _subscribe(
        self,
        link: Link,
        state: ConnectionState,
        source: TerminusRequest,
        topic: Topic,
        filters: FilterRequest,
        matcher: Callable[[bytes], bool] | None,
    ) -> Outbound:
        """A topic consumer: create, resume or replace its subscription (mapping.subscriptions decides)."""
        subs = self.subscriptions
        details = Details(topic.name, filters.selector, filters.no_local)
        request = SubscribeRequest(link.name, state.container_id, source.durable >= 1, source.capabilities, details)
        current = subs.get(key_for(request))
        decision = decide_subscribe(request, current.existing() if current is not None else None)
        if decision.action is Action.ATTACH and current is not None:
            sub = current
        else:
            if decision.action is Action.REPLACE and current is not None:
                log.info("replacing %r: topic, selector or no-local changed", current.key)
                subs.delete(current)
            sub = subs.create(decision.kind, decision.key, details, topic, state.container_id, matcher, link.name)
            self.watch_schedule(sub.queue)
        outbound = Outbound(link, state, sub.queue, sub)
        subs.add_consumer(sub, outbound)
        sub.queue.add_consumer(outbound)
        return outbound

    def _open_selector_consumer(
        self, link: Link, state: ConnectionState, source: TerminusRequest, selector: Any, filters: FilterRequest
    ) -> None:
        """A consumer whose address is a topic selector: every matching topic, also those created later."""
        if source.durable >= 1:
            raise Refused(NOT_IMPLEMENTED, "durable subscriptions to a topic selector are not supported")
        matcher = _compile(filters.selector)
        no_local_id = state.container_id if filters.no_local else None
        queue = Queue(f"{selector.expression}#{state.container_id}/{link.name}", durable=False)
        self.watch_schedule(queue)
        accepts = subscription_filter(self.router.last_seq, no_local_id, matcher)
        outbound = Outbound(link, state, queue)
        outbound.selector_sub = self.router.topics.subscribe(selector, queue, accepts)
        queue.add_consumer(outbound)
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, None, filters.selector, filters.no_local)

    def _open_fetch(self, link: Link, state: ConnectionState, address: str) -> None:
        """Capability ``fetch``: the current value of each matching topic once, then the link is closed."""
        selector = _topic_selector(fetch_selector, address)
        outbound = Outbound(link, state, Queue(f"fetch#{state.container_id}/{link.name}", durable=False))
        outbound.fetch = deque(t.current for t in self.router.topics.select(selector) if t.current is not None)
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, None, None, False)

    def _send_fetched(self, out: Outbound) -> None:
        fetch = out.fetch
        assert fetch is not None
        while fetch and out.credit > 0:
            out.deliver_copy(fetch.popleft())
        if not fetch:
            self._close_link(out)

    def _open_lookup(self, link: Link, state: ConnectionState) -> None:
        """An unsubscribe lookup (null source): answer with the subscription's source, or not-found (§3.2)."""
        key = lookup_key(link.name, state.container_id)
        sub = self.subscriptions.get(key)
        decide_lookup(key, sub.existing() if sub is not None else None)
        assert sub is not None
        lookup = Lookup(link, state, key)
        link._sg = lookup
        state.links.add(lookup)
        details = sub.details
        capabilities = lookup_source_capabilities(key, sub.kind)
        answer_lookup(link, details.topic, capabilities, details.selector, details.no_local)

    def _unsubscribe(self, lookup: Lookup) -> None:
        """The lookup link is closed: delete the subscription, or answer the close with resource-locked."""
        sub = self.subscriptions.get(lookup.key)
        try:
            decide_unsubscribe(lookup.key, sub.existing() if sub is not None else None)
        except Refused as refusal:
            log.info("unsubscribe refused: %s", refusal.description)
            lookup.link.condition = Condition(refusal.condition, refusal.description)
            return
        assert sub is not None
        self.subscriptions.delete(sub)

    def _create_temporary(self, terminus: TerminusRequest) -> Queue | Topic:
        """A dynamic node (temporary queue or topic, mapping §5.3); it lives as long as the link that made it."""
        kind = dynamic_kind(terminus.capabilities)
        node = self.router.create(temporary_address(kind, uuid.uuid4().hex), kind, durable=False)
        self._watch_node(node)
        return node

    def _delete_temporary(self, name: str) -> None:
        node = self.router.nodes.pop(name, None)
        if node is None:
            return
        if isinstance(node, Topic):
            self.router.topics.removed(node)
        log.info("deleting temporary %s %r", node.kind, name)
        queues = {id(node): node} if isinstance(node, Queue) else {id(q): q for q in node.subscriptions}
        for state in list(self.connections):
            for link_state in list(state.links):
                uses = (isinstance(link_state, Outbound) and id(link_state.queue) in queues) or (
                    isinstance(link_state, Inbound) and link_state.node is node
                )
                if uses and not link_state.closed:
                    self._close_link(
                        link_state, Condition(RESOURCE_DELETED, f"temporary destination {name!r} was deleted")
                    )
        for queue in queues.values():
            queue.purge()

    def _close_link(
        self, link_state: Inbound | Outbound | Lookup | CoordinatorLink, condition: Condition | None = None
    ) -> None:
        """The server ends a link (detach closed=true, with ``condition`` when given); the peer's answering
        detach then only frees it (``_link_ended``)."""
        self._end_link(link_state, abrupt=False, closed=True)
        link_state.conn.links.discard(link_state)
        link = link_state.link
        if not link.state & Endpoint.LOCAL_CLOSED:
            if condition is not None:
                link.condition = condition
            link.close()

    def _watch_node(self, node: Queue | Topic) -> None:
        if isinstance(node, Queue) and node.on_schedule is None:
            self.watch_schedule(node)

    @guarded
    def on_link_remote_close(self, event: Any) -> None:
        self._link_ended(event.link, closed=True)

    @guarded
    def on_link_remote_detach(self, event: Any) -> None:
        self._link_ended(event.link, closed=False)

    def _link_ended(self, link: Link, *, closed: bool) -> None:
        """The peer detached (closed=False) or closed a link: end our side the same way."""
        link_state = getattr(link, "_sg", None)
        if link_state is not None:
            self._end_link(link_state, abrupt=False, closed=closed)
            link_state.conn.links.discard(link_state)
        if not link.state & Endpoint.LOCAL_CLOSED:
            if closed:
                link.close()
            else:
                link.detach()
        # Free it: a detached link keeps its name in the session, and Qpid JMS re-attaches a durable
        # subscription under the same name on the same session (proton would refuse "link name already attached").
        link.free()

    def _end_link(
        self, link_state: Inbound | Outbound | Lookup | CoordinatorLink, *, abrupt: bool, closed: bool
    ) -> None:
        if link_state.closed:
            return
        link_state.closed = True
        owns = link_state.owns
        if isinstance(link_state, Lookup):
            if closed:
                self._unsubscribe(link_state)
        elif isinstance(link_state, CoordinatorLink):
            self.transacting.coordinator_ended(link_state)
        elif isinstance(link_state, Outbound):
            self._end_consumer(link_state, abrupt=abrupt, closed=closed)
        if owns is not None:
            self._delete_temporary(owns)

    def _end_consumer(self, out: Outbound, *, abrupt: bool, closed: bool) -> None:
        queue = out.queue
        queue.remove_consumer(out)
        settlement = settle_unsettled(abrupt)
        for message in sorted(out.unsettled.values(), key=lambda m: m.seq):
            queue.settle(message, settlement, None)
        out.unsettled.clear()
        if out.selector_sub is not None:
            self.router.topics.unsubscribe(out.selector_sub)
            return
        sub = out.subscription
        if sub is None:
            queue.dispatch()
            return
        subs = self.subscriptions
        subs.remove_consumer(sub, out)
        if removed_on_detach(sub.kind, closed, len(sub.consumers)):
            subs.delete(sub)

    @guarded
    def on_link_flow(self, event: Any) -> None:
        link = event.link
        out = getattr(link, "_sg", None)
        if not isinstance(out, Outbound) or out.closed:
            return
        out.credit = link.credit
        if out.fetch is not None:
            self._send_fetched(out)
            return
        if out.browse:
            self._browse(out)
        else:
            out.queue.dispatch()
        if link.drain_mode and link.credit > 0:
            link.drained()
        out.credit = link.credit

    def _browse(self, out: Outbound) -> None:
        for message in out.queue.take_for(out, 1 << 30):
            if out.credit <= 0:
                return
            if message.seq > out.browsed:
                out.deliver_copy(message)

    # -- deliveries ------------------------------------------------------------------------------------------
    @guarded
    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        self.delivery_event(getattr(delivery.link, "_sg", None), delivery)

    def raw_delivery_event(self, link_state: Any, impl: Any) -> None:
        """``gateway.loop``'s fast path, with the C delivery: a consumer's plain ``accepted`` is applied without a
        Delivery wrapper; everything else goes to ``delivery_event``."""
        if type(link_state) is Outbound and pn_delivery_remote_state(impl) == PN_ACCEPTED:
            message = link_state.unsettled.pop(impl, None)
            pn_delivery_settle(impl)
            if message is not None:
                link_state.queue.settle(message, _ACCEPTED, link_state)
            return
        self.delivery_event(link_state, Delivery.wrap(impl))

    def delivery_event(self, link_state: Any, delivery: Delivery) -> None:
        """A delivery changed on one of our links (``gateway.loop`` calls this directly, without an Event)."""
        if isinstance(link_state, Inbound):
            self._receive(link_state, delivery)
        elif isinstance(link_state, CoordinatorLink):
            self.transacting.control(link_state, delivery)
        elif isinstance(link_state, Outbound):
            self._settled_by_consumer(link_state, delivery)

    def _receive(self, inbound: Inbound, delivery: Delivery) -> None:
        if not delivery.readable:
            return
        link = inbound.link
        limit = self.settings.max_message_size
        if delivery.partial:
            if delivery.pending > limit:
                self._oversize(inbound, delivery)
            return
        raw = link.recv(delivery.pending)
        link.advance()
        inbound.credit -= 1
        if delivery.aborted or raw is None:
            delivery.settle()
            inbound.top_up()
            return
        if len(raw) > limit:
            self._oversize(inbound, delivery)
            return
        if inbound.service:
            self._manage(delivery, raw)
            inbound.top_up()
            return
        try:
            txn = self.transacting.transaction_of(delivery)
            env = codec.scan(raw)
            node = inbound.node or self._relay_node(env)
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed message: {exc}")
            inbound.top_up()
            return
        except Refused as refusal:
            reject(delivery, refusal.condition, refusal.description)
            inbound.top_up()
            return
        ingest = self.router.prepare(raw, env, node, inbound.conn, inbound.publisher_id)
        if txn is not None:
            # Held until the discharge: journaled (with the acks) and routed only at commit (mapping §6.3).
            self.transacting.enlist_send(txn, ingest, node, delivery)
        elif ingest.record is not None:
            inbound.pending += 1
            self.router.submitted(ingest.record.id)
            self.router.writer.submit_message(ingest.record, (delivery, ingest.message, node, inbound))
        else:
            self._route(node, ingest.message)
            accept(delivery)
        inbound.top_up()

    def _manage(self, delivery: Delivery, raw: bytes) -> None:
        """A request to $management: answer it on its reply-to address (gateway.management)."""
        try:
            request = management.read_request(raw)
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed management request: {exc}")
            return
        response = management.handle(request, self.subscriptions)
        log.info("management %s %s: %d %s", request.operation, request.type, response.status, response.description)
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        node = self.router.nodes.get(request.reply_to or "")
        if node is None:
            log.info("management response dropped: no node at reply-to %r", request.reply_to)
            return
        reply = management.encode_response(request, response)
        self._route(node, self.router.prepare(reply, codec.scan(reply), node, None, management.ADDRESS).message)

    def _relay_node(self, env: codec.Envelope) -> Queue | Topic:
        if not env.to:
            raise Refused(NOT_FOUND, "anonymous relay: the message has no 'to' address")
        kind = kind_from_jms_dest(env.annotations.get("x-opt-jms-dest")) if env.annotations else None
        node = self.router.node_for(self.router.decide(env.to, kind))
        self._watch_node(node)
        return node

    def _route(self, node: Queue | Topic, message: Message) -> None:
        self.published += 1
        if isinstance(node, Topic):
            node.publish(message)
        else:
            node.push(message)

    def _oversize(self, inbound: Inbound, delivery: Delivery) -> None:
        description = f"message larger than the maximum of {self.settings.max_message_size} bytes"
        log.info("closing link %r: %s", inbound.link.name, description)
        reject(delivery, MESSAGE_SIZE_EXCEEDED, description)
        self._close_link(inbound, Condition(MESSAGE_SIZE_EXCEEDED, description))

    def _settled_by_consumer(self, out: Outbound, delivery: Delivery) -> None:
        remote = delivery.remote_state
        if not remote and not delivery.settled:
            return
        message = out.settled_message(delivery)
        if message is None:
            delivery.settle()
            return
        if remote == TRANSACTIONAL_STATE:
            self.transacting.enlist_ack(out, delivery, message)
            return
        outcome = _OUTCOME_NAMES.get(remote)
        if outcome == MODIFIED:
            settlement = settle_outcome(
                outcome, failed=bool(delivery.remote.failed), undeliverable_here=bool(delivery.remote.undeliverable)
            )
        else:
            settlement = settle_outcome(outcome)
        delivery.settle()
        out.queue.settle(message, settlement, out)

    # -- journal completions ---------------------------------------------------------------------------------
    @guarded
    def on_journal_committed(self, event: Any) -> None:
        result = event.subject
        touched: set[Inbound] = set()
        for token in result.tokens:
            if callable(token):
                token(None)
                continue
            delivery, message, node, inbound = token
            self.router.committed(message.seq)
            inbound.pending -= 1
            touched.add(inbound)
            self._route(node, message)
            if not inbound.closed:
                accept(delivery)
        for token in result.failed:
            if callable(token):
                token(result.error)
                continue
            delivery, message, node, inbound = token
            self.router.committed(message.seq)
            inbound.pending -= 1
            touched.add(inbound)
            if not inbound.closed:
                reject(delivery, INTERNAL_ERROR, f"journal write failed: {result.error}")
        for inbound in touched:
            inbound.top_up()

    # -- shutdown --------------------------------------------------------------------------------------------
    def begin_shutdown(self, io: Any) -> None:
        """Stop accepting, let queued journal writes commit and be acknowledged, then close connections."""
        if self.stopping:
            return
        self.stopping = True
        log.info("shutting down: no new connections; flushing the journal")
        io.stop_listening()
        done = False

        def close_connections(_error: BaseException | None = None) -> None:
            nonlocal done
            if done:
                return
            done = True
            for state in list(self.connections):
                connection = state.connection
                if not connection.state & Endpoint.LOCAL_CLOSED:
                    connection.condition = Condition("amqp:connection:forced", "server shutting down")
                    connection.close()
            self.schedule(0.3, finish)

        def finish() -> None:
            io.flush_dirty()
            io.close_all()
            if self.on_stopped is not None:
                self.on_stopped()

        self.router.writer.submit_barrier(close_connections)
        self.schedule(10.0, close_connections)  # a stuck store must not keep the server from stopping
