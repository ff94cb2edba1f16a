"""One Qpid-JMS-shaped connection (``JmsWire``): who the client says it is in its open (§1.3), SASL then the open
and the hidden connection session (§1.2, §1.7), what each broker event means (answers to detach, end, close and
drain, deliveries to their consumers and pending sends), the connection-level JMS operations (sessions,
unsubscribe, temporary destinations) and teardown. The top of the package: it builds on every other module.
"""

from __future__ import annotations

import uuid
from typing import Any

from proton import Delivery, Endpoint, Event, Link, Terminus, Transport, symbol

from tests.support.jms.errors import ConnectionRefused, JmsError, RefusedLocally, RemoteError
from tests.support.jms.frames import DELETE_ON_CLOSE, _put_symbols, described_list
from tests.support.jms.links import Consumer, TemporaryDestination, _LinkEnd
from tests.support.jms.session import JmsSession
from tests.support.jms.subscriptions import SubscriptionTracker
from tests.support.jms.vocabulary import QUEUE, TEMP_QUEUE, TEMP_TOPIC, TOPIC
from tests.support.jms.wire import MAX_FRAME_SIZE, TIMEOUT, Wire, _AttachShape

CHANNEL_MAX = 32767
IDLE_TIMEOUT = 60.0  # proton-c advertises half of it (30000 ms), as proton-j does (§1.3)
PRODUCT = "QpidJMS"
CLIENT_VERSION = "2.11.0-SNAPSHOT"
PLATFORM = "JVM: 17.0.15, 17.0.15+6, Eclipse Adoptium, OS: Linux, 6.8.0, amd64"
CONNECTION_CAPABILITIES = ("sole-connection-for-container", "DELAYED_DELIVERY", "ANONYMOUS-RELAY", "SHARED-SUBS")
ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"
KNOWN_DIFFERENCES = (
    "begin next-outgoing-id is 0 (proton-c numbering), Qpid JMS sends 1",
    "modified dispositions carry delivery-failed and undeliverable-here explicitly, also when false",
    "no anonymous-producer fallback (per-send links) when the broker does not offer ANONYMOUS-RELAY",
)


def _split_address(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    return host or "127.0.0.1", int(port or 5672)


class JmsWire(Wire):
    """One Qpid-JMS-shaped connection (see the package docstring). Build it with ``JmsWire.connect``."""

    def __init__(self, host: str, port: int, *, client_id: str | None = None, timeout: float = TIMEOUT) -> None:
        self.client_id = client_id
        self.container_id = client_id or f"ID:{uuid.uuid4()}:1"
        self.connection_id = f"ID:{uuid.uuid4()}:1"
        self.sessions: list[JmsSession] = []
        self.hidden: JmsSession | None = None
        self.offered_capabilities: set[str] = set()
        self.remote_properties: dict[str, Any] = {}
        self.subscriptions = SubscriptionTracker()
        self._session_seq = 0
        self._temp_seq = 0
        super().__init__(host, port, timeout=timeout)

    # -- setup -----------------------------------------------------------------------------------------------------
    @classmethod
    def connect(
        cls,
        address: str,
        client_id: str | None = None,
        user: str | None = None,
        password: str | None = None,
        *,
        timeout: float = TIMEOUT,
        open: bool = True,
    ) -> JmsWire:
        """SASL, then (unless ``open=False``, the deferred open of §1.2) the open and the hidden session.

        Raises:
            SaslFailed, ConnectionRefused (e.g. ClientID in use: ``condition``/``description``/``info``).
        """
        host, port = _split_address(address)
        wire = cls(host, port, client_id=client_id, timeout=timeout)
        try:
            wire.sasl(user, password)
            if open:
                wire.open()
        except BaseException:
            wire.abort()
            raise
        return wire

    def open(self) -> None:
        """Open (§1.3), wait for the broker's open, then begin the hidden connection session (§1.7)."""
        transport = Transport(Transport.CLIENT)
        transport.max_frame_size = MAX_FRAME_SIZE
        transport.channel_max = CHANNEL_MAX
        transport.idle_timeout = IDLE_TIMEOUT
        conn = self.connection
        conn.container = self.container_id
        conn.hostname = self.host
        conn.desired_capabilities = [symbol(c) for c in CONNECTION_CAPABILITIES]
        conn.properties = {symbol("product"): PRODUCT, symbol("version"): CLIENT_VERSION, symbol("platform"): PLATFORM}
        conn.collect(self.collector)
        transport.bind(conn)
        self.transport = transport
        conn.open()
        leftover, self._inbuf = self._inbuf, b""
        self._received(leftover)
        self.pump(lambda: not conn.state & Endpoint.REMOTE_UNINIT, what="the broker's open")
        self.remote_properties = {str(k): v for k, v in (conn.remote_properties or {}).items()}
        self.offered_capabilities = {str(c) for c in (conn.remote_offered_capabilities or ())}
        if ESTABLISHMENT_FAILED in self.remote_properties or conn.state & Endpoint.REMOTE_CLOSED:
            self._pump(lambda: bool(conn.state & Endpoint.REMOTE_CLOSED), None)
            self.remote_error = RemoteError.of(conn.remote_condition)
            self._service()
            self.sock.close()
            self.socket_closed = True
            raise ConnectionRefused("connection refused", self.remote_error)
        self.hidden = JmsSession(self, f"{self.connection_id}:0", transacted=False, hidden=True)

    # -- events ----------------------------------------------------------------------------------------------------
    def _dispatch(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY and event.delivery is not None:
            self._delivery(event.delivery)
        elif kind == Event.LINK_FLOW and event.link is not None:
            link = event.link
            if link.is_sender and link.drain_mode and link.credit > 0:
                link.drained()  # §5.2: a drained answer at once
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH):
            endpoint = getattr(event.link, "_jms", None)
            if endpoint is not None:
                endpoint._remote_detach(kind == Event.LINK_REMOTE_CLOSE)
        elif kind == Event.SESSION_REMOTE_CLOSE:
            owner = getattr(event.session, "_jms", None)
            if owner is not None:
                owner._remote_end()
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            self.remote_error = RemoteError.of(self.connection.remote_condition)
            if not self.connection.state & Endpoint.LOCAL_CLOSED:
                self.connection.close()  # §1.8: answer every broker close

    def _delivery(self, delivery: Delivery) -> None:
        link = delivery.link
        if link.is_sender:
            pending = getattr(delivery, "_jms_pending", None)
            if pending is not None:
                pending._updated(delivery)
            return
        if not delivery.readable or delivery.partial:
            return
        raw = link.recv(delivery.pending) if delivery.pending else b""
        link.advance()
        consumer = getattr(link, "_jms", None)
        if delivery.aborted or not isinstance(consumer, Consumer):
            delivery.settle()
            return
        consumer._arrived(delivery, bytes(raw or b""))

    # -- connection-level JMS operations ---------------------------------------------------------------------------
    def session(self, transacted: bool = False, *, declare: bool = True) -> JmsSession:
        """A JMS Session: a begin, plus the coordinator and a declare when ``transacted`` (§6.1)."""
        self._session_seq += 1
        return JmsSession(self, f"{self.connection_id}:{self._session_seq}", transacted=transacted, declare=declare)

    def unsubscribe(self, name: str, timeout: float | None = None) -> None:
        """``Session.unsubscribe(name)`` (§3.1) on the hidden session.

        Raises:
            RefusedLocally while this connection has an active durable subscriber of that name (§2.7);
            JmsError carrying the broker's error (not-found on the refused lookup, resource-locked on the detach).
        """
        if self.subscriptions.active(name):
            raise RefusedLocally(f"Can't remove an active durable subscription: {name}")
        hidden = self._hidden()
        link_name = name if self.client_id else f"{name}|global"
        link = hidden.session.receiver(link_name)
        link.source.type = Terminus.UNSPECIFIED
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        caps = () if self.client_id else ("shared", "global")
        self._expect_attach(link_name, _AttachShape(desired_capabilities=caps))
        lookup = _LinkEnd(self, link)
        link.open()
        lookup._await_attach(timeout, check=False)
        if lookup.refusal is not None:
            raise JmsError(f"unsubscribe {name!r} refused", lookup.refusal)
        error = lookup.close(timeout)
        if error is not None:
            raise JmsError(f"unsubscribe {name!r} failed", error)

    def create_temporary_queue(self, timeout: float | None = None) -> TemporaryDestination:
        return self._temporary(TEMP_QUEUE, timeout)

    def create_temporary_topic(self, timeout: float | None = None) -> TemporaryDestination:
        return self._temporary(TEMP_TOPIC, timeout)

    def _temporary(self, kind: str, timeout: float | None) -> TemporaryDestination:
        """§5.3: a sender with a dynamic target on the hidden session; the reply target names the node."""
        self._temp_seq += 1
        creator = "temp-queue-creator" if kind == TEMP_QUEUE else "temp-topic-creator"
        link = self._hidden().session.sender(f"qpid-jms:{creator}:{self.connection_id}:{self._temp_seq}")
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        target = link.target
        target.dynamic = True
        target.durability = Terminus.NONDURABLE
        target.expiry_policy = Terminus.EXPIRE_WITH_LINK
        target.properties.put_object({symbol("lifetime-policy"): described_list(DELETE_ON_CLOSE, [])})
        _put_symbols(target.capabilities, [kind])
        destination = TemporaryDestination(self, link, kind)
        link.open()
        destination._await_attach(timeout, check=True)
        destination.address = link.remote_target.address
        return destination

    def _hidden(self) -> JmsSession:
        if self.hidden is None:
            raise JmsError("the connection is not open")
        return self.hidden

    def node_address(self, address: str, kind: str) -> str:
        """Apply the broker-announced queue-prefix / topic-prefix (§1.4) to a non-temporary address."""
        prefix = self.remote_properties.get("queue-prefix" if kind == QUEUE else "topic-prefix")
        if kind in (QUEUE, TOPIC) and prefix and not address.startswith(prefix):
            return f"{prefix}{address}"
        return address

    # -- teardown --------------------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> RemoteError | None:
        """``Connection.close()``: discharge(fail) for transacted sessions, then close with no ends or detaches."""
        try:
            remote_closed = self.connection.state & Endpoint.REMOTE_CLOSED
            if self.transport is not None and not self.socket_closed and not remote_closed:
                for session in self.sessions:
                    session._rollback_on_close(timeout)
                if not self.connection.state & Endpoint.LOCAL_CLOSED:
                    self.connection.close()
                self._pump(lambda: bool(self.connection.state & Endpoint.REMOTE_CLOSED), timeout)
        finally:
            self.abort()
        return self.remote_error

    def __enter__(self) -> JmsWire:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        try:
            self.close()
        except Exception:
            if exc_type is None:  # never hide the test's own failure behind a failing close
                raise
