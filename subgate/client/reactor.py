"""The client's I/O thread: one proton ``Container`` that owns the connection, its links and every proton object.

Rules of this file:
- Only the I/O thread touches proton objects. Other threads hand it work with ``call(fn)``: the function is
  queued and one ``EventInjector`` event wakes the container (one wake for many queued calls), so nothing polls.
- ``lock`` (with its condition ``cond``) guards the state the I/O thread shares with application threads; every
  event handler here runs under it, and link owners (publishers, subscribers) mutate shared state only under it.
  One exception: a publisher takes its links' delivery outcomes and credit without the lock
  (``take_raw_deliveries`` with ``locked=False``), because it keeps its per-message state on the I/O thread alone
  (publisher.py).
  Application threads wait on ``cond`` (bounded by their timeouts); the I/O thread notifies it.
- One connection at a time. When it is lost, every owner hears ``detached()`` and the next URL of the list is
  tried (round robin) after a backoff that doubles from ``reconnect_delay[0]`` up to ``reconnect_delay[1]``
  seconds and starts again on success; when the new connection opens, every owner ``attach``es again.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from proton import Condition, Connection, Delivery, Event, Handler, Link, Session
from proton.reactor import ApplicationEvent, EventInjector

from subgate.client.loop import ClientContainer, RawDeliveryOwner

log = logging.getLogger("subgate.client")
OWNER = "_sgc"  # the attribute of a proton Link naming the owner of the link


class LinkOwner(Protocol):
    """A publisher or a subscription: what the I/O thread tells it (always on the I/O thread, under the lock)."""

    def attach(self, session: Session) -> None: ...
    def detached(self) -> None: ...
    def on_link_opened(self, link: Link) -> None: ...
    def on_link_flow(self, link: Link) -> None: ...
    def on_delivery(self, delivery: Delivery) -> None: ...
    def on_link_closed(self, link: Link, condition: Condition | None) -> None: ...


class _Timer:
    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def on_timer_task(self, event: Event) -> None:
        self.fn()


class _Locked:
    """An owner's ``raw_delivery`` called under the client's lock, as every other event is."""

    def __init__(self, lock: threading.RLock, owner: RawDeliveryOwner) -> None:
        self.lock, self.owner = lock, owner

    def raw_delivery(self, delivery: Any) -> None:
        with self.lock:
            self.owner.raw_delivery(delivery)

    def raw_flow(self, link: Any) -> None:
        with self.lock:
            self.owner.raw_flow(link)


class Reactor(Handler):
    """The I/O thread and its connection; see the module's rules."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        client_id: str,
        user: str | None = None,
        password: str | None = None,
        reconnect_delay: tuple[float, float] = (0.05, 2.0),
        heartbeat: float | None = 10.0,
    ) -> None:
        super().__init__()
        self.heartbeat = heartbeat
        if not urls:
            raise ValueError("at least one server URL is needed")
        self.urls = list(urls)
        self.user, self.password = user, password
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.owners: list[LinkOwner] = []
        self.connected = False
        self.connections = 0  # connections opened so far
        self.last_error: str | None = None
        self.connect_failures: dict[str, str] = {}  # URL -> why its last attempt failed, since the last open
        self._url: str | None = None  # the URL of the connection being made or in use
        self._reconnect_delay = reconnect_delay
        self._delay = reconnect_delay[0]
        self._next_url = 0
        self._commands: deque[Callable[[], None]] = deque()
        self._woken = False
        self._closing = False
        self._conn: Connection | None = None
        self.session: Session | None = None  # the current connection's session, while connected
        self._injector = EventInjector()
        self._container = ClientContainer(self)
        self._container.container_id = client_id
        self._thread = threading.Thread(target=self._run, name="subgate-client-io", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._container.run()
        except Exception:  # the I/O thread must say why it died
            log.exception("the client's I/O thread failed")
        finally:
            with self.lock:
                self.connected = False
                self._closing = True
                self.cond.notify_all()

    @property
    def closing(self) -> bool:
        return self._closing

    # -- other threads --------------------------------------------------------------------------------------

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread, soon (any thread)."""
        with self.lock:
            self._commands.append(fn)
            if self._woken or self._closing:
                return
            self._woken = True
        self._injector.trigger(ApplicationEvent("subgate_wake"))

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection and end the I/O thread (waits at most ``timeout`` seconds)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("Client.close() cannot be called from the client's own I/O thread")
        self.call(self._shutdown)
        with self.lock:
            self._closing = True
        self._thread.join(timeout)

    # -- the I/O thread ---------------------------------------------------------------------------------------

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread after ``delay`` seconds (I/O thread only)."""
        self._container.schedule(delay, _Timer(fn))  # type: ignore[arg-type]  # duck-typed handler

    def on_reactor_init(self, event: Event) -> None:
        self._container.selectable(self._injector)
        self._connect()

    def on_subgate_wake(self, event: Event) -> None:
        with self.lock:
            self._woken = False
            commands = list(self._commands)
            self._commands.clear()
            for command in commands:
                command()

    def _connect(self) -> None:
        with self.lock:
            if self._closing:
                return
            url = self.urls[self._next_url % len(self.urls)]
            self._next_url += 1
            self._url = url
            options: dict[str, Any] = {"reconnect": False}
            if self.heartbeat:
                options["heartbeat"] = self.heartbeat  # our idle timeout: a silent peer is a lost connection
            if self.user is not None:
                options.update(user=self.user, password=self.password, allowed_mechs="PLAIN", allow_insecure_mechs=True)
            self._conn = self._container.connect(url, **options)

    def _shutdown(self) -> None:
        self._closing = True
        self._injector.close()
        if self._conn is not None:
            self._conn.close()
            self.schedule(2.0, self._container.stop)  # if the server does not answer the close
        else:
            self._container.stop()

    def on_connection_remote_open(self, event: Event) -> None:
        with self.lock:
            if event.connection is None or event.connection != self._conn:
                return
            self.connected = True
            self.connections += 1
            self.connect_failures.clear()
            self._delay = self._reconnect_delay[0]
            session = event.connection.session()
            session.open()
            self.session = session
            for owner in list(self.owners):
                owner.attach(session)
            self.cond.notify_all()

    def on_connection_remote_close(self, event: Event) -> None:
        connection = event.connection
        if connection is None:
            return
        condition = connection.remote_condition
        if condition is not None:
            self.last_error = f"{condition.name}: {condition.description}"
        connection.close()

    def on_transport_error(self, event: Event) -> None:
        condition = event.transport.condition if event.transport is not None else None
        if condition is not None:
            self.last_error = f"{condition.name}: {condition.description}"
            with self.lock:
                if not self.connected and self._url is not None:  # an attempt to connect failed
                    self.connect_failures[self._url] = str(condition.description or condition.name)
                    self.cond.notify_all()

    def on_transport_closed(self, event: Event) -> None:
        with self.lock:
            if event.connection is None or event.connection != self._conn:
                return
            self._conn = None
            self.session = None
            self.connected = False
            self._container.raw_owners.clear()  # every link of the connection is gone
            for owner in list(self.owners):
                owner.detached()
            self.cond.notify_all()
            if self._closing:
                self._container.stop()
                return
            delay, self._delay = self._delay, min(self._delay * 2, self._reconnect_delay[1])
            self.schedule(delay, self._connect)

    def on_link_remote_open(self, event: Event) -> None:
        owner = getattr(event.link, OWNER, None)
        if owner is not None and event.link is not None:
            with self.lock:
                owner.on_link_opened(event.link)

    def on_link_flow(self, event: Event) -> None:
        owner = getattr(event.link, OWNER, None)
        if owner is not None:
            with self.lock:
                owner.on_link_flow(event.link)

    def on_delivery(self, event: Event) -> None:
        owner = getattr(event.link, OWNER, None)
        if owner is not None:
            with self.lock:
                owner.on_delivery(event.delivery)

    def on_link_remote_close(self, event: Event) -> None:
        link = event.link
        if link is None:
            return
        if not link.state & Link.LOCAL_CLOSED:
            link.close()
        owner = getattr(link, OWNER, None)
        if owner is not None:
            with self.lock:
                owner.on_link_closed(link, link.remote_condition)

    def adopt(self, link: Link, owner: LinkOwner) -> None:
        """Name ``owner`` as the owner of ``link`` (I/O thread)."""
        setattr(link, OWNER, owner)

    def take_raw_deliveries(self, link: Link, owner: RawDeliveryOwner, *, locked: bool = True) -> None:
        """Hand ``link``'s delivery and flow events to ``owner.raw_delivery`` / ``raw_flow`` unwrapped (loop.py),
        instead of ``on_delivery`` / ``on_link_flow``: under the lock, or, with ``locked=False``, without it (the
        owner then takes the lock itself for what it shares)."""
        self._container.raw_owners[link._impl] = _Locked(self.lock, owner) if locked else owner

    def drop_raw_deliveries(self, link: Link) -> None:
        self._container.raw_owners.pop(link._impl, None)
