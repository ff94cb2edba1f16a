"""The store stopped under load (issue 19, item 1): PostgreSQL is shut down for a few seconds while publishers
send persistent messages to a queue, then started again.

Promised: a publisher whose message could not be written gets ``rejected`` with ``amqp:internal-error`` and a
description (or waits: back-pressure), never an ``accepted`` for a message that is not stored; nothing accepted
is lost; the server keeps running and accepts again by itself once the store is back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from proton import Delivery, Message
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from tests.support.amqp import Capabilities, connect

ADDRESS = "outage.q"


@dataclass
class Outcomes:
    """What the publishers saw: accepted keys with their times, and rejections (time, condition, description)."""

    accepted: list[tuple[float, str]] = field(default_factory=list)
    rejected: list[tuple[float, str, str]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for t, _ in self.accepted if t > moment)


def _send_one(conn: BlockingConnection, link: object, key: str, padding: int) -> Delivery:
    body = key if not padding else f"{key}|{'x' * padding}"
    delivery = link.send(Message(body=body, durable=True))  # type: ignore[attr-defined]
    conn.wait(lambda: bool(delivery.remote_state) or delivery.settled, timeout=60, msg=f"outcome of {key}")
    return delivery


def publish(url: str, name: str, outcomes: Outcomes, stop: threading.Event, padding: int = 0) -> None:
    """Send one message at a time until ``stop``; record each outcome. ``padding``: bytes appended to each body
    after a ``|`` (``received_keys`` strips them)."""
    conn = connect(url, timeout=60)
    options: list[LinkOption] = [Capabilities("queue")]
    link = conn.create_sender(ADDRESS, name=name, options=options).link
    number = 0
    while not stop.is_set():
        number += 1
        key = f"{name}-{number}"
        delivery = _send_one(conn, link, key, padding)
        with outcomes.lock:
            if delivery.remote_state == Delivery.ACCEPTED:
                outcomes.accepted.append((time.monotonic(), key))
            elif delivery.remote_state == Delivery.REJECTED and delivery.remote.condition is not None:
                condition = delivery.remote.condition
                outcomes.rejected.append((time.monotonic(), condition.name, condition.description or ""))
            else:
                outcomes.other.append(f"{key}: {delivery.remote_state}")
        delivery.settle()
        if delivery.remote_state != Delivery.ACCEPTED:
            time.sleep(0.05)
    conn.close()


def received_keys(url: str, limit: float = 60.0) -> set[str]:
    """Drain the queue (accepting), until 3 s pass idle or ``limit`` runs out."""
    conn = connect(url, timeout=30)
    options: list[LinkOption] = [Capabilities("queue")]
    rcv = conn.create_receiver(ADDRESS, credit=1000, options=options)
    keys: set[str] = set()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            message = rcv.receive(timeout=3)
        except Exception:  # noqa: BLE001 - proton's Timeout: the queue is empty
            break
        keys.add(str(message.body).split("|", 1)[0])
        rcv.accept()
    conn.close()
    return keys
