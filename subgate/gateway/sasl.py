"""The server side of the AMQP 1.0 SASL exchange, with no I/O (AMQP 1.0 part 5.3).

This module owns the bytes a client sends before its AMQP header: the protocol header, the SASL frames and
the sasl-outcome we answer with. It knows nothing about sockets, threads, password stores or proton
transports. The caller feeds bytes in with ``receive_data``, reads events from ``next_event``, gives its
verdict on credentials with ``complete`` and writes out whatever ``data_to_send`` returns. The proton in the
python-qpid-proton wheel has no Cyrus SASL, so its server side could only offer ANONYMOUS and EXTERNAL;
doing the exchange here lets PLAIN be checked against our own password hashes, and the proton
``Transport(Transport.SERVER)`` that follows is created without a SASL layer.

PLAIN (RFC 4616), ANONYMOUS (RFC 4505) and EXTERNAL (RFC 4422 appendix A: the identity is the TLS client
certificate's, which the caller supplies) send everything in sasl-init; an EXTERNAL sasl-init without an initial
response asks for no authorization identity. A PLAIN sasl-init without an initial response is an authentication
failure rather than the start of a challenge round: every AMQP client we know sends one. SCRAM-SHA-256 (RFC 7677,
``engine.scram``) takes one challenge round: its sasl-init carries the client-first message; the caller looks the
user's keys up (``CredentialsReceived``) and hands them to ``challenge``, which sends the server-first message in a
sasl-challenge; the sasl-response carries the client-final message, whose proof is checked here (``ProofChecked``)
before the caller's ``complete``; the sasl-outcome ok carries the server-final message as additional-data.

States (``SaslState``) and what moves them, h11-style. "Output" is what becomes available from
``data_to_send``; "event" is what ``next_event`` returns.

============== ================================= ============== ============================================
state          trigger                           next state     output / event
============== ================================= ============== ============================================
AWAIT_HEADER   SASL header ``AMQP 3 1 0 0``      AWAIT_INIT     our SASL header + sasl-mechanisms
AWAIT_HEADER   AMQP header ``AMQP 0 1 0 0``      NO_SASL        NoSaslHeader (leftover starts with it)
AWAIT_HEADER   TLS header, other header, garbage ERROR          our SASL header; ProtocolViolation
AWAIT_INIT     empty frame (heartbeat)           AWAIT_INIT     nothing
AWAIT_INIT     sasl-init, mechanism offered      AWAIT_VERDICT  CredentialsReceived
AWAIT_INIT     sasl-init, malformed credentials  FAILED         sasl-outcome auth; SaslDone(False)
               (SCRAM: a bad client-first)
AWAIT_INIT     sasl-init, mechanism not offered  ERROR          sasl-outcome auth; ProtocolViolation
AWAIT_INIT     bad or oversize frame, other      ERROR          ProtocolViolation
               performative
AWAIT_VERDICT  any bytes                         AWAIT_VERDICT  kept for SaslDone.leftover, not parsed
AWAIT_VERDICT  ``challenge(keys)`` (SCRAM)       AWAIT_RESPONSE sasl-challenge (server-first)
AWAIT_RESPONSE sasl-response (client-final)      AWAIT_VERDICT  ProofChecked (valid or not)
AWAIT_RESPONSE bad frame, other performative     ERROR          ProtocolViolation
AWAIT_VERDICT  ``complete(True)``                AUTHENTICATED  sasl-outcome ok (SCRAM: with server-final);
                                                                SaslDone(True)
AWAIT_VERDICT  ``complete(False)``               FAILED         sasl-outcome code; SaslDone(False)
FAILED, ERROR  any bytes                         (same)         ignored: the caller flushes and closes
AUTHENTICATED, any bytes                         (same)         kept for the leftover until SaslDone or
NO_SASL                                                         NoSaslHeader is returned, then SaslError
============== ================================= ============== ============================================

Peer misbehaviour never raises: it becomes a ``ProtocolViolation`` event. ``SaslError`` means the caller used
the API wrongly (``complete`` in the wrong state, bytes fed after the hand-off). Internally a bad frame raises
``Violation``; ``receive_data`` is the one place that turns it into the event.

The object is not thread-safe: a password check done on a worker thread must hand its result back to the
thread that owns the connection, which then calls ``complete``.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from subgate.engine import scram
from subgate.engine.sasl_mechanisms import ANONYMOUS, EXTERNAL, PLAIN, BadCredentials, identity
from subgate.gateway.sasl_frames import (
    AMQP_HEADER,
    FAILURE_CODES,
    MAX_FRAME_SIZE,
    OUTCOME_AUTH,
    OUTCOME_OK,
    OUTCOME_SYS,
    OUTCOME_SYS_PERM,
    OUTCOME_SYS_TEMP,
    SASL_HEADER,
    TLS_PROTOCOL_ID,
    Violation,
    challenge_frame,
    decode_performative,
    init_fields,
    mechanisms_frame,
    outcome_frame,
    response_field,
    take_frame,
)

SUPPORTED_MECHANISMS = (EXTERNAL, scram.MECHANISM, PLAIN, ANONYMOUS)

__all__ = [
    "AMQP_HEADER",
    "MAX_FRAME_SIZE",
    "OUTCOME_AUTH",
    "OUTCOME_OK",
    "OUTCOME_SYS",
    "OUTCOME_SYS_PERM",
    "OUTCOME_SYS_TEMP",
    "SASL_HEADER",
    "SUPPORTED_MECHANISMS",
    "CredentialsReceived",
    "NoSaslHeader",
    "ProofChecked",
    "ProtocolViolation",
    "SaslDone",
    "SaslError",
    "SaslServer",
    "SaslState",
]


class SaslError(Exception):
    """The caller used ``SaslServer`` wrongly. Never raised for anything the peer sent."""


@dataclass(frozen=True)
class CredentialsReceived:
    """The client chose a mechanism and sent credentials; the caller must answer with ``complete``.

    ``username`` and ``password`` are None for ANONYMOUS (its trace string is ignored); for EXTERNAL ``username``
    is the authorization identity the client asked for (None: none), ``password`` None. For SCRAM-SHA-256
    ``username`` is the user the client-first message names and ``password`` None: the caller answers with
    ``challenge`` (the user's keys, or made-up ones) rather than ``complete``, unless it refuses at once.
    """

    mechanism: str
    username: str | None
    password: str | None
    hostname: str | None


@dataclass(frozen=True)
class SaslDone:
    """The sasl-outcome is queued in ``data_to_send``; the SASL exchange is over.

    When ``authenticated``, ``leftover`` holds every byte the client sent after its sasl-init (normally its
    AMQP header, possibly more); it may be empty, and all later bytes go straight to the AMQP transport. On
    failure ``leftover`` is empty and the caller closes after flushing.
    """

    authenticated: bool
    username: str | None
    leftover: bytes


@dataclass(frozen=True)
class ProofChecked:
    """SCRAM-SHA-256: the client-final message came and its proof was checked (``valid`` False for anything
    wrong with it: malformed, another nonce or channel binding, a wrong proof, made-up keys). The caller answers
    with ``complete`` (``complete(True)`` only when ``valid``)."""

    username: str
    valid: bool


@dataclass(frozen=True)
class NoSaslHeader:
    """The client skipped SASL and sent the plain AMQP header, which ``leftover`` starts with.

    Nothing has been queued for the client; whether to allow an unauthenticated connection is up to the
    caller.
    """

    leftover: bytes


@dataclass(frozen=True)
class ProtocolViolation:
    """The client broke the protocol. The caller flushes ``data_to_send`` (if any) and closes the socket."""

    description: str


Event = CredentialsReceived | ProofChecked | SaslDone | NoSaslHeader | ProtocolViolation


class SaslState(enum.Enum):
    """Where the exchange stands; the module docstring has the transition table."""

    AWAIT_HEADER = "await-header"
    AWAIT_INIT = "await-init"
    AWAIT_VERDICT = "await-verdict"
    AWAIT_RESPONSE = "await-response"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"
    NO_SASL = "no-sasl"
    ERROR = "error"


_IGNORING_INPUT = frozenset({SaslState.FAILED, SaslState.ERROR})
_HANDING_OFF = frozenset({SaslState.AUTHENTICATED, SaslState.NO_SASL})


class SaslServer:
    """One connection's server side of the SASL exchange. See the module docstring for the states."""

    def __init__(self, mechanisms: Sequence[str]) -> None:
        """Offer ``mechanisms`` in the given order.

        Raises:
            SaslError: the list is empty, has duplicates or names a mechanism this module does not implement.
        """
        self._mechanisms = _checked_mechanisms(mechanisms)
        self._state = SaslState.AWAIT_HEADER
        self._buffer = bytearray()
        self._outgoing = bytearray()
        self._events: deque[Event] = deque()
        self._credentials: CredentialsReceived | None = None
        self._scram: _ScramRound | None = None  # the SCRAM exchange so far
        self._username: str | None = None
        self._handoff_ready = False
        self._handed_off = False

    @property
    def state(self) -> SaslState:
        return self._state

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self._mechanisms

    def offer(self, mechanisms: Sequence[str]) -> None:
        """Offer ``mechanisms`` instead (a TLS handshake that ended before the SASL header can change them).

        Raises:
            SaslError: the SASL header has already been answered, or the list is not valid (as in ``__init__``).
        """
        if self._state is not SaslState.AWAIT_HEADER or self._outgoing:
            raise SaslError(f"offer() called in state {self._state.name}; expected AWAIT_HEADER")
        self._mechanisms = _checked_mechanisms(mechanisms)

    def receive_data(self, data: bytes) -> None:
        """Feed bytes read from the socket; parsing happens at once and may queue output and events.

        Raises:
            SaslError: the exchange already handed the connection off (``SaslDone`` with ``authenticated`` or
                ``NoSaslHeader`` was returned); those bytes belong to the AMQP transport.
        """
        if self._handed_off:
            raise SaslError("the SASL exchange is over: give these bytes to the AMQP transport")
        if self._state in _IGNORING_INPUT:
            return
        self._buffer += data
        try:
            self._advance()
        except Violation as violation:
            self._fail_protocol(violation)

    def next_event(self) -> Event | None:
        """Return the next event, or None when more bytes (or a ``complete`` call) are needed."""
        if self._events:
            return self._events.popleft()
        if self._handoff_ready:
            return self._hand_off()
        return None

    def complete(self, authenticated: bool, username: str | None = None, code: int | None = None) -> None:
        """Give the verdict on the last ``CredentialsReceived`` (SCRAM: ``ProofChecked``; or at once, refusing
        without a challenge) and queue the sasl-outcome.

        Args:
            authenticated: whether the credentials were accepted.
            username: the identity to report in ``SaslDone``; defaults to the username that was received.
            code: the sasl-code for a failure (1 auth, 2 sys, 3 sys-perm, 4 sys-temp; default 1). Must be
                None or 0 on success.

        Raises:
            SaslError: no verdict is awaited, ``code`` does not fit ``authenticated``, or a SCRAM exchange is
                accepted without a valid proof.
        """
        if self._state is not SaslState.AWAIT_VERDICT or self._credentials is None:
            raise SaslError(f"complete() called in state {self._state.name}; expected AWAIT_VERDICT")
        outcome = _outcome_code(authenticated, code)
        server_final = None
        if authenticated and self._scram is not None:
            server_final = None if self._scram.server_final is None else self._scram.server_final.encode("utf-8")
            if server_final is None:
                raise SaslError("complete(True) for a SCRAM exchange whose proof was not valid")
        self._username = self._credentials.username if username is None else username
        self._credentials = None
        self._scram = None
        if authenticated:
            self._outgoing += outcome_frame(OUTCOME_OK, server_final)
            self._state = SaslState.AUTHENTICATED
            self._handoff_ready = True
        else:
            self._fail_auth(self._username, outcome)

    def challenge(self, keys: scram.ScramKeys) -> None:
        """SCRAM-SHA-256: answer the client-first message with the server-first one, salted with ``keys`` (the
        user's, or ``scram.fake_keys`` for one who cannot log in this way: the exchange then fails at the proof).

        Raises:
            SaslError: no SCRAM exchange is waiting for its keys.
        """
        if self._state is not SaslState.AWAIT_VERDICT or self._scram is None or self._scram.keys is not None:
            raise SaslError(f"challenge() called in state {self._state.name}; expected a SCRAM AWAIT_VERDICT")
        self._scram.keys = keys
        self._scram.server_first = scram.server_first(self._scram.client, keys)
        self._outgoing += challenge_frame(self._scram.server_first.encode("utf-8"))
        self._state = SaslState.AWAIT_RESPONSE
        try:  # the client may have sent its response already (it should not have)
            self._advance()
        except Violation as violation:
            self._fail_protocol(violation)

    def data_to_send(self) -> bytes:
        """Return and forget the bytes queued for the client."""
        data, self._outgoing = bytes(self._outgoing), bytearray()
        return data

    # -- parsing --------------------------------------------------------------------------------------------

    def _advance(self) -> None:
        progressed = True
        while progressed:
            if self._state is SaslState.AWAIT_HEADER:
                progressed = self._read_header()
            elif self._state in (SaslState.AWAIT_INIT, SaslState.AWAIT_RESPONSE):
                progressed = self._read_frame()
            else:
                progressed = False

    def _read_header(self) -> bool:
        head = bytes(self._buffer[:8])
        if not b"AMQP".startswith(head[:4]):  # not AMQP at all: no need to wait for all 8 bytes
            raise Violation(_header_problem(head), reply=SASL_HEADER)
        if len(head) < len(SASL_HEADER):
            return False
        if head == AMQP_HEADER:
            self._state = SaslState.NO_SASL
            self._handoff_ready = True
            return False
        if head != SASL_HEADER:
            raise Violation(_header_problem(head), reply=SASL_HEADER)
        del self._buffer[:8]
        self._outgoing += SASL_HEADER + mechanisms_frame(self._mechanisms)
        self._state = SaslState.AWAIT_INIT
        return True

    def _read_frame(self) -> bool:
        body = take_frame(self._buffer)
        if body is None:
            return False
        if body:  # an empty body is a heartbeat (part 2.3.2), which needs no answer
            self._on_performative(*decode_performative(body))
        return True

    def _on_performative(self, name: str, fields: list[object]) -> None:
        if self._state is SaslState.AWAIT_RESPONSE:
            if name != "sasl-response":
                raise Violation(f"expected sasl-response, got {name}")
            self._on_response(response_field(fields))
            return
        if name != "sasl-init":
            raise Violation(f"expected sasl-init, got {name}")
        mechanism, response, hostname = init_fields(fields)
        if mechanism not in self._mechanisms:
            offered = ", ".join(self._mechanisms)
            raise Violation(
                f"client chose mechanism {mechanism[:64]!r}, which was not offered ({offered})",
                reply=outcome_frame(OUTCOME_AUTH),
            )
        try:
            if mechanism == scram.MECHANISM:
                self._scram = _ScramRound(scram.parse_client_first(response))
                user: tuple[str | None, str | None] = (self._scram.client.username, None)
            else:
                user = identity(mechanism, response)
        except BadCredentials as bad:
            self._fail_auth(bad.username, OUTCOME_AUTH)
            return
        except scram.ScramError:
            self._fail_auth(None, OUTCOME_AUTH)
            return
        credentials = CredentialsReceived(mechanism, *user, hostname)
        self._credentials = credentials
        self._state = SaslState.AWAIT_VERDICT
        self._events.append(credentials)

    def _on_response(self, response: bytes) -> None:
        round_ = self._scram
        assert round_ is not None and round_.keys is not None and round_.server_first is not None
        try:
            round_.server_final = scram.verify_client_final(round_.client, round_.server_first, round_.keys, response)
        except scram.ScramError:
            round_.server_final = None
        self._state = SaslState.AWAIT_VERDICT
        self._events.append(ProofChecked(round_.client.username, round_.server_final is not None))

    # -- endings --------------------------------------------------------------------------------------------

    def _fail_protocol(self, violation: Violation) -> None:
        self._outgoing += violation.reply
        self._buffer.clear()
        self._state = SaslState.ERROR
        self._events.append(ProtocolViolation(violation.description))

    def _fail_auth(self, username: str | None, code: int) -> None:
        self._scram = None
        self._outgoing += outcome_frame(code)
        self._buffer.clear()
        self._state = SaslState.FAILED
        self._events.append(SaslDone(authenticated=False, username=username, leftover=b""))

    def _hand_off(self) -> SaslDone | NoSaslHeader:
        # Built only now, so the leftover holds every byte received before the caller took the event.
        self._handoff_ready = False
        self._handed_off = True
        leftover, self._buffer = bytes(self._buffer), bytearray()
        if self._state is SaslState.NO_SASL:
            return NoSaslHeader(leftover)
        return SaslDone(authenticated=True, username=self._username, leftover=leftover)


class _ScramRound:
    """One SCRAM-SHA-256 exchange: the client-first message, the keys, what we sent and the answer we owe."""

    __slots__ = ("client", "keys", "server_final", "server_first")

    def __init__(self, client: scram.ClientFirst) -> None:
        self.client = client
        self.keys: scram.ScramKeys | None = None
        self.server_first: str | None = None
        self.server_final: str | None = None  # set when the proof was valid


# -- helpers: configuration and verdicts ---------------------------------------------------------------------


def _checked_mechanisms(mechanisms: Sequence[str]) -> tuple[str, ...]:
    offered = tuple(mechanisms)
    if not offered:
        raise SaslError("at least one SASL mechanism must be offered")
    if len(set(offered)) != len(offered):
        raise SaslError(f"duplicate SASL mechanisms in {offered!r}")
    unsupported = [name for name in offered if name not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise SaslError(f"unsupported SASL mechanisms {unsupported!r}; supported: {SUPPORTED_MECHANISMS!r}")
    return offered


def _outcome_code(authenticated: bool, code: int | None) -> int:
    if authenticated:
        if code not in (None, OUTCOME_OK):
            raise SaslError(f"a successful outcome has code 0, not {code!r}")
        return OUTCOME_OK
    if code is None:
        return OUTCOME_AUTH
    if code not in FAILURE_CODES:
        raise SaslError(f"a failed outcome needs code 1-4, not {code!r}")
    return code


def _header_problem(head: bytes) -> str:
    if not head.startswith(b"AMQP"):
        return f"not an AMQP protocol header: {head!r}"
    if head[4] == TLS_PROTOCOL_ID:
        return "the client asked for TLS (protocol id 2), but TLS is not enabled on this listener"
    return f"unsupported protocol header {head!r}; this server speaks AMQP 1.0 over SASL ({SASL_HEADER!r})"
