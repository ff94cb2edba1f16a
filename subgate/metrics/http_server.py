"""The HTTP server under ``metrics.http``: waitress, with a fixed thread pool, a connection cap, deadlines and sizes.

Owns ``HttpLimits`` and ``HttpServer``. waitress reads and writes every socket on one thread (``subgate-http``, its
poll loop) and runs the application on a fixed pool of ``threads`` workers (``waitress-N``), so an idle or a slow
client costs a socket and a few kilobytes, never a thread. waitress itself enforces:

* ``max_connections`` (its ``connection_limit``): at the cap it stops accepting; further clients wait in the
  listen backlog until a connection ends.
* ``MAX_HEADER_BYTES`` (``max_request_header_size``): a larger request head is answered 431 and closed.
* ``MAX_BODY_BYTES`` (``max_request_body_size``): a body announced (``Content-Length``) or sent larger is answered
  413 and closed at once, without reading it.

This module adds two deadlines, checked by the loop's maintenance pass (about once a second), in place of
waitress' own pass (whose ``channel_timeout`` counts from the last byte, so a client trickling one byte at a time
would never be cut off):

* ``request_timeout``: a request must arrive whole, head and body, within this many seconds of its first byte;
  a connection whose request is still incomplete then is closed.
* ``idle_timeout``: a connection with no request in progress (none arriving, none being answered) and no byte
  either way for this many seconds is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger("subgate.http")

MAX_HEADER_BYTES = 16 * 1024  # the request line and headers of one request
MAX_BODY_BYTES = 64 * 1024  # an action's JSON body; the GET routes take none
_LOOP_SECONDS = 1  # the poll loop's timeout and the maintenance interval (waitress takes whole seconds)

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What the HTTP endpoint spends at most (see the module docstring; ``settings.Settings.http_*``)."""

    threads: int = 4
    max_connections: int = 1000
    idle_timeout: float = 60.0
    request_timeout: float = 10.0


class _Channel(HTTPChannel):  # type: ignore[misc]
    """waitress' connection, remembering when the request it is reading began."""

    request_began = 0.0  # time.monotonic() of the first byte of the request being read (``request`` not None)

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_began = time.monotonic()
        return bool(super().received(data))


class _Server(TcpWSGIServer):  # type: ignore[misc]
    """waitress' listener with this module's deadlines in its maintenance pass."""

    channel_class = _Channel
    limits = HttpLimits()

    def maintenance(self, now: float) -> None:
        """Loop thread. ``now`` is ``time.time()``, as waitress' ``last_activity`` is."""
        began_before = time.monotonic() - self.limits.request_timeout
        idle_before = now - self.limits.idle_timeout
        slow = idle = 0
        for channel in list(self.active_channels.values()):
            if channel.requests or channel.will_close:
                continue  # being answered (the answer's own writes count as activity), or closing already
            if channel.request is not None:
                if channel.request_began < began_before:
                    channel.will_close = True
                    slow += 1
            elif channel.last_activity < idle_before:
                channel.will_close = True
                idle += 1
        if slow or idle:
            log.debug("HTTP: closing %d connection(s) past the request deadline, %d idle", slow, idle)


class HttpServer:
    """``app`` (WSGI) served on host:port under ``limits``; ``start`` runs the loop, ``close`` ends it all."""

    def __init__(self, app: App, host: str, port: int, limits: HttpLimits) -> None:
        adjustments = Adjustments(
            host=host,
            port=port,
            threads=limits.threads,
            connection_limit=limits.max_connections,
            channel_timeout=max(1, int(limits.idle_timeout)),  # unused: _Server.maintenance decides
            cleanup_interval=_LOOP_SECONDS,
            asyncore_loop_timeout=_LOOP_SECONDS,
            asyncore_use_poll=True,  # select() stops at descriptor 1024
            max_request_header_size=MAX_HEADER_BYTES,
            max_request_body_size=MAX_BODY_BYTES,
            ident="subgate",
            expose_tracebacks=False,
        )
        self._map: dict[int, Any] = {}
        self._dispatcher = ThreadedTaskDispatcher()
        try:
            server = _Server(app, map=self._map, dispatcher=self._dispatcher, adj=adjustments,
                             sockinfo=adjustments.listen[0])  # fmt: skip
        except BaseException:
            wasyncore.close_all(self._map, ignore_all=True)  # the wake-up pipe it made before binding
            raise
        server.limits = limits
        self._server = server
        self._threads = limits.threads
        self._thread = threading.Thread(target=server.run, name="subgate-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        return str(self._server.effective_host), int(self._server.effective_port)

    def start(self) -> None:
        self._dispatcher.set_thread_count(self._threads)
        self._thread.start()

    def close(self) -> None:
        """Close the listener and every connection (on the loop thread, which then ends), then the workers."""
        if self._thread.is_alive():
            self._server.trigger.pull_trigger(lambda: wasyncore.close_all(self._map, ignore_all=True))
            self._thread.join(10)
        else:
            wasyncore.close_all(self._map, ignore_all=True)
        self._dispatcher.shutdown(timeout=5)
