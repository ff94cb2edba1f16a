"""Every accepted connection's socket and transport: moving bytes between them, and ending them.

Owns the table of open channels (``gateway.channels.Channel``), their epoll registrations after accept, the TLS
layer of those accepted on the TLS listener (``gateway.tls.TlsLayer``: every byte read goes through it before the
SASL phase or the transport sees it, every byte written after; ``outgoing`` then holds TLS records), the SASL
phase of each (``gateway.sasl_phase``, which writes and closes through this class), the hand-off to a proton
``Transport`` (server mode, no SASL layer) bound to a new ``Connection``, batched writes (a transport with output is
flushed once per loop turn; a socket is watched for writability only while a send is short), each connection's
guard (``_fail``: an exception while serving it is logged and closes that connection only) and its deadlines
(``tick``). ``gateway.io.ServerIO`` accepts the sockets and runs the wait.

Thread rule: reactor thread only.
"""

from __future__ import annotations

import functools
import logging
import select
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from proton import Condition, Endpoint, Event, Transport
from proton.reactor import Container

from subgate.engine.admission import Admission, ConnectionLimits
from subgate.engine.frame_scan import CloseConnection, Forward
from subgate.engine.login_throttle import LoginThrottle
from subgate.engine.repeats import refused_as
from subgate.engine.transport_policy import TransportRules
from subgate.gateway.channels import READ, WRITE, Channel
from subgate.gateway.frame_gate import FrameGate, FrameHooks
from subgate.gateway.guard import schedule
from subgate.gateway.sasl import CredentialsReceived
from subgate.gateway.sasl_phase import SaslPhase
from subgate.gateway.tls import TlsFailure, TlsLayer
from subgate.mapping.errors import INTERNAL_ERROR, RESOURCE_LIMIT

log = logging.getLogger("subgate.io")

_READ = READ
_WRITE = WRITE
_RECV_MAX = 1 << 20
_TLS_CHUNK = 256 * 1024  # transport output encrypted per step: bounds what a slow TLS reader makes us copy
_CLOSING = Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED


class ChannelIO:
    """The sockets and transports of the accepted connections (see the module docstring)."""

    def __init__(
        self,
        container: Container,
        epoll: select.epoll,
        admission: Admission,
        *,
        authenticate: Callable[[int, CredentialsReceived], None],
        configure_transport: Callable[[Transport], None],
        withdraw: Callable[[int], None] | None = None,
        rules: TransportRules | None = None,
        throttle: LoginThrottle | None = None,
        frame_hooks: FrameHooks | None = None,
    ) -> None:
        self._container = container
        self._frame_hooks = frame_hooks
        self._epoll = epoll
        self._admission = admission
        timers = functools.partial(schedule, container)
        self._sasl = SaslPhase(self, authenticate, withdraw, rules, throttle=throttle, schedule=timers)
        self._configure_transport = configure_transport
        self._channels: dict[int, Channel] = {}
        self._dirty: set[Channel] = set()
        self.transports: dict[Any, Channel] = {}  # transport pointer -> its channel (gateway.loop's fast path)
        self.ended: list[Channel] = []  # dropped, their proton attributes still to let go (``release_ended``)

    @property
    def channels(self) -> list[Channel]:
        return list(self._channels.values())

    def get(self, fd: int) -> Channel | None:
        return self._channels.get(fd)

    def add(self, channel: Channel, tls: ssl.SSLContext | None = None) -> None:
        """An admitted (or to be refused) socket: its SASL phase begins with its first byte (with ``tls``: its
        first byte after the TLS handshake)."""
        sock = channel.sock
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            channel.tls = TlsLayer(tls)
        self._sasl.begin(channel)
        self._channels[channel.fd] = channel
        self._epoll.register(channel.fd, _READ)
        self._container._selectables += 1

    def sasl_verdict(self, event: Event) -> None:
        self._sasl.on_verdict(event)

    @property
    def auth_failures(self) -> Mapping[str, int]:
        return self._sasl.failures

    def write(self, channel: Channel, data: bytes) -> None:
        if data:
            channel.outgoing += data if channel.tls is None else channel.tls.encrypt(data)
        self._write_outgoing(channel)

    def _write_outgoing(self, channel: Channel) -> None:
        while channel.outgoing and not channel.closed:
            try:
                sent = channel.sock.send(channel.outgoing)
            except (BlockingIOError, InterruptedError):
                self._watch(channel, _READ | _WRITE)
                return
            except OSError:
                self.drop(channel)
                return
            channel.outgoing = channel.outgoing[sent:]

    def close_after_flush(self, channel: Channel) -> None:
        self._write_outgoing(channel)
        if not channel.closed:
            try:
                channel.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self.drop(channel)

    def start_amqp(self, channel: Channel, leftover: bytes) -> None:
        channel.sasl = None
        container = self._container
        connection = container.connection()
        connection._acceptor = self  # type: ignore[assignment]  # what proton's own acceptor sets
        connection._channel = channel
        transport = Transport(Transport.SERVER)
        self._configure_transport(transport)
        transport.bind(connection)
        transport._channel = channel
        if self._frame_hooks is not None:
            channel.gate = FrameGate(transport.max_frame_size, self._frame_hooks)
        self.transports[transport._impl] = channel
        channel.transport = transport
        channel.connection = connection
        if channel.outgoing:
            self._write_outgoing(channel)
        if leftover:
            self._push(channel, leftover)
        self._dirty.add(channel)

    def _push(self, channel: Channel, data: bytes) -> None:
        """The peer's bytes into its transport, through its frame gate (``gateway.frame_gate``) when it has one."""
        transport = channel.transport
        assert transport is not None
        channel.clock.bytes_in += len(data)
        gate = channel.gate
        if gate is None:
            _push_all(transport, data)
        else:
            connection = channel.connection
            assert connection is not None
            for action in gate.scan.feed(data):
                if type(action) is Forward:
                    _push_all(transport, action.data)
                elif type(action) is CloseConnection:
                    log.info(
                        "closing connection from %s: %s", channel.peer, action.description, extra=_PROTOCOL_VIOLATION
                    )
                    self._abort(channel, action.condition, action.description)
                    return
                else:
                    gate.apply(action, connection)
        self._dirty.add(channel)

    def readable(self, channel: Channel) -> None:
        transport = channel.transport
        try:
            data = channel.sock.recv(_RECV_MAX)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.info("connection from %s lost: %s", channel.peer, exc, extra=_LOST)
            data = b""
        if not data:
            channel.eof = True
            if transport is None:
                self.drop(channel)
            else:
                if channel.gate is not None:  # a frame cut short: proton sees it, as without the gate
                    _push_all(transport, channel.gate.scan.take_partial())
                transport.close_tail()
                self._dirty.add(channel)
            return
        tls = channel.tls
        if tls is not None:
            try:
                data = tls.receive(data)
            except TlsFailure as exc:
                log.info("TLS with %s failed: %s", channel.peer, exc, extra=refused_as("tls-failure"))
                channel.outgoing += tls.output()  # the alert, when there is one
                self.close_after_flush(channel)
                return
            channel.outgoing += tls.output()  # the handshake's answers
            self._write_outgoing(channel)
            if tls.established and not tls.announced:
                tls.announced = True
                self._sasl.tls_established(channel, tls.peer_certificate())
            if not data or channel.closed:
                return
        if transport is None:
            self._sasl.receive(channel, data)
        else:
            self._push(channel, data)

    def _flush(self, channel: Channel) -> None:
        transport = channel.transport
        if transport is None or channel.closed:
            return
        tls = channel.tls
        while True:
            if tls is not None and channel.outgoing:  # TLS records of earlier output go first
                self._write_outgoing(channel)
                if channel.outgoing or channel.closed:
                    return
            pending = transport.pending()
            if pending < 0:  # head closed: everything has been written
                if transport.capacity() < 0 or channel.eof or channel.ending:
                    self.drop(channel)
                else:
                    self._watch(channel, _READ)
                return
            if pending == 0:
                if channel.ending:
                    self.drop(channel)
                    return
                if channel.eof:
                    # The peer is gone and proton has nothing left to send. proton-c reports a closed tail as
                    # an error and closes the head itself, except when the input ended inside a frame: then it
                    # waits for the rest forever, and an EOF socket left in epoll spins. End it here.
                    log.info("connection from %s ended in the middle of a frame", channel.peer, extra=_TRUNCATED)
                    transport.close_head()
                    self.drop(channel)
                    return
                self._watch(channel, _READ)
                return
            if tls is not None:  # a chunk at a time, encrypted only once the previous one is written
                output = transport.peek(min(pending, _TLS_CHUNK)) or b""
                transport.pop(len(output))
                channel.outgoing += tls.encrypt(output)
                continue
            try:
                sent = channel.sock.send(transport.peek(pending) or b"")
            except (BlockingIOError, InterruptedError):
                self._watch(channel, _READ | _WRITE)
                return
            except OSError as exc:
                log.info("connection from %s lost while writing: %s", channel.peer, exc, extra=_LOST)
                transport.close_head()
                transport.close_tail()
                self.drop(channel)
                return
            transport.pop(sent)
            if sent < pending:
                self._watch(channel, _READ | _WRITE)
                return

    def _watch(self, channel: Channel, mask: int) -> None:
        if channel.watching != mask and not channel.closed:
            channel.watching = mask
            self._epoll.modify(channel.fd, mask)

    def drop(self, channel: Channel) -> None:
        if channel.closed:
            return
        channel.closed = True
        self._admission.release(channel.address, channel.verdict)
        self._sasl.forget(channel)
        self._dirty.discard(channel)
        self._channels.pop(channel.fd, None)
        try:
            self._epoll.unregister(channel.fd)
        except (OSError, ValueError):
            pass
        channel.sock.close()
        self._container._selectables -= 1
        transport = channel.transport
        if transport is not None:
            self.ended.append(channel)
            self.transports.pop(transport._impl, None)
            # Make sure proton sees the end of the stream so the connection is cleaned up (transport events).
            if transport.capacity() >= 0:
                transport.close_tail()
            if transport.pending() >= 0:
                transport.close_head()

    def close(self, channel: Channel) -> None:
        """Write what the transport still holds, then close the socket."""
        self._flush(channel)
        self.drop(channel)

    def close_all(self) -> None:
        for channel in list(self._channels.values()):
            self.close(channel)

    def mark_dirty(self, channel: Channel) -> None:
        """The channel's transport has output: flush it at the end of this loop turn."""
        self._dirty.add(channel)

    def flush_dirty(self) -> None:
        dirty = self._dirty
        while dirty:
            channel = dirty.pop()
            try:
                self._flush(channel)
                _output_taken(channel)
            except Exception:
                self._fail(channel, "writing its output")

    def ready(self, channel: Channel, mask: int) -> None:
        """epoll reported ``mask`` for this channel's socket."""
        try:
            self._ready(channel, mask)
        except Exception:
            self._fail(channel, "handling its input")

    def _ready(self, channel: Channel, mask: int) -> None:
        if mask & _WRITE:
            if channel.transport is None:
                self._write_outgoing(channel)
                if not channel.outgoing:
                    self._watch(channel, _READ)
            else:
                self._dirty.add(channel)
        if mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
            self.readable(channel)

    def _fail(self, channel: Channel, doing: str) -> None:
        """The guard of one connection: an exception while serving it is a bug, logged with its traceback; that
        connection is closed with ``amqp:internal-error`` and every other one goes on."""
        log.exception("internal error on the connection from %s while %s", channel.peer, doing)
        try:
            self._abort(channel, INTERNAL_ERROR, "internal error; see the server log")
        except Exception:
            log.exception("could not close the connection from %s after an internal error", channel.peer)
            self.drop(channel)

    def _abort(self, channel: Channel, condition: str, description: str) -> None:
        """Close a connection on our side now: a ``close`` with the error if the AMQP phase has begun, whatever
        can still be written, then the socket."""
        connection = channel.connection
        if connection is not None and not connection.state & Endpoint.LOCAL_CLOSED:
            if not connection.state & Endpoint.LOCAL_ACTIVE:
                connection.open()
            connection.condition = Condition(condition, description)
            connection.close()
        if channel.transport is not None:
            self._flush(channel)
        else:
            self._write_outgoing(channel)
        self.drop(channel)

    def tick(self, now: float, limits: ConnectionLimits, next_tick: float) -> float:
        """Drive transport timers (idle time-out, heartbeats) and our own deadlines for every connection; the
        nearest deadline, no later than ``next_tick``."""
        for channel in list(self._channels.values()):
            if channel.closed:
                continue
            try:
                deadline = self._tick_channel(channel, now, limits)
            except Exception:
                self._fail(channel, "checking its timers")
                continue
            if deadline:
                next_tick = min(next_tick, deadline)
        return next_tick

    def _tick_channel(self, channel: Channel, now: float, limits: ConnectionLimits) -> float:
        transport, connection = channel.transport, channel.connection
        closing = connection is not None and connection.state & _CLOSING == Endpoint.LOCAL_CLOSED
        frames_in = transport.frames_input if transport is not None else 0
        overdue = channel.clock.overdue(now, limits, frames_in, bool(closing))
        if overdue is not None:
            kind = _DEADLINES.get(overdue.split(" ", 1)[0], "close-deadline")
            log.info("closing connection from %s: %s", channel.peer, overdue, extra=refused_as(kind))
            self._abort(channel, RESOURCE_LIMIT, overdue)
            return 0.0
        if transport is None:
            return 0.0
        self._dirty.add(channel)
        return float(transport.tick(now))


# Kinds of the per-connection log lines held back by ``engine.repeats`` (docs/operations.md).
_DEADLINES = {"handshake": "handshake-deadline", "frame": "frame-deadline"}  # by the first word of the reason
_TRUNCATED = refused_as("truncated-frame")
_LOST = refused_as("connection-lost")
_PROTOCOL_VIOLATION = refused_as("protocol-violation")  # a frame the scan refused (engine.frame_scan)


def _push_all(transport: Transport, data: bytes) -> None:
    view = memoryview(data)
    while view:
        capacity = transport.capacity()
        if capacity <= 0:
            # The transport will not take more (closed tail): the rest is discarded, the peer is done.
            break
        transport.push(bytes(view[:capacity]))
        view = view[capacity:]


def _output_taken(channel: Channel) -> None:
    """After a write: tell the connection how much of its output its socket has not taken yet
    (``ConnectionState.output_taken``: consumers parked behind a slow socket go on once it catches up)."""
    state = getattr(channel.connection, "_sg", None)
    transport = channel.transport
    if state is not None and state.output and transport is not None and not channel.closed:
        state.output_taken(_unsent(transport, channel.connection) + len(channel.outgoing))


def _unsent(transport: Transport, connection: Any) -> int:
    """Bytes of a connection's output not written yet: framed in the transport, or still in its sessions'
    deliveries (held back by the peer's session window)."""
    unsent = max(transport.pending(), 0)
    session = connection.session_head(0) if connection is not None else None
    while session is not None:
        unsent += session.outgoing_bytes
        session = session.next(0)
    return unsent


def release_ended(ended: list[Channel]) -> None:
    """Let go of the attributes we set on the proton objects of dropped channels (``ChannelIO.ended``, emptied);
    ``ServerIO`` runs it when the collector is empty, so every event about their end (the lifecycle's
    ``connection_ended`` reads ``_sg``) was handled.

    proton keeps a wrapper's attributes in the C object's record, and the Python binding holds that dict until the
    C object is freed; the C object is freed when its last wrapper is, and ``Channel``, ``ConnectionState`` and
    link states (in the dicts) hold wrappers. Without this every connection stayed in memory for good (about
    26 KiB each: found by the RSS check of the fuzz run, issue 19 item 2)."""
    for channel in ended:
        endpoints: list[Any] = [channel.connection, channel.transport]
        link = channel.connection.link_head(0) if channel.connection is not None else None
        while link is not None:  # a link's state (``_sg``) holds its wrapper and the connection's state
            endpoints.append(link)
            link = link.next(0)
        for endpoint in endpoints:
            if endpoint is not None:
                attributes = endpoint.__dict__["_attrs"]
                for name in ("_channel", "_sg"):
                    attributes.pop(name, None)
    ended.clear()
