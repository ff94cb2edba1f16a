"""The verdicts of ``engine.frame_scan`` on one connection, carried out on its proton objects.

Owns ``FrameGate`` (one per AMQP connection, kept by its ``Channel``) and the ``FrameHooks`` it calls: the
lifecycle refuses, steals and ends (``gateway.lifecycle``). ``gateway.channel_io`` feeds the gate every byte the
peer sends and pushes into proton only what it is told to forward; every other verdict is carried out at once,
between two pushes, so proton's objects are in the state the next frame needs (an older attachment of a stolen
link name is closed on our side before the peer's detach of it reaches proton).

Proton's objects have no channel or handle numbers in the Python API: a session is tagged with its channel
(``_sg_channel``, an attribute kept in proton's record) right after its ``begin`` is pushed, as the newest session
not tagged yet; a link is found by its session, name and role. Reactor thread only.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from proton import Connection, Endpoint, Link, Session

from subgate.engine.frame_scan import (
    Action,
    EndSession,
    FrameScan,
    RefuseAttach,
    SessionBegun,
    Steal,
)

log = logging.getLogger("subgate.broker")


class FrameHooks(Protocol):
    """What the gate asks of the broker (``gateway.lifecycle.Lifecycle``)."""

    def refuse_link(self, link: Link, condition: str, description: str) -> None: ...

    def steal_link(self, link: Link, description: str) -> None: ...

    def end_session(self, session: Session, condition: str, description: str) -> None: ...


class FrameGate:
    """One connection's frame checks (see the module docstring)."""

    __slots__ = ("scan", "_hooks")

    def __init__(self, max_frame_size: int, hooks: FrameHooks) -> None:
        self.scan = FrameScan(max_frame_size)
        self._hooks = hooks

    def apply(self, action: Action, connection: Connection) -> None:
        """Carry out one verdict other than ``Forward`` and ``CloseConnection`` (``gateway.channel_io``'s)."""
        if isinstance(action, SessionBegun):
            _tag_newest_session(connection, action.channel)
            return
        session = _session(connection, action.channel)  # type: ignore[union-attr]
        if session is None:
            return
        if isinstance(action, EndSession):
            self._hooks.end_session(session, action.condition, action.description)
            return
        if isinstance(action, (RefuseAttach, Steal)):
            link = _link(connection, session, action.name, action.sender)
            if link is None:
                log.debug("no link %r on channel %d for %s", action.name, action.channel, action)
                return
            if isinstance(action, Steal):
                self._hooks.steal_link(link, action.description)
            else:
                self._hooks.refuse_link(link, action.condition, action.description)


def _tag_newest_session(connection: Connection, channel: int) -> None:
    newest: Any = None
    session = connection.session_head(Endpoint.REMOTE_ACTIVE)
    while session is not None:
        if getattr(session, "_sg_channel", None) is None:
            newest = session
        session = session.next(Endpoint.REMOTE_ACTIVE)
    if newest is not None:
        newest._sg_channel = channel


def _session(connection: Connection, channel: int) -> Session | None:
    session = connection.session_head(Endpoint.REMOTE_ACTIVE)
    while session is not None:
        if getattr(session, "_sg_channel", None) == channel:
            return session
        session = session.next(Endpoint.REMOTE_ACTIVE)
    return None


def _link(connection: Connection, session: Session, name: str, sender: bool) -> Link | None:
    link = connection.link_head(Endpoint.REMOTE_ACTIVE)
    while link is not None:
        try:
            found = link.session == session and link.is_sender == sender and link.name == name
        except UnicodeDecodeError:
            found = False
        if found:
            return link
        link = link.next(Endpoint.REMOTE_ACTIVE)
    return None
