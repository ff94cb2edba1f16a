"""Connection admission and deadlines: who may connect, and how long a connection may take to say something.

Owns the rules, not the sockets (no proton, no I/O; ``gateway.io`` applies them):

- **Admission** at accept. A connection is admitted while fewer than ``max_connections`` are open in all and
  fewer than ``max_per_address`` from its address. Past either limit it is *refused*: it is kept just long enough
  to say why (a SASL client gets ``sasl-outcome`` sys-temp, a client without SASL ``open`` then
  ``close(amqp:resource-limit-exceeded)``) and is not counted as open. Refusals in progress are bounded too
  (``REFUSALS_IN_FLIGHT``); past that a new socket is closed at once, so a flood costs one ``accept`` each.
- **Deadlines** per connection (``ChannelClock``), checked on every transport tick:
  the *handshake* (from accept to the end of SASL and the peer's ``open``), the *frame* (once a frame has begun,
  it must be complete within ``frame_timeout``: a client that sends one byte a second never gets past it), and
  the *close grace* (after we close a connection with an error, the peer has that long to answer before the
  socket is dropped). Idle connections are the transport's idle time-out's business, not this module's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# Refusals being answered at once; beyond this a new connection over the limit is closed without an answer.
REFUSALS_IN_FLIGHT = 64


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of ``subgate serve`` (docs/security.md lists them with their defaults)."""

    max_connections: int = 10_000
    max_per_address: int = 1_000
    handshake_timeout: float = 10.0
    frame_timeout: float = 30.0
    close_grace: float = 5.0

    def tick_interval(self) -> float:
        """How often deadlines are checked: often enough that none is overrun by more than a quarter."""
        return min(5.0, self.handshake_timeout / 4, self.frame_timeout / 4, self.close_grace / 2)


class Verdict(enum.Enum):
    ADMIT = "admit"
    REFUSE = "refuse"  # answer with the reason, then close
    DROP = "drop"  # close the socket at once


class Admission:
    """Counts open connections, in all and per address, and decides on each new one."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open = 0
        self.refusing = 0
        self._per_address: dict[str, int] = {}

    def decide(self, address: str) -> tuple[Verdict, str]:
        """Admit (and count) a connection from ``address``, or say why not."""
        limits = self.limits
        if self.open >= limits.max_connections:
            reason = f"connection limit reached: {self.open} open (max-connections {limits.max_connections})"
        elif self._per_address.get(address, 0) >= limits.max_per_address:
            reason = f"too many connections from {address} (max-connections-per-address {limits.max_per_address})"
        else:
            self.open += 1
            self._per_address[address] = self._per_address.get(address, 0) + 1
            return Verdict.ADMIT, ""
        if self.refusing >= REFUSALS_IN_FLIGHT:
            return Verdict.DROP, reason
        self.refusing += 1
        return Verdict.REFUSE, reason

    def release(self, address: str, verdict: Verdict) -> None:
        """A connection decided on earlier has ended."""
        if verdict is Verdict.REFUSE:
            self.refusing -= 1
            return
        if verdict is not Verdict.ADMIT:
            return
        self.open -= 1
        left = self._per_address.get(address, 1) - 1
        if left > 0:
            self._per_address[address] = left
        else:
            self._per_address.pop(address, None)


class ChannelClock:
    """One connection's deadlines (see the module docstring). Times are the container's clock, in seconds."""

    __slots__ = ("accepted_at", "opened", "bytes_in", "_frames", "_frame_mark", "_bytes_at_mark", "_closing_since")

    def __init__(self, now: float) -> None:
        self.accepted_at = now
        self.opened = False  # the peer's open has arrived
        self.bytes_in = 0  # bytes handed to the AMQP transport
        self._frames = 0
        self._frame_mark = now
        self._bytes_at_mark = 0
        self._closing_since: float | None = None

    def overdue(self, now: float, limits: ConnectionLimits, frames_in: int, closing: bool) -> str | None:
        """Why the connection must be dropped now, or None.

        ``frames_in`` is how many whole frames the transport has read so far; ``closing`` whether we have closed
        the connection and wait for the peer's ``close``.
        """
        if not self.opened and now - self.accepted_at > limits.handshake_timeout:
            return f"handshake not finished within {limits.handshake_timeout:g}s"
        if frames_in != self._frames:
            self._frames, self._frame_mark, self._bytes_at_mark = frames_in, now, self.bytes_in
        elif self.bytes_in > self._bytes_at_mark and now - self._frame_mark > limits.frame_timeout:
            return f"frame not completed within {limits.frame_timeout:g}s"
        if not closing:
            self._closing_since = None
        elif self._closing_since is None:
            self._closing_since = now
        elif now - self._closing_since > limits.close_grace:
            return f"no close from the peer within {limits.close_grace:g}s of ours"
        return None
