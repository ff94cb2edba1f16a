"""Two proton Transports pumped in memory: a client ``Connection`` on one side, the server side wired to the
Broker's handlers through a ``Collector`` (no sockets, no threads), after proton's own ``pump()`` tests.

The journal is ``FakeJournal``: it keeps what it is given and commits only when a test says so, on the test's
thread, which stands for the reactor (the real writer's thread rules are untouched: tokens still go through
``claim`` on the reactor side).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from proton import Collector, Connection, Delivery, Link, Message, Transport

from subgate.engine.records import Catalog, NewMessage
from subgate.gateway.broker import Broker
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings
from subgate.storage.journal import BatchResult


class FakeJournal:
    """A ``JournalWriter`` stand-in that commits on demand (``commit``) and records the structural writes."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        self.records: list[NewMessage] = []
        self.calls: list[tuple[Any, ...]] = []

    def submit_message(self, message: NewMessage, token: Any) -> None:
        self.records.append(message)
        self.pending.append(token)

    def submit_transaction(self, messages: list[NewMessage], acks: list[tuple[int, int]], token: Any) -> None:
        self.records.extend(messages)
        self.pending.append(token)

    def submit_barrier(self, token: Any) -> None:
        self.pending.append(token)

    def claim(self, result: BatchResult) -> BatchResult:
        return result

    def commit(self, error: BaseException | None = None) -> BatchResult:
        """Everything submitted so far, as one batch: committed, or (``error``) not written."""
        tokens, self.pending = self.pending, []
        if error is None:
            return BatchResult(tokens, None, len(tokens))
        return BatchResult([], error, len(tokens), tokens)

    def __getattr__(self, name: str) -> Callable[..., None]:
        if not name.startswith("submit_"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, *args))


class FakeContainer:
    """What the broker asks of the container: timers, kept here and never fired unless a test fires them."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Any]] = []

    def schedule(self, delay: float, handler: Any) -> None:
        self.timers.append((delay, handler))


def _pump_one_way(src: Transport, dst: Transport) -> bool:
    pending = src.pending()
    capacity = dst.capacity()
    if capacity < 0:
        if pending < 0:
            return False
        src.close_head()
        return True
    if pending < 0:
        dst.close_tail()
        return True
    data = src.peek(min(capacity, 4096))
    if data:
        dst.push(data)
        src.pop(len(data))
        return True
    return False


class Pair:
    """A client connection and the broker, pumped in memory."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings(name="unit")
        self.journal = FakeJournal()
        self.router = Router(self.settings, self.journal, Catalog([], [], 0, 0, 0))  # type: ignore[arg-type]
        self.container = FakeContainer()
        self.broker = Broker(self.settings, self.router, self.container, journal=self.journal)  # type: ignore[arg-type]
        self.client = Connection()
        self.client.container = "client-1"
        self.client_transport = Transport()
        self.client_transport.bind(self.client)
        self.server = Connection()
        self.server_transport = Transport(Transport.SERVER)
        self.server_transport.bind(self.server)
        self.collector = Collector()
        self.server.collect(self.collector)
        self.client.open()
        self.session = self.client.session()
        self.session.open()
        self.pump()

    def pump(self, rounds: int = 200) -> None:
        """Move bytes both ways and hand the server's events to the broker until nothing moves."""
        for _ in range(rounds):
            moved = _pump_one_way(self.client_transport, self.server_transport)
            moved = _pump_one_way(self.server_transport, self.client_transport) or moved
            dispatched = self._dispatch()
            if not moved and not dispatched:
                return
        raise AssertionError("the pair did not settle")

    def _dispatch(self) -> bool:
        dispatched = False
        for _ in range(10_000):
            event = self.collector.peek()
            if event is None:
                return dispatched
            event.dispatch(self.broker)
            self.collector.pop()
            dispatched = True
        raise AssertionError("too many events")

    def commit(self, error: BaseException | None = None) -> None:
        """The journal commits what it holds; the result comes back to the broker as the writer's would."""
        self.broker.on_journal_committed(SimpleNamespace(subject=self.journal.commit(error)))
        self.pump()

    # -- client side -------------------------------------------------------------------------------------
    def sender(self, address: str | None, name: str = "snd", **target: Any) -> Link:
        link = self.session.sender(name)
        if address is not None:
            link.target.address = address
        for key, value in target.items():
            setattr(link.target, key, value)
        link.open()
        self.pump()
        return link

    def receiver(self, address: str | None, name: str = "rcv", credit: int = 0) -> Link:
        link = self.session.receiver(name)
        if address is not None:
            link.source.address = address
        link.open()
        if credit:
            link.flow(credit)
        self.pump()
        return link

    def send(self, link: Link, body: str, *, durable: bool = False, tag: str = "t") -> Delivery:
        delivery = link.delivery(tag)
        link.send(Message(body=body, durable=durable).encode())
        link.advance()
        self.pump()
        return delivery

    def server_link(self, name: str) -> Any:
        """The broker's state of the server side of the link called ``name``."""
        link = self.server.link_head(0)
        while link is not None:
            if link.name == name:
                return getattr(link, "_sg", None)
            link = link.next(0)
        return None


def received(link: Link) -> list[tuple[Delivery, str]]:
    """The complete deliveries waiting on a client receiver, read and advanced."""
    out = []
    for _ in range(10_000):
        delivery = link.current
        if delivery is None or delivery.partial:
            return out
        message = Message()
        message.decode(link.recv(delivery.pending))
        link.advance()
        out.append((delivery, str(message.body)))
    return out
