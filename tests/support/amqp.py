"""python-qpid-proton client helpers for end-to-end tests (blocking, bounded by timeouts).

Thin wrappers over ``proton.utils.BlockingConnection`` plus link options for terminus capabilities, and
helpers to settle a received delivery with any outcome.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from proton import Data, Delivery, Message, Terminus, symbol
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender


class Capabilities(LinkOption):
    """Set the terminus capabilities (``queue``/``topic``/...) on the node side of a link."""

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def apply(self, link: Any) -> None:
        terminus = link.target if link.is_sender else link.source
        data: Data = terminus.capabilities
        data.put_array(False, Data.SYMBOL)
        data.enter()
        for capability in self.capabilities:
            data.put_symbol(symbol(capability))
        data.exit()


class SharedDurable(LinkOption):
    """A shared global durable subscription's source (JMS createSharedDurableConsumer without a ClientID)."""

    def apply(self, link: Any) -> None:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
        Capabilities("topic", "shared", "global").apply(link)


class PreSettled(LinkOption):
    def apply(self, link: Any) -> None:
        link.snd_settle_mode = link.SND_SETTLED


class BrowseCopy(LinkOption):
    def apply(self, link: Any) -> None:
        link.source.distribution_mode = link.source.DIST_MODE_COPY


def connect(
    url: str,
    *,
    user: str | None = None,
    password: str | None = None,
    timeout: float = 15,
    container_id: str | None = None,
    **kwargs: Any,
) -> BlockingConnection:
    options: dict[str, Any] = {"timeout": timeout}
    if user is not None:
        options.update(user=user, password=password, allow_insecure_mechs=True, allowed_mechs="PLAIN")
    if container_id is not None:
        options["container_id"] = container_id
    options.update(kwargs)
    return BlockingConnection(url, **options)


def _name(kind: str, address: str | None) -> str:
    return f"{kind}-{address}-{uuid.uuid4().hex[:8]}"


def sender(conn: BlockingConnection, address: str | None, *caps: str) -> BlockingSender:
    return conn.create_sender(address, name=_name("snd", address), options=[Capabilities(*caps)] if caps else None)


def receiver(
    conn: BlockingConnection, address: str, *caps: str, credit: int = 100, options: Iterable[LinkOption] = ()
) -> BlockingReceiver:
    opts = list(options) + ([Capabilities(*caps)] if caps else [])
    return conn.create_receiver(address, credit=credit, name=_name("rcv", address), options=opts or None)


def send_all(snd: BlockingSender, bodies: Iterable[Any], **fields: Any) -> None:
    for body in bodies:
        snd.send(Message(body=body, **fields))


def receive_bodies(rcv: BlockingReceiver, count: int, timeout: float = 10) -> list[Any]:
    bodies = []
    for _ in range(count):
        bodies.append(rcv.receive(timeout=timeout).body)
        rcv.accept()
    return bodies


def settle_last(rcv: BlockingReceiver, outcome: str) -> None:
    """Settle the oldest unsettled delivery of ``rcv`` with ``outcome``: accepted, rejected, released,
    modified-failed, modified-undeliverable, modified-failed-undeliverable."""
    delivery: Delivery = rcv.fetcher.unsettled.popleft()
    if outcome == "accepted":
        delivery.update(Delivery.ACCEPTED)
    elif outcome == "rejected":
        delivery.update(Delivery.REJECTED)
    elif outcome == "released":
        delivery.update(Delivery.RELEASED)
    else:
        delivery.local.failed = "failed" in outcome
        delivery.local.undeliverable = "undeliverable" in outcome
        delivery.update(Delivery.MODIFIED)
    delivery.settle()


def outcome(conn: BlockingConnection, snd: BlockingSender, message: Message) -> str:
    """Send and wait for the outcome: "accepted", or the condition of a rejection."""
    delivery = snd.link.send(message)
    conn.wait(lambda: bool(delivery.remote_state) or delivery.settled, timeout=10, msg="no outcome")
    if delivery.remote_state == Delivery.REJECTED:
        condition = delivery.remote.condition
        return condition.name if condition is not None else "rejected"
    return "accepted" if delivery.remote_state == Delivery.ACCEPTED else str(delivery.remote_state)


def send_while_credit(
    conn: BlockingConnection, snd: BlockingSender, bodies: list[Any], wait: float, *, durable: bool = False
) -> list[Delivery]:
    """Send as long as the link gets credit within ``wait`` seconds; returns the deliveries sent."""
    from proton import Timeout

    sent = []
    for body in bodies:
        try:
            conn.wait(lambda: snd.link.credit > 0, timeout=wait, msg="no credit")
        except Timeout:
            break
        sent.append(snd.link.send(Message(body=body, durable=durable)))
    return sent


def all_accepted(conn: BlockingConnection, deliveries: list[Delivery]) -> bool:
    conn.wait(lambda: all(d.remote_state for d in deliveries), timeout=10, msg="outcomes")
    return all(d.remote_state == Delivery.ACCEPTED for d in deliveries)


def nothing_arrives(rcv: BlockingReceiver, wait: float = 0.5) -> bool:
    try:
        rcv.receive(timeout=wait)
    except Exception:
        return True
    return False


def nothing_buffered(conn: BlockingConnection, rcv: BlockingReceiver, wait: float = 0.3) -> bool:
    """True when no message reaches ``rcv`` within ``wait`` seconds, without granting credit (unlike receive)."""
    from proton import Timeout

    try:
        conn.wait(lambda: bool(rcv.fetcher.incoming), timeout=wait)
    except Timeout:
        return True
    return False
