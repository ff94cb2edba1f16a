"""The HTTP endpoint of ``--http``: ``/metrics``, ``/healthz``, ``/readyz`` and the web console, on threads of
its own.

Owns the WSGI application, the three routes and the health verdict; the console's routes are
``metrics.console``'s, the server under them (waitress: one loop thread, a fixed pool of workers, a connection
cap, deadlines and size limits) is ``metrics.http_server``'s.
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
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from subgate.metrics.collector import SubgateCollector, WriterFigures
from subgate.metrics.console import PAGE_HEADER, Console
from subgate.metrics.http_server import MAX_BODY_BYTES, HttpLimits, HttpServer
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

    def __init__(self, host: str, port: int, top_n: int, limits: HttpLimits | None = None) -> None:
        self.snapshot: Callable[[], Snapshot | None] = lambda: None
        self.writer: Callable[[], WriterFigures | None] = lambda: None
        self.health: Callable[[], CommitHealth | None] = lambda: None
        self.ready = False
        self.console = Console()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SubgateCollector(lambda: self.snapshot(), lambda: self.writer(), top_n))
        self._server = HttpServer(self.wsgi, host, port, limits or HttpLimits())

    @property
    def address(self) -> tuple[str, int]:
        return self._server.address

    def start(self) -> None:
        self._server.start()
        log.info("HTTP endpoint on http://%s:%d (/metrics, /healthz, /readyz, the console at /)", *self.address)

    def close(self) -> None:
        self._server.close()

    def answer(self, path: str, authorization: str | None = None, from_page: bool = False, address: str = "") -> Answer:
        """(status, headers, body) for a GET of ``path`` (with the request's credentials and client address)."""
        route = path.split("?", 1)[0]
        console = self.console.get(route, self.writer(), authorization, from_page, address)
        if console is not None:
            return console
        if route == "/metrics":
            return 200, {"Content-Type": CONTENT_TYPE_LATEST}, generate_latest(self.registry)
        if route == "/healthz":
            reason = verdict(self.snapshot(), self.health(), time.monotonic())
            return _text(200, "ok") if reason is None else _text(503, reason)
        if route == "/readyz":
            if not self.ready:
                return _text(503, "recovering: not listening yet")
            snapshot = self.snapshot()
            refusal = None if snapshot is None or snapshot.memory is None else snapshot.memory.refusal()
            return _text(200, "ready") if refusal is None else _text(503, refusal)
        return _text(404, "not found: /, /metrics, /healthz, /readyz")

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI application (a worker thread of ``metrics.http_server``): GET and POST, nothing else."""
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO") or "/"
        authorization = environ.get("HTTP_AUTHORIZATION")
        from_page = "HTTP_" + PAGE_HEADER.upper().replace("-", "_") in environ
        try:
            if method in ("GET", "HEAD"):
                address = str(environ.get("REMOTE_ADDR") or "")
                status, headers, body = self.answer(path, authorization, from_page, address)
            elif method == "POST":
                raw = environ["wsgi.input"].read(MAX_BODY_BYTES)  # waitress refused a longer one (413)
                found = self.console.post(path, authorization, from_page, raw)
                status, headers, body = found if found is not None else _text(404, "not found")
            else:
                status, headers, body = _text(405, f"{method} is not served: GET, or POST for a console action")
                headers["Allow"] = "GET, HEAD, POST"
        except Exception as exc:  # a bug in a collector or a route: this request fails, the server goes on
            log.exception("HTTP %s %s failed", method, path)
            status, headers, body = _text(500, f"internal error: {exc}")
        start_response(
            _status_line(status),
            [*headers.items(), ("Content-Length", str(len(body)))],
        )
        return [b"" if method == "HEAD" else body]


Answer = tuple[int, dict[str, str], bytes]
_TEXT = "text/plain; charset=utf-8"


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Status"


def _text(status: int, text: str) -> Answer:
    return status, {"Content-Type": _TEXT}, text.encode() + b"\n"
