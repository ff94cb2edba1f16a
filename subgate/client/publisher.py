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

The hot path (docs/client.md, "Costs"). Who owns what:
- Application threads, one at a time (``_numbering``): the seqs, the encoding (``wire.MessageEncoder``) and
  ``_handed``, the count of messages handed over. They append ``(seq, bytes, deadline)`` to the ``_Outbox``'s
  ``incoming`` and wake the I/O thread only when no wake is pending (``wake_pending``): one ``EventInjector``
  event for a run of sends, not one per message.
- The I/O thread: the rest of the ``_Outbox`` (unconfirmed messages, the send queue, deliveries in flight, and
  ``resolved``, the count of messages confirmed or failed). It takes deliveries' outcomes and new credit straight
  from the container loop (loop.py) without the client's lock, and takes the lock only to wake a waiting
  application thread.
- Both, under the client's lock: ``_error``, ``_refused``, ``_closed`` and the ``_Waiters``' level.
  ``_handed - resolved`` is the number of unconfirmed messages; each counter has one writer, and the I/O thread
  notifies only when that number has dropped to the level some waiter asked for (no notify per message).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cproton import PN_ACCEPTED, lib, pn_delivery
from proton import Condition, Delivery, Link, Session

from subgate.client.errors import ClientError, PublishError
from subgate.client.identity import PublisherIdFile
from subgate.client.reactor import Reactor
from subgate.client.termini import set_capabilities
from subgate.client.wire import MessageEncoder

SEND_POLICIES = ("inline", "non_inline")
CHUNK = 64  # send_many hands messages over in chunks of at most this many (and at most max_batch_count)
EVERY_RESOLVE = 1 << 62  # a notify level: wake the waiter on every confirmation (inline sends)


@dataclass(frozen=True)
class PublisherOptions:
    send_policy: str = "non_inline"
    max_batch_count: int = 1000
    retry_duration: float = 10.0
    capability: str = "topic"
    on_loss: Callable[[PublishError], None] | None = None


class _Waiters:
    """What application threads wait for (under the client's lock): ``level``, the most unconfirmed messages at
    which one of them wants to be woken, or -1 when none waits."""

    def __init__(self) -> None:
        self._levels: list[int] = []
        self.level = -1

    @contextmanager
    def waiting(self, level: int) -> Iterator[None]:
        self._levels.append(level)
        self.level = max(self._levels)
        try:
            yield
        finally:
            self._levels.remove(level)
            self.level = max(self._levels, default=-1)


class _Outbox:
    """A publisher's messages from the hand-over to their outcome. Application threads only append to
    ``incoming`` (and set ``wake_pending``); everything else is the I/O thread's."""

    def __init__(self, first_seq: int) -> None:
        self.incoming: deque[tuple[int, bytes, float]] = deque()
        self.wake_pending = False
        self.unconfirmed: dict[int, tuple[bytes, float]] = {}  # seq -> (bytes, deadline), in seq order
        self.to_send: deque[int] = deque()
        self.sent: dict[Any, int] = {}  # delivery C pointer -> seq, on the current link
        self.resolved = 0
        self.drained_seq = first_seq - 1  # every seq up to this one left ``incoming``
        self.tick_at: float | None = None

    def drain(self) -> None:
        """Move what application threads handed over into ``unconfirmed`` and the send queue."""
        incoming, unconfirmed, to_send = self.incoming, self.unconfirmed, self.to_send
        for _ in range(len(incoming)):  # more may come meanwhile: the next wake takes them
            seq, data, deadline = incoming.popleft()
            unconfirmed[seq] = (data, deadline)
            to_send.append(seq)
            self.drained_seq = seq

    def wake(self, call: Callable[[Callable[[], None]], None], pump: Callable[[], None]) -> None:
        """Have the I/O thread run ``pump`` (which takes ``incoming``), unless a wake is already on its way; called
        after appending, and ``pump`` clears ``wake_pending`` before it drains, so nothing is left behind."""
        if not self.wake_pending:
            self.wake_pending = True
            call(pump)

    def is_resolved(self, seq: int) -> bool:
        """True once ``seq`` was confirmed or failed (read by application threads: two atomic looks)."""
        return seq <= self.drained_seq and seq not in self.unconfirmed

    def send_on_credit(self, impl: Any) -> None:
        """Send while the link has credit, by the link's C pointer, without a Python wrapper per delivery."""
        credit = lib.pn_link_credit(impl)
        to_send, unconfirmed, sent = self.to_send, self.unconfirmed, self.sent
        send, advance = lib.pn_link_send, lib.pn_link_advance
        while credit > 0 and to_send:
            seq = to_send.popleft()
            pending = unconfirmed.get(seq)
            if pending is None:
                continue
            data = pending[0]
            sent[pn_delivery(impl, seq.to_bytes(8, "big"))] = seq  # the tag: the seq
            send(impl, data, len(data))
            advance(impl)
            credit -= 1

    def confirm(self, impl: Any) -> bool:
        """The delivery ``impl`` was accepted: True when that confirms an unconfirmed message."""
        seq = self.sent.pop(impl, None)
        if seq is not None and self.unconfirmed.pop(seq, None) is not None:
            self.resolved += 1
            return True
        return False

    def drop(self, seqs: list[int]) -> None:
        """Failed messages: no longer unconfirmed."""
        for seq in seqs:
            if self.unconfirmed.pop(seq, None) is not None:
                self.resolved += 1

    def resend_all(self) -> None:
        """A new link: every unconfirmed message goes again, in seq order."""
        self.sent.clear()
        self.drain()
        self.to_send = deque(self.unconfirmed)

    def give_up(self) -> None:
        self.drain()
        self.drop(list(self.unconfirmed))
        self.to_send.clear()

    def expired(self, now: float) -> list[int]:
        return [seq for seq, (_, deadline) in self.unconfirmed.items() if deadline <= now]

    def arm(self, schedule: Callable[[float, Callable[[], None]], None], tick: Callable[[], None]) -> None:
        """A timer at the oldest unconfirmed message's deadline (they expire in seq order), unless one is set."""
        if not self.unconfirmed or self.tick_at is not None:
            return
        deadline = next(iter(self.unconfirmed.values()))[1]
        self.tick_at = deadline
        schedule(max(0.0, deadline - time.monotonic()) + 0.001, tick)


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
        self._inline = options.send_policy == "inline"
        self._reactor = reactor
        self._cond = reactor.cond
        self._encoder = MessageEncoder(publisher_id)
        # application threads (under _numbering)
        self._numbering = threading.Lock()
        self._next_seq = first_seq
        self._id_file = id_file
        self._handed = 0
        # the I/O thread (application threads append to its incoming)
        self._out = _Outbox(first_seq)
        self._link: Link | None = None
        self.confirmed = 0
        # both, under the client's lock
        self._error: PublishError | None = None
        self._refused: str | None = None  # why the server refused the link, until a new connection retries it
        self._closed = False
        self._waiters = _Waiters()
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
        """How many messages sent are not confirmed yet."""
        return max(0, self._handed - self._out.resolved)

    def send(self, body: Any, properties: Mapping[str, Any] | None = None) -> int:
        """Publish one message; returns its seq. Raises ``PublishError`` as the send policy says."""
        with self._numbering:
            if self._handed - self._out.resolved >= self.options.max_batch_count or self._troubled():
                with self._cond:
                    self._check_usable()
                    self._wait_for_room(1)
            seq = self._next_seq
            if self._id_file is not None:
                self._id_file.cover(seq + 1)
            data = self._encoder.encode(body, properties, seq)
            self._next_seq = seq + 1
            self._handed += 1
            self._out.incoming.append((seq, data, time.monotonic() + self.options.retry_duration))
            self._out.wake(self._reactor.call, self._pump_now)
        if self._inline:
            with self._cond:
                self._wait_confirmed(seq, seq + 1)
        return seq

    def send_many(self, bodies: Iterable[Any]) -> list[int]:
        """Publish many messages, handed to the I/O thread in chunks; returns their seqs. An inline publisher
        returns when all of them are accepted."""
        items = list(bodies)
        chunk_size = max(1, min(CHUNK, self.options.max_batch_count))
        encode, incoming = self._encoder.encode, self._out.incoming
        with self._numbering:
            first_seq = self._next_seq
            for start in range(0, len(items), chunk_size):
                chunk = items[start : start + chunk_size]
                if self._handed - self._out.resolved + len(chunk) > self.options.max_batch_count or self._troubled():
                    with self._cond:
                        self._check_usable()
                        self._wait_for_room(len(chunk))
                first = self._next_seq
                if self._id_file is not None:
                    self._id_file.cover(first + len(chunk))
                deadline = time.monotonic() + self.options.retry_duration
                self._handed += len(chunk)
                incoming.extend((first + i, encode(body, None, first + i), deadline) for i, body in enumerate(chunk))
                self._next_seq = first + len(chunk)
                self._out.wake(self._reactor.call, self._pump_now)
            end_seq = self._next_seq
        if self._inline:
            with self._cond:
                self._wait_confirmed(first_seq, end_seq)
        return list(range(first_seq, end_seq))

    def _troubled(self) -> bool:
        return self._error is not None or self._closed or self._refused is not None or self._reactor.closing

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
        most = self.options.max_batch_count
        level = max(0, most - max(needed, most // 8))  # some slack: one wake lets a run of sends through
        with self._waiters.waiting(level):
            while self._handed - self._out.resolved + needed > most:
                self._cond.wait(0.5)
                self._check_usable()

    def _wait_confirmed(self, first: int, end: int) -> None:
        with self._waiters.waiting(EVERY_RESOLVE):
            for seq in range(first, end):
                while not self._out.is_resolved(seq):
                    if self._closed or self._reactor.closing:
                        raise ClientError(f"the publisher to {self.address!r} was closed")
                    self._cond.wait(0.5)
        self._raise_error()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every message sent is confirmed. Raises ``PublishError`` for messages that failed, and
        ``TimeoutError`` when ``timeout`` seconds pass first (the messages stay in flight)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond, self._waiters.waiting(0):
            while self._handed > self._out.resolved and self._error is None:
                if self._reactor.closing:
                    raise ClientError("the client is closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{self.unconfirmed} message(s) still unconfirmed after {timeout}s")
                self._cond.wait(0.5 if left is None else min(left, 0.5))
            self._raise_error()

    def close(self, linger: float = 5.0) -> None:
        """Try to deliver what is in flight for up to ``linger`` seconds, then give up silently; detach."""
        deadline = time.monotonic() + linger
        with self._cond:
            if self._closed:
                return
            with self._waiters.waiting(0):
                while self._handed > self._out.resolved and time.monotonic() < deadline and not self._reactor.closing:
                    self._cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            self._closed = True
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
        self._reactor.take_raw_deliveries(link, self, locked=False)
        link.open()
        self._link = link
        self._refused = None
        self._out.resend_all()
        self._out.arm(self._reactor.schedule, self._tick)

    def detached(self) -> None:
        self._link = None
        self._out.sent.clear()

    def _detach_now(self) -> None:
        if self._link is not None:
            self._reactor.drop_raw_deliveries(self._link)
            self._link.close()
            self._link = None
        self._out.give_up()  # close's linger is over
        if self in self._reactor.owners:
            self._reactor.owners.remove(self)

    def _pump_now(self) -> None:
        self._out.wake_pending = False  # before the drain: a message appended after it wakes us again
        self._out.drain()
        if self._closed:
            return
        if self._link is not None:
            self._out.send_on_credit(self._link._impl)
        self._out.arm(self._reactor.schedule, self._tick)

    def on_link_opened(self, link: Link) -> None:
        pass

    def on_link_flow(self, link: Link) -> None:
        if link == self._link:
            self.raw_flow(link._impl)

    def raw_flow(self, impl: Any) -> None:
        """New credit (the fast path of loop.py, without the client's lock): send what waits."""
        if self._link is not None and impl == self._link._impl:
            self._out.drain()
            self._out.send_on_credit(impl)

    def raw_delivery(self, impl: Any) -> None:
        """The fast path (loop.py), without the client's lock: an accepted delivery confirmed without wrapping
        it; anything else through ``on_delivery``, under the lock."""
        if lib.pn_delivery_remote_state(impl) != PN_ACCEPTED:
            with self._cond:
                self.on_delivery(Delivery.wrap(impl))
            return
        confirmed = self._out.confirm(impl)
        lib.pn_delivery_settle(impl)
        if confirmed:
            self.confirmed += 1
            if self._handed - self._out.resolved <= self._waiters.level:
                with self._cond:
                    self._cond.notify_all()

    def on_delivery(self, delivery: Delivery) -> None:
        out = self._out
        seq = out.sent.pop(delivery._impl, None)
        state = delivery.remote_state
        if seq is None or seq not in out.unconfirmed:
            delivery.settle()
            return
        if state == Delivery.ACCEPTED or (state is None and delivery.remote_settled):
            out.drop([seq])
            self.confirmed += 1
            self._cond.notify_all()
        elif state == Delivery.REJECTED:
            condition = delivery.remote.condition
            why = f"rejected: {condition.name}: {condition.description}" if condition else "rejected"
            self._fail([seq], why)
        elif state in (Delivery.RELEASED, Delivery.MODIFIED):
            delivery.settle()  # before the re-send, which reuses the tag (the seq)
            out.to_send.append(seq)
            self.on_link_flow(delivery.link)
            return
        else:
            out.sent[delivery._impl] = seq  # not an outcome yet
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
            self._out.drain()
            self._fail(list(self._out.unconfirmed), f"link refused: {self._refused}")

    def _fail(self, seqs: list[int], reason: str) -> None:
        with self._cond:
            self._out.drop(seqs)
            error = PublishError(reason, seqs)
            self._error = error if self._error is None else self._error.merged(error)
            self._cond.notify_all()
        if self.options.on_loss is not None:
            self.options.on_loss(error)

    def _tick(self) -> None:
        """The retry-duration timer (``_Outbox.arm``): fail what ran out of time, then wait for the next one."""
        with self._cond:
            self._out.tick_at = None
            self._out.drain()
            expired = self._out.expired(time.monotonic())
            if expired:
                self._fail(expired, f"not confirmed within the retry duration of {self.options.retry_duration}s")
            self._out.arm(self._reactor.schedule, self._tick)
