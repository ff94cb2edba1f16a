"""One JMS Session (``JmsSession``): the begin and end, the attaches of consumers, browsers and producers in the
shapes of §2.1-2.4 and §5.1-5.4 (capabilities, filters, settle modes, link names), and local transactions
(§6: coordinator, declare, commit, rollback). It refers to its connection (``JmsWire``) by type only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proton import Data, Described, Endpoint, Link, Terminus, symbol, ulong

from tests.support.jms.deliveries import Outcome, Pending, _error_of
from tests.support.jms.errors import RefusedLocally, RemoteError, TransactionFailed
from tests.support.jms.frames import AMQP_VALUE, DECLARE, DISCHARGE, _encode, _put_symbols, described_list
from tests.support.jms.links import Consumer, Producer, Received, TemporaryDestination, _Coordinator
from tests.support.jms.vocabulary import (
    _CONSUMER_KINDS,
    DURABLE,
    NO_LOCAL_FILTER,
    OUTCOMES,
    QUEUE,
    SELECTOR_FILTER,
    SHARED,
    SHARED_DURABLE,
)
from tests.support.jms.wire import MAX_FRAME_SIZE, _AttachShape

if TYPE_CHECKING:
    from tests.support.jms.connection import JmsWire

PREFETCH = 1000
SESSION_CAPACITY = 2047 * MAX_FRAME_SIZE  # gives begin incoming-window=2047 (§1.7)


def _put_filters(data: Data, selector: str | None, no_local: bool) -> None:
    """§2.4: described values with the numeric Apache descriptors, keyed by symbols."""
    if not selector and not no_local:
        return
    data.put_map()
    data.enter()
    for key, descriptor, value in (
        ("no-local", NO_LOCAL_FILTER, "NoLocalFilter{}" if no_local else None),
        ("jms-selector", SELECTOR_FILTER, selector),
    ):
        if value is not None:
            data.put_symbol(symbol(key))
            data.put_described()
            data.enter()
            data.put_ulong(descriptor)
            data.put_string(value)
            data.exit()
    data.exit()


class JmsSession:
    """One AMQP session, plus the coordinator link when transacted. Build it with ``JmsWire.session``."""

    def __init__(
        self, wire: JmsWire, session_id: str, *, transacted: bool, declare: bool = True, hidden: bool = False
    ) -> None:
        self.wire = wire
        self.id = session_id
        self.transacted = transacted
        self.txn_id: bytes | None = None
        self.declare_outcome: Outcome | None = None
        self.consumers: list[Consumer] = []
        self.remote_error: RemoteError | None = None
        self.ended = False
        self._consumer_seq = 0
        self._producer_seq = 0
        session = wire.connection.session()
        session.incoming_capacity = SESSION_CAPACITY
        session._jms = self
        self.session = session
        session.open()
        wire.pump(lambda: not session.state & Endpoint.REMOTE_UNINIT, what="the begin reply")
        if not hidden:
            wire.sessions.append(self)
        self.coordinator: _Coordinator | None = None
        if transacted:
            self.coordinator = _Coordinator(self)
        if self.coordinator is not None and declare:
            outcome = self.declare()
            if outcome.state != "declared":
                raise TransactionFailed("declare was not answered with declared", _error_of(outcome))

    # -- consumers -------------------------------------------------------------------------------------------------
    def consumer(
        self,
        destination: str | TemporaryDestination,
        kind: str = QUEUE,
        *,
        name: str | None = None,
        selector: str | None = None,
        no_local: bool = False,
        prefetch: int = PREFETCH,
        presettle: bool = False,
        browse: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> Consumer:
        """Attach a receiver shaped like §2.1-2.4 / §5.1, then ``flow(prefetch)`` (§5.5).

        ``kind``: QUEUE, TOPIC, TEMP_QUEUE, TEMP_TOPIC (implied by a TemporaryDestination), DURABLE,
        SHARED_DURABLE or SHARED (these three need ``name``; global naming follows from a missing ClientID).

        Raises:
            RefusedLocally (the client's own guards), LinkRefused (null source reply; unless ``check=False``,
            then the consumer comes back with ``refusal`` set).
        """
        if isinstance(destination, TemporaryDestination):
            kind, address = destination.kind, destination.address or ""
        else:
            address = self.wire.node_address(destination, _CONSUMER_KINDS[kind].capability)
        shape = _CONSUMER_KINDS[kind]
        selector = selector if selector and selector.strip() else None  # §2.4: blank means no filter
        if shape.shared and no_local:
            raise RefusedLocally("a JMS shared consumer has no no-local option")
        self._consumer_seq += 1
        if kind in (DURABLE, SHARED_DURABLE, SHARED):
            if name is None:
                raise RefusedLocally("a subscription needs a name")
            link_name = self.wire.subscriptions.reserve(name, kind, address, selector, self.wire.client_id is not None)
        else:
            name = None  # only subscriptions have names; other consumers are named after their consumer id
            link_name = f"qpid-jms:receiver:{self.id}:{self._consumer_seq}:{address}"
        capabilities = [shape.capability]
        if shape.shared:
            capabilities += ["shared"] if self.wire.client_id else ["shared", "global"]
        link = self.session.receiver(link_name)
        link.snd_settle_mode = Link.SND_SETTLED if presettle or browse else Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        source = link.source
        source.address = address
        source.durability = Terminus.DELIVERIES if shape.durable else Terminus.NONDURABLE
        source.expiry_policy = Terminus.EXPIRE_NEVER if shape.durable else Terminus.EXPIRE_WITH_LINK
        if shape.durable or browse:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        _put_symbols(source.capabilities, capabilities)
        _put_symbols(source.outcomes, OUTCOMES)
        _put_filters(source.filter, selector, no_local)
        ask_shared = shape.shared and "SHARED-SUBS" not in self.wire.offered_capabilities
        self.wire._expect_attach(link_name, _AttachShape(True, ("SHARED-SUBS",) if ask_shared else ()))
        consumer = Consumer(self, link, kind, address, name, prefetch)
        link.open()
        consumer._await_attach(timeout, check)
        if consumer.refusal is None and ask_shared:
            consumer._check_shared_subs(timeout)
        if consumer.refusal is None and prefetch:
            consumer.flow(prefetch)
        return consumer

    def browser(self, queue: str, *, selector: str | None = None, prefetch: int = PREFETCH) -> Consumer:
        """A QueueBrowser link (§5.4): distribution-mode copy, snd-settle-mode settled, capability queue."""
        return self.consumer(queue, QUEUE, selector=selector, prefetch=prefetch, browse=True)

    def browse(self, queue: str, *, selector: str | None = None, prefetch: int = PREFETCH) -> list[Received]:
        """A whole enumeration the way Qpid JMS does it: drain until a drain brings nothing, re-flow, close."""
        browser = self.browser(queue, selector=selector, prefetch=prefetch)
        seen: list[Received] = []
        for _ in range(100_000):
            browser.drain()
            arrived = browser.take_buffered()
            if not arrived:
                break
            seen += arrived
            browser.top_up()
        browser.top_up()
        browser.close()
        return seen

    # -- producers -------------------------------------------------------------------------------------------------
    def producer(
        self,
        address: str | TemporaryDestination | None,
        kind: str = QUEUE,
        *,
        presettle: bool = False,
        check: bool = True,
        timeout: float | None = None,
    ) -> Producer:
        """A fixed producer (§5.2), or the anonymous relay producer for ``address=None``."""
        if isinstance(address, TemporaryDestination):
            kind, address = address.kind, address.address
        elif address is not None:
            address = self.wire.node_address(address, kind)
        self._producer_seq += 1
        producer_id = f"{self.id}:{self._producer_seq}"
        link = self.session.sender(f"qpid-jms:sender:{producer_id}:{'null' if address is None else address}")
        link.snd_settle_mode = Link.SND_SETTLED if presettle else Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.source.address = producer_id
        _put_symbols(link.source.outcomes, OUTCOMES)
        if address is not None:
            link.target.address = address
            _put_symbols(link.target.capabilities, [kind])
        ask_delay = "DELAYED_DELIVERY" not in self.wire.offered_capabilities
        self.wire._expect_attach(link.name, _AttachShape(False, ("DELAYED_DELIVERY",) if ask_delay else ()))
        producer = Producer(self, link, producer_id, address, kind, presettle)
        link.open()
        producer._await_attach(timeout, check)
        return producer

    # -- transactions (§6) -----------------------------------------------------------------------------------------
    def send_declare(self) -> Pending:
        """Send ``declare{}`` without waiting; ``wait()`` gives the declared outcome (or a rejection)."""
        return self._control(described_list(DECLARE, []))

    def send_discharge(self, fail: bool, txn_id: bytes | None = None) -> Pending:
        """Send ``discharge{txn-id, fail}`` without waiting (for hand-made pipelines)."""
        txn = txn_id if txn_id is not None else self.txn_id
        return self._control(described_list(DISCHARGE, [txn, fail]))

    def declare(self, timeout: float | None = None) -> Outcome:
        """Declare a transaction and wait; ``txn_id`` becomes the declared id (None after a rejection)."""
        return self._declared(self.send_declare().wait(timeout))

    def commit(self, *, redeclare: bool = True, timeout: float | None = None) -> Outcome:
        """discharge(fail=false), pipelined with the next declare as Qpid JMS does; returns the discharge outcome."""
        return self._discharge(False, redeclare, timeout)

    def rollback(self, *, redeclare: bool = True, timeout: float | None = None) -> Outcome:
        """§6.5: drain consumers with credit, discharge(fail=true) + declare, release the prefetch, re-flow."""
        active = [c for c in self.consumers if c.open]
        for consumer in active:
            consumer.drain(timeout)
        outcome = self._discharge(True, redeclare, timeout)
        for consumer in active:
            consumer.release_buffered()
            consumer.top_up()
        return outcome

    def _discharge(self, fail: bool, redeclare: bool, timeout: float | None) -> Outcome:
        discharge = self.send_discharge(fail)
        declare = self.send_declare() if redeclare else None
        outcome = discharge.wait(timeout)
        self.txn_id = None
        if declare is not None:
            self._declared(declare.wait(timeout))
        return outcome

    def _declared(self, outcome: Outcome) -> Outcome:
        self.declare_outcome = outcome
        self.txn_id = outcome.txn_id if outcome.state == "declared" else None
        return outcome

    def _control(self, body: Described) -> Pending:
        if self.coordinator is None:
            raise RefusedLocally("not a transacted session")
        return self.coordinator.control(_encode(Described(ulong(AMQP_VALUE), body)))

    def _rollback_on_close(self, timeout: float | None) -> None:
        if self.coordinator is not None and self.txn_id is not None and not self.ended:
            self.send_discharge(True).wait(timeout)
            self.txn_id = None

    # -- end -------------------------------------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> RemoteError | None:
        """``Session.close()``: discharge(fail) if transacted, then ``end`` without detaching links (§1.7)."""
        self._rollback_on_close(timeout)
        if not self.session.state & Endpoint.LOCAL_CLOSED:
            self.session.close()
        self.wire.pump(lambda: self.ended, timeout, "the end reply")
        return self.remote_error

    def _remote_end(self) -> None:
        self.ended = True
        self.remote_error = RemoteError.of(self.session.remote_condition)
        for consumer in self.consumers:
            consumer._finished()
        if not self.session.state & Endpoint.LOCAL_CLOSED:
            self.session.close()
