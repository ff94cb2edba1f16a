"""A bounded fuzz run against a real server (issue 11): at least 5,000 cases of random bytes, mutated captures
of real client sessions and invalid text in every text field of sasl-init, open, attach and a transfer.

Afterwards (and every 500 cases during the run) a normal client exchanges a message; at the end the server must
be alive and its log must hold no traceback, no internal error and no stop. ``SUBGATE_FUZZ_SEED`` and
``SUBGATE_FUZZ_CASES`` change the seed and the count; the seed is in every failure message.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from tests.fuzz.capture import record_sessions
from tests.fuzz.runner import run_cases
from tests.support.amqp import connect, receive_bodies, receiver, sender
from tests.support.cli import run_subgate
from tests.support.server import SubgateProcess

SEED = int(os.environ.get("SUBGATE_FUZZ_SEED", "20261124"))
CASES = int(os.environ.get("SUBGATE_FUZZ_CASES", "5000"))


@pytest.fixture
def fuzz_server(tmp_path: Path) -> Iterator[SubgateProcess]:
    url = f"sqlite:///{tmp_path / 'subgate.db'}"
    setup = [("db", "upgrade"), ("users", "add", "alice", "--password", "s3cret", "--role", "admin")]
    setup += [("grants", "add", p, "--user", "anonymous") for p in ("SELECT_TOPIC", "READ_TOPIC", "UPDATE_TOPIC")]
    setup += [("grants", "add", "MODIFY_TOPIC", "--user", "anonymous")]
    for args in setup:
        result = run_subgate(*args, "--store", url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    server = SubgateProcess(url, tmp_path, "--allow-anonymous", "--frame-timeout", "2")
    server.start()
    yield server
    if server.alive():
        server.stop(timeout=20)
    server.kill()


def exchange(server: SubgateProcess) -> None:
    """A normal client: send one message to a fresh queue and receive exactly it."""
    queue = f"healthy-{uuid.uuid4().hex[:8]}"
    conn = connect(server.url, user="alice", password="s3cret")
    try:
        sender(conn, queue).send(Message(body=queue))
        assert receive_bodies(receiver(conn, queue), 1) == [queue]
    finally:
        conn.close()


def test_the_server_survives_a_bounded_fuzz_run(fuzz_server):
    captures = record_sessions(fuzz_server.port, "alice", "s3cret")
    assert len(captures) == 2 and all(len(c) > 8 for c in captures), captures
    report = run_cases(fuzz_server.port, SEED, CASES, captures, lambda: exchange(fuzz_server))
    print(report.summary())
    assert report.cases == CASES >= 5000 or "SUBGATE_FUZZ_CASES" in os.environ, report.summary()
    assert report.outcomes["skipped-deadline"] == 0, report.summary()
    assert not report.unhealthy, report.summary()
    assert fuzz_server.alive(), fuzz_server.log()[-4000:]
    exchange(fuzz_server)
    log = fuzz_server.log()
    for bad in ("Traceback", "internal error", "subgate stopped"):
        assert bad not in log, f"{report.summary()}\n{_around(log, bad)}"


def _around(log: str, needle: str, width: int = 3000) -> str:
    at = log.find(needle)
    return log[max(0, at - 500) : at + width]
