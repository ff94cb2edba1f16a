"""The broker's proton handler: connection, session, link and delivery events, kept thin.

Each ``on_*`` method reads the proton objects into plain values, asks a rule (``mapping``) or the node engine
(``engine.nodes`` through ``gateway.router``), and writes the answer back. This is a flat handler set directly
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
from dataclasses import replace
from typing import Any, TypeVar

from cproton import PN_ACCEPTED, pn_delivery_remote_state, pn_delivery_settle
from proton import Condition, Delivery, Endpoint, Link, symbol
from proton.reactor import Container

from subgate.engine import codec
from subgate.engine.browsing import Browser
from subgate.engine.memory import Answer, Sender, describe
from subgate.engine.nodes import Message, Queue, Topic, now_ms
from subgate.engine.selection import compile_selector
from subgate.engine.topic_space import TopicsError, fetch_selector, selector_address
from subgate.engine.transactions import TRANSACTIONAL_STATE
from subgate.gateway import management
from subgate.gateway.channels import connection_channel, end_after_output
from subgate.gateway.links import ConnectionState, CoordinatorLink, Inbound, Lookup, Outbound, accept, reject
from subgate.gateway.peer_fields import peer_text, read_open
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings
from subgate.gateway.subscriptions import Subscriptions, subscription_filter
from subgate.gateway.termini import (
    TerminusRequest,
    accept_attach,
    accept_consumer,
    answer_lookup,
    read_terminus,
    refuse_attach,
)
from subgate.gateway.topic_admin import PERMISSIONS_TYPE, TOPIC_TYPE, TopicAdmin
from subgate.gateway.topic_control import (
    CONTROL_PREFIX,
    FETCH,
    SUBSCRIBE,
    HandlerLink,
    HeldAttach,
    RemovalLink,
    TopicControl,
    handler_path,
    removal_branch,
)
from subgate.gateway.transacting import Transacting
from subgate.mapping.addresses import (
    QUEUE,
    TEMPORARY_PREFIX,
    TOPIC,
    NodeDecision,
    check_temporary_use,
    dynamic_kind,
    kind_from_capabilities,
    kind_from_jms_dest,
    split_fqqn,
    temporary_address,
)
from subgate.mapping.errors import (
    CONNECTION_ESTABLISHMENT_FAILED,
    CONNECTION_FORCED,
    DECODE_ERROR,
    INTERNAL_ERROR,
    INVALID_FIELD,
    MESSAGE_SIZE_EXCEEDED,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    RESOURCE_DELETED,
    RESOURCE_LIMIT,
    Refused,
)
from subgate.mapping.filters import FilterRequest, read_filters
from subgate.mapping.names import check_link_name, check_selector, check_terminus, split_prefix
from subgate.mapping.outcomes import MODIFIED, settle_outcome, settle_unsettled
from subgate.mapping.permissions import OPEN_POLICY, Permission, Policy
from subgate.mapping.selectors import SelectorError
from subgate.mapping.subscriptions import (
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
from subgate.storage.journal import JournalWriter
from subgate.topics import Selector, is_valid_path

log = logging.getLogger("subgate.broker")
LinkState = Inbound | Outbound | Lookup | CoordinatorLink | RemovalLink | HandlerLink | HeldAttach

VERSION = "0.1.0"
OFFERED_CAPABILITIES = ["sole-connection-for-container", "DELAYED_DELIVERY", "SHARED-SUBS", "ANONYMOUS-RELAY"]
SOLE_CONNECTION = "sole-connection-for-container"


_ACCEPTED = settle_outcome("accepted")
_OUTCOME_NAMES: dict[Any, str] = {
    Delivery.ACCEPTED: "accepted",
    Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released",
    Delivery.MODIFIED: MODIFIED,
}


_Self = TypeVar("_Self")


def guarded(method: Callable[[_Self, Any], None]) -> Callable[[_Self, Any], None]:
    """Event handlers never let an exception out: a bug is logged and the endpoint it concerns is closed with
    ``amqp:internal-error``, while the server keeps serving every other connection."""

    def handler(self: _Self, event: Any) -> None:
        try:
            method(self, event)
        except UnicodeDecodeError as exc:
            # A text field the peer sent is not text, read where no handler expected it: the peer's error.
            log.info("closing an endpoint after undecodable input in %s: %s", method.__name__, exc)
            _close_endpoint(event, DECODE_ERROR, "a field sent by the peer is not valid text")
        except Exception:
            log.exception("internal error in %s", method.__name__)
            _close_endpoint(event, INTERNAL_ERROR, "internal error; see the server log")

    handler.__name__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


def _close_endpoint(event: Any, condition: str, description: str) -> None:
    """Close the endpoint an event concerns with an error (an endpoint the peer opened and we did not yet: proton
    answers with the attach, begin or open first)."""
    try:
        endpoint = event.link or event.session or event.connection
        if endpoint is not None and not endpoint.state & Endpoint.LOCAL_CLOSED:
            endpoint.condition = Condition(condition, description)
            endpoint.close()
    except Exception:
        log.exception("could not close the endpoint after an error")


def _refuse_connection(connection: Any, condition: str, description: str, info: dict[Any, Any] | None = None) -> None:
    """Answer a peer's ``open`` with ours and a ``close`` carrying the error (AMQP part 2.4.1: an open must be
    answered before a close can say why)."""
    connection.open()
    connection.condition = Condition(condition, description, info)
    connection.close()
    end_after_output(connection)


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


def _on_bytes(matcher: Callable[[bytes], bool] | None) -> Callable[[Message], bool] | None:
    """A consumer's or browser's filter on messages from a compiled selector on their bytes (None: no selector)."""
    if matcher is None:
        return None
    return lambda message: matcher(message.raw)


class _RouteAtCommit:
    """The token of a journaled message nobody waits for (a management reply to a paging node): routed when its
    row is committed, in journal order; if the row could not be written, routed from memory only."""

    __slots__ = ("broker", "node", "message")

    def __init__(self, broker: Broker, node: Queue | Topic, message: Message) -> None:
        self.broker = broker
        self.node = node
        self.message = message

    def __call__(self, error: BaseException | None) -> None:
        message = self.message
        self.broker.router.committed(message.seq)
        self.broker._route(self.node, message if error is None else message.as_journaled(False))


class Broker:
    """The container's handler (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        container: Container,
        subscriptions: Subscriptions | None = None,
        *,
        journal: JournalWriter,
    ) -> None:
        self.settings = settings
        self.router = router
        self.journal = journal  # claims committed tickets back into tokens (reactor thread); removal rows
        self.subscriptions = subscriptions or Subscriptions(router)
        self.transacting = Transacting(router, self._route)
        self.container = container
        self.connections: set[ConnectionState] = set()
        self._containers: dict[str, int] = {}
        self._temporary_owners: dict[str, ConnectionState] = {}  # temporary node name -> the connection that made it
        self._scheduled: dict[str, int] = {}
        self.stopping = False
        self.published = 0
        self.on_stopped: Callable[[], None] | None = None
        self.policy: Policy = OPEN_POLICY
        self.on_policy_refresh: Callable[[], None] | None = None
        self._since_policy_refresh = 0.0
        self.control = TopicControl(
            settings.name,
            settings.reconnect_timeout,
            settings.missing_topic_timeout,
            self.schedule,
            self.remove_branch,
        )
        self.control.journal = journal
        self.topic_admin = TopicAdmin(router, self.control, self.remove_topics, self._refresh_policy)

    # -- timers ----------------------------------------------------------------------------------------------
    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        self.container.schedule(max(0.0, delay), _Timer(callback))  # type: ignore[arg-type]  # duck-typed handler

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
                self.journal.submit_low_water(cursor.cursor_id, self.router.safe_low_water(queue))
                cursor.acks_since_low_water = 0
        self._since_policy_refresh += self.settings.expiry_sweep_interval
        if self.on_policy_refresh is not None and self._since_policy_refresh >= self.settings.policy_refresh_interval:
            self._since_policy_refresh = 0.0
            self.on_policy_refresh()
        if not self.stopping:
            self.schedule(self.settings.expiry_sweep_interval, self._housekeeping)

    # -- permissions -----------------------------------------------------------------------------------------
    def on_policy_loaded(self, event: Any) -> None:
        """A policy freshly read from the store (gateway.policy): it decides every attach from now on."""
        self.policy = event.subject

    def _refresh_policy(self) -> None:
        if self.on_policy_refresh is not None:
            self.on_policy_refresh()

    def _check(
        self, state: ConnectionState, permission: Permission, path: str | None = None, kind: str | None = None
    ) -> None:
        """Raises: Refused(amqp:unauthorized-access) when the connection's principal lacks ``permission``."""
        self.policy.check(state.user, permission, path, kind)

    def _check_node(self, state: ConnectionState, permission: Permission, decision: NodeDecision) -> None:
        """``permission`` on a node's address, plus MODIFY_TOPIC when the attach would create it. Temporary
        nodes are not in the permission tree: anyone may send to one, only the connection that created it may
        receive from it (mapping.addresses.check_temporary_use; docs/permissions.md)."""
        if decision.address.startswith(TEMPORARY_PREFIX):
            owner = self._temporary_owners.get(decision.address)
            receiving = permission is not Permission.UPDATE_TOPIC
            check_temporary_use(decision.address, owned=owner is state, receiving=receiving)
            return
        if decision.create:
            self._check(state, Permission.MODIFY_TOPIC, decision.address, decision.kind)
        self._check(state, permission, decision.address, decision.kind)

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
        connection.container = self.settings.name
        if channel is not None:
            channel.handshake_finished()
        try:
            request = read_open(connection)
        except Refused as refusal:
            log.info("refusing connection from %s: %s", channel.peer if channel else "?", refusal.description)
            _refuse_connection(connection, refusal.condition, refusal.description)
            return
        container_id = request.container_id
        state = ConnectionState(
            connection, container_id, channel.user if channel else None, channel.peer if channel else None
        )
        connection._sg = state
        over_limit = channel.refusal if channel is not None else None
        if over_limit is not None:
            _refuse_connection(connection, RESOURCE_LIMIT, over_limit)
            state.closed = True
            return
        if SOLE_CONNECTION in request.desired_capabilities and self._containers.get(container_id, 0) > 0:
            log.info("refusing connection: container-id %r already connected", container_id)
            connection.properties = {symbol(CONNECTION_ESTABLISHMENT_FAILED): True}
            _refuse_connection(
                connection,
                INVALID_FIELD,
                f"ClientID {container_id} already in use",
                {symbol("invalid-field"): symbol("container-id")},
            )
            state.closed = True
            return
        if self.stopping:
            _refuse_connection(connection, CONNECTION_FORCED, "server shutting down")
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
        self._end_connection(connection, abrupt=False)
        if not connection.state & Endpoint.LOCAL_CLOSED:
            connection.close()

    @guarded
    def on_transport_tail_closed(self, event: Any) -> None:
        connection = event.connection
        if connection is not None:
            self._end_connection(connection, abrupt=True)

    @guarded
    def on_transport_closed(self, event: Any) -> None:
        connection = event.connection
        if connection is not None:
            self._end_connection(connection, abrupt=True)

    def _end_connection(self, connection: Any, *, abrupt: bool) -> None:
        """The connection closed (a close frame: ``abrupt=False``) or was lost; its links end as abrupt."""
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
        self.control.connection_ended(state, abrupt=abrupt)
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
            check_link_name(peer_text("attach name", lambda: link.name) or "")
        except Refused as refusal:
            if refusal.condition == INVALID_FIELD:  # too long: no detach repeating it would fit the client's frames
                log.info("closing the connection of %s: %s", state.container_id, refusal.description)
                connection = link.connection
                connection.condition = Condition(refusal.condition, refusal.description)
                connection.close()
                end_after_output(connection)
                return
        self._attach(link, state, consult_handlers=True)

    def _attach(self, link: Link, state: ConnectionState, *, consult_handlers: bool) -> None:
        try:
            # A name that is not text is refused like any other attach: proton echoes the name it holds as
            # bytes, so the refusal needs no decoded copy of it.
            check_link_name(peer_text("attach name", lambda: link.name) or "")
            if link.is_receiver:
                self._open_publisher(link, state)
            else:
                self._open_consumer(link, state, consult_handlers=consult_handlers)
        except Refused as refusal:
            log.info("refused attach from %s: %s", state.container_id, refusal.description)
            refuse_attach(link, refusal.condition, refusal.description)
        except UnicodeDecodeError:  # a field of the attach that is not text, read where nobody expected it
            log.info("refused attach from %s: a field is not valid text", state.container_id)
            refuse_attach(link, DECODE_ERROR, "a field of the attach is not valid text")
        except Exception:
            log.exception("attach %r failed", link.name)
            refuse_attach(link, INTERNAL_ERROR, "internal error while attaching")

    def _open_publisher(self, link: Link, state: ConnectionState) -> None:
        target = self._unprefixed(peer_text("attach target", lambda: read_terminus(link.remote_target)))
        check_terminus(target.address, len(target.capabilities))
        if target.coordinator:
            coordinator = CoordinatorLink(link, state)
            link._sg = coordinator
            state.links.add(coordinator)
            accept_attach(link)
            self.transacting.open_coordinator(coordinator)
            return
        address = target.address or ""
        if address.startswith(CONTROL_PREFIX):
            self._open_removal(link, state, address)
            return
        node = None
        service = address == management.ADDRESS
        if service:
            self._check(state, Permission.CONTROL_SERVER)
        if target.dynamic:
            node = self._create_temporary(target, state)
        elif target.present and address and not service:
            decision = self.router.decide(address, kind_from_capabilities(target.capabilities))
            self._check_node(state, Permission.UPDATE_TOPIC, decision)
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

    def _open_removal(self, link: Link, state: ConnectionState, address: str) -> None:
        """A remove-with-session registration (design §3): the open link is the registration; no credit."""
        branch = removal_branch(address)
        self._check(state, Permission.MODIFY_TOPIC, branch)
        removal = self.control.register_removal(link, state, branch)
        link._sg = removal
        state.links.add(removal)
        accept_attach(link)

    def _open_handler(self, link: Link, state: ConnectionState, address: str) -> None:
        """A missing-topic handler registration (design §3): notifications are sent on this link."""
        path = handler_path(address)
        self._check(state, Permission.REGISTER_HANDLER)
        handler = self.control.register_handler(link, state, path)
        link._sg = handler
        state.links.add(handler)
        accept_attach(link)

    def _open_consumer(self, link: Link, state: ConnectionState, *, consult_handlers: bool = True) -> None:
        source = self._unprefixed(peer_text("attach source", lambda: read_terminus(link.remote_source)))
        if not source.present:
            self._open_lookup(link, state)
            return
        check_terminus(source.address, len(source.capabilities))
        address = source.address or ""
        if address.startswith(CONTROL_PREFIX):
            self._open_handler(link, state, address)
            return
        filters = read_filters(source.filters)
        check_selector(filters.selector)
        fqqn = None if source.dynamic else split_fqqn(address)
        if fqqn is not None:
            self._open_subscription_browser(link, state, source, fqqn, filters)
            return
        if not source.dynamic and address and kind_from_capabilities(source.capabilities) != QUEUE:
            fetch = "fetch" in source.capabilities
            selector = _topic_selector(fetch_selector if fetch else selector_address, address)
            if consult_handlers and self._hold_if_missing(link, state, source, selector, fetch):
                return
            if fetch:
                self._open_fetch(link, state, selector)
                return
            if selector is not None:
                self._open_selector_consumer(link, state, source, selector, filters)
                return
        if source.dynamic:
            node = self._create_temporary(source, state)
        elif not address:
            raise Refused(INVALID_FIELD, "a source address is required")
        else:
            decision = self.router.decide(address, kind_from_capabilities(source.capabilities))
            if decision.kind == TOPIC and not address.startswith(TEMPORARY_PREFIX):
                self._check(state, Permission.SELECT_TOPIC, address)
            self._check_node(state, Permission.READ_TOPIC, decision)
            node = self.router.node_for(decision)
            self._watch_node(node)
        matcher = _compile(filters.selector)
        if isinstance(node, Topic):
            outbound = self._subscribe(link, state, source, node, filters, matcher)
            no_local = filters.no_local
        else:
            outbound = Outbound(link, state, node)
            outbound.filter = _on_bytes(matcher)
            if source.distribution_mode == 1:  # copy on a queue means browse (mapping §2.2)
                self._make_browser(outbound)
            else:
                node.add_consumer(outbound)
            no_local = False  # no-local applies to topics only
        if source.dynamic:
            outbound.owns = node.name
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, node.name if source.dynamic else None, filters.selector, no_local)

    def _open_subscription_browser(
        self, link: Link, state: ConnectionState, source: TerminusRequest, fqqn: tuple[str, str], filters: FilterRequest
    ) -> None:
        """A browser of a topic subscription's queue, named as Artemis names it (``<topic>::<ClientID>.<name>``,
        ``<topic>::<name>:global``, ...): what a JMS ``QueueBrowser`` on that queue sees there. Only browsing:
        a subscription is consumed by attaching to its topic with its name."""
        topic, name = fqqn
        if source.distribution_mode != 1:
            raise Refused(NOT_IMPLEMENTED, "a subscription's queue can only be browsed (distribution-mode copy)")
        self._check(state, Permission.SELECT_TOPIC, topic)
        self._check(state, Permission.READ_TOPIC, topic)
        sub = self.subscriptions.by_queue_name(topic, name)
        if sub is None:
            raise Refused(NOT_FOUND, f"topic {topic!r} has no subscription queue {name!r}")
        matcher = _compile(filters.selector)
        outbound = Outbound(link, state, sub.queue)
        outbound.filter = _on_bytes(matcher)
        self._make_browser(outbound)
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, None, filters.selector, False)

    def _hold_if_missing(
        self, link: Link, state: ConnectionState, source: TerminusRequest, selector: Selector | None, fetch: bool
    ) -> bool:
        """A subscribe or fetch that selects no topic: notify the missing-topic handlers and hold the attach
        until they answer (design §3). Returns False when the attach goes ahead now."""
        address = source.address or ""
        if selector is None:  # a plain topic path
            if address.startswith("$") or address in self.router.nodes or not is_valid_path(address):
                return False  # "$..." names server nodes (temporary, management, control), never topic paths
            if (kind_from_capabilities(source.capabilities) or self.settings.default_node_type) != TOPIC:
                return False
            selector = fetch_selector(">" + address)
        elif self.router.topics.selects_any(selector):
            return False
        self._check(state, Permission.SELECT_TOPIC, selector.prefix)
        request = FETCH if fetch else SUBSCRIBE
        held = self.control.hold(
            link,
            state,
            selector,
            request,
            resume=lambda: self._resume_held(link, state),
            cancel=lambda path: self._cancel_held(link, state, selector, request, path),
        )
        if held is None:
            return False
        link._sg = held
        state.links.add(held)
        return True

    def _release_held(self, link: Link, state: ConnectionState) -> None:
        held = getattr(link, "_sg", None)
        if isinstance(held, HeldAttach):
            held.closed = True  # the link gets a new state now (gateway.loop caches states by link)
            state.links.discard(held)
        link._sg = None

    def _resume_held(self, link: Link, state: ConnectionState) -> None:
        self._release_held(link, state)
        if not state.closed:
            self._attach(link, state, consult_handlers=False)

    def _cancel_held(self, link: Link, state: ConnectionState, selector: Selector, request: str, path: str) -> None:
        self._release_held(link, state)
        description = f"no topic matches {selector.expression!r}: the missing-topic handler on {path!r} cancelled"
        log.info("refused %s %r from %s: %s", request, link.name, state.container_id, description)
        refuse_attach(link, NOT_FOUND, description)

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

    def _readable(self, state: ConnectionState) -> Callable[[str], bool]:
        """Which topics a selector subscription or fetch of this connection may read (READ_TOPIC)."""
        user = state.user
        return lambda path: self.policy.allows(user, Permission.READ_TOPIC, path)

    def _open_selector_consumer(
        self, link: Link, state: ConnectionState, source: TerminusRequest, selector: Any, filters: FilterRequest
    ) -> None:
        """A consumer whose address is a topic selector: every matching topic it may read, also those created
        later."""
        if source.durable >= 1:
            raise Refused(NOT_IMPLEMENTED, "durable subscriptions to a topic selector are not supported")
        self._check(state, Permission.SELECT_TOPIC, selector.prefix)
        matcher = _compile(filters.selector)
        no_local_id = state.container_id if filters.no_local else None
        queue = Queue(f"{selector.expression}#{state.container_id}/{link.name}", durable=False)
        queue.limit_memory(self.router.memory_limit)
        self.watch_schedule(queue)
        accepts = subscription_filter(self.router.last_seq, no_local_id, matcher)
        outbound = Outbound(link, state, queue)
        outbound.selector_sub = self.router.topics.subscribe(selector, queue, accepts, self._readable(state))
        queue.add_consumer(outbound)
        link._sg = outbound
        state.links.add(outbound)
        accept_consumer(link, None, filters.selector, filters.no_local)

    def _open_fetch(self, link: Link, state: ConnectionState, selector: Selector) -> None:
        """Capability ``fetch``: the current value of each matching topic once, then the link is closed."""
        self._check(state, Permission.SELECT_TOPIC, selector.prefix)
        readable = self._readable(state)
        outbound = Outbound(link, state, Queue(f"fetch#{state.container_id}/{link.name}", durable=False))
        outbound.fetch = deque(
            t.current for t in self.router.topics.select(selector) if t.current is not None and readable(t.name)
        )
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

    def _create_temporary(self, terminus: TerminusRequest, owner: ConnectionState) -> Queue | Topic:
        """A dynamic node (temporary queue or topic, mapping §5.3); it lives as long as the link that made it,
        and only ``owner`` may receive from it."""
        kind = dynamic_kind(terminus.capabilities)
        node = self.router.create(temporary_address(kind, uuid.uuid4().hex), kind, durable=False)
        self._temporary_owners[node.name] = owner
        self._watch_node(node)
        return node

    def _unprefixed(self, terminus: TerminusRequest) -> TerminusRequest:
        """The terminus with its address's routing prefix (``topic://``, ``queue://``: mapping.names) turned into
        the capability of the node type it names; what the client sent is still what the attach echoes."""
        if not terminus.address:
            return terminus
        settings = self.settings
        address, kind = split_prefix(terminus.address, settings.anycast_prefixes, settings.multicast_prefixes)
        if kind is None:
            return terminus
        return replace(terminus, address=address, capabilities=terminus.capabilities | {kind})

    def _delete_temporary(self, name: str) -> None:
        self._temporary_owners.pop(name, None)
        node = self.router.nodes.get(name)
        if node is not None:
            self._delete_nodes([node], lambda gone: f"temporary destination {gone.name!r} was deleted")

    def remove_branch(self, branch: str) -> list[str]:
        """Remove every topic at and below ``branch`` (remove-with-session, management DELETE)."""
        return self.remove_topics(self.router.topics.branch(branch))

    def remove_topics(self, topics: list[Topic]) -> list[str]:
        """Remove topics. Consumers of plain-path subscriptions on them are closed with amqp:resource-deleted
        and those subscriptions deleted; selector subscriptions stay (a topic created again matches them)."""
        self._delete_nodes(list(topics), lambda gone: f"topic {gone.name!r} was removed")
        removed = {id(topic) for topic in topics}
        for sub in self.subscriptions.named():  # those without a consumer to close (detached durable ones)
            if id(sub.topic) in removed:
                self.subscriptions.delete(sub)
        return [topic.name for topic in topics]

    def _delete_nodes(self, nodes: list[Queue | Topic], reason: Callable[[Queue | Topic], str]) -> None:
        """Take nodes out of service: the links that use them are closed with amqp:resource-deleted (``reason``
        names the node) and their messages dropped, in one pass over the links. A topic leaves the tree first,
        so only its own subscriptions' queues remain on it."""
        owner_of_queue: dict[int, Queue | Topic] = {}
        queues: list[Queue] = []
        for node in nodes:
            self.router.remove(node)
            own = [node] if isinstance(node, Queue) else list(node.subscriptions)
            owner_of_queue.update((id(queue), node) for queue in own)
            queues.extend(own)
        by_node = {id(node): node for node in nodes}
        for state in list(self.connections):
            for link_state in list(state.links):
                if link_state.closed:
                    continue
                owner: Queue | Topic | None
                if isinstance(link_state, Outbound):
                    owner = owner_of_queue.get(id(link_state.queue))
                elif isinstance(link_state, Inbound) and link_state.node is not None:
                    owner = by_node.get(id(link_state.node))
                else:
                    continue
                if owner is not None:
                    self._close_link(link_state, Condition(RESOURCE_DELETED, reason(owner)))
        for queue in queues:
            queue.purge()

    def _close_link(self, link_state: LinkState, condition: Condition | None = None) -> None:
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
        if isinstance(node, Queue):
            if node.on_schedule is None:
                self.watch_schedule(node)
            node.on_unblocked = self._unblocked

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

    def _end_link(self, link_state: LinkState, *, abrupt: bool, closed: bool) -> None:
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
        elif isinstance(link_state, RemovalLink):
            self.control.removal_ended(link_state)
        elif isinstance(link_state, HandlerLink):
            self.control.handler_ended(link_state)
        elif isinstance(link_state, HeldAttach):
            self.control.held_ended(link_state)
        if owns is not None:
            self._delete_temporary(owns)

    def _end_consumer(self, out: Outbound, *, abrupt: bool, closed: bool) -> None:
        queue = out.queue
        if out.browser is not None:
            out.browser.close()  # a page read still on its way is dropped when it comes back
            return
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
        self.link_flow(getattr(event.link, "_sg", None))

    def link_flow(self, out: Any) -> None:
        """A link's credit or drain changed (``gateway.loop`` calls this directly with the link's state)."""
        if isinstance(out, HandlerLink) and not out.closed:
            self.control.handler_flow(out)
            return
        if not isinstance(out, Outbound) or out.closed:
            return
        link = out.link
        out.credit = link.credit
        if out.fetch is not None:
            self._send_fetched(out)
            return
        if out.browser is not None:
            self._browse(out)
            return
        out.queue.dispatch()
        if link.drain_mode and link.credit > 0:
            link.drained()
        out.credit = link.credit

    def _make_browser(self, out: Outbound) -> None:
        browser = out.browser = Browser(out.queue, out.filter)

        def on_rows() -> None:  # a journal page read for it came back (inside on_journal_committed)
            try:
                self._browse(out)
            except Exception:
                log.exception("internal error while browsing %r", out.queue.name)
                self._close_link(out, Condition(INTERNAL_ERROR, "internal error; see the server log"))

        browser.on_rows = on_rows

    def _browse(self, out: Outbound) -> None:
        """Copies for a browser (engine.browsing), as far as its credit goes. A drain is answered only once the
        walk has nothing more to show: while a journal page is being read for it, the answer waits for the
        page (else Qpid JMS would take the early answer for the end of the queue)."""
        browser = out.browser
        assert browser is not None
        if out.closed:
            return
        if browser.failed:
            self._close_link(out, Condition(INTERNAL_ERROR, "browsing failed: the journal could not be read"))
            return
        for message in browser.take(out.credit):
            out.deliver_copy(message)
        link = out.link
        if link.drain_mode and link.credit > 0 and not browser.reading:
            link.drained()
        out.credit = link.credit

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
        elif isinstance(link_state, HandlerLink):
            self.control.handler_settled(link_state, delivery)
        elif isinstance(link_state, RemovalLink) and delivery.readable and not delivery.partial:
            link_state.link.recv(delivery.pending)
            link_state.link.advance()
            reject(delivery, NOT_ALLOWED, "a remove-with-session registration link carries no messages")

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
            node = inbound.node or self._relay_node(env, inbound.conn)
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed message: {exc}")
            inbound.top_up()
            return
        except Refused as refusal:
            reject(delivery, refusal.condition, refusal.description)
            inbound.top_up()
            return
        ingest = self.router.prepare(raw, env, node, inbound.conn, inbound.publisher_id, inbound.pending)
        if ingest.record is None and type(node) is Queue and not self._admits(node, inbound):
            reject(delivery, RESOURCE_LIMIT, describe(node.memory, node.name))
        elif txn is not None:
            # Held until the discharge: journaled (with the acks) and routed only at commit (mapping §6.3).
            self.transacting.enlist_send(txn, ingest, node, delivery, inbound.publisher_id)
        elif ingest.record is not None:
            record = ingest.record
            inbound.pending += 1  # its credit comes back at the commit: the writer's queue stays bounded
            self.router.submitted(record.id)
            waiting: Delivery | None = delivery
            if not record.durable and not self.settings.journal_non_persistent:
                # Non-persistent, journaled only to keep its place behind journaled messages (Router.prepare):
                # accepted at once as ever, routed at its commit, in journal order.
                accept(delivery)
                waiting = None
            self.journal.submit_message(record, (waiting, ingest.message, node, inbound))
        else:
            self._route(node, ingest.message)
            accept(delivery)
        inbound.top_up()

    def _admits(self, queue: Queue, inbound: Inbound) -> bool:
        """May ``queue`` take one more message that is not in the journal from this publisher (engine.memory)?
        Below the limit: two compares. A transaction's send is judged when it is sent (enlisted), not at the
        discharge, so the transfer itself is rejected."""
        return queue.admits(Sender.LINK if inbound.node is queue else Sender.RELAY) is Answer.TAKE

    def _unblocked(self, queue: Queue) -> None:
        """A queue that withheld credit (policy block) drained to its low-water mark: its publisher links get
        credit again. Rare (once per fill and drain), so a pass over the links is cheap enough."""
        for state in self.connections:
            for link_state in state.links:
                if type(link_state) is Inbound and link_state.node is queue:
                    link_state.top_up()

    def _manage(self, delivery: Delivery, raw: bytes) -> None:
        """A request to $management: answer it on its reply-to address (gateway.management)."""
        try:
            request = management.read_request(raw)
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed management request: {exc}")
            return
        if request.type in (TOPIC_TYPE, PERMISSIONS_TYPE):
            response = self.topic_admin.handle(request)
        else:
            response = management.handle(request, self.subscriptions)
        log.info("management %s %s: %d %s", request.operation, request.type, response.status, response.description)
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        node = self.router.nodes.get(request.reply_to or "")
        if node is None:
            log.info("management response dropped: no node at reply-to %r", request.reply_to)
            return
        reply = management.encode_response(request, response)
        ingest = self.router.prepare(reply, codec.scan(reply), node, None, management.ADDRESS)
        if ingest.record is None:
            self._route(node, ingest.message)
            return
        self.router.submitted(ingest.record.id)  # journaled (a paging node): routed in journal order
        self.journal.submit_message(ingest.record, _RouteAtCommit(self, node, ingest.message))

    def _relay_node(self, env: codec.Envelope, state: ConnectionState) -> Queue | Topic:
        if not env.to:
            raise Refused(NOT_FOUND, "anonymous relay: the message has no 'to' address")
        settings = self.settings
        to, kind = split_prefix(env.to, settings.anycast_prefixes, settings.multicast_prefixes)
        if kind is None and env.annotations:
            kind = kind_from_jms_dest(env.annotations.get("x-opt-jms-dest"))
        decision = self.router.decide(to, kind)
        self._check_node(state, Permission.UPDATE_TOPIC, decision)
        node = self.router.node_for(decision)
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
        result = self.journal.claim(event.subject)  # the tokens never left this thread
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
            if delivery is not None and not inbound.closed:
                accept(delivery)
        for token in result.failed:
            if callable(token):
                token(result.error)
                continue
            delivery, message, node, inbound = token
            self.router.committed(message.seq)
            inbound.pending -= 1
            touched.add(inbound)
            if delivery is None:  # non-persistent, accepted already: delivered anyway, from memory only
                self._route(node, message.as_journaled(False))  # its row could not be written
            elif not inbound.closed:
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
                    connection.condition = Condition(CONNECTION_FORCED, "server shutting down")
                    connection.close()
            self.schedule(0.3, finish)

        def finish() -> None:
            io.flush_dirty()
            io.close_all()
            if self.on_stopped is not None:
                self.on_stopped()

        self.journal.submit_barrier(close_connections)
        self.schedule(10.0, close_connections)  # a stuck store must not keep the server from stopping
