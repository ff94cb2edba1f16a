"""The net under the broker's event handlers: an exception never leaves one.

Owns ``guarded`` (a bug is logged and the endpoint the event concerns is closed with ``amqp:internal-error``;
undecodable text from the peer is the peer's ``amqp:decode-error``), so the server keeps serving every other
connection, and ``Timer``, the guarded handler of a container timer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from proton import Condition, Endpoint, Event

from subgate.mapping.errors import DECODE_ERROR, INTERNAL_ERROR

log = logging.getLogger("subgate.broker")

_Self = TypeVar("_Self")


def guarded(method: Callable[[_Self, Event], None]) -> Callable[[_Self, Event], None]:
    """Event handlers never let an exception out: a bug is logged and the endpoint it concerns is closed with
    ``amqp:internal-error``, while the server keeps serving every other connection."""

    def handler(self: _Self, event: Event) -> None:
        try:
            method(self, event)
        except UnicodeDecodeError as exc:
            # A text field the peer sent is not text, read where no handler expected it: the peer's error.
            log.info("closing an endpoint after undecodable input in %s: %s", method.__name__, exc)
            close_endpoint(event, DECODE_ERROR, "a field sent by the peer is not valid text")
        except Exception:
            log.exception("internal error in %s", method.__name__)
            close_endpoint(event, INTERNAL_ERROR, "internal error; see the server log")

    handler.__name__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


class Timer:
    """A container timer's handler that runs ``callback`` (``container.schedule(delay, Timer(callback))``)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback

    @guarded
    def on_timer_task(self, event: Event) -> None:
        self.callback()


def schedule(container: Any, delay: float, callback: Callable[[], None]) -> None:
    """Run ``callback`` on the reactor thread ``delay`` seconds from now (a container timer with ``Timer``)."""
    container.schedule(max(0.0, delay), Timer(callback))


def close_endpoint(event: Event, condition: str, description: str) -> None:
    """Close the endpoint an event concerns with an error (an endpoint the peer opened and we did not yet: proton
    answers with the attach, begin or open first)."""
    try:
        endpoint = event.link or event.session or event.connection
        if endpoint is not None and not endpoint.state & Endpoint.LOCAL_CLOSED:
            endpoint.condition = Condition(condition, description)
            endpoint.close()
    except Exception:
        log.exception("could not close the endpoint after an error")
