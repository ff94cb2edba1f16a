"""Thousands of idle AMQP connections held open at once, each with a session and a consumer link, from raw sockets.

Each connection is one write of pipelined frames (SASL header and ANONYMOUS init, AMQP header, ``open``,
``begin``, ``attach`` of a receiver on one shared queue, no credit) and is counted as held once the server's
answer up to its ``attach`` has been read. Connections are opened in batches (every one of a batch answered
before the next batch is sent), from several loopback source addresses so the per-address limit is not the one
tested. ``server_rss_kib`` reads a process's resident memory from /proc. Used by
tests/e2e/test_many_connections.py and bench/connections_rss.py.
"""

from __future__ import annotations

import resource
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from proton import Described, symbol, ubyte, uint, ulong

from tests.support.rawamqp import AMQP_HEADER, SASL_FRAME, SASL_HEADER, frame, parse_frames, performative

OPEN, BEGIN, ATTACH, DETACH, END, CLOSE = 0x10, 0x11, 0x12, 0x16, 0x17, 0x18
SASL_INIT, SASL_OUTCOME = 0x41, 0x44
SOURCE = 0x28
TARGET = 0x29


def hello(index: int, address: str) -> bytes:
    """Everything one connection sends: SASL ANONYMOUS, then open, begin and a receiver's attach to ``address``."""
    sasl = SASL_HEADER + frame(performative(SASL_INIT, [symbol("ANONYMOUS"), b"", None]), frame_type=SASL_FRAME)
    opening = frame(performative(OPEN, [f"held-{index}"]))
    begin = frame(performative(BEGIN, [None, uint(0), uint(2048), uint(2048)]), channel=0)
    attach = performative(
        ATTACH,
        [
            f"held-{index}",  # name
            uint(0),  # handle
            True,  # role: receiver
            ubyte(0),  # snd-settle-mode: unsettled
            ubyte(0),  # rcv-settle-mode: first
            Described(ulong(SOURCE), [address]),
            Described(ulong(TARGET), []),
        ],
    )
    return sasl + AMQP_HEADER + opening + begin + frame(attach, channel=0)


def answered(data: bytes) -> bool:
    """Has the server's answer, from its SASL header up to its ``attach``, arrived whole in ``data``? Raises
    AssertionError if the SASL outcome is not ok or the server ends anything before the attach."""
    if len(data) < len(SASL_HEADER) + len(AMQP_HEADER):
        return False
    assert data.startswith(SASL_HEADER), data[:16]
    sasl, rest = parse_frames(data[len(SASL_HEADER) :])
    outcome = [f for f in sasl if f.descriptor == SASL_OUTCOME]
    if not outcome:
        return False
    assert int(outcome[0].fields[0]) == 0, f"SASL outcome {outcome[0].fields}"
    if len(rest) < len(AMQP_HEADER):
        return False
    assert rest.startswith(AMQP_HEADER), rest[:16]
    frames, _ = parse_frames(rest[len(AMQP_HEADER) :])
    for amqp in frames:
        if amqp.descriptor in (END, DETACH, CLOSE):
            raise AssertionError(f"the server ended a held connection: {amqp}")
        if amqp.descriptor == ATTACH:
            return True
    return False


def raise_open_files(needed: int) -> None:
    """Raise this process's soft open-file limit towards the hard one, to hold ``needed`` sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, needed + 256))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < needed + 64:
        raise RuntimeError(f"open-file limit {hard} is too low for {needed} connections")


@contextmanager
def held_connections(
    port: int, count: int, address: str, *, batch: int = 100, sources: int = 4, timeout: float = 60.0
) -> Iterator[list[socket.socket]]:
    """``count`` connections, each with a session and a consumer link on ``address``, open for the block."""
    raise_open_files(count)
    held: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    try:
        while len(held) < count:
            size = min(batch, count - len(held))
            pending = {}
            for index in range(len(held), len(held) + size):
                source = f"127.0.0.{index % sources + 2}"
                sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
                held.append(sock)
                sock.sendall(hello(index, address))
                pending[sock] = b""
            _read_answers(pending, deadline)
        yield held
    finally:
        for sock in held:
            sock.close()


def _read_answers(pending: dict[socket.socket, bytes], deadline: float) -> None:
    with selectors.DefaultSelector() as selector:
        for sock in pending:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        waiting = len(pending)
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{waiting} connections of a batch not answered in time")
            for key, _ in selector.select(min(remaining, 1.0)):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                chunk = sock.recv(65536)
                if not chunk:
                    raise AssertionError(f"the server closed a held connection after {pending[sock]!r}")
                pending[sock] += chunk
                if answered(pending[sock]):
                    selector.unregister(sock)
                    waiting -= 1


FRESH_CLIENT = """
import sys
from tests.support.survival import Bystander
port = int(sys.argv[1])
class Server:
    url = f"amqp://127.0.0.1:{port}"
with Bystander(Server()) as fresh:
    fresh.exchange()
print("served")
"""


def fresh_client_served(port: int, timeout: float = 60.0) -> bool:
    """A brand-new ordinary client (proton's blocking client) sends and receives a message, in a process of its
    own: this one holds more sockets than proton's select() takes (descriptors past 1,024)."""
    result = subprocess.run(
        [sys.executable, "-c", FRESH_CLIENT, str(port)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
    )
    return result.returncode == 0 and "served" in result.stdout
