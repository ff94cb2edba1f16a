"""Socket I/O for the container: an epoll loop, the listener, admission, and the bytes of every connection.

Owns sockets and proton ``Transport`` objects. It replaces proton's default ``IOHandler`` as the container's
global handler because proton-c's built-in SASL cannot check PLAIN passwords: each accepted socket is first
admitted or refused (``engine.admission``), then runs its SASL phase (``gateway.sasl_phase``: password checks go
to the ``Authenticator``'s worker threads and come back as the ``sasl_verdict`` application event), and only then
gets a proton ``Transport`` (server mode, no SASL layer) bound to a new ``Connection`` on the container's
collector. It also batches writes: transports that produced output are flushed once per loop turn, and a socket
is watched for writability only while a send is short. Every connection has a guard: an exception while serving
it is logged and closes that connection only (``_fail``); its deadlines are checked on every tick.

Thread rule: everything here runs on the reactor thread; ``Authenticator`` callbacks arrive through the
container's ``EventInjector``.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import time
from collections.abc import Callable
from typing import Any

from proton import Condition, Endpoint, Transport
from proton.reactor import Container

from subgate.engine.admission import Admission, ConnectionLimits, Verdict
from subgate.gateway.channels import READ, WRITE, Channel, RateLimitedLog
from subgate.gateway.sasl import CredentialsReceived, SaslServer
from subgate.gateway.sasl_phase import SaslPhase
from subgate.mapping.errors import INTERNAL_ERROR, RESOURCE_LIMIT

log = logging.getLogger("subgate.io")

_READ = READ
_WRITE = WRITE
_RECV_MAX = 1 << 20
_ACCEPT_PAUSE = 0.1  # seconds without accepting after accept() failed (out of file descriptors)
_CLOSING = Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED


class ServerIO:
    """The container's global handler: sockets, SASL, transports, timers (see the module docstring)."""

    def __init__(
        self,
        container: Container,
        *,
        authenticate: Callable[[int, CredentialsReceived], None],
        configure_transport: Callable[[Transport], None],
        withdraw: Callable[[int], None] | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self._container = container
        self._sasl = SaslPhase(self, authenticate, withdraw)
        self._configure_transport = configure_transport
        self._limits = limits or ConnectionLimits()
        self._admission = Admission(self._limits)
        self._refusals_logged = RateLimitedLog(log, interval=1.0)
        self._epoll = select.epoll()
        self._listeners: dict[int, socket.socket] = {}
        self._accept_paused_until = 0.0
        self._channels: dict[int, Channel] = {}
        self._selectables: dict[int, Any] = {}
        self._timed: set[Any] = set()
        self._dirty: set[Channel] = set()
        self.transports: dict[Any, Channel] = {}  # transport pointer -> its channel (gateway.loop's fast path)
        self._next_tick = 0.0
        self.stop_requested = False
        self._wakeups: dict[int, Callable[[], None]] = {}

    def watch_wakeup(self, fd: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the reactor thread whenever a byte arrives on ``fd`` (signal-safe wake-ups)."""
        os.set_blocking(fd, False)
        self._wakeups[fd] = callback
        self._epoll.register(fd, select.EPOLLIN)

    # -- listening -----------------------------------------------------------------------------------------
    def listen(self, host: str, port: int) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
        sock.setblocking(False)
        self._listeners[sock.fileno()] = sock
        self._epoll.register(sock.fileno(), select.EPOLLIN)
        self._container._selectables += 1  # keeps the container's loop running while we listen
        bound = sock.getsockname()
        return bound[0], bound[1]

    def stop_listening(self) -> None:
        for fd, sock in list(self._listeners.items()):
            self._epoll.unregister(fd)
            sock.close()
            self._container._selectables -= 1
        self._listeners.clear()

    def _pause_accepting(self) -> None:
        """Out of file descriptors: stop watching the listeners for a moment instead of spinning on them (a
        listener with a pending connection stays readable, and every accept fails until a descriptor is free)."""
        for fd in self._listeners:
            self._epoll.modify(fd, 0)
        self._accept_paused_until = time.time() + _ACCEPT_PAUSE

    def _resume_accepting(self, now: float) -> None:
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            for fd in self._listeners:
                self._epoll.modify(fd, select.EPOLLIN)

    @property
    def channels(self) -> list[Channel]:
        return list(self._channels.values())

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                self._refusals_logged.info("accept failed: %s; not accepting for %gs", exc, _ACCEPT_PAUSE)
                self._pause_accepting()
                return
            channel = Channel(sock, peer, self._container.mark())
            channel.verdict, reason = self._admission.decide(channel.address)
            if channel.verdict is Verdict.DROP:
                self._refusals_logged.info("closing connection from %s at once: %s", peer, reason)
                self._admission.release(channel.address, channel.verdict)
                sock.close()
                continue
            if channel.verdict is Verdict.REFUSE:
                self._refusals_logged.info("refusing connection from %s: %s", peer, reason)
                channel.refusal = reason
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            channel.sasl = SaslServer(["PLAIN", "ANONYMOUS"])
            self._channels[channel.fd] = channel
            self._epoll.register(channel.fd, _READ)
            self._container._selectables += 1
            log.debug("accepted connection from %s", peer)

    # -- the socket side of the SASL phase (gateway.sasl_phase calls these) ---------------------------------
    def on_sasl_verdict(self, event: Any) -> None:
        self._sasl.on_verdict(event)

    def write(self, channel: Channel, data: bytes) -> None:
        if data:
            channel.outgoing += data
        self._write_outgoing(channel)

    def _write_outgoing(self, channel: Channel) -> None:
        while channel.outgoing and not channel.closed:
            try:
                sent = channel.sock.send(channel.outgoing)
            except (BlockingIOError, InterruptedError):
                self._watch(channel, _READ | _WRITE)
                return
            except OSError:
                self._drop(channel)
                return
            channel.outgoing = channel.outgoing[sent:]

    def close_after_flush(self, channel: Channel) -> None:
        self._write_outgoing(channel)
        if not channel.closed:
            try:
                channel.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._drop(channel)

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
        self.transports[transport._impl] = channel
        channel.transport = transport
        channel.connection = connection
        if channel.outgoing:
            self._write_outgoing(channel)
        if leftover:
            self._push(channel, leftover)
        self._dirty.add(channel)

    # -- the AMQP phase ------------------------------------------------------------------------------------
    def _push(self, channel: Channel, data: bytes) -> None:
        transport = channel.transport
        assert transport is not None
        channel.clock.bytes_in += len(data)
        view = memoryview(data)
        while view:
            capacity = transport.capacity()
            if capacity <= 0:
                # The transport will not take more (closed tail): the rest is discarded, the peer is done.
                break
            transport.push(bytes(view[:capacity]))
            view = view[capacity:]
        self._dirty.add(channel)

    def _readable(self, channel: Channel) -> None:
        transport = channel.transport
        try:
            data = channel.sock.recv(_RECV_MAX)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.info("connection from %s lost: %s", channel.peer, exc)
            data = b""
        if not data:
            channel.eof = True
            if transport is None:
                self._drop(channel)
            else:
                transport.close_tail()
                self._dirty.add(channel)
            return
        if transport is None:
            self._sasl.receive(channel, data)
        else:
            self._push(channel, data)

    def _flush(self, channel: Channel) -> None:
        transport = channel.transport
        if transport is None or channel.closed:
            return
        while True:
            pending = transport.pending()
            if pending < 0:  # head closed: everything has been written
                if transport.capacity() < 0 or channel.eof or channel.ending:
                    self._drop(channel)
                else:
                    self._watch(channel, _READ)
                return
            if pending == 0:
                if channel.ending:
                    self._drop(channel)
                    return
                if channel.eof:
                    # The peer is gone and proton has nothing left to send. proton-c reports a closed tail as
                    # an error and closes the head itself, except when the input ended inside a frame: then it
                    # waits for the rest forever, and an EOF socket left in epoll spins. End it here.
                    log.info("connection from %s ended in the middle of a frame", channel.peer)
                    transport.close_head()
                    self._drop(channel)
                    return
                self._watch(channel, _READ)
                return
            try:
                sent = channel.sock.send(transport.peek(pending) or b"")
            except (BlockingIOError, InterruptedError):
                self._watch(channel, _READ | _WRITE)
                return
            except OSError as exc:
                log.info("connection from %s lost while writing: %s", channel.peer, exc)
                transport.close_head()
                transport.close_tail()
                self._drop(channel)
                return
            transport.pop(sent)
            if sent < pending:
                self._watch(channel, _READ | _WRITE)
                return

    def _watch(self, channel: Channel, mask: int) -> None:
        if channel.watching != mask and not channel.closed:
            channel.watching = mask
            self._epoll.modify(channel.fd, mask)

    def _drop(self, channel: Channel) -> None:
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
            self.transports.pop(transport._impl, None)
            # Make sure proton sees the end of the stream so the connection is cleaned up (transport events).
            if transport.capacity() >= 0:
                transport.close_tail()
            if transport.pending() >= 0:
                transport.close_head()

    def close_all(self) -> None:
        for channel in list(self._channels.values()):
            self._flush(channel)
            self._drop(channel)

    # -- container protocol (selectables, transports, the wait) --------------------------------------------
    def on_selectable_init(self, event: Any) -> None:
        selectable = event.selectable
        self._container._selectables += 1
        fd = selectable.fileno()
        if fd is not None and fd >= 0:
            self._selectables[fd] = selectable
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._timed.add(selectable)

    def on_selectable_updated(self, event: Any) -> None:
        pass  # injectors are always read; timers are read from their deadline each turn

    def on_selectable_final(self, event: Any) -> None:
        selectable = event.selectable
        self._container._selectables -= 1
        fd = selectable.fileno()
        if fd is not None and fd >= 0 and self._selectables.pop(fd, None) is not None:
            try:
                self._epoll.unregister(fd)
            except (OSError, ValueError):
                pass
        self._timed.discard(selectable)
        selectable.close()

    def mark_dirty(self, channel: Channel) -> None:
        """The channel's transport has output: flush it at the end of this loop turn."""
        self._dirty.add(channel)

    def on_transport(self, event: Any) -> None:
        transport = event.transport
        channel = getattr(transport, "_channel", None) if transport is not None else None
        if channel is not None:
            self._dirty.add(channel)

    def on_transport_closed(self, event: Any) -> None:
        transport = event.transport
        channel = getattr(transport, "_channel", None)
        if channel is not None:
            self._flush(channel)
            self._drop(channel)
        transport.unbind()

    def flush_dirty(self) -> None:
        dirty = self._dirty
        while dirty:
            channel = dirty.pop()
            try:
                self._flush(channel)
            except Exception:
                self._fail(channel, "writing its output")

    def wait_for_io(self) -> None:
        """Nothing left to process: write what is pending, wait for sockets and timers (until the nearest
        deadline), and handle what is ready. ``gateway.loop`` calls this whenever the collector runs empty."""
        container = self._container
        self.flush_dirty()
        timeout = self._timeout(container)
        try:
            ready = self._epoll.poll(timeout)
        except InterruptedError:
            ready = []
        now = container.mark()
        for fd, mask in ready:
            channel = self._channels.get(fd)
            if channel is not None:
                try:
                    self._channel_ready(channel, mask)
                except Exception:
                    self._fail(channel, "handling its input")
                continue
            listener = self._listeners.get(fd)
            if listener is not None:
                self._accept(listener)
                continue
            selectable = self._selectables.get(fd)
            if selectable is not None:
                selectable.readable()
                continue
            wakeup = self._wakeups.get(fd)
            if wakeup is not None:
                try:
                    os.read(fd, 512)
                except OSError:
                    pass
                wakeup()
        for selectable in list(self._timed):
            deadline = selectable.deadline
            if deadline and deadline <= now:
                selectable.expired()
        self._resume_accepting(now)
        if now >= self._next_tick:
            self._tick(now)

    def _channel_ready(self, channel: Channel, mask: int) -> None:
        if mask & _WRITE:
            if channel.transport is None:
                self._write_outgoing(channel)
                if not channel.outgoing:
                    self._watch(channel, _READ)
            else:
                self._dirty.add(channel)
        if mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
            self._readable(channel)

    def _fail(self, channel: Channel, doing: str) -> None:
        """The guard of one connection: an exception while serving it is a bug, logged with its traceback; that
        connection is closed with ``amqp:internal-error`` and every other one goes on."""
        log.exception("internal error on the connection from %s while %s", channel.peer, doing)
        try:
            self._abort(channel, INTERNAL_ERROR, "internal error; see the server log")
        except Exception:
            log.exception("could not close the connection from %s after an internal error", channel.peer)
            self._drop(channel)

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
        self._drop(channel)

    def _timeout(self, container: Container) -> float:
        now = time.time()
        deadlines = [d for d in (s.deadline for s in self._timed) if d]
        if self._next_tick:
            deadlines.append(self._next_tick)
        if self._accept_paused_until:
            deadlines.append(self._accept_paused_until)
        if not deadlines:
            return container.timeout
        return max(0.0, min(min(deadlines) - now, container.timeout))

    def _tick(self, now: float) -> None:
        """Drive transport timers (idle time-out, heartbeats) and our own deadlines for every connection."""
        next_tick = now + self._limits.tick_interval()
        for channel in list(self._channels.values()):
            if channel.closed:
                continue
            try:
                deadline = self._tick_channel(channel, now)
            except Exception:
                self._fail(channel, "checking its timers")
                continue
            if deadline:
                next_tick = min(next_tick, deadline)
        self._next_tick = next_tick

    def _tick_channel(self, channel: Channel, now: float) -> float:
        transport, connection = channel.transport, channel.connection
        closing = connection is not None and connection.state & _CLOSING == Endpoint.LOCAL_CLOSED
        frames_in = transport.frames_input if transport is not None else 0
        overdue = channel.clock.overdue(now, self._limits, frames_in, bool(closing))
        if overdue is not None:
            log.info("closing connection from %s: %s", channel.peer, overdue)
            self._abort(channel, RESOURCE_LIMIT, overdue)
            return 0.0
        if transport is None:
            return 0.0
        self._dirty.add(channel)
        return float(transport.tick(now))
