"""Socket I/O for the container: the epoll wait, the listeners (plain and TLS), admission, selectables and timers.

Owns the container's side of I/O. It replaces proton's default ``IOHandler`` as the container's global handler
because proton-c's built-in SASL cannot check PLAIN passwords: each accepted socket is first admitted or refused
(``engine.admission``), then handed to ``gateway.channel_io.ChannelIO``, which runs its SASL phase (password
checks go to the ``Authenticator``'s worker threads and come back as the ``sasl_verdict`` application event), gives
it a proton ``Transport``, moves its bytes and guards it. Here: listening (and pausing accept when out of file
descriptors), the container's selectables (injectors, timers) and wake-up pipes, the wait for whatever is ready
(``wait_for_io``, called by ``gateway.loop`` whenever the collector runs empty), and the tick that drives every
connection's deadlines.

Thread rule: everything here runs on the reactor thread; ``Authenticator`` callbacks arrive through the
container's ``EventInjector``.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import ssl
import time
from collections.abc import Callable, Mapping

from proton import Event, Transport
from proton._selectable import Selectable
from proton.reactor import Container

from subgate.engine.admission import Admission, ConnectionLimits, Verdict
from subgate.engine.login_throttle import LoginThrottle
from subgate.engine.repeats import refused_as
from subgate.engine.transport_policy import TransportRules
from subgate.gateway.channel_io import ChannelIO, release_ended
from subgate.gateway.channels import Channel
from subgate.gateway.frame_gate import FrameHooks
from subgate.gateway.sasl import CredentialsReceived

log = logging.getLogger("subgate.io")

_ACCEPT_PAUSE = 0.1  # seconds without accepting after accept() failed (out of file descriptors)


# Kinds of the per-connection log lines held back by ``engine.repeats`` (docs/operations.md).
_ACCEPT_FAILED = refused_as("accept-failed")
_TLS_REQUIRED = refused_as("tls-required")
_CONNECTION_LIMIT = refused_as("connection-limit")


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
        rules: TransportRules | None = None,
        throttle: LoginThrottle | None = None,
        frame_hooks: FrameHooks | None = None,
    ) -> None:
        self._container = container
        self._limits = limits or ConnectionLimits()
        self._rules = rules or TransportRules()
        self._admission = Admission(self._limits)
        self._epoll = select.epoll()
        self._io = ChannelIO(
            container,
            self._epoll,
            self._admission,
            authenticate=authenticate,
            configure_transport=configure_transport,
            withdraw=withdraw,
            rules=self._rules,
            throttle=throttle,
            frame_hooks=frame_hooks,
        )
        self._listeners: dict[int, socket.socket] = {}
        self._tls: dict[int, ssl.SSLContext] = {}  # listener fd -> its TLS context (the TLS listener's)
        self._accept_paused_until = 0.0
        self._selectables: dict[int, Selectable] = {}
        self._timed: set[Selectable] = set()
        self.transports = self._io.transports  # transport pointer -> its channel (gateway.loop's fast path)
        self._next_tick = 0.0
        self.stop_requested = False
        self.before_wait: Callable[[], None] | None = None
        self._waiting = False  # in epoll: the reactor has nothing left to do (read by the journal writer's thread)
        self._wakeups: dict[int, Callable[[], None]] = {}

    def watch_wakeup(self, fd: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the reactor thread whenever a byte arrives on ``fd`` (signal-safe wake-ups)."""
        os.set_blocking(fd, False)
        self._wakeups[fd] = callback
        self._epoll.register(fd, select.EPOLLIN)

    # -- listening -----------------------------------------------------------------------------------------
    def listen(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> tuple[str, int]:
        """Listen on ``host:port``; connections accepted there speak TLS first when ``tls`` is given."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
        sock.setblocking(False)
        self._listeners[sock.fileno()] = sock
        if tls is not None:
            self._tls[sock.fileno()] = tls
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
        self._tls.clear()

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
        return self._io.channels

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                log.info("accept failed: %s; not accepting for %gs", exc, _ACCEPT_PAUSE, extra=_ACCEPT_FAILED)
                self._pause_accepting()
                return
            channel = Channel(sock, peer, self._container.mark())
            tls = self._tls.get(listener.fileno())
            refusal = self._rules.refusal(channel.address, tls=tls is not None)
            if refusal is not None:  # --require-tls: a plain connection from another host
                log.info("closing connection from %s at once: %s", peer, refusal, extra=_TLS_REQUIRED)
                sock.close()
                continue
            channel.verdict, reason = self._admission.decide(channel.address)
            if channel.verdict is Verdict.DROP:
                log.info("closing connection from %s at once: %s", peer, reason, extra=_CONNECTION_LIMIT)
                self._admission.release(channel.address, channel.verdict)
                sock.close()
                continue
            if channel.verdict is Verdict.REFUSE:
                log.info("refusing connection from %s: %s", peer, reason, extra=_CONNECTION_LIMIT)
                channel.refusal = reason
            self._io.add(channel, tls)
            log.debug("accepted connection from %s", peer)

    def on_sasl_verdict(self, event: Event) -> None:
        self._io.sasl_verdict(event)

    @property
    def auth_failures(self) -> Mapping[str, int]:
        """Failed authentications by SASL mechanism ("none": a client without SASL refused), for /metrics."""
        return self._io.auth_failures

    def close_all(self) -> None:
        self._io.close_all()

    # -- container protocol (selectables, transports, the wait) --------------------------------------------
    def on_selectable_init(self, event: Event) -> None:
        selectable = event.selectable
        self._container._selectables += 1
        fd = selectable.fileno()
        if fd is not None and fd >= 0:
            self._selectables[fd] = selectable
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._timed.add(selectable)

    def on_selectable_updated(self, event: Event) -> None:
        pass  # injectors are always read; timers are read from their deadline each turn

    def on_selectable_final(self, event: Event) -> None:
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
        self._io.mark_dirty(channel)

    def on_transport(self, event: Event) -> None:
        transport = event.transport
        channel = getattr(transport, "_channel", None) if transport is not None else None
        if channel is not None:
            self._io.mark_dirty(channel)

    def on_transport_closed(self, event: Event) -> None:
        transport = event.transport
        if transport is None:
            return
        channel = getattr(transport, "_channel", None)
        if channel is not None:
            self._io.close(channel)
        transport.unbind()

    def flush_dirty(self) -> None:
        self._io.flush_dirty()

    def is_waiting(self) -> bool:
        """Is the reactor waiting for input (any thread may ask: the journal writer's group commit)?"""
        return self._waiting

    def wait_for_io(self) -> None:
        """Nothing left to process: write what is pending, wait for sockets and timers (until the nearest
        deadline), and handle what is ready. ``gateway.loop`` calls this whenever the collector runs empty."""
        container = self._container
        release_ended(self._io.ended)
        self.flush_dirty()
        if self.before_wait is not None:
            self.before_wait()
        timeout = self._timeout(container)
        self._waiting = True
        try:
            ready = self._epoll.poll(timeout)
        except InterruptedError:
            ready = []
        finally:
            self._waiting = False
        now = container.mark()
        for fd, mask in ready:
            channel = self._io.get(fd)
            if channel is not None:
                self._io.ready(channel, mask)
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
        self._next_tick = self._io.tick(now, self._limits, now + self._limits.tick_interval())
