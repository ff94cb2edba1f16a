"""Sending fuzz cases to a server, many at a time, and noting how it answered each.

Each case gets its own socket: the bytes are sent, then the server's answer is read until it closes the socket or
``answer_wait`` seconds pass (a case that leaves a frame half-sent is the server's deadlines' business, not this
run's). ``run_cases`` returns a ``Report``: how many cases ended each way, and the cases during which a health
check (a normal client exchanging a message) failed.
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tests.fuzz.cases import Capture, make_case


@dataclass
class Report:
    seed: int
    outcomes: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    unhealthy: list[tuple[int, str]] = field(default_factory=list)  # (case index reached, what failed)

    @property
    def cases(self) -> int:
        return sum(self.outcomes.values())

    def summary(self) -> str:
        return (
            f"seed {self.seed}: {self.cases} cases ({dict(self.families)}); "
            f"answers {dict(self.outcomes)}; unhealthy {self.unhealthy}"
        )


def send_case(port: int, data: bytes, answer_wait: float) -> str:
    """How the server answered: ``closed`` (it closed the socket), ``reset``, or ``open`` (still open when we
    stopped waiting)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return "refused"
    try:
        sock.sendall(data)
        deadline = time.monotonic() + answer_wait
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "open"
            sock.settimeout(remaining)
            try:
                if not sock.recv(65536):
                    return "closed"
            except TimeoutError:
                return "open"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    finally:
        sock.close()


def run_cases(
    port: int,
    seed: int,
    count: int,
    captures: Sequence[Capture],
    healthy: Callable[[], None],
    *,
    concurrency: int = 48,
    answer_wait: float = 0.3,
    check_every: int = 500,
    deadline: float = 240.0,
) -> Report:
    report = Report(seed)
    give_up = time.monotonic() + deadline

    def one(index: int) -> tuple[str, str]:
        family, data = make_case(seed, index, captures)
        if time.monotonic() > give_up:
            return family, "skipped-deadline"
        return family, send_case(port, data, answer_wait)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for start in range(0, count, check_every):
            for family, outcome in pool.map(one, range(start, min(count, start + check_every))):
                report.families[family] += 1
                report.outcomes[outcome] += 1
            try:
                healthy()
            except Exception as exc:  # noqa: BLE001 - any failure of the check is the finding
                report.unhealthy.append((start + check_every, f"{type(exc).__name__}: {exc}"))
    return report
