"""The client's container loop: proton's ``Container.process`` with one fast path, for delivery and flow events.

proton's loop wraps every event in Python objects (event, delivery, link, session, connection, transport) and
looks for handlers by name, for the handler and again for the global handler. A publisher gets one delivery
event per message (its outcome), a subscriber one per message received, so that wrapping is most of the I/O
thread's time. Here a
``PN_DELIVERY`` event on a link registered in ``raw_owners`` (by its C pointer) goes straight to the owner's
``raw_delivery(delivery_pointer)``, and a ``PN_LINK_FLOW`` event (credit: a publisher sends on it) to its
``raw_flow(link_pointer)``; every other event takes proton's own path, unchanged, in the same order.
The subgate broker's loop does the same (gateway/loop.py); this one is the client's own, importing nothing of it.
"""

from __future__ import annotations

from typing import Any, Protocol

from cproton import (
    PN_DELIVERY,
    PN_LINK_FLOW,
    ffi,
    pn_collector_peek,
    pn_collector_pop,
    pn_delivery_link,
    pn_event_delivery,
    pn_event_link,
    pn_event_type,
)
from proton._events import Event
from proton.reactor import Container

_NULL = ffi.NULL


class RawDeliveryOwner(Protocol):
    def raw_delivery(self, delivery: Any) -> None: ...
    def raw_flow(self, link: Any) -> None: ...


class ClientContainer(Container):  # type: ignore[misc]
    """A ``Container`` whose loop hands registered links' delivery events to their owner unwrapped."""

    def __init__(self, *handlers: Any, **kwargs: Any) -> None:
        super().__init__(*handlers, **kwargs)
        self.raw_owners: dict[Any, RawDeliveryOwner] = {}  # link C pointer -> owner (I/O thread only)

    def process(self) -> bool:
        """``Container.process`` (python-qpid-proton 0.40) plus the fast path described above."""
        self.mark()
        collector = self._collector._impl
        previous: Any = None
        while True:
            if self._yield:
                self._yield = False
                return True
            raw = pn_collector_peek(collector)
            if raw != _NULL and self.raw_owners:
                kind = pn_event_type(raw)
                if kind == PN_DELIVERY:
                    delivery = pn_event_delivery(raw)
                    owner = self.raw_owners.get(pn_delivery_link(delivery))
                    if owner is not None:
                        owner.raw_delivery(delivery)
                        previous = self._previous = Event.DELIVERY
                        pn_collector_pop(collector)
                        continue
                elif kind == PN_LINK_FLOW:
                    link = pn_event_link(raw)
                    owner = self.raw_owners.get(link)
                    if owner is not None:
                        owner.raw_flow(link)
                        previous = self._previous = Event.LINK_FLOW
                        pn_collector_pop(collector)
                        continue
            event = self._collector.peek()
            if event:
                handler = event.handler or self._handler
                event.dispatch(handler)
                event.dispatch(self._global_handler)
                previous = self._previous = event.type
                self._collector.pop()
            elif not self._stop and (self._timers > 0 or self._selectables > 1):
                if previous is not Event.REACTOR_QUIESCED and self._previous is not Event.REACTOR_FINAL:
                    self.push_event(self, Event.REACTOR_QUIESCED)
                self.yield_()
            elif self._selectable:
                self._selectable.terminate()
                self._selectable.update()
                self._selectable = None
            else:
                if self._previous is not Event.REACTOR_FINAL:
                    self.push_event(self, Event.REACTOR_FINAL)
                return False
