"""The HTTP endpoint of ``--http`` against idle, slow, lying and oversized clients (issue 33, defect 3), on raw
sockets against a real server process: a fixed number of threads whatever the number of connections, idle ones
closed at the idle deadline, a request trickling in cut off at the request deadline, a ``Content-Length`` past the
body limit answered 413 at once, an oversized head answered 431, and normal requests answered all the while.

The short deadlines are given through the environment (``SUBGATE_HTTP_IDLE_TIMEOUT``,
``SUBGATE_HTTP_REQUEST_TIMEOUT``), so a server without them starts all the same and shows what it does instead.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_metrics import get, http_base
from tests.support.polling import eventually

IDLE_CONNECTIONS = 300
SHORT = {"SUBGATE_HTTP_IDLE_TIMEOUT": "4", "SUBGATE_HTTP_REQUEST_TIMEOUT": "2", "SUBGATE_HTTP_THREADS": "4"}
POOL = 4
SPARE_THREADS = 8  # threads the server may start meanwhile for anything else (store reads, a login check)


@pytest.fixture
def http_server(make_server: Any) -> Iterator[tuple[Any, str, tuple[str, int]]]:
    server = make_server(None, "--http", "127.0.0.1:0", env=SHORT)
    base = http_base(server)
    host, port = base.removeprefix("http://").rsplit(":", 1)
    assert get(base + "/readyz") == (200, "ready\n")
    yield server, base, (host, int(port))


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no thread count for {pid}")


def accepted(pid: int, port: int) -> int:
    """Sockets process ``pid`` has accepted on ``port`` (its descriptors whose inode /proc/net/tcp lists with that
    local port; a connection still in the listen backlog has no descriptor)."""
    inodes = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
            inodes.add(fields[9])
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except FileNotFoundError:
            continue
        count += target.startswith("socket:[") and target[8:-1] in inodes
    return count


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (EOF or reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
    finally:
        sock.setblocking(True)


def status_line(sock: socket.socket, timeout: float = 20.0) -> bytes:
    """The first line the server answers on ``sock`` (b"" when it closed without one)."""
    sock.settimeout(timeout)
    answer = b""
    try:
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    except TimeoutError:
        return b"(no answer within %d s)" % timeout
    except ConnectionError:
        pass
    return answer.split(b"\r\n", 1)[0]


def test_idle_connections_hold_no_thread_and_are_closed_at_the_idle_deadline(http_server):
    server, base, address = http_server
    pid = server.proc.pid
    before_threads = threads(pid)
    idle = [socket.create_connection(address, timeout=10) for _ in range(IDLE_CONNECTIONS)]
    try:
        eventually(
            lambda: accepted(pid, address[1]) >= IDLE_CONNECTIONS,
            timeout=30,
            what=f"the server accepted the {IDLE_CONNECTIONS} connections",
        )
        assert get(base + "/metrics")[0] == 200  # a normal request meanwhile
        grown = threads(pid) - before_threads
        assert grown <= SPARE_THREADS, f"{IDLE_CONNECTIONS} idle connections took {grown} more threads"
        assert threads(pid) <= before_threads + SPARE_THREADS

        selector = selectors.DefaultSelector()
        for sock in idle:
            selector.register(sock, selectors.EVENT_READ)
        closed = 0
        deadline = time.monotonic() + 30
        while closed < IDLE_CONNECTIONS and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                selector.unregister(sock)
                assert closed_by_server(sock), "the server sent something on an idle connection"
                closed += 1
        selector.close()
        assert closed == IDLE_CONNECTIONS, f"only {closed} of {IDLE_CONNECTIONS} idle connections were closed"
        assert get(base + "/readyz") == (200, "ready\n")
    finally:
        for sock in idle:
            sock.close()


def test_a_request_trickling_in_is_cut_off_at_the_request_deadline(http_server):
    _, base, address = http_server
    request = b"GET /metrics HTTP/1.1\r\nHost: subgate\r\nX-Pad: " + b"a" * 2000 + b"\r\n\r\n"
    slow = socket.create_connection(address, timeout=10)
    sent = 0
    cut = False
    deadline = time.monotonic() + 30
    try:
        while sent < len(request) and time.monotonic() < deadline:
            try:
                slow.sendall(request[sent : sent + 1])  # one byte every 0.1 s: never idle, never done
            except ConnectionError:
                cut = True
                break
            sent += 1
            if closed_by_server(slow):
                cut = True
                break
            if sent % 20 == 0:
                assert get(base + "/healthz")[0] in (200, 503)  # others are answered meanwhile
            time.sleep(0.1)
        assert cut, f"the server still read a request trickling in after {sent} bytes"
        assert sent < len(request)
    finally:
        slow.close()


def test_a_content_length_past_the_body_limit_is_answered_413_at_once(http_server):
    _, base, address = http_server
    liar = socket.create_connection(address, timeout=10)
    try:
        liar.sendall(
            b"POST /api/connections/close HTTP/1.1\r\nHost: subgate\r\nContent-Type: application/json\r\n"
            b"Content-Length: 99999999999\r\n\r\n{"
        )
        assert status_line(liar).startswith(b"HTTP/1.1 413 ")
        eventually(lambda: closed_by_server(liar), timeout=20, what="the connection closed after the 413")
    finally:
        liar.close()
    assert get(base + "/readyz") == (200, "ready\n")


def test_an_oversized_head_is_answered_431(http_server):
    _, base, address = http_server
    big = socket.create_connection(address, timeout=10)
    try:
        big.sendall(b"GET /healthz HTTP/1.1\r\nHost: subgate\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n")
        line = status_line(big)
        assert re.match(rb"HTTP/1\.[01] (431|400) ", line), line
    finally:
        big.close()
    assert get(base + "/readyz") == (200, "ready\n")
