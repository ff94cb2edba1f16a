"""One kill cycle against a running server: check what the restart brought back, start the load, kill the
server at a random moment, check the store while it is down.

``Cycle.check_and_load`` runs on a freshly (re)started server; ``Cycle.kill_and_inspect`` ends the cycle. The
problems found are returned, never raised, so a run reports them all.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.chaos import checks, control, store_checks, traffic
from tests.chaos.ledger import Ledger
from tests.chaos.traffic import Endpoint
from tests.support.server import SubgateProcess

QUEUE, SDK_QUEUE, TOPIC = "chaos.q", "chaos.sdk", "chaos/t"
ENDPOINTS = (
    Endpoint("queue", QUEUE, "queue"),
    Endpoint("sdk-queue", SDK_QUEUE, "queue"),
    Endpoint("dsub", TOPIC, "durable", "chaos-durable"),
    Endpoint("ssub", TOPIC, "shared"),
)


@dataclass
class Cycle:
    """State carried from one cycle to the next: the ledger, key counters, the baseline snapshot."""

    server: SubgateProcess
    ledger: Ledger
    rng: random.Random
    window: float
    baseline: dict[str, list[tuple[object, ...]]] | None = None
    kill_time: float | None = None
    counters: dict[str, itertools.count[int]] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)

    def counter(self, name: str) -> itertools.count[int]:
        return self.counters.setdefault(name, itertools.count(1))

    def check_and_load(self, load: bool = True) -> list[str]:
        """Drain and check every endpoint, then (with ``load``) start consumers, control clients, publishers."""
        problems: list[str] = []
        for endpoint in ENDPOINTS:
            problems += self._drain(endpoint, load)
        problems += self._resolve_in_doubt()
        if not load:
            return problems
        for make in (control.register_removal, control.probe_missing_topic_handler):
            client, found = make(self.server.address)
            self.clients.append(client)
            problems += found
        self._publishers()
        return problems

    def _drain(self, endpoint: Endpoint, load: bool) -> list[str]:
        conn, rcv = traffic.open_receiver(self.server.url, endpoint)
        settled = self.ledger.settled_copy(endpoint.name)
        # What was confirmed when the drain began: the SDK publisher keeps publishing meanwhile, and a key it gets
        # confirmed during the drain may arrive after the drain's last delivery (the next cycle checks it).
        expected = set(self.ledger.expected(endpoint.name))
        awaited = {k for k in expected if settled.get(k) is None or not settled[k].accepted}
        deliveries, held = traffic.drain(rcv, awaited)
        problems: list[str] = []
        if self.kill_time is not None:
            found = checks.check_drain(
                expected,
                settled,
                set(self.ledger.forbidden),
                deliveries,
                self.kill_time,
                self.window,
            )
            problems += [f"{endpoint.name}: {p}" for p in found]
        self.ledger.after_drain(endpoint.name, deliveries, self.kill_time)
        if not load:
            conn.close()
            return problems
        pairs = [(d.key, h) for d, h in zip(deliveries, held, strict=True)]
        self.clients.append(conn)
        seed = self.rng.getrandbits(32)
        self.threads.append(traffic.thread(traffic.consume, self.ledger, endpoint, rcv, pairs, seed))
        return problems

    def _resolve_in_doubt(self) -> list[str]:
        problems: list[str] = []
        for address, keys in self.ledger.take_in_doubt():
            committed, found = checks.resolve_in_doubt(keys, self.ledger.ever_received(address))
            self.ledger.resolve(address, keys, committed)
            problems += found
        return problems

    def _publishers(self) -> None:
        url, ledger = self.server.url, self.ledger
        self.threads += [
            traffic.thread(traffic.publish_plain, ledger, url, QUEUE, "queue", "plain", self.counter("plain")),
            traffic.thread(traffic.publish_plain, ledger, url, TOPIC, "topic", "topic", self.counter("topic")),
            traffic.thread(
                traffic.publish_transactions,
                ledger,
                QUEUE,
                self.server.address,
                self.counter("tx"),
                self.rng.getrandbits(32),
            ),
        ]

    def kill_and_inspect(self, uptime: float) -> list[str]:
        """Let the load run ``uptime`` seconds, SIGKILL the server, wait for the load to notice, read the store."""
        time.sleep(uptime)
        self.kill_time = time.monotonic()
        self.server.kill()
        for runner in self.threads:
            runner.join(timeout=20)
        stuck = [t.name for t in self.threads if t.is_alive()]
        self.threads = [t for t in self.threads if t.is_alive()]
        for client in self.clients:
            _close_quietly(client)
        self.clients = []
        problems = [f"client threads still running after the kill: {stuck}"] if stuck else []
        if "Traceback" in self.server.log():
            problems.append(f"the server logged a traceback before the kill: {self.server.log_path}")
        problems += store_checks.integrity_problems(self.server.store_url)
        after = store_checks.snapshot(self.server.store_url)
        if self.baseline is not None:
            for name, rows in self.baseline.items():
                problems += checks.compare_snapshot(name, rows, after[name])
        return problems


def _close_quietly(client: Any) -> None:
    try:
        if hasattr(client, "abort"):
            client.abort()
        else:
            client.close()
    except Exception:  # noqa: BLE001 - the server is gone; closing is best effort
        return
