"""Repeated per-connection refusals are held back in the log and summarized (issue 33, defect 6; docs/operations.md,
"Repeated refusals in the log").

Before: 3,000 silent connections wrote 3,004 INFO lines, one "handshake not finished" per connection. Now the
first lines of a kind in a 10 s window are written (``engine.repeats.BURST``) and, once the window is over, one
line says how many more there were: every refusal is accounted for, in far fewer lines. The same holds for the
other kinds (here: refused attaches, each a bookmark the store could not look up). Real server, real sockets.
"""

from __future__ import annotations

import re
import selectors
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from subgate.engine.repeats import BURST
from tests.e2e.test_replay import refusal, subscribe
from tests.support.amqp import connect
from tests.support.many_connections import raise_open_files
from tests.support.polling import eventually
from tests.support.server import SubgateProcess, module_server

SILENT = 300
SUMMARY = re.compile(r"… and ([\d,]+) more (\S+) refusals in the last 10 s")


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "log-flood", extra=("--handshake-timeout", "0.5")) as server:
        yield server


def summarized(log: str, kind: str) -> int:
    """How many refusals of ``kind`` the summary lines in ``log`` say were left out."""
    return sum(int(count.replace(",", "")) for count, named in SUMMARY.findall(log) if named == kind)


def log_once(broker: SubgateProcess, start: int, holds: Callable[[str], bool], what: str, timeout: float) -> str:
    """The server's log from ``start`` on, once ``holds`` is true of it (bounded wait)."""

    def check() -> str | None:
        text = broker.log()[start:]
        return text if holds(text) else None

    return eventually(check, timeout=timeout, what=what)


def silent_connections_closed(port: int, count: int, timeout: float) -> None:
    """Open ``count`` connections that send nothing, and wait until the server has closed every one."""
    raise_open_files(count)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            for sock in socks:
                sock.setblocking(False)
                selector.register(sock, selectors.EVENT_READ)
            open_ = count
            while open_:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{open_} silent connections were not closed within {timeout}s"
                for key, _ in selector.select(min(remaining, 1.0)):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65536)
                    except ConnectionResetError:
                        data = b""
                    if not data:  # closed by the server (what it wrote before, the SASL header, is skipped)
                        selector.unregister(sock)
                        open_ -= 1
    finally:
        for sock in socks:
            sock.close()


def test_silent_connections_write_a_few_lines_and_a_summary_with_the_count(broker):
    start = len(broker.log())
    silent_connections_closed(broker.port, SILENT, timeout=120)
    # The summary comes once the window (10 s from the first refusal) is over, from the server's timer.
    log_once(broker, start, lambda log: summarized(log, "handshake-deadline") > 0, "the summary", timeout=60)
    log = log_once(  # every refusal accounted for: lines written plus those summarized
        broker,
        start,
        lambda log: log.count("handshake not finished") + summarized(log, "handshake-deadline") >= SILENT,
        "all refusals accounted for",
        timeout=30,
    )
    written = log.count("handshake not finished")
    assert written + summarized(log, "handshake-deadline") == SILENT
    assert 1 <= written <= 3 * BURST  # at most a few windows' worth, never one line per connection
    assert len(log.splitlines()) < SILENT // 5


def test_refused_attaches_are_held_back_too(broker, uid):
    start = len(broker.log())
    attaches = 40
    conn = connect(broker.url)
    try:
        for _ in range(attaches):
            condition, _, _ = refusal(lambda: subscribe(conn, f"flood/{uid}", "not-a-bookmark"))
            assert condition == "amqp:invalid-field"
    finally:
        conn.close()
    log = log_once(broker, start, lambda log: summarized(log, "attach-refused") > 0, "the summary", timeout=60)
    written = log.count("refused attach from")
    assert written + summarized(log, "attach-refused") == attaches
    assert written <= 3 * BURST
