"""Reading the text a peer sent through proton's wrappers, with invalid text turned into a refusal.

Owns one rule: a field the peer filled with bytes that are not text (a string that is not UTF-8, a symbol that is
not ASCII) is the peer's error, answered with ``amqp:decode-error`` naming the field, never an exception out of a
handler. proton-c keeps such fields as raw bytes; the Python wrappers decode them when a property is read
(``Connection.remote_container``, ``Data.get_object``), and that decode raises ``UnicodeDecodeError``.

``read_open`` reads every field of a peer's ``open`` that the broker uses or could echo. Handlers call it (and
``peer_text`` for single fields) before acting on what the peer asked for. Reactor thread only, like every
proton object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from proton import DataException

from subgate.mapping.errors import DECODE_ERROR, Refused

_T = TypeVar("_T")


# What proton's Python getters raise for values of the wrong shape (a map keyed by a described value, a uint where
# a list of symbols belongs, a char out of range, nesting too deep): the peer's error, like bad text.
_MALFORMED = (TypeError, ValueError, KeyError, OverflowError, RecursionError, AttributeError, DataException)


def peer_text(field: str, read: Callable[[], _T]) -> _T:
    """``read()``, with undecodable text or a malformed value refused as ``amqp:decode-error`` naming ``field``."""
    try:
        return read()
    except UnicodeDecodeError as exc:
        kind = "ASCII" if exc.encoding == "ascii" else "UTF-8"
        raise Refused(DECODE_ERROR, f"{field} is not valid {kind}") from None
    except _MALFORMED as exc:
        raise Refused(DECODE_ERROR, f"{field} is malformed ({type(exc).__name__})") from None


@dataclass(frozen=True)
class OpenRequest:
    """What a peer's ``open`` asked for, read once and checked."""

    container_id: str
    hostname: str | None
    desired_capabilities: frozenset[str]


def read_open(connection: Any) -> OpenRequest:
    """The peer's ``open`` (the connection must be remotely active).

    Raises:
        Refused: ``amqp:decode-error`` when a text field of the ``open`` is not valid text.
    """
    container_id = peer_text("open container-id", lambda: connection.remote_container) or ""
    hostname = peer_text("open hostname", lambda: connection.remote_hostname)
    desired = peer_text("open desired-capabilities", lambda: connection.remote_desired_capabilities) or ()
    peer_text("open offered-capabilities", lambda: connection.remote_offered_capabilities)
    peer_text("open properties", lambda: connection.remote_properties)
    return OpenRequest(container_id, hostname, frozenset(str(c) for c in desired))
