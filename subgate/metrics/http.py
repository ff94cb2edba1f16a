"""The HTTP endpoint of ``--http``: ``/metrics``, ``/healthz``, ``/readyz`` and the web console, on threads of
its own.

Owns the standard library's ``ThreadingHTTPServer`` (thread ``subgate-http``, one short-lived thread per
request), the three routes and the health verdict; the console's routes are ``metrics.console``'s.
``/metrics`` is ``prometheus_client``'s own exposition (``generate_latest``) of a registry holding only
``collector.SubgateCollector``. A request reads the latest snapshot the reactor published, the journal writer's
histograms and its ``CommitHealth``: each one attribute read; it never touches the reactor's state, a proton
object or the store, and the reactor never waits on it.

Health (``verdict``): 200 "ok" while the reactor's snapshot is younger than ``stale_after`` seconds (it
publishes one a second) and the writer's last commit succeeded (it commits a write probe a second) within
``stale_after``; otherwise 503 with the reason. Ready: 200 once ``ready`` is set (the server sets it when
recovery has finished and it listens), 503 before; and 503 again while the memory high-water mark blocks every
publisher (``MemoryFigures.refusal``: docs/operations.md "The memory mark"), health staying 200 meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from subgate.metrics.collector import SubgateCollector, WriterFigures
from subgate.metrics.console import PAGE_HEADER, Console
from subgate.metrics.snapshot import Snapshot
from subgate.storage.journal import CommitHealth

log = logging.getLogger("subgate.http")

STALE_AFTER = 10.0  # seconds


def verdict(
    snapshot: Snapshot | None, health: CommitHealth | None, now: float, stale_after: float = STALE_AFTER
) -> str | None:
    """Why the server is not healthy at ``now`` (``time.monotonic``), or None when it is."""
    if snapshot is None:
        return "the reactor has not published its figures yet"
    if now - snapshot.taken_at > stale_after:
        return f"the reactor has not answered for {now - snapshot.taken_at:.1f} s"
    if health is None:
        return "the store has not taken a write yet"
    if not health.ok:
        return f"the store refused a write: {health.error}"
    if health.last_ok is None or now - health.last_ok > stale_after:
        return f"no store write has succeeded for {now - (health.last_ok or 0):.1f} s"
    return None


class MetricsEndpoint:
    """See the module docstring. The sources are set once the server has built them (``snapshot``, ``writer``,
    ``health``); until then ``/healthz`` answers 503 and ``/metrics`` is empty."""

    def __init__(self, host: str, port: int, top_n: int) -> None:
        self.snapshot: Callable[[], Snapshot | None] = lambda: None
        self.writer: Callable[[], WriterFigures | None] = lambda: None
        self.health: Callable[[], CommitHealth | None] = lambda: None
        self.ready = False
        self.console = Console()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SubgateCollector(lambda: self.snapshot(), lambda: self.writer(), top_n))
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="subgate-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()
        log.info("HTTP endpoint on http://%s:%d (/metrics, /healthz, /readyz, the console at /)", *self.address)

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``path``."""
        route = path.split("?", 1)[0]
        console = self.console.get(route, self.writer())
        if console is not None:
            status, headers, body = console
            return status, headers["Content-Type"], body
        if route == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if route == "/healthz":
            reason = verdict(self.snapshot(), self.health(), time.monotonic())
            return (200, _TEXT, b"ok\n") if reason is None else (503, _TEXT, reason.encode() + b"\n")
        if route == "/readyz":
            if not self.ready:
                return 503, _TEXT, b"recovering: not listening yet\n"
            snapshot = self.snapshot()
            refusal = None if snapshot is None or snapshot.memory is None else snapshot.memory.refusal()
            return (200, _TEXT, b"ready\n") if refusal is None else (503, _TEXT, refusal.encode() + b"\n")
        return 404, _TEXT, b"not found: /, /metrics, /healthz, /readyz\n"


_TEXT = "text/plain; charset=utf-8"
_MAX_BODY = 64 * 1024  # an action's JSON body


def _handler(endpoint: MetricsEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "subgate"

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            try:
                status, content_type, body = endpoint.answer(self.path)
            except Exception as exc:  # a bug in a collector: the scrape fails, the server goes on
                log.exception("HTTP %s failed", self.path)
                status, content_type, body = 500, _TEXT, f"internal error: {exc}\n".encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            length = min(int(self.headers.get("Content-Length") or 0), _MAX_BODY)
            raw = self.rfile.read(length) if length else b""
            route = self.path.split("?", 1)[0]
            from_page = self.headers.get(PAGE_HEADER) is not None
            try:
                found = endpoint.console.post(route, self.headers.get("Authorization"), from_page, raw)
            except Exception as exc:
                log.exception("HTTP POST %s failed", self.path)
                found = 500, {"Content-Type": _TEXT}, f"internal error: {exc}\n".encode()
            status, headers, body = found if found is not None else (404, {"Content-Type": _TEXT}, b"not found\n")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
