"""Connections, sessions and links from open to end, node deletion, and shutdown, on the reactor thread.

Owns the open connections (``Connections``: their states, one count per container-id for
``sole-connection-for-container``), answering a connection's open (refusals included) and its close or loss,
session begin and end, the end of links (ours or the peer's; each link kind does its own part in ``on_end``),
taking nodes out of service (temporary nodes with the link that made them, topic branches removed by
remove-with-session or management), and the orderly shutdown (journal flushed first, then connections closed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from proton import Condition, Connection, Endpoint, Link, Session, symbol

from subgate.engine.endpoint_limits import EndpointLimits, link_refusal, session_refusal
from subgate.engine.nodes import Queue, Topic
from subgate.engine.repeats import ATTACH_REFUSED, refused_as
from subgate.gateway.authority import Authority
from subgate.gateway.channels import connection_channel, end_after_output, remote
from subgate.gateway.housekeeping import Housekeeping
from subgate.gateway.links import ConnectionState, LinkState
from subgate.gateway.peer_fields import peer_text, read_open
from subgate.gateway.router import Router
from subgate.gateway.subscriptions import Subscriptions
from subgate.gateway.termini import refuse_attach
from subgate.gateway.topic_control import TopicControl
from subgate.mapping.errors import (
    CONNECTION_ESTABLISHMENT_FAILED,
    CONNECTION_FORCED,
    INVALID_FIELD,
    LINK_STOLEN,
    RESOURCE_DELETED,
    RESOURCE_LIMIT,
    Refused,
)
from subgate.mapping.names import check_link_name

if TYPE_CHECKING:
    from subgate.gateway.io import ServerIO

log = logging.getLogger("subgate.broker")
_LINK_STOLEN = refused_as("link-stolen")  # per-connection refusal kinds: engine.repeats, docs/operations.md

VERSION = "0.1.0"
OFFERED_CAPABILITIES = ["sole-connection-for-container", "DELAYED_DELIVERY", "SHARED-SUBS", "ANONYMOUS-RELAY"]
SOLE_CONNECTION = "sole-connection-for-container"
SESSION_CAPACITY = 64 * 1024 * 1024

Node = Queue | Topic


def refuse_connection(
    connection: Connection, condition: str, description: str, info: dict[Any, Any] | None = None
) -> None:
    """Answer a peer's ``open`` with ours and a ``close`` carrying the error (AMQP part 2.4.1: an open must be
    answered before a close can say why)."""
    connection.open()
    connection.condition = Condition(condition, description, info)
    connection.close()
    end_after_output(connection)


def connection_state(endpoint_connection: Connection) -> ConnectionState | None:
    """The state of an open connection of ours (None before its open was answered, or after its end)."""
    state: ConnectionState | None = getattr(endpoint_connection, "_sg", None)
    if state is None or state.closed:
        return None
    return state


def _peer_name(connection: Connection) -> str:
    """The peer's container-id for a log line, whether or not its open was answered yet."""
    state = connection_state(connection)
    if state is not None:
        return state.container_id
    try:
        return str(connection.remote_container or "")
    except Exception:  # noqa: BLE001 - not text: the open's own check says so
        return "?"


class Connections:
    """The open connections and how many there are per container-id."""

    __slots__ = ("open", "_containers", "_numbered")

    def __init__(self) -> None:
        self.open: set[ConnectionState] = set()
        self._containers: dict[str, int] = {}
        self._numbered = 0  # the last connection number given (1, 2, ... since the server started)

    def links(self) -> Iterator[LinkState]:
        for state in self.open:
            yield from state.links

    def connected(self, container_id: str) -> bool:
        return self._containers.get(container_id, 0) > 0

    def add(self, state: ConnectionState) -> None:
        self._containers[state.container_id] = self._containers.get(state.container_id, 0) + 1
        state.counted = True
        self._numbered += 1
        state.id = self._numbered
        self.open.add(state)

    def remove(self, state: ConnectionState) -> None:
        self.open.discard(state)
        if state.counted:
            remaining = self._containers.get(state.container_id, 1) - 1
            if remaining:
                self._containers[state.container_id] = remaining
            else:
                self._containers.pop(state.container_id, None)


class Lifecycle:
    """Opens and ends of connections, sessions and links; node deletion; shutdown (module docstring)."""

    def __init__(
        self,
        settings_name: str,
        router: Router,
        subscriptions: Subscriptions,
        control: Callable[[], TopicControl],
        housekeeping: Housekeeping,
        connections: Connections,
        authority: Authority,
        barrier: Callable[[Callable[[BaseException | None], None]], None],
        limits: EndpointLimits | None = None,
    ) -> None:
        self.name = settings_name
        self.limits = limits or EndpointLimits()
        self.router = router
        self.subscriptions = subscriptions
        self._control = control
        self.housekeeping = housekeeping
        self.connections = connections
        self.authority = authority
        self._barrier = barrier  # the journal calls it back once everything handed over before is committed
        self.stopping = False
        self.on_stopped: Callable[[], None] | None = None

    # -- connections -----------------------------------------------------------------------------------------
    def connection_opened(self, connection: Connection) -> None:
        """The peer's open: answer it, or refuse it (bad fields, over a limit, a second connection of a
        container-id that asked to be the only one, shutting down)."""
        if connection.state & Endpoint.LOCAL_CLOSED:
            return  # closed before this handler ran (gateway.frame_gate: a frame that broke a rule)
        channel = connection_channel(connection)
        connection.container = self.name
        if channel is not None:
            channel.handshake_finished()
        try:
            request = read_open(connection)
        except Refused as refusal:
            peer = channel.peer if channel else "?"
            log.info("refusing connection from %s: %s", peer, refusal.description, extra=refused_as("open-refused"))
            refuse_connection(connection, refusal.condition, refusal.description)
            return
        container_id = request.container_id
        router = self.router
        state = ConnectionState(
            connection,
            container_id,
            channel.user if channel else None,
            channel.peer if channel else None,
            lambda topic: router.node(topic.name) is topic,
            self.limits,
            self.housekeeping.settings.max_connection_output,
        )
        connection._sg = state
        refuse = self._refusal(state, channel.refusal if channel is not None else None, request.desired_capabilities)
        if refuse is not None:
            refuse()
            state.closed = True
            return
        self.connections.add(state)
        log.info(
            "connection opened: container-id %r, principal %r, from %s",
            container_id,
            state.user,
            state.peer,
            extra={"event": "connection-opened", "container_id": container_id, "principal": state.user,
                   "peer": remote(state.peer)},
        )  # fmt: skip
        connection.offered_capabilities = [symbol(c) for c in OFFERED_CAPABILITIES]
        connection.properties = {symbol("product"): "subgate", symbol("version"): VERSION}
        connection.open()

    def _refusal(
        self, state: ConnectionState, over_limit: str | None, desired: frozenset[str]
    ) -> Callable[[], None] | None:
        connection = state.connection
        container_id = state.container_id
        if over_limit is not None:
            return lambda: refuse_connection(connection, RESOURCE_LIMIT, over_limit)
        if SOLE_CONNECTION in desired and self.connections.connected(container_id):
            log.info(
                "refusing connection: container-id %r already connected", container_id,
                extra=refused_as("container-id-in-use"),
            )  # fmt: skip

            def already_connected() -> None:
                connection.properties = {symbol(CONNECTION_ESTABLISHMENT_FAILED): True}
                refuse_connection(
                    connection,
                    INVALID_FIELD,
                    f"ClientID {container_id} already in use",
                    {symbol("invalid-field"): symbol("container-id")},
                )

            return already_connected
        if self.stopping:
            return lambda: refuse_connection(connection, CONNECTION_FORCED, "server shutting down")
        return None

    def connection_ended(self, connection: Connection, *, abrupt: bool) -> None:
        """The connection closed (a close frame: ``abrupt=False``) or was lost; its links end as abrupt."""
        state = connection_state(connection)
        if state is None:
            return
        state.closed = True
        self.connections.remove(state)
        how = "lost" if abrupt else "closed"
        log.info(
            "connection %s: container-id %r, principal %r, from %s",
            how,
            state.container_id,
            state.user,
            state.peer,
            extra={"event": f"connection-{how}", "container_id": state.container_id, "principal": state.user,
                   "peer": remote(state.peer)},
        )  # fmt: skip
        self._control().connection_ended(state, abrupt=abrupt)
        self.end_links(list(state.links))
        state.links.clear()

    def close_connection(self, state: ConnectionState, description: str) -> None:
        """End an open connection from the server's side (an operator's ``subgate connections close``): a close
        with ``amqp:connection:forced``, the socket closed once it is written, and everything the connection held
        ended now, as for a close frame (its remove-with-session branches go at once)."""
        connection = state.connection
        connection.condition = Condition(CONNECTION_FORCED, description)
        connection.close()
        end_after_output(connection)
        self.connection_ended(connection, abrupt=False)

    def link_name_fits(self, link: Link, state: ConnectionState) -> bool:
        """A link name too long for a detach repeating it to fit the client's frames closes the connection
        (with the reason); any other problem with the name is the attach's refusal (``gateway.attach``)."""
        try:
            check_link_name(peer_text("attach name", lambda: link.name) or "")
        except Refused as refusal:
            if refusal.condition == INVALID_FIELD:
                log.info(
                    "closing the connection of %s: %s", state.container_id, refusal.description, extra=ATTACH_REFUSED
                )
                connection = link.connection
                connection.condition = Condition(refusal.condition, refusal.description)
                connection.close()
                end_after_output(connection)
                return False
        return True

    # -- sessions --------------------------------------------------------------------------------------------
    def session_opened(self, session: Session) -> None:
        """The peer's begin: answered, and ended at once with the reason past ``max-sessions-per-connection``
        (AMQP part 2.5.1: the begin is answered first); the connection's other sessions go on."""
        if session.state & Endpoint.LOCAL_CLOSED:
            return  # ended before its begin was answered (``end_session``)
        state = connection_state(session.connection)
        session.incoming_capacity = SESSION_CAPACITY
        session.open()
        if state is None:
            return
        refusal = session_refusal(state.sessions, self.limits)
        if refusal is not None:
            log.info("ending a session of %s: %s", state.container_id, refusal, extra=refused_as("session-refused"))
            session.condition = Condition(RESOURCE_LIMIT, refusal)
            session.close()
            return
        state.sessions += 1
        session._sg_counted = True  # type: ignore[attr-defined]  # our attribute on proton's wrapper

    def session_ended(self, session: Session) -> None:
        state = connection_state(session.connection)
        if state is not None and getattr(session, "_sg_counted", False):
            session._sg_counted = False  # type: ignore[attr-defined]
            state.sessions -= 1
        if state is not None:
            ending = [ls for ls in state.links if ls.link.session == session]
            self.end_links(ending)
            state.links.difference_update(ending)
        if not session.state & Endpoint.LOCAL_CLOSED:
            session.close()

    def end_session(self, session: Session, condition: str, description: str) -> None:
        """End a session from our side with an error (``gateway.frame_gate``: a protocol violation on it); its
        links end now, and its begin is answered first if it was not yet (AMQP part 2.5.1)."""
        log.info(
            "ending a session of %s: %s",
            _peer_name(session.connection),
            description,
            extra=refused_as("session-refused"),
        )
        if session.state & Endpoint.LOCAL_UNINIT:
            session.incoming_capacity = SESSION_CAPACITY
            session.open()
        session.condition = Condition(condition, description)
        self.session_ended(session)

    # -- links -----------------------------------------------------------------------------------------------
    def refuse_link(self, link: Link, condition: str, description: str) -> None:
        """Refuse the peer's attach before any handler read it (``gateway.frame_gate``: a field proton would
        rewrite); the broker's own attach handler then leaves it alone (it is closed on our side)."""
        log.info("refused attach from %s: %s", _peer_name(link.connection), description, extra=ATTACH_REFUSED)
        if link.state & Endpoint.LOCAL_UNINIT:
            refuse_attach(link, condition, description)

    def steal_link(self, link: Link, description: str) -> None:
        """The peer attached this link's name again (AMQP part 2.6.1): our attachment is closed with
        ``amqp:link:stolen`` and the new attachment goes on once the peer has answered (docs/protocol.md, "Link
        names"). Our side ends as on a detach, so a durable subscription stays for the new attachment."""
        log.info(
            "link stolen on the connection of %s: %s", _peer_name(link.connection), description, extra=_LINK_STOLEN
        )
        if link.state & Endpoint.LOCAL_UNINIT:
            refuse_attach(link, LINK_STOLEN, description)
            return
        if link.state & Endpoint.LOCAL_CLOSED:
            return
        link_state: LinkState | None = getattr(link, "_sg", None)
        if link_state is not None:
            self.end_link(link_state, abrupt=False, closed=False)
            link_state.conn.forget(link_state)
        link.condition = Condition(LINK_STOLEN, description)
        link.close()

    def link_admitted(self, link: Link, state: ConnectionState) -> bool:
        """Count the peer's attach against its session's ``max-links-per-session``; past it the attach is
        answered and detached with the reason (False). The count drops at the peer's detach (``link_ended``)."""
        session = link.session
        attached: int = getattr(session, "_sg_links", 0)
        refusal = link_refusal(attached, self.limits)
        if refusal is not None:
            log.info("refused attach from %s: %s", state.container_id, refusal, extra=ATTACH_REFUSED)
            refuse_attach(link, RESOURCE_LIMIT, refusal)
            return False
        session._sg_links = attached + 1  # our attributes on proton's wrappers
        link._sg_counted = True  # type: ignore[attr-defined]
        return True

    def end_links(self, ending: list[LinkState]) -> None:
        """End several links at once (session end, connection loss), as abrupt: their consumers leave their
        queues first, so a message returned by one of them (or by a rolled-back transaction) is not handed to
        another link that is about to end too, and counted twice."""
        for link_state in ending:
            link_state.withdraw()
        for link_state in ending:
            self.end_link(link_state, abrupt=True, closed=False)

    def end_link(self, link_state: LinkState, *, abrupt: bool, closed: bool) -> None:
        if link_state.closed:
            return
        link_state.closed = True
        link_state.on_end(abrupt=abrupt, closed=closed)
        if link_state.owns is not None:
            self.delete_temporary(link_state.owns)

    def link_ended(self, link: Link, *, closed: bool) -> None:
        """The peer detached (closed=False) or closed a link: end our side the same way."""
        if getattr(link, "_sg_counted", False):
            link._sg_counted = False  # type: ignore[attr-defined]
            session = link.session
            session._sg_links = getattr(session, "_sg_links", 1) - 1
        link_state: LinkState | None = getattr(link, "_sg", None)
        if link_state is not None:
            self.end_link(link_state, abrupt=False, closed=closed)
            link_state.conn.forget(link_state)
        if not link.state & Endpoint.LOCAL_CLOSED:
            if closed:
                link.close()
            else:
                link.detach()
        # Free it: a detached link keeps its name in the session, and Qpid JMS re-attaches a durable
        # subscription under the same name on the same session (proton would refuse "link name already attached").
        link.free()

    def close_link(self, link_state: LinkState, condition: Condition | None = None) -> None:
        """The server ends a link (detach closed=true, with ``condition`` when given); the peer's answering
        detach then only frees it (``link_ended``)."""
        self.end_link(link_state, abrupt=False, closed=True)
        link_state.conn.forget(link_state)
        link = link_state.link
        if not link.state & Endpoint.LOCAL_CLOSED:
            if condition is not None:
                link.condition = condition
            link.close()

    # -- nodes -----------------------------------------------------------------------------------------------
    def delete_temporary(self, name: str) -> None:
        self.authority.forget_temporary(name)
        node = self.router.node(name)
        if node is not None:
            self._delete_nodes([node], lambda gone: f"temporary destination {gone.name!r} was deleted")

    def remove_branch(self, branch: str) -> list[str]:
        """Remove every topic at and below ``branch`` (remove-with-session, management DELETE)."""
        local = [topic for topic in self.router.topics.branch(branch) if topic.replica_of is None]
        return self.remove_topics(local)  # a replica goes when its primary removes it (docs/fanout.md)

    def remove_topics(self, topics: list[Topic]) -> list[str]:
        """Remove topics. Consumers of plain-path subscriptions on them are closed with amqp:resource-deleted
        and those subscriptions deleted; selector subscriptions stay (a topic created again matches them)."""
        self._delete_nodes(list(topics), lambda gone: f"topic {gone.name!r} was removed")
        removed = {id(topic) for topic in topics}
        for sub in self.subscriptions.named():  # those without a consumer to close (detached durable ones)
            if id(sub.topic) in removed:
                self.subscriptions.delete(sub)
        return [topic.name for topic in topics]

    def _delete_nodes(self, nodes: list[Node], reason: Callable[[Node], str]) -> None:
        """Take nodes out of service: the links that use them are closed with amqp:resource-deleted (``reason``
        names the node) and their messages dropped, in one pass over the links. A topic leaves the tree first,
        so only its own subscriptions' queues remain on it."""
        owners: dict[int, Node] = {}  # a node, and each queue it owns, by id -> the node
        queues: list[Queue] = []
        for node in nodes:
            self.router.remove(node)
            own = [node] if isinstance(node, Queue) else list(node.subscriptions)
            owners.update((id(queue), node) for queue in own)
            owners[id(node)] = node
            queues.extend(own)
        for state in list(self.connections.open):
            for link_state in list(state.links):
                if link_state.closed:
                    continue
                owner = link_state.uses(owners)
                if owner is not None:
                    self.close_link(link_state, Condition(RESOURCE_DELETED, reason(owner)))
        for queue in queues:
            queue.purge()

    # -- shutdown --------------------------------------------------------------------------------------------
    def begin_shutdown(self, io: ServerIO, *, flush: bool = True) -> None:
        """Stop accepting, let queued journal writes commit and be acknowledged (unless not ``flush``: the
        journal writer is gone), then close connections."""
        if self.stopping:
            return
        self.stopping = True
        self.housekeeping.stop()
        log.info("shutting down: no new connections; %s", "flushing the journal" if flush else "the journal is lost")
        io.stop_listening()
        done = False

        def close_connections(_error: BaseException | None = None) -> None:
            nonlocal done
            if done:
                return
            done = True
            for state in list(self.connections.open):
                connection = state.connection
                if not connection.state & Endpoint.LOCAL_CLOSED:
                    connection.condition = Condition(CONNECTION_FORCED, "server shutting down")
                    connection.close()
            self.housekeeping.schedule(0.3, finish)

        def finish() -> None:
            io.flush_dirty()
            io.close_all()
            if self.on_stopped is not None:
                self.on_stopped()

        if not flush:
            close_connections()
            return
        self._barrier(close_connections)
        self.housekeeping.schedule(10.0, close_connections)  # a stuck store must not keep the server from stopping
