"""The harness's bookkeeping, kept in this process: what each publisher saw confirmed, which transactions were
committed, rolled back or left in doubt, and what each consumer endpoint settled and when.

Traffic threads write to it under one lock; ``cycle`` reads consistent copies between kills. Nothing here
talks to the server.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from tests.chaos.checks import Delivery, Settled


@dataclass
class Figures:
    """Counts for the report."""

    confirmed: int = 0
    accepted: int = 0
    failed: int = 0
    checked: int = 0
    window_redeliveries: int = 0
    longest_forgotten_ms: int = 0  # the oldest accept (before its kill) a crash forgot
    committed: int = 0
    rolled_back: int = 0
    in_doubt: int = 0


@dataclass
class Ledger:
    """Everything the harness knows about the run. ``endpoints`` maps a consumer endpoint to its address."""

    endpoints: dict[str, str]
    figures: Figures = field(default_factory=Figures)
    confirmed: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    forbidden: set[str] = field(default_factory=set)
    in_doubt: list[tuple[str, list[str]]] = field(default_factory=list)
    settled: dict[str, dict[str, Settled]] = field(default_factory=lambda: defaultdict(dict))
    received: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- publishers ---------------------------------------------------------------------------------------------
    def confirm(self, address: str, keys: list[str]) -> None:
        with self.lock:
            self.confirmed[address].update(keys)
            self.figures.confirmed += len(keys)

    def transaction(self, address: str, keys: list[str], outcome: str) -> None:
        """``outcome``: committed, rolled-back (or never discharged), in-doubt (commit sent, no answer)."""
        with self.lock:
            if outcome == "committed":
                self.confirmed[address].update(keys)
                self.figures.committed += 1
            elif outcome == "in-doubt":
                self.in_doubt.append((address, keys))
                self.figures.in_doubt += 1
            else:
                self.forbidden.update(keys)
                self.figures.rolled_back += 1

    # -- consumers ----------------------------------------------------------------------------------------------
    def delivered(self, endpoint: str, key: str) -> None:
        with self.lock:
            self.received[endpoint].add(key)

    def accept(self, endpoint: str, key: str) -> None:
        with self.lock:
            self.settled[endpoint].setdefault(key, Settled()).accepted_at = time.monotonic()
            self.figures.accepted += 1

    def fail(self, endpoint: str, key: str) -> None:
        with self.lock:
            self.settled[endpoint].setdefault(key, Settled()).failed_at.append(time.monotonic())
            self.figures.failed += 1

    # -- after a restart ----------------------------------------------------------------------------------------
    def expected(self, endpoint: str) -> set[str]:
        with self.lock:
            return set(self.confirmed[self.endpoints[endpoint]])

    def settled_copy(self, endpoint: str) -> dict[str, Settled]:
        with self.lock:
            return {k: Settled(s.accepted_at, list(s.failed_at), s.floor) for k, s in self.settled[endpoint].items()}

    def after_drain(self, endpoint: str, deliveries: list[Delivery], kill_time: float | None) -> None:
        """What a restart's pass showed becomes the truth: a redelivered key is not accepted (its accept was in
        the window), and its delivery-count is what the store keeps."""
        with self.lock:
            self.figures.checked += len(deliveries)
            table = self.settled[endpoint]
            for delivery in deliveries:
                self.received[endpoint].add(delivery.key)
                old = table.get(delivery.key)
                if old is not None and old.accepted_at is not None and kill_time is not None:
                    self.figures.window_redeliveries += 1
                    age = round((kill_time - old.accepted_at) * 1000)
                    self.figures.longest_forgotten_ms = max(self.figures.longest_forgotten_ms, age)
                table[delivery.key] = Settled(floor=delivery.count)

    def take_in_doubt(self) -> list[tuple[str, list[str]]]:
        with self.lock:
            taken, self.in_doubt = self.in_doubt, []
            return taken

    def ever_received(self, address: str) -> set[str]:
        with self.lock:
            return set().union(*(keys for ep, keys in self.received.items() if self.endpoints[ep] == address))

    def resolve(self, address: str, keys: list[str], committed: bool) -> None:
        with self.lock:
            if committed:
                self.confirmed[address].update(keys)
            else:
                self.forbidden.update(keys)
