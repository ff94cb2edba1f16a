"""The links of a JMS session, once attached: ``_LinkEnd`` (attach reply, refusal, detach in both directions, the
bookkeeping every link shares), ``Consumer`` with its ``Received`` messages and their dispositions, ``Producer``,
the transaction ``_Coordinator`` (which attaches itself) and ``TemporaryDestination``. The other attaches are
shaped where these objects are built: consumers and producers in ``session``, the unsubscribe lookup and the
temporary-destination creators in ``connection``. A link refers back to its session and connection by type only
(``TYPE_CHECKING``), never by an import at run time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from proton import Delivery, Endpoint, Link, Message, Terminus

from tests.support.jms.deliveries import Pending, SendFailed, _Presettled, _Tags, _transactional
from tests.support.jms.errors import LinkRefused, RemoteError
from tests.support.jms.frames import ACCEPTED, TRANSACTIONAL_STATE, _put_symbols, symbol_names
from tests.support.jms.messages import JmsMessage, encode_message
from tests.support.jms.vocabulary import _CONSUMER_KINDS, LOCAL_TRANSACTIONS, OUTCOMES, QUEUE

if TYPE_CHECKING:
    from tests.support.jms.connection import JmsWire
    from tests.support.jms.session import JmsSession


class _LinkEnd:
    """Attach/detach bookkeeping shared by every link this client opens."""

    durable = False

    def __init__(self, wire: JmsWire, link: Link) -> None:
        self.wire = wire
        self.link = link
        self.refusal: RemoteError | None = None
        self.remote_closed: bool | None = None  # the closed flag of the broker's detach, once it arrived
        self.remote_error: RemoteError | None = None
        self._local_detached = False
        self._done = False
        link._jms = self

    @property
    def name(self) -> str:
        return str(self.link.name)

    @property
    def credit(self) -> int:
        return int(self.link.credit)

    @property
    def open(self) -> bool:
        return not self._done and not self._local_detached and self.remote_closed is None

    def _null_terminus(self) -> bool:
        terminus = self.link.remote_source if self.link.is_receiver else self.link.remote_target
        return terminus.type == Terminus.UNSPECIFIED

    def _await_attach(self, timeout: float | None, check: bool) -> None:
        """Wait for the attach reply; a null terminus means refusal: wait for the detach and answer it (§2.5)."""
        link = self.link
        self.wire.pump(
            lambda: not link.state & Endpoint.REMOTE_UNINIT or self.remote_closed is not None,
            timeout,
            f"attach reply for {self.name!r}",
        )
        if not self._null_terminus():
            return
        self.wire.pump(lambda: self.remote_closed is not None, timeout, f"the detach after refusing {self.name!r}")
        self.refusal = self.remote_error or RemoteError(None, "Link creation was refused")
        self._finished()
        if check:
            raise LinkRefused(f"attach {self.name!r} refused", self.refusal)

    def _remote_detach(self, closed: bool) -> None:
        self.remote_closed = closed
        self.remote_error = RemoteError.of(self.link.remote_condition)
        if not self._local_detached:  # §1.8: answer; durable consumers with closed=false (§2.6)
            self._local_detached = True
            if self.durable and not self._null_terminus():
                self.link.detach()
            else:
                self.link.close()
        self._finished()

    def close(self, timeout: float | None = None) -> RemoteError | None:
        """detach(closed=true); waits for the broker's detach and returns its error (None if it had none)."""
        return self._end(True, timeout)

    def detach(self, timeout: float | None = None) -> RemoteError | None:
        """detach(closed=false); waits for the broker's detach and returns its error."""
        return self._end(False, timeout)

    def _end(self, closed: bool, timeout: float | None) -> RemoteError | None:
        owner = getattr(self.link.session, "_jms", None)
        if (owner is not None and owner.ended) or self.wire.socket_closed:
            self._finished()  # the session or connection is gone: no detach to exchange
            return self.remote_error
        if not self._local_detached:
            self._local_detached = True
            if closed:
                self.link.close()
            else:
                self.link.detach()
        self.wire.pump(lambda: self.remote_closed is not None, timeout, f"the broker's detach of {self.name!r}")
        self._finished()
        return self.remote_error

    def _finished(self) -> None:
        self._done = True


class Received:
    """One message a consumer got: the raw bytes, the decoded proton Message and the delivery."""

    def __init__(self, consumer: Consumer, delivery: Delivery, raw: bytes) -> None:
        self.consumer = consumer
        self.delivery = delivery
        self.raw = raw
        self.message = Message()
        self.message.decode(raw)
        self.presettled = bool(delivery.settled)
        self.state: str | None = "settled" if self.presettled else None

    @property
    def body(self) -> Any:
        return self.message.body

    @property
    def delivery_count(self) -> int:
        """header.delivery-count (0 when there is no header, §5.7)."""
        return int(self.message.delivery_count or 0)

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.message.properties or {})

    def accept(self, txn_id: bytes | None = None) -> Received:
        """accepted, or transactional-state{txn-id, accepted} in a transacted session (§6.4); settled."""
        txn = txn_id if txn_id is not None else self.consumer.session.txn_id
        if txn is not None:
            return self._settle("accepted", lambda d: _transactional(d, txn, ACCEPTED))
        return self._settle("accepted", lambda d: d.update(Delivery.ACCEPTED))

    def release(self) -> Received:
        return self._settle("released", lambda d: d.update(Delivery.RELEASED))

    def reject(self) -> Received:
        return self._settle("rejected", lambda d: d.update(Delivery.REJECTED))

    def modify(self, failed: bool = True, undeliverable: bool = False) -> Received:
        def update(delivery: Delivery) -> None:
            delivery.local.failed = failed
            delivery.local.undeliverable = undeliverable
            delivery.update(Delivery.MODIFIED)

        return self._settle("modified", update)

    def _settle(self, state: str, update: Callable[[Delivery], None]) -> Received:
        if self.state is not None:
            return self  # presettled (JMS sends nothing) or already settled
        update(self.delivery)
        self.delivery.settle()  # §5.6: every client disposition is settled=true, one per delivery
        self.state = state
        self.consumer.wire.flush()
        return self


class Consumer(_LinkEnd):
    """A JMS MessageConsumer / TopicSubscriber / QueueBrowser link."""

    def __init__(
        self, session: JmsSession, link: Link, kind: str, address: str, subscription: str | None, prefetch: int
    ) -> None:
        super().__init__(session.wire, link)
        self.session = session
        self.kind = kind
        self.address = address
        self.subscription = subscription
        self.prefetch = prefetch
        self.durable = _CONSUMER_KINDS[kind].durable
        self.buffer: deque[Received] = deque()
        self.arrived = 0
        session.consumers.append(self)

    def _arrived(self, delivery: Delivery, raw: bytes) -> None:
        received = Received(self, delivery, raw)
        if received.presettled:
            delivery.settle()  # frees it locally; no frame for a delivery the broker already settled
        self.buffer.append(received)
        self.arrived += 1

    def receive(self, timeout: float | None = None) -> Received:
        """The next buffered message, waiting for one (TimeoutError). No credit and no drain are added."""
        self.wire.pump(lambda: bool(self.buffer), timeout, f"a message on {self.name!r}")
        return self.buffer.popleft()

    def poll(self, timeout: float = 0.3) -> Received | None:
        """The next message within ``timeout``, or None."""
        self.wire._pump(lambda: bool(self.buffer), timeout)
        return self.buffer.popleft() if self.buffer else None

    def take_buffered(self) -> list[Received]:
        taken = list(self.buffer)
        self.buffer.clear()
        return taken

    def flow(self, credit: int) -> None:
        """flow(link-credit = current + ``credit``, drain=false)."""
        self.link.flow(credit)
        self.wire.flush()

    def top_up(self) -> None:
        """Back to ``prefetch`` credit, as after a drain or a rollback."""
        missing = self.prefetch - self.credit
        if missing > 0 and self.open:
            self.flow(missing)

    def drain(self, timeout: float | None = None) -> int:
        """flow(drain=true) and wait for the broker's drained answer (credit 0). Returns how many messages arrived
        meanwhile (they stay buffered). Without credit nothing is sent, as in Qpid JMS."""
        link = self.link
        if link.credit <= 0 or not self.open:
            return 0
        before = self.arrived
        link.drain(0)
        self.wire.flush()
        self.wire.pump(lambda: link.credit == 0 or not self.open, timeout, f"the drain answer on {self.name!r}")
        link.drain_mode = False
        return self.arrived - before

    def release_buffered(self) -> int:
        """``released`` for every prefetched message never handed out (consumer close, rollback)."""
        taken = self.take_buffered()
        for received in taken:
            received.release()
        return len(taken)

    def _check_shared_subs(self, timeout: float | None) -> None:
        """§1.5: without the connection capability, the reply attach must offer SHARED-SUBS itself."""
        reply = self.wire.last_attach_from_broker(self.name)
        if reply is not None and "SHARED-SUBS" in symbol_names(reply["offered-capabilities"]):
            return
        self._end(not self.durable, timeout)
        self.refusal = RemoteError(None, "Remote peer does not support shared subscriptions")
        raise LinkRefused("shared subscription refused", self.refusal)

    def _finished(self) -> None:
        if not self._done and self.subscription is not None:
            self.wire.subscriptions.release(self.subscription, self.kind, self.name)
        super()._finished()


class Producer(_LinkEnd):
    """A JMS MessageProducer link (fixed, or the anonymous relay one when ``address`` is None)."""

    def __init__(
        self, session: JmsSession, link: Link, producer_id: str, address: str | None, kind: str, presettle: bool
    ) -> None:
        super().__init__(session.wire, link)
        self.session = session
        self.id = producer_id
        self.address = address
        self.kind = kind
        self.presettle = presettle
        self.sent_count = 0
        self._tags = _Tags()

    def send(
        self,
        message: Any = None,
        *,
        to: str | TemporaryDestination | None = None,
        to_kind: str = QUEUE,
        persistent: bool = True,
        priority: int = 4,
        ttl: int | None = None,
        delay: int | None = None,
        txn_id: bytes | None = None,
        sync: bool | None = None,
        timeout: float | None = None,
        **message_fields: Any,
    ) -> Pending:
        """Send a JMS-shaped message (``JmsMessage.of(message, **message_fields)``); ttl/delay in ms.

        ``to``/``to_kind`` are for the anonymous producer. In a transacted session the transfer carries
        transactional-state{txn-id} (§6.3). Persistent non-transacted sends are synchronous (§5.2) unless
        ``sync`` says otherwise; a synchronous send raises SendFailed when the outcome is not accepted.
        """
        jms_message = JmsMessage.of(message, **message_fields)
        if isinstance(to, TemporaryDestination):
            to_kind, to = to.kind, to.address
        elif to is not None:
            to = self.wire.node_address(to, to_kind)
        if self.address is not None:
            to, to_kind = self.address, self.kind
        txn = txn_id if txn_id is not None else self.session.txn_id
        self.sent_count += 1
        message_id = f"{self.id}-{self.sent_count}"  # §7.4 DEFAULT: the producer id already starts with "ID:"
        payload = encode_message(
            jms_message,
            message_id=message_id,
            to=to,
            to_kind=to_kind if to is not None else None,
            persistent=persistent,
            priority=priority,
            ttl=ttl,
            delay=delay,
        )
        self.wire.pump(lambda: self.link.credit > 0 or not self.open, timeout, f"credit on {self.name!r}")
        pending = self._transfer(payload, txn, message_id)
        if sync if sync is not None else (persistent and txn is None and not self.presettle):
            outcome = pending.wait(timeout)
            if not outcome.accepted:
                raise SendFailed(outcome)
        return pending

    def _transfer(self, payload: bytes, txn: bytes | None, message_id: str | None) -> Pending:
        link = self.link
        tag = b"" if self.presettle else self._tags.acquire()  # §5.2: presettled sends use an empty tag
        delivery = link.delivery(tag)
        if txn is not None:
            delivery.local.data = [txn]  # transactional-state{txn-id}, no outcome
            delivery.update(TRANSACTIONAL_STATE)
        link.send(payload)
        link.advance()
        if self.presettle:
            delivery.settle()
            pending: Pending = _Presettled(self.wire, delivery, message_id)
        else:
            pending = Pending(self.wire, delivery, self._tags, tag, message_id)
        self.wire.flush()
        return pending


class _Coordinator(Producer):
    """The transaction coordinator link of a transacted session (§6.1)."""

    def __init__(self, session: JmsSession) -> None:
        link = session.session.sender(f"qpid-jms:coordinator:{session.id}")
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        _put_symbols(link.source.outcomes, OUTCOMES)
        link.target.type = Terminus.COORDINATOR
        _put_symbols(link.target.capabilities, [LOCAL_TRANSACTIONS])
        super().__init__(session, link, session.id, None, QUEUE, False)
        link.open()
        try:
            self._await_attach(None, check=True)
        except LinkRefused:
            session.close()  # §6.1: the client ends the session and createSession fails
            raise

    def control(self, payload: bytes) -> Pending:
        """One unsettled declare/discharge transfer, once the coordinator has credit."""
        self.wire.pump(lambda: self.link.credit > 0 or not self.open, None, "credit on the coordinator")
        return self._transfer(payload, None, None)


class TemporaryDestination(_LinkEnd):
    """A temporary queue/topic: the creator link on the hidden session. ``address`` is the broker's name."""

    def __init__(self, wire: JmsWire, link: Link, kind: str) -> None:
        super().__init__(wire, link)
        self.kind = kind
        self.address: str | None = None

    def delete(self, timeout: float | None = None) -> RemoteError | None:
        """``TemporaryQueue.delete()``: detach(closed=true) on the creator link."""
        return self.close(timeout)
