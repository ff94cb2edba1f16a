"""Checks that a server survived a misbehaving client: nothing lost, other connections still served.

``preload`` stores durable messages on a queue before the bad input; ``Bystander`` is a proton connection opened
before it and used again after it; ``assert_still_serving`` runs every check (the bystander exchanges a message,
a brand-new connection does too, the preloaded messages are all still there and the server log has no traceback).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from proton import Message

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, sender
from tests.support.server import SubgateProcess


def preload(server: SubgateProcess, address: str, count: int, **connect_kwargs: Any) -> list[str]:
    """Send ``count`` durable messages to queue ``address`` and return their bodies, in order."""
    bodies = [f"{address}-{i}-{uuid.uuid4().hex[:6]}" for i in range(count)]
    conn = connect(server.url, **connect_kwargs)
    snd = sender(conn, address, "queue")
    for body in bodies:
        snd.send(Message(body=body, durable=True))
    conn.close()
    return bodies


class Bystander:
    """A connection with a sender and a receiver on one queue, opened before the bad input arrives."""

    def __init__(self, server: SubgateProcess, address: str | None = None, **connect_kwargs: Any) -> None:
        self.address = address or f"bystander-{uuid.uuid4().hex[:8]}"
        self.conn = connect(server.url, **connect_kwargs)
        self.snd = sender(self.conn, self.address, "queue")
        self.rcv = receiver(self.conn, self.address, "queue", credit=10)
        self.exchanged = 0

    def exchange(self) -> None:
        """Send one fresh message and receive exactly it back."""
        body = f"{self.address}-{self.exchanged}"
        self.snd.send(Message(body=body))
        assert receive_bodies(self.rcv, 1) == [body]
        self.exchanged += 1

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Bystander:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def assert_still_serving(
    server: SubgateProcess,
    bystander: Bystander | None = None,
    backlog: tuple[str, list[str]] | None = None,
    *,
    fresh_address: str | None = None,
    **connect_kwargs: Any,
) -> None:
    """The server is alive, the bystander and a new connection work, and ``backlog`` is intact on its queue.

    The new connection uses a queue of its own (``fresh_address``, or a new one when auto-create is on)."""
    assert server.alive(), server.log()
    if bystander is not None:
        bystander.exchange()
    fresh = Bystander(server, fresh_address, **connect_kwargs)
    fresh.exchange()
    fresh.close()
    if backlog is not None:
        address, bodies = backlog
        conn = connect(server.url, **connect_kwargs)
        rcv = receiver(conn, address, "queue", credit=len(bodies) + 10)
        assert receive_bodies(rcv, len(bodies)) == bodies
        assert nothing_arrives(rcv)
        conn.close()
    assert_clean_log(server)


def assert_clean_log(server: SubgateProcess) -> None:
    """No handler let an exception through (``guarded`` logs those with a traceback and internal-error)."""
    log = server.log()
    assert "Traceback" not in log and "internal error" not in log, log


def open_sockets(pid: int) -> int:
    """How many sockets the process ``pid`` holds (listener and connections), read from /proc."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except FileNotFoundError:  # closed while we looked
            continue
    return count


def wait_for_sockets(pid: int, expected: int, timeout: float = 5.0) -> int:
    """Poll until ``pid`` holds ``expected`` sockets (or the timeout passes); returns the last count."""
    deadline = time.monotonic() + timeout
    count = open_sockets(pid)
    while count != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        count = open_sockets(pid)
    return count


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
