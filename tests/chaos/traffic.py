"""The load: publishers and consumers, each a thread with its own connection that ends when the server dies.

Every message's body is its key (``plain-17``, ``tx-3-2``...), unique over the run. A publisher records a key in
the ledger once the server confirmed it; a consumer records its accepts and failed deliveries as it settles them,
accepting out of order. ``drain`` is a consumer endpoint's first pass after a restart: everything it gets,
unsettled, until the expected keys are all there and nothing more comes.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Delivery as ProtonDelivery
from proton import Message, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, BlockingReceiver

from tests.chaos.checks import Delivery
from tests.chaos.ledger import Ledger
from tests.support.amqp import Capabilities, connect
from tests.support.jms import QUEUE, JmsWire

QUIET = 0.5  # seconds without a delivery that end a drain once the expected keys are in
DRAIN_LIMIT = 30.0  # the longest a drain waits for the expected keys
TAIL = 1.0  # the longest a drain goes on once they are in


@dataclass(frozen=True)
class Endpoint:
    """A consumer endpoint: a queue, a durable subscription (container-id + link name) or a shared durable one."""

    name: str
    address: str
    kind: str  # queue | durable | shared
    container_id: str | None = None


class _Durable(LinkOption):
    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def apply(self, link: Any) -> None:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
        Capabilities(*self.capabilities).apply(link)


def open_receiver(url: str, endpoint: Endpoint) -> tuple[BlockingConnection, BlockingReceiver]:
    conn = connect(url, container_id=endpoint.container_id, timeout=10)
    if endpoint.kind == "queue":
        options: list[LinkOption] = [Capabilities("queue")]
        name = f"{endpoint.name}-{random.getrandbits(32):x}"
    elif endpoint.kind == "durable":
        options, name = [_Durable("topic")], endpoint.name
    else:
        options, name = [_Durable("topic", "shared", "global")], f"{endpoint.name}|global"
    rcv = conn.create_receiver(endpoint.address, credit=500, name=name, options=options)
    return conn, rcv


def _next(rcv: BlockingReceiver, timeout: float) -> tuple[Message, ProtonDelivery] | None:
    try:
        message = rcv.receive(timeout=timeout)
    except Exception as error:
        if type(error).__name__ == "Timeout":
            return None
        raise
    assert rcv.fetcher is not None
    return message, rcv.fetcher.unsettled.pop()


def drain(rcv: BlockingReceiver, expected: set[str]) -> tuple[list[Delivery], list[ProtonDelivery]]:
    """Receive without settling until every expected key came (or ``DRAIN_LIMIT`` passed), then until ``QUIET``
    passes idle (at most ``TAIL`` more seconds: publishers may still be sending)."""
    got: list[Delivery] = []
    held: list[ProtonDelivery] = []
    missing = set(expected)
    deadline = time.monotonic() + DRAIN_LIMIT
    while time.monotonic() < deadline:
        item = _next(rcv, QUIET if not missing else min(2.0, max(0.1, deadline - time.monotonic())))
        if item is None:
            if not missing:
                break
            continue
        message, delivery = item
        got.append(Delivery(str(message.body), message.delivery_count))
        held.append(delivery)
        missing.discard(str(message.body))
        if not missing:
            deadline = min(deadline, time.monotonic() + TAIL)
    return got, held


def _settle(ledger: Ledger, endpoint: str, key: str, delivery: ProtonDelivery, rng: random.Random) -> None:
    """Accept (mostly), fail (modified, delivery-failed), or leave unsettled for good: the crash must bring it
    back."""
    roll = rng.random()
    if roll < 0.8:
        delivery.update(ProtonDelivery.ACCEPTED)
        delivery.settle()
        ledger.accept(endpoint, key)
    elif roll < 0.9:
        delivery.local.failed = True
        delivery.update(ProtonDelivery.MODIFIED)
        delivery.settle()
        ledger.fail(endpoint, key)


def consume(
    ledger: Ledger, endpoint: Endpoint, rcv: BlockingReceiver, held: list[tuple[str, ProtonDelivery]], seed: int
) -> None:
    """Settle in shuffled batches of 1–8 until the connection dies (the kill)."""
    rng = random.Random(seed)
    while True:
        rng.shuffle(held)
        for key, delivery in held:
            _settle(ledger, endpoint.name, key, delivery, rng)
        held = []
        for _ in range(rng.randint(1, 8)):
            item = _next(rcv, 0.2)
            if item is None:
                break
            key = str(item[0].body)
            ledger.delivered(endpoint.name, key)
            held.append((key, item[1]))


def publish_plain(
    ledger: Ledger, url: str, address: str, kind: str, prefix: str, counter: itertools.count[int]
) -> None:
    conn = connect(url, timeout=10)
    options: list[LinkOption] = [Capabilities(kind)]
    snd = conn.create_sender(address, name=f"{prefix}-{next(counter)}", options=options)
    while True:
        key = f"{prefix}-{next(counter)}"
        snd.send(Message(body=key, durable=True), timeout=10)
        ledger.confirm(address, [key])


def publish_transactions(ledger: Ledger, address: str, hostport: str, counter: itertools.count[int], seed: int) -> None:
    """JMS-style transacted sessions: 1–5 sends, then commit (mostly) or rollback."""
    rng = random.Random(seed)
    wire = JmsWire.connect(hostport, timeout=10)
    session = wire.session(transacted=True)
    producer = session.producer(address, QUEUE)
    while True:
        keys = [f"tx-{next(counter)}" for _ in range(rng.randint(1, 5))]
        try:
            for key in keys:
                producer.send(key, timeout=10)
        except BaseException:
            ledger.transaction(address, keys, "rolled-back")  # never discharged: the crash rolls it back
            raise
        commit = rng.random() < 0.75
        try:
            outcome = session.commit(timeout=10) if commit else session.rollback(timeout=10)
        except BaseException:
            ledger.transaction(address, keys, "in-doubt" if commit else "rolled-back")
            raise
        committed = commit and outcome.accepted
        ledger.transaction(address, keys, "committed" if committed else "rolled-back")


def thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    """A daemon thread whose end (the server's death) is expected and silent."""

    def quiet() -> None:
        try:
            target(*args)
        except BaseException:  # noqa: BLE001 - the kill ends every connection; that is the point
            return

    runner = threading.Thread(target=quiet, daemon=True, name=f"chaos-{target.__name__}")
    runner.start()
    return runner
