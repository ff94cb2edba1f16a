"""The server's memory high-water mark is a real bound (issue 33, defect 1): many queues with no consumer, many
publisher links holding credit and large messages never take the server past its mark, because the credit of every
publisher link is reserved on the mark before its bytes arrive (engine.memory_mark); and while the mark blocks the
publishers, ``subgate status``, ``/readyz``, ``/metrics`` and the log say so, until a consumer drains the queues.

A real server process, real sockets: 16 publisher links on 4 connections to 12 queues, 256 KiB non-persistent
messages, a 64 MiB mark (``--memory-high-water``) with 1 MiB as the largest message (``--max-message-size``, the
reservation per credit). The publishers offer up to 2.5 times the mark. Before the fix every link had its 1,000 credits,
so all of it was accepted and RSS grew by as much. Memory is the server's VmRSS (Linux /proc).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from proton import Delivery, Message, Timeout
from proton.utils import BlockingConnection, BlockingSender

from tests.e2e.test_cli_journal import live
from tests.e2e.test_metrics import get, http_base, scrape, value
from tests.support.amqp import connect, receiver, sender
from tests.support.cli import run_subgate
from tests.support.polling import eventually
from tests.support.server import rss_kib

MIB = 1 << 20
MARK = 64 * MIB
UNIT = 1 * MIB  # --max-message-size: what one credit reserves
BODY = b"m" * (256 * 1024)
QUEUES = 12
CONNECTIONS = 4
LINKS_PER_CONNECTION = 4  # 16 publisher links
OFFERED = 640  # messages offered in all (each link sends while it has credit): 160 MiB, 2.5 times the mark
# The stated margin for RSS: what the process needs besides the message bodies the mark counts (proton's buffer of a
# transfer being read, the allocator's slack, the metrics and log). The bodies themselves stay under the mark.
RSS_MARGIN = 24 * MIB
BLOCKED_LOG = "memory high-water mark reached"
UNBLOCKED_LOG = "memory below the low-water mark"

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")

Links = list[tuple[BlockingConnection, BlockingSender]]


def rss(pid: int) -> int:
    return rss_kib(pid) * 1024


def offer(links: Links, sent: dict[int, list[Delivery]], quiet: float = 4.0, limit: float = 25.0) -> None:
    """Send on every link while it has credit, until OFFERED messages are sent or no link got credit for ``quiet``
    seconds (bounded by ``limit`` seconds in all; ``quiet`` is longer than the two ticks the server takes to move
    an idle link's credit to a waiting one)."""
    conns = list({id(conn): conn for conn, _ in links}.values())
    began = last_progress = time.monotonic()
    total = 0
    while time.monotonic() - began < limit and time.monotonic() - last_progress < quiet and total < OFFERED:
        for index, (_, snd) in enumerate(links):
            mine = sent.setdefault(index, [])
            while snd.link.credit > 0 and total < OFFERED:
                mine.append(snd.link.send(Message(body=BODY, durable=False)))
                total += 1
                last_progress = time.monotonic()
        for conn in conns:
            try:
                conn.wait(lambda: False, timeout=0.05, msg="pump")
            except Timeout:
                pass


def settled(links: Links, sent: dict[int, list[Delivery]], limit: float = 30.0) -> list[Delivery]:
    """Every delivery sent, once each has its outcome (within ``limit`` seconds)."""
    deliveries = [delivery for index in sorted(sent) for delivery in sent[index]]
    conns = list({id(conn): conn for conn, _ in links}.values())
    deadline = time.monotonic() + limit
    while not all(d.remote_state for d in deliveries):
        assert time.monotonic() < deadline, f"{sum(1 for d in deliveries if not d.remote_state)} without an outcome"
        for conn in conns:
            try:
                conn.wait(lambda: False, timeout=0.05, msg="pump")
            except Timeout:
                pass
    return deliveries


def status(server: object) -> tuple[int, dict, str]:
    result = live(server, "status", "--json", "--interval", "0.1")
    text = live(server, "status", "--interval", "0.1")
    return result.exit_code, json.loads(result.stdout), text.stdout


def log_lines(server: object, needle: str) -> list[str]:
    return [line for line in server.log().splitlines() if needle in line]  # type: ignore[attr-defined]


def test_many_queues_links_and_large_messages_stay_under_the_mark_and_the_block_is_reported(make_server):
    server = make_server(
        None, "--memory-high-water", str(MARK), "--max-message-size", str(UNIT), "--http", "127.0.0.1:0"
    )
    base = http_base(server)
    conns = [connect(server.url) for _ in range(CONNECTIONS)]
    links: Links = [
        (conn, sender(conn, f"mark.q{(number * LINKS_PER_CONNECTION + offset) % QUEUES}"))
        for number, conn in enumerate(conns)
        for offset in range(LINKS_PER_CONNECTION)
    ]
    assert get(base + "/readyz") == (200, "ready\n")
    before = rss(server.proc.pid)

    sent: dict[int, list[Delivery]] = {}
    offer(links, sent)
    deliveries = settled(links, sent)
    accepted = [d for d in deliveries if d.remote_state == Delivery.ACCEPTED]
    grown = rss(server.proc.pid) - before
    offered = len(deliveries) * len(BODY)
    # The bound: every body accepted is held (no consumer), and what is held never passes the mark.
    assert len(accepted) * len(BODY) <= MARK, f"{len(accepted) * len(BODY)} bytes accepted against a {MARK} mark"
    assert len(accepted) == len(deliveries)  # blocked, not refused: nothing credit was granted for is lost
    assert len(accepted) * len(BODY) >= MARK - 2 * UNIT  # and the mark is used, not a fraction of it
    assert grown <= MARK + RSS_MARGIN, f"RSS grew by {grown} bytes ({before} before; {offered} offered)"

    # Blocked: the probes, the metrics, the status and one log line say so.
    eventually(lambda: get(base + "/readyz")[0] == 503, what="/readyz 503 while blocked")
    _, text = get(base + "/readyz")
    assert text.startswith("memory high-water mark reached: publishers blocked"), text
    assert get(base + "/healthz") == (200, "ok\n")  # the process is healthy: restarting it would not help
    samples = scrape(base)
    assert value(samples, "subgate_memory_blocked") == 1
    assert value(samples, "subgate_memory_high_water_bytes") == MARK
    assert MARK - UNIT < value(samples, "subgate_memory_held_bytes") <= MARK
    exit_code, report, lines = status(server)
    assert exit_code == 5, report
    assert report["health"].startswith("memory-blocked: ") and report["server"]["memory"]["blocked"] is True
    assert lines.splitlines()[0].startswith("subgate 0.1.0 'subgate': running, memory-blocked: "), lines
    assert "publishers blocked" in lines
    assert all(snd.link.credit <= 0 for _, snd in links)  # below 0: credit taken back while sends were on the wire
    blocked = log_lines(server, BLOCKED_LOG)
    assert len(blocked) == 1 and "WARNING" in blocked[0], blocked

    # A consumer drains every queue: the block ends, reported as such, and the publishers get credit again.
    consumer = connect(server.url)
    per_queue = {queue: 0 for queue in range(QUEUES)}
    for index, mine in sent.items():
        per_queue[index % QUEUES] += sum(1 for d in mine if d.remote_state == Delivery.ACCEPTED)
    for queue, count in per_queue.items():
        rcv = receiver(consumer, f"mark.q{queue}", credit=8)
        for _ in range(count):
            assert rcv.receive(timeout=10).body == BODY
            rcv.accept()
    eventually(lambda: get(base + "/readyz") == (200, "ready\n"), what="/readyz 200 after the drain")
    assert value(scrape(base), "subgate_memory_blocked") == 0
    exit_code, report, lines = status(server)
    assert exit_code == 0 and report["health"] == "ok", report
    assert lines.splitlines()[0] == "subgate 0.1.0 'subgate': running, ok"
    for conn, snd in links:
        conn.wait(lambda snd=snd: snd.link.credit > 0, timeout=10, msg="credit after the drain")
    unblocked = log_lines(server, UNBLOCKED_LOG)
    assert len(unblocked) == 1 and "INFO" in unblocked[0], unblocked
    assert len(log_lines(server, BLOCKED_LOG)) == 1  # one line per crossing, not per message
    for conn in [*conns, consumer]:
        conn.close()


def test_a_mark_below_the_largest_message_is_refused_at_start_with_one_line(tmp_path):
    bad = run_subgate(
        "serve", "--listen", "127.0.0.1:0", "--store", f"sqlite:///{tmp_path / 'subgate.db'}", "--migrate",
        "--memory-high-water", "1000000", "--max-message-size", "2000000", cwd=tmp_path, timeout=20,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "Error: --memory-high-water (1000000 bytes) must be at least --max-message-size (2000000 bytes): the credit "
        "of a single publisher link reserves room for a message of that size"
    )
