"""The reactor's event loop: proton's ``Container.process`` rewritten to pop raw events from the collector.

Owns only the dispatch of collector events. proton's own loop wraps every event in an ``Event`` (five or six
wrapper objects: delivery, link, session, connection, transport), looks for a handler on the link, the session
and the connection, and only then calls the handler by name, for the handler and again for the global handler.
At one or two events per message that is about half of the reactor's time (docs/performance.md).

Here the loop reads the raw event type first and takes these fast paths:

- ``PN_DELIVERY`` on a link the broker knows (found by the link's C pointer, without a wrapper): a direct
  call of ``Broker.raw_delivery_event`` with the C delivery (which wraps it only when it needs to).
- ``PN_LINK_FLOW`` on a link the broker knows: ``Broker.link_flow`` with the link's state.
- ``PN_TRANSPORT`` (output is pending) on a transport ``ServerIO`` knows: it is marked for the next flush.
- An empty collector: ``ReplicationFeeds.flush`` first (work deferred to the end of a burst: fan-out batches; when it
  made events, they are processed first), then ``ServerIO.wait_for_io`` (flush, wait for sockets and timers) is
  called directly, where proton pushes a ``REACTOR_QUIESCED`` event through the collector and dispatches it to
  the same place.

Every other event (connection, session and link endpoints, timers, selectables, application events from
other threads) goes the way ``Container.process`` sends it, with the same handler look-up and the same
order, so the rest of the broker sees no difference. The loop's bookkeeping (yield, quiesced, final) is the
container's own, kept attribute for attribute. While it runs, Python's cyclic garbage collector runs only here,
between bursts of events (gateway.garbage).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from cproton import (
    PN_DELIVERY,
    PN_LINK_FLOW,
    PN_TRANSPORT,
    ffi,
    pn_collector_peek,
    pn_collector_pop,
    pn_delivery_link,
    pn_event_delivery,
    pn_event_link,
    pn_event_transport,
    pn_event_type,
)
from proton import Condition, Endpoint, Link
from proton._events import Event
from proton.reactor import Container

from subgate.gateway.garbage import ReactorGarbageCollector
from subgate.gateway.links import LinkState
from subgate.mapping.errors import INTERNAL_ERROR

if TYPE_CHECKING:
    from subgate.gateway.broker import Broker
    from subgate.gateway.io import ServerIO

log = logging.getLogger("subgate.loop")

_NULL = ffi.NULL


class EventLoop:
    """Runs ``container`` with ``broker`` as its handler and ``io`` as its global handler."""

    def __init__(self, container: Container, broker: Broker, io: ServerIO) -> None:
        self._container = container
        self._broker = broker
        self._io = io
        # Link pointer -> the broker's link state (Inbound, Outbound, ...), held weakly: an entry goes with its link's
        # state, so a link that ended keeps neither its state nor (through it) its connection in memory. A plain
        # dict here kept every link that ever carried a transfer, about 15 KiB per publisher connection that left.
        self._links: weakref.WeakValueDictionary[Any, LinkState] = weakref.WeakValueDictionary()
        self._garbage = ReactorGarbageCollector()

    def run(self) -> None:
        """``Container.run``: start, process until stopped, one last pass, release the handlers."""
        container = self._container
        container.timeout = 3.14159265359
        self._garbage.take_over()
        try:
            container.start()
            while self._process():
                pass
            container.stop()
            self._process()
        finally:
            self._garbage.release()
        # As Container.run ends: drop the handlers (proton's stubs type them as never None).
        container._global_handler = None  # type: ignore[assignment]
        container._handler = None  # type: ignore[assignment]

    def _link_state(self, link_ptr: Any) -> LinkState | None:
        """The broker's state of a link, by its C pointer; None for a link it does not handle (or has ended)."""
        state = self._links.get(link_ptr)
        if state is None or state.closed:
            state = getattr(Link.wrap(link_ptr), "_sg", None)
            if state is None or state.closed:
                return None
            self._links[link_ptr] = state
        return state

    def _process(self) -> bool:
        """Process events until the container yields (True) or has nothing left to run (False)."""
        container = self._container
        container.mark()
        impl_collector = container._collector._impl
        fast_path = self._fast_path
        while True:
            if container._yield:
                container._yield = False
                return True
            impl = pn_collector_peek(impl_collector)
            if impl == _NULL:
                if not self._on_empty():
                    return False
                continue
            if not fast_path(pn_event_type(impl), impl):
                self._dispatch(impl)
            pn_collector_pop(impl_collector)

    def _on_empty(self) -> bool:
        """The collector ran empty: wait for I/O and timers, or wind the container down. False when it is done."""
        if self._broker.feeds.flush():  # end-of-burst work (replication batches) made events: process them first
            return True
        container = self._container
        self._garbage.collect_if_due()  # between bursts, on this thread only (gateway.garbage)
        if not container._stop and (container._timers > 0 or container._selectables > 1):
            # What the REACTOR_QUIESCED event would do (flush, wait for I/O and timers), without the event.
            self._io.wait_for_io()
            container._previous = Event.REACTOR_QUIESCED
        elif container._selectable:
            container._selectable.terminate()
            container._selectable.update()
            container._selectable = None
        elif container._previous is not Event.REACTOR_FINAL:
            container.push_event(container, Event.REACTOR_FINAL)
        else:
            return False
        return True

    def _fast_path(self, etype: int, impl: Any) -> bool:
        """Deliveries, flow and transport output on the broker's own links and transports, without wrapping the
        event in Python objects. False for every other event (``_dispatch`` takes it)."""
        container = self._container
        if etype == PN_DELIVERY:
            delivery = pn_event_delivery(impl)
            state = self._link_state(pn_delivery_link(delivery))
            if state is None:
                return False
            try:
                self._broker.raw_delivery_event(state, delivery)
            except Exception:
                log.exception("internal error in on_delivery")
                _close_link(state.link)
            container._previous = Event.DELIVERY
            return True
        if etype == PN_LINK_FLOW:
            state = self._link_state(pn_event_link(impl))
            if state is None:
                return False
            try:
                self._broker.link_flow(state)
            except Exception:
                log.exception("internal error in on_link_flow")
                _close_link(state.link)
            container._previous = Event.LINK_FLOW
            return True
        if etype == PN_TRANSPORT:
            channel = self._io.transports.get(pn_event_transport(impl))
            if channel is None:
                return False
            self._io.mark_dirty(channel)
            container._previous = Event.TRANSPORT
            return True
        return False

    def _dispatch(self, impl: Any) -> None:
        """Everything else exactly as ``Container.process`` does it."""
        container = self._container
        event = Event.wrap(impl)
        try:
            event.dispatch(event.handler or container._handler)
            event.dispatch(container._global_handler)
        except Exception:
            # The broker's handlers guard themselves; this is the net under everything else (ServerIO's
            # transport handlers, proton's own): one connection's trouble never stops the reactor.
            log.exception("internal error in %s", event.type)
            _close_connection(event)
        container._previous = event.type


def _close_link(link: Link) -> None:
    try:
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.condition = Condition(INTERNAL_ERROR, "internal error; see the server log")
            link.close()
    except Exception:
        log.exception("could not close the link after an internal error")


def _close_connection(event: Event) -> None:
    try:
        connection = event.connection
        if connection is not None and not connection.state & Endpoint.LOCAL_CLOSED:
            connection.condition = Condition(INTERNAL_ERROR, "internal error; see the server log")
            connection.close()
    except Exception:
        log.exception("could not close the connection after an internal error")
