"""The secondary's AMQP client side of fan-out: one thread with its own proton container.

Owns the connections a secondary opens to its primaries (docs/fanout.md, "Threads"): for each configured link a
connection (container-id = the server's name; SASL PLAIN with the link's user, else ANONYMOUS), a receiver from
the link's selector with the source capability ``replicate``, and a sender to ``$subgate/fanout/missing-topic``
for propagated notifications. It reconnects every ``retry_interval`` seconds after a failure.

None of this runs on the broker's reactor: the broker's event loop (``gateway.loop``) serves accepted sockets
only, and its hot path stays as it is. What this thread receives goes to the reactor as plain tuples through
``deliver`` (``Mailbox.put``: one wake-up of the reactor's injector per burst); what the reactor asks of it
(propagate a notification, give back credit) comes in through ``post``, which wakes this container. The
receiver's credit is ``max_in_flight``, and is given back only once the reactor has applied what arrived, so no
more than that many replication messages are ever between the primary's socket and the secondary's tree.

Tuples to the reactor: ``("state", index, generation, state, error)``, ``("message", index, generation, op,
path, value, ts)``, ``("batch", index, generation, [(op, path, value), ...], ts)`` (one transfer of a primary
that batches), ``("answer", index, ask_id, outcome, description)`` with outcome ``proceed``, ``cancel``,
``refused`` or ``lost``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from proton import Condition, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector, LinkOption

from subgate.engine.fanout import (
    BATCH,
    CONNECTING,
    LOST,
    OP,
    PATH,
    PROPAGATION_ADDRESS,
    REPLICATE,
    REPLICATE_BATCH,
    SNAPSHOT,
    TIMESTAMP,
    FanoutConfig,
    decode_batch,
)
from subgate.mapping.errors import NOT_FOUND

log = logging.getLogger("subgate.fanout")

Deliver = Callable[[tuple[Any, ...]], None]


class _Replicate(LinkOption):
    """The receiver's source capabilities ``replicate`` and ``replicate-batch``, pre-settled transfers."""

    def apply(self, link: Any) -> None:
        link.source.capabilities.put_array(False, 21)  # an array of symbols
        link.source.capabilities.enter()
        link.source.capabilities.put_symbol(REPLICATE)
        link.source.capabilities.put_symbol(REPLICATE_BATCH)  # we read batch transfers (docs/fanout.md, "Wire")
        link.source.capabilities.exit()
        link.snd_settle_mode = link.SND_SETTLED


class _Timer:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback

    def on_timer_task(self, _event: Any) -> None:
        self.callback()


class _Link:
    """One fan-out link's connection state in the client thread."""

    def __init__(self, index: int, config: FanoutConfig) -> None:
        self.index = index
        self.config = config
        self.generation = 0
        self.conn: Any = None
        self.receiver: Any = None
        self.sender: Any = None
        self.waiting: list[tuple[int, dict[str, str]]] = []  # asks waiting for the sender's credit
        self.asked: dict[Any, int] = {}  # delivery tag -> ask id
        self.error: str | None = None
        self.opened = False  # the replicate link of the current connection was answered


class FanoutClient(MessagingHandler):  # type: ignore[misc]  # proton's handler is untyped
    """The client thread (module docstring)."""

    def __init__(self, server_name: str, configs: tuple[FanoutConfig, ...], deliver: Deliver) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True, peer_close_is_error=True)
        self.links = [_Link(index, config) for index, config in enumerate(configs)]
        self.deliver = deliver
        self.container = Container(self)
        self.container.container_id = server_name
        self.injector = EventInjector()
        self.container.selectable(self.injector)
        self._lock = threading.Lock()
        self._inbox: list[tuple[Any, ...]] = []
        self._stopping = False
        self._owners: dict[Any, tuple[_Link, int]] = {}  # connection (C pointer) -> its link and generation
        self.thread = threading.Thread(target=self._run, name="fanout-client", daemon=True)

    # -- from other threads ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def post(self, item: tuple[Any, ...]) -> None:
        """``("ask", index, ask_id, properties)``, ``("credit", index, generation, n)`` or ``("stop",)``."""
        with self._lock:
            self._inbox.append(item)
        self.injector.trigger(ApplicationEvent("fanout_mail"))

    def stop(self, timeout: float = 5.0) -> None:
        if self.thread.is_alive():
            self.post(("stop",))
            self.thread.join(timeout)

    # -- the client thread -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.container.run()
        except Exception:  # noqa: BLE001 - the thread must say why it ended
            log.exception("fan-out client thread failed")

    def on_start(self, _event: Any) -> None:
        for link in self.links:
            self._connect(link)

    def _connect(self, link: _Link) -> None:
        if self._stopping:
            return
        link.generation += 1
        config = link.config
        self.deliver(("state", link.index, link.generation, CONNECTING, link.error))
        options: dict[str, Any] = {"reconnect": False}
        if config.user is not None:
            options.update(
                user=config.user, password=config.password or "", allowed_mechs="PLAIN", allow_insecure_mechs=True
            )
        else:
            options.update(allowed_mechs="ANONYMOUS")
        link.conn = self.container.connect(config.url, **options)
        # Keyed by the C pointer, not an attribute on the wrapper: that would tie the wrapper into a reference
        # cycle, which only the reactor thread's garbage collector could release (docs/threading.md).
        self._owners[link.conn._impl] = (link, link.generation)
        link.receiver = link.sender = None

    def _link_of(self, event: Any) -> _Link | None:
        """The link whose current connection the event is on (None: another one, or an earlier connection)."""
        owner = self._owners.get(event.connection._impl) if event.connection is not None else None
        if owner is None or owner[0].generation != owner[1]:
            return None
        link: _Link = owner[0]
        return link

    def on_connection_opened(self, event: Any) -> None:
        link = self._link_of(event)
        if link is None:
            return
        config = link.config
        name = f"fanout-{self.container.container_id}-{link.index}"
        link.receiver = self.container.create_receiver(
            event.connection, source=config.selector, name=name, options=_Replicate()
        )
        link.receiver.flow(config.max_in_flight)
        link.sender = self.container.create_sender(event.connection, target=PROPAGATION_ADDRESS, name=name + "-mt")

    def on_link_opened(self, event: Any) -> None:
        """The primary answered the ``replicate`` attach: the snapshot follows (a refused attach answers with no
        source, then detaches with the error: ``on_link_error``)."""
        link = self._link_of(event)
        if link is None or event.link is None or event.link != link.receiver:
            return
        if event.link.remote_source.type == Terminus.UNSPECIFIED:
            return
        link.error = None
        link.opened = True
        self.deliver(("state", link.index, link.generation, SNAPSHOT, None))
        log.info("fan-out: connected to %s, replicating %r", link.config.url, link.config.selector)

    def on_message(self, event: Any) -> None:
        link = self._link_of(event)
        if link is None or event.receiver is None or event.receiver != link.receiver:
            return
        message: Message = event.message
        props: dict[str, object] = message.properties or {}
        body = message.body  # a memoryview into proton's buffer, reused by the next message: copied here
        op = props.get(OP)
        if op == BATCH:  # several operations in one transfer: one item, one hand-off to the reactor
            try:
                operations = decode_batch(body) if isinstance(body, bytes | memoryview) else []
            except ValueError as exc:
                log.warning("fan-out: %s sent a malformed batch: %s", link.config.url, exc)
                operations = []
            self.deliver(("batch", link.index, link.generation, operations, props.get(TIMESTAMP)))
            return
        value = bytes(body) if isinstance(body, bytes | memoryview) else None
        self.deliver(("message", link.index, link.generation, op, props.get(PATH), value, props.get(TIMESTAMP)))

    def on_sendable(self, event: Any) -> None:
        link = self._link_of(event)
        if link is not None and event.sender is not None and event.sender == link.sender:
            self._send_waiting(link)

    def _send_waiting(self, link: _Link) -> None:
        sender = link.sender
        while link.waiting and sender is not None and sender.credit > 0:
            ask_id, properties = link.waiting.pop(0)
            delivery = sender.send(Message(subject="missing-topic", properties=properties))
            link.asked[delivery.tag] = ask_id

    def _answered(self, event: Any, outcome: str) -> None:
        link = self._link_of(event)
        if link is None or event.delivery is None:
            return
        ask_id = link.asked.pop(event.delivery.tag, None)
        if ask_id is None:
            return
        condition: Condition | None = event.delivery.remote.condition
        description = condition.description if condition is not None else ""
        if outcome == "rejected":
            cancel = condition is not None and condition.name == NOT_FOUND
            outcome = "cancel" if cancel else "refused"
            description = f"{condition.name if condition else 'rejected'}: {description}"
        self.deliver(("answer", link.index, ask_id, outcome, description))

    def on_accepted(self, event: Any) -> None:
        self._answered(event, "proceed")

    def on_rejected(self, event: Any) -> None:
        self._answered(event, "rejected")

    def on_released(self, event: Any) -> None:
        self._answered(event, "proceed")

    def on_link_error(self, event: Any) -> None:
        link = self._link_of(event)
        condition = event.link.remote_condition if event.link is not None else None
        if link is not None and condition is not None:
            error = f"{condition.name}: {condition.description}"
            if error != link.error:  # once, not at every retry
                log.warning("fan-out: %s refused the link: %s", link.config.url, error)
            link.error = error
            event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        link = self._link_of(event)
        condition = event.transport.condition if event.transport is not None else None
        if link is not None and condition is not None:
            link.error = f"{condition.name}: {condition.description}"

    def on_connection_remote_close(self, event: Any) -> None:
        """The primary closed the connection (it stops, say): close ours, so that the transport closes."""
        link = self._link_of(event)
        condition = event.connection.remote_condition
        if link is not None and condition is not None:
            link.error = f"{condition.name}: {condition.description}"
        if not event.connection.state & event.connection.LOCAL_CLOSED:
            event.connection.close()

    def on_transport_closed(self, event: Any) -> None:
        link = self._link_of(event)
        if link is None or link.conn is None:
            return
        was_open, link.opened = link.opened, False
        self._owners.pop(event.connection._impl, None)
        link.conn = link.receiver = link.sender = None
        self.deliver(("state", link.index, link.generation, LOST, link.error or "connection lost"))
        for ask_id in list(link.asked.values()) + [ask_id for ask_id, _ in link.waiting]:
            self.deliver(("answer", link.index, ask_id, "lost", link.error or "connection lost"))
        link.asked.clear()
        link.waiting.clear()
        if not self._stopping:
            level = logging.WARNING if was_open else logging.DEBUG  # a warning once, not at every retry
            log.log(level, "fan-out: link to %s lost (%s); retrying in %.1f s", link.config.url, link.error,
                    link.config.retry_interval)  # fmt: skip
            self.container.schedule(link.config.retry_interval, _Timer(lambda: self._connect(link)))  # type: ignore[arg-type]

    def on_fanout_mail(self, _event: Any) -> None:
        with self._lock:
            items, self._inbox = self._inbox, []
        for item in items:
            if item[0] == "stop":
                self._stop()
            elif item[0] == "credit":
                _, index, generation, count = item
                link = self.links[index]
                if link.generation == generation and link.receiver is not None:
                    link.receiver.flow(count)
            elif item[0] == "ask":
                _, index, ask_id, properties = item
                link = self.links[index]
                if link.sender is None:
                    self.deliver(("answer", index, ask_id, "lost", "no session to the primary"))
                else:
                    link.waiting.append((ask_id, properties))
                    self._send_waiting(link)

    def _stop(self) -> None:
        self._stopping = True
        for link in self.links:
            if link.conn is not None:
                link.conn.close()
        self.injector.close()
        self.container.schedule(1.0, _Timer(self.container.stop))  # type: ignore[arg-type]
