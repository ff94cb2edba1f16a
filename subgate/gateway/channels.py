"""One accepted socket's state, and the few things other modules ask of it.

Owns ``Channel`` (the socket, its SASL phase or proton transport, its deadlines and its admission verdict),
``connection_channel`` (the channel behind a proton connection), ``end_after_output`` (close a refused connection
once its answer is written). ``gateway.io`` moves the bytes; ``gateway.sasl_phase`` runs the
SASL exchange. Reactor thread only.
"""

from __future__ import annotations

import select
import socket
from typing import Any

from proton import Connection, Transport

from subgate.engine.admission import ChannelClock, Verdict
from subgate.gateway.frame_gate import FrameGate
from subgate.gateway.sasl import SaslServer
from subgate.gateway.tls import TlsLayer

READ = select.EPOLLIN | select.EPOLLRDHUP
WRITE = select.EPOLLOUT


class Channel:
    """One accepted socket: its TLS layer (on the TLS listener), its SASL phase, then its proton transport."""

    __slots__ = (
        "sock",
        "fd",
        "peer",
        "sasl",
        "transport",
        "connection",
        "outgoing",
        "user",
        "closed",
        "watching",
        "eof",
        "held",
        "clock",
        "verdict",
        "refusal",
        "ending",
        "verdict_request",
        "tls",
        "certificate_name",
        "login",
        "gate",
    )

    def __init__(self, sock: socket.socket, peer: tuple[Any, ...], now: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.sasl: SaslServer | None = None
        self.transport: Transport | None = None
        self.connection: Connection | None = None
        self.outgoing = b""  # bytes of the SASL phase not yet written
        self.user: str | None = None
        self.closed = False
        self.watching = READ
        self.eof = False
        self.held: bytes | None = None  # input of a no-SASL connection while its anonymous check runs
        self.clock = ChannelClock(now)
        self.verdict = Verdict.ADMIT
        self.refusal: str | None = None  # over a connection limit: why; the handshake is answered with a refusal
        self.ending = False  # close the socket once the output is written (io.end_after_output)
        self.verdict_request: int | None = None  # the auth request it waits for (gateway.sasl_phase)
        self.tls: TlsLayer | None = None  # accepted on the TLS listener: every byte goes through it
        self.certificate_name: str | None = None  # the principal its verified client certificate names
        self.login: str | None = None  # the mechanism its credentials came with (gateway.sasl_phase)
        self.gate: FrameGate | None = None  # its frame checks once the AMQP phase begins (gateway.frame_gate)

    @property
    def address(self) -> str:
        return str(self.peer[0]) if self.peer else ""

    def handshake_finished(self) -> None:
        """The peer's open has arrived (the broker calls this): the handshake deadline no longer applies."""
        self.clock.opened = True


def end_after_output(connection: Connection) -> None:
    """Close the socket as soon as everything queued on this connection (the ``close`` just queued) is written,
    without waiting for the peer's ``close``. For a refused ``open``: its peer has broken a rule or a limit, and
    waiting for its answer would let it hold a connection slot."""
    channel = connection_channel(connection)
    if channel is not None:
        channel.ending = True


def connection_channel(connection: Connection) -> Channel | None:
    """The channel (socket, user) behind a connection accepted by ``ServerIO`` (served by ``ChannelIO``)."""
    return getattr(connection, "_channel", None)


def remote(peer: object) -> str | None:
    """A socket's peer address as ``host:port`` (the form log lines and their JSON fields carry)."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return None if peer is None else str(peer)
