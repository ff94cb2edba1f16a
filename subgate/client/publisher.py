"""Publishers with FTL's send policies (seed 004) over one sender link of the client's connection.

Every message is persistent (``header.durable``) and numbered: ``x-opt-publisher-id`` and a strictly increasing
``x-opt-publisher-seq``, so a re-send after a reconnect or a server restart is dropped by the server as a
duplicate (docs/bookmarks.md). A message stays *unconfirmed* until the server settles it ``accepted``; it is sent
again, with its seq, on every new connection, until ``retry_duration`` seconds after it was handed to ``send``.

- ``inline``: ``send`` returns when the message is accepted, or raises ``PublishError`` when the retry duration
  ran out or the server rejected it.
- ``non_inline``: ``send`` returns at once while fewer than ``max_batch_count`` messages are unconfirmed, else
  waits for room. A message that fails in the background (retry duration out, or rejected) is reported by the
  next ``send`` or ``flush`` as one ``PublishError`` naming every message that may have been lost; ``on_loss`` is
  told at once, on the I/O thread (keep it short).
- ``close(linger)``: keeps trying for ``linger`` seconds, then gives up silently (as FTL does).

A rejected message (``amqp:invalid-field``, ...) is not retried: the server will not take it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cproton import (
    PN_ACCEPTED,
    pn_delivery,
    pn_delivery_remote_state,
    pn_delivery_settle,
    pn_link_advance,
    pn_link_credit,
    pn_link_send,
)
from proton import Condition, Delivery, Link, Message, Session, symbol, ulong

from subgate.client.errors import ClientError, PublishError
from subgate.client.identity import PublisherIdFile
from subgate.client.reactor import Reactor
from subgate.client.termini import set_capabilities

PUBLISHER_ID = symbol("x-opt-publisher-id")
PUBLISHER_SEQ = symbol("x-opt-publisher-seq")
SEND_POLICIES = ("inline", "non_inline")


def encode(body: Any, properties: Mapping[str, Any] | None, publisher_id: str, seq: int) -> bytes:
    """One persistent message numbered for duplicate detection, as bytes for the sender link."""
    message = Message(
        body=body,
        durable=True,
        properties=dict(properties) if properties else None,
        annotations={PUBLISHER_ID: publisher_id, PUBLISHER_SEQ: ulong(seq)},
    )
    return bytes(message.encode())


@dataclass
class _Unconfirmed:
    data: bytes
    deadline: float


@dataclass(frozen=True)
class PublisherOptions:
    send_policy: str = "non_inline"
    max_batch_count: int = 1000
    retry_duration: float = 10.0
    capability: str = "topic"
    on_loss: Callable[[PublishError], None] | None = None


class Publisher:
    """Sends numbered persistent messages to one address; see the module's rules."""

    def __init__(
        self,
        reactor: Reactor,
        address: str,
        publisher_id: str,
        first_seq: int,
        options: PublisherOptions,
        id_file: PublisherIdFile | None = None,
    ):
        if options.send_policy not in SEND_POLICIES:
            raise ValueError(f"send_policy must be one of {SEND_POLICIES}, not {options.send_policy!r}")
        if options.max_batch_count < 1:
            raise ValueError("max_batch_count must be at least 1")
        self.address = address
        self.publisher_id = publisher_id
        self.options = options
        self._reactor = reactor
        self._cond = reactor.cond
        self._numbering = threading.Lock()  # held by one sending thread at a time (seqs, encoding)
        self._next_seq = first_seq
        self._id_file = id_file
        self._unconfirmed: OrderedDict[int, _Unconfirmed] = OrderedDict()
        self._to_send: deque[int] = deque()
        self._sent: dict[Any, int] = {}  # delivery C pointer -> seq, on the current link
        self._link: Link | None = None
        self._error: PublishError | None = None
        self._refused: str | None = None  # why the server refused the link, until a new connection retries it
        self._closed = False
        self._tick_at: float | None = None
        self.confirmed = 0
        with self._cond:
            reactor.owners.append(self)
        reactor.call(self._attach_now)

    # -- application threads ----------------------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        """The seq the next message will carry."""
        return self._next_seq

    @property
    def unconfirmed(self) -> int:
        with self._cond:
            return len(self._unconfirmed)

    def send(self, body: Any, properties: Mapping[str, Any] | None = None) -> int:
        """Publish one message; returns its seq. Raises ``PublishError`` as the send policy says."""
        return self._send_all([(body, properties)])[-1]

    def send_many(self, bodies: Iterable[Any]) -> list[int]:
        """Publish many messages in one hand-off to the I/O thread; returns their seqs. An inline publisher
        returns when all of them are accepted."""
        return self._send_all([(body, None) for body in bodies])

    def _send_all(self, items: list[tuple[Any, Mapping[str, Any] | None]]) -> list[int]:
        """Number, encode and queue ``items`` in chunks; the encoding runs outside the shared lock, so the I/O
        thread keeps confirming meanwhile. ``_numbering`` keeps concurrent senders' seqs in queue order."""
        seqs: list[int] = []
        chunk_size = max(1, min(64, self.options.max_batch_count))
        with self._numbering:
            for start in range(0, len(items), chunk_size):
                chunk = items[start : start + chunk_size]
                with self._cond:
                    self._check_usable()
                    self._wait_for_room(len(chunk))
                first = self._next_seq
                if self._id_file is not None:
                    self._id_file.cover(first + len(chunk))
                publisher_id = self.publisher_id
                encoded = [encode(body, props, publisher_id, first + i) for i, (body, props) in enumerate(chunk)]
                with self._cond:
                    self._check_usable()
                    deadline = time.monotonic() + self.options.retry_duration
                    for offset, data in enumerate(encoded):
                        self._unconfirmed[first + offset] = _Unconfirmed(data, deadline)
                        self._to_send.append(first + offset)
                    self._next_seq = first + len(chunk)
                seqs.extend(range(first, first + len(chunk)))
                self._reactor.call(self._pump_now)
        if self.options.send_policy == "inline":
            with self._cond:
                self._wait_confirmed(seqs)
        return seqs

    def _check_usable(self) -> None:
        if self._closed:
            raise ClientError(f"the publisher to {self.address!r} is closed")
        if self._reactor.closing:
            raise ClientError("the client is closed")
        self._raise_error()
        if self._refused is not None:
            raise ClientError(f"the server refused the publisher to {self.address!r}: {self._refused}")

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _wait_for_room(self, needed: int) -> None:
        while len(self._unconfirmed) + needed > self.options.max_batch_count:
            self._cond.wait(0.5)
            self._check_usable()

    def _wait_confirmed(self, seqs: list[int]) -> None:
        while any(seq in self._unconfirmed for seq in seqs):
            self._cond.wait(0.5)
            if self._closed or self._reactor.closing:
                raise ClientError(f"the publisher to {self.address!r} was closed")
        self._raise_error()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent is confirmed. Raises ``PublishError`` for messages that failed, and
        ``TimeoutError`` when ``timeout`` seconds pass first (the messages stay in flight)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._unconfirmed and self._error is None:
                if self._reactor.closing:
                    raise ClientError("the client is closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{len(self._unconfirmed)} message(s) still unconfirmed after {timeout}s")
                self._cond.wait(0.5 if left is None else min(left, 0.5))
            self._raise_error()

    def close(self, linger: float = 5.0) -> None:
        """Try to deliver what is in flight for up to ``linger`` seconds, then give up silently; detach."""
        deadline = time.monotonic() + linger
        with self._cond:
            if self._closed:
                return
            while self._unconfirmed and time.monotonic() < deadline:
                self._cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            self._closed = True
            self._unconfirmed.clear()
            self._to_send.clear()
            self._cond.notify_all()
        self._reactor.call(self._detach_now)

    # -- the I/O thread -------------------------------------------------------------------------------------

    def _attach_now(self) -> None:
        session = self._reactor.session
        if session is not None and self._link is None and not self._closed:
            self.attach(session)

    def attach(self, session: Session) -> None:
        link = session.sender(f"pub-{self.publisher_id}-{uuid.uuid4().hex[:8]}")
        link.target.address = self.address
        set_capabilities(link.target, self.options.capability)
        self._reactor.adopt(link, self)
        self._reactor.take_raw_deliveries(link, self)
        link.open()
        self._link = link
        self._refused = None
        self._sent.clear()
        self._to_send = deque(self._unconfirmed)  # every unconfirmed message again, in seq order
        self._schedule_tick()

    def detached(self) -> None:
        self._link = None
        self._sent.clear()

    def _detach_now(self) -> None:
        if self._link is not None:
            self._reactor.drop_raw_deliveries(self._link)
            self._link.close()
            self._link = None
        if self in self._reactor.owners:
            self._reactor.owners.remove(self)

    def _pump_now(self) -> None:
        if self._link is not None:
            self.on_link_flow(self._link)
        self._schedule_tick()

    def on_link_opened(self, link: Link) -> None:
        pass

    def on_link_flow(self, link: Link) -> None:
        """Send while the link has credit; by the link's C pointer, without a Python wrapper per delivery."""
        if link != self._link:
            return
        impl = link._impl
        credit = pn_link_credit(impl)
        while credit > 0 and self._to_send:
            seq = self._to_send.popleft()
            pending = self._unconfirmed.get(seq)
            if pending is None:
                continue
            self._sent[pn_delivery(impl, str(seq))] = seq
            pn_link_send(impl, pending.data)
            pn_link_advance(impl)
            credit -= 1

    def raw_delivery(self, impl: Any) -> None:
        """The fast path (loop.py): an accepted delivery confirmed without wrapping it; anything else as usual."""
        if pn_delivery_remote_state(impl) != PN_ACCEPTED:
            self.on_delivery(Delivery.wrap(impl))
            return
        seq = self._sent.pop(impl, None)
        if seq is not None and self._unconfirmed.pop(seq, None) is not None:
            self.confirmed += 1
            self._cond.notify_all()
        pn_delivery_settle(impl)

    def on_delivery(self, delivery: Delivery) -> None:
        seq = self._sent.pop(delivery._impl, None)
        state = delivery.remote_state
        if seq is None or seq not in self._unconfirmed:
            delivery.settle()
            return
        if state == Delivery.ACCEPTED or (state is None and delivery.remote_settled):
            del self._unconfirmed[seq]
            self.confirmed += 1
            self._cond.notify_all()
        elif state == Delivery.REJECTED:
            condition = delivery.remote.condition
            why = f"rejected: {condition.name}: {condition.description}" if condition else "rejected"
            self._fail([seq], why)
        elif state in (Delivery.RELEASED, Delivery.MODIFIED):
            delivery.settle()  # before the re-send, which reuses the tag (the seq)
            self._to_send.append(seq)
            self.on_link_flow(delivery.link)
            return
        else:
            self._sent[delivery._impl] = seq  # not an outcome yet
            return
        delivery.settle()

    def on_link_closed(self, link: Link, condition: Condition | None) -> None:
        if link != self._link:
            return
        self._reactor.drop_raw_deliveries(link)
        self._link = None
        if condition is not None and not self._closed:
            # The server refused the link itself (a bad address, no permission): nothing will get through, so
            # what is in flight fails now and later sends fail at once (until a new connection tries again).
            self._refused = f"{condition.name}: {condition.description}"
            self._fail(list(self._unconfirmed), f"link refused: {self._refused}")

    def _fail(self, seqs: list[int], reason: str) -> None:
        for seq in seqs:
            self._unconfirmed.pop(seq, None)
        error = PublishError(reason, seqs)
        self._error = error if self._error is None else self._error.merged(error)
        self._cond.notify_all()
        if self.options.on_loss is not None:
            self.options.on_loss(error)

    def _schedule_tick(self) -> None:
        """A timer at the oldest unconfirmed message's deadline; every message expires in seq order."""
        if not self._unconfirmed or self._tick_at is not None:
            return
        first = next(iter(self._unconfirmed.values()))
        self._tick_at = first.deadline
        self._reactor.schedule(max(0.0, first.deadline - time.monotonic()) + 0.001, self._tick)

    def _tick(self) -> None:
        with self._cond:
            self._tick_at = None
            now = time.monotonic()
            expired = [seq for seq, pending in self._unconfirmed.items() if pending.deadline <= now]
            if expired:
                self._fail(expired, f"not confirmed within the retry duration of {self.options.retry_duration}s")
            self._schedule_tick()
