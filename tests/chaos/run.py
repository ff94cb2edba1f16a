"""A crash run: prepare a store (a user, a role, grants), start one server, then ``kills`` cycles of load, SIGKILL,
inspection and restart; a last check after the final restart; a report of figures and problems.

The SDK's publisher (stable publisher id, inline sends) lives through the whole run, reconnecting by itself;
the other clients live one cycle each (``cycle``).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from click.testing import CliRunner

from subgate.cli.main import main
from subgate.client import Client, PublishError
from tests.chaos import store_checks
from tests.chaos.cycle import ENDPOINTS, SDK_QUEUE, Cycle
from tests.chaos.ledger import Ledger
from tests.support.server import SubgateProcess

SDK_PAUSE = 0.005  # seconds between two SDK sends: a steady load the consumers keep up with
PERMISSIONS = ("SELECT_TOPIC", "READ_TOPIC", "UPDATE_TOPIC", "MODIFY_TOPIC", "REGISTER_HANDLER", "CONTROL_SERVER")


@dataclass
class Report:
    store: str
    kills: int = 0
    seconds: float = 0.0
    figures: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def prepare_store(url: str) -> None:
    """Schema, a user with the admin role, grants to anonymous (which the load uses) and to a role."""
    steps = [
        ["db", "upgrade"],
        ["users", "add", "chaos-admin", "--password", "chaos-secret", "--role", "admin"],
        ["roles", "add", "chaos-readers"],
        ["grants", "add", "READ_TOPIC", "--role", "chaos-readers", "--path", "chaos"],
        *(["grants", "add", permission, "--user", "anonymous"] for permission in PERMISSIONS),
    ]
    for step in steps:
        result = CliRunner().invoke(main, [*step, "--store", url])
        if result.exit_code != 0:
            raise RuntimeError(f"subgate {' '.join(step)}: {result.output}")


def _log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _sdk_publisher(url: str, stop: threading.Event, cycle: Cycle) -> None:
    client = Client(url, client_id="chaos-sdk")
    publisher = client.publisher(SDK_QUEUE, queue=True, send_policy="inline", retry_duration=60.0, publisher_id="sdk")
    counter = cycle.counter("sdk")
    try:
        while not stop.is_set():
            key = f"sdk-{next(counter)}"
            try:
                publisher.send(key)
            except PublishError:
                continue  # not confirmed: the harness expects nothing of it
            cycle.ledger.confirm(SDK_QUEUE, [key])
            stop.wait(SDK_PAUSE)
    finally:
        publisher.close(linger=1.0)
        client.close()


def _wait_for_rows(url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = store_checks.snapshot(url)
        if rows["registrations"] and len(rows["subscriptions"]) >= 2:
            return
        time.sleep(0.1)


def run(store_url: str, workdir: Path, kills: int, seed: int, window: float = 1.0, max_up: float = 2.5) -> Report:
    """Run ``kills`` kill cycles against a fresh store; returns the report (problems listed, not raised)."""
    started = time.monotonic()
    report = Report(store=store_url.split(":", 1)[0])
    prepare_store(store_url)
    server = SubgateProcess(store_url, workdir, "--allow-anonymous")
    server.start()
    ledger = Ledger({e.name: e.address for e in ENDPOINTS})
    cycle = Cycle(server, ledger, random.Random(seed), window)
    stop = threading.Event()
    sdk = threading.Thread(target=_sdk_publisher, args=(server.url, stop, cycle), daemon=True, name="chaos-sdk")
    sdk.start()
    seen = 0
    try:
        for number in range(1, kills + 1):
            label = f"after kill {number - 1}" if number > 1 else "start"
            _log(f"{label}: checking, then loading")
            report.problems += [f"{label}: {p}" for p in cycle.check_and_load()]
            if cycle.baseline is None:
                _wait_for_rows(store_url)
                cycle.baseline = store_checks.snapshot(store_url)
            found = cycle.kill_and_inspect(cycle.rng.uniform(0.3, max_up))
            report.problems += [f"kill {number}: {p}" for p in found]
            report.kills = number
            server.start(timeout=60)
            _log(f"kill {number} done: {len(report.problems)} problems so far")
            for problem in report.problems[seen:]:
                _log(f"  problem: {problem}")
            seen = len(report.problems)
        report.problems += [f"after kill {kills}: {p}" for p in cycle.check_and_load(load=False)]
    finally:
        stop.set()
        sdk.join(timeout=15)
        if server.alive():
            server.stop(timeout=30)
    report.figures = asdict(ledger.figures)
    report.seconds = round(time.monotonic() - started, 1)
    return report
