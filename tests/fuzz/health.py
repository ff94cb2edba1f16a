"""Watching the servers during a fuzz run: crashes, tracebacks in the log, and a normal client that must work.

``Watch`` is the runner's ``tick``: at most every ``interval`` seconds it checks that each server process is
alive and whether its log grew a traceback, and records an ``Incident`` with the cases in flight since the last
check as suspects (a dead server is restarted on its port, up to ``max_restarts`` times, so the run goes on and
finds the other defects). ``Prober`` is a thread that does a normal proton exchange on each server every few
seconds. ``pinpoint`` replays an incident's suspects one at a time to name the case that did it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from proton import Message

from tests.fuzz.cases import Case
from tests.fuzz.runner import Settings, run_cases
from tests.support.amqp import connect, receive_bodies, receiver, sender
from tests.support.server import SubgateProcess

BAD_LOG_MARKS = ("Traceback", "subgate stopped")


@dataclass
class Incident:
    kind: str  # "crash" or "traceback"
    server: str
    suspects: set[int]
    excerpt: str
    culprits: list[int] = field(default_factory=list)


def logs(server: SubgateProcess) -> str:
    """Every log of the server's starts so far, in order."""
    return "".join((server.workdir / f"server-{n}.log").read_text(errors="replace") for n in range(server.starts))


def exchange(server: SubgateProcess, credentials: dict[str, str], timeout: float = 10.0) -> None:
    """A normal client: a fresh connection sends one message to a fresh queue and receives it back."""
    queue = f"fuzz.probe.{uuid.uuid4().hex[:8]}"
    conn = connect(server.url, timeout=timeout, **credentials)
    try:
        rcv = receiver(conn, queue, "queue", credit=1)
        sender(conn, queue, "queue").send(Message(body=queue))
        assert receive_bodies(rcv, 1, timeout=timeout) == [queue]
    finally:
        conn.close()


class Watch:
    """See the module docstring."""

    def __init__(self, servers: dict[str, SubgateProcess], interval: float = 0.25, max_restarts: int = 10) -> None:
        self.servers, self.interval, self.max_restarts = servers, interval, max_restarts
        self.incidents: list[Incident] = []
        self.restarts = 0
        self._seen = {name: len(logs(s)) for name, s in servers.items()}
        self._recent: set[int] = set()
        self._last = 0.0

    def __call__(self, active: set[int]) -> None:
        self._recent |= active
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        for name, server in self.servers.items():
            self._check(name, server)
        self._recent = set(active)

    def _check(self, name: str, server: SubgateProcess) -> None:
        text = logs(server)
        fresh, self._seen[name] = text[self._seen[name] :], len(text)
        if "Traceback" in fresh or "subgate stopped" in fresh:
            self.incidents.append(Incident("traceback", name, set(self._recent), fresh[-3000:]))
        if not server.alive() and self.restarts < self.max_restarts:
            self.incidents.append(Incident("crash", name, set(self._recent), logs(server)[-3000:]))
            self.restarts += 1
            server.start()
            self._seen[name] = len(logs(server))


class Prober(threading.Thread):
    """Every ``every`` seconds, a normal exchange on each server; failures are kept with the time they happened."""

    def __init__(self, servers: dict[str, SubgateProcess], credentials: dict[str, dict[str, str]], every: float = 2.0):
        super().__init__(daemon=True)
        self.servers, self.credentials, self.every = servers, credentials, every
        self.ok = 0
        self.failures: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self._halt.wait(self.every):
            for name, server in self.servers.items():
                try:
                    exchange(server, self.credentials[name])
                    self.ok += 1
                except Exception as exc:  # any failure of a normal client is a finding
                    self.failures.append(f"t+{time.monotonic() - started:.1f}s {name}: {exc!r}")

    def stop(self) -> None:
        self._halt.set()
        self.join(60)


def pinpoint(
    incident: Incident,
    case_of: Callable[[int], Case],
    servers: dict[str, SubgateProcess],
    credentials: dict[str, dict[str, str]],
    deadline: float,
) -> None:
    """Replay the incident's suspects one by one (until ``deadline``, a ``time.monotonic()``); a case after which
    the server died or logged a traceback is a culprit. After each, a normal exchange goes through the reactor
    (its own failure is not the verdict), so what the case set off has happened before the log is read. A dead
    server is restarted."""
    server = servers[incident.server]
    ports = {name: s.port for name, s in servers.items()}
    for index in sorted(incident.suspects):
        case = case_of(index)
        if case.server != incident.server:
            continue
        if time.monotonic() > deadline:
            return
        before = len(logs(server))
        run_cases([case], ports, Settings(concurrency=1, linger=2.0), lambda _active: None)
        try:
            exchange(server, credentials[incident.server], timeout=5.0)
        except Exception:
            pass
        died = not server.alive()
        if died or any(mark in logs(server)[before:] for mark in BAD_LOG_MARKS):
            incident.culprits.append(index)
        if died:
            server.start()
