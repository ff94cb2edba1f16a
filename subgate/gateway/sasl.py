"""The server side of the AMQP 1.0 SASL exchange, with no I/O (AMQP 1.0 part 5.3).

This module owns the bytes a client sends before its AMQP header: the protocol header, the SASL frames and
the sasl-outcome we answer with. It knows nothing about sockets, threads, password stores or proton
transports. The caller feeds bytes in with ``receive_data``, reads events from ``next_event``, gives its
verdict on credentials with ``complete`` and writes out whatever ``data_to_send`` returns. The proton in the
python-qpid-proton wheel has no Cyrus SASL, so its server side could only offer ANONYMOUS and EXTERNAL;
doing the exchange here lets PLAIN be checked against our own password hashes, and the proton
``Transport(Transport.SERVER)`` that follows is created without a SASL layer.

PLAIN (RFC 4616), ANONYMOUS (RFC 4505) and EXTERNAL (RFC 4422 appendix A: the identity is the TLS client
certificate's, which the caller supplies) are implemented. All three send everything in sasl-init, so the
server never sends a sasl-challenge; an EXTERNAL sasl-init without an initial response asks for no
authorization identity. A PLAIN sasl-init without an initial response is an authentication
failure rather than the start of a challenge round: every AMQP client we know sends one.

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
AWAIT_INIT     sasl-init, mechanism not offered  ERROR          sasl-outcome auth; ProtocolViolation
AWAIT_INIT     bad or oversize frame, other      ERROR          ProtocolViolation
               performative
AWAIT_VERDICT  any bytes                         AWAIT_VERDICT  kept for SaslDone.leftover, not parsed
AWAIT_VERDICT  ``complete(True)``                AUTHENTICATED  sasl-outcome ok; SaslDone(True)
AWAIT_VERDICT  ``complete(False)``               FAILED         sasl-outcome code; SaslDone(False)
FAILED, ERROR  any bytes                         (same)         ignored: the caller flushes and closes
AUTHENTICATED, any bytes                         (same)         kept for the leftover until SaslDone or
NO_SASL                                                         NoSaslHeader is returned, then SaslError
============== ================================= ============== ============================================

Peer misbehaviour never raises: it becomes a ``ProtocolViolation`` event. ``SaslError`` means the caller used
the API wrongly (``complete`` in the wrong state, bytes fed after the hand-off). Internally a bad frame raises
``_Violation``; ``receive_data`` is the one place that turns it into the event.

The object is not thread-safe: a password check done on a worker thread must hand its result back to the
thread that owns the connection, which then calls ``complete``.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from proton import Data, DataException, Described

from subgate.engine.sasl_mechanisms import ANONYMOUS, EXTERNAL, PLAIN, BadCredentials, identity

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
_TLS_PROTOCOL_ID = 2

# Part 5.3.1: SASL frames share the 8-byte frame header with AMQP frames; type 0x01 marks them.
_FRAME_HEADER = struct.Struct(">IBBH")
_SASL_FRAME_TYPE = 0x01
_MIN_DOFF = 2
# Part 5.3.1 sets no SASL frame size of its own; 64 KiB is plenty for PLAIN and bounds what a client can make
# us buffer before it has authenticated.
MAX_FRAME_SIZE = 64 * 1024

SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_CHALLENGE = 0x42
SASL_RESPONSE = 0x43
SASL_OUTCOME = 0x44

_PERFORMATIVE_NAMES = {
    SASL_MECHANISMS: "sasl-mechanisms",
    SASL_INIT: "sasl-init",
    SASL_CHALLENGE: "sasl-challenge",
    SASL_RESPONSE: "sasl-response",
    SASL_OUTCOME: "sasl-outcome",
}
_SYMBOLIC_DESCRIPTORS = {f"amqp:{name}:list": code for code, name in _PERFORMATIVE_NAMES.items()}

# sasl-code values (part 5.3.3.6).
OUTCOME_OK = 0
OUTCOME_AUTH = 1
OUTCOME_SYS = 2
OUTCOME_SYS_PERM = 3
OUTCOME_SYS_TEMP = 4
_FAILURE_CODES = frozenset({OUTCOME_AUTH, OUTCOME_SYS, OUTCOME_SYS_PERM, OUTCOME_SYS_TEMP})

SUPPORTED_MECHANISMS = (EXTERNAL, PLAIN, ANONYMOUS)


class SaslError(Exception):
    """The caller used ``SaslServer`` wrongly. Never raised for anything the peer sent."""


@dataclass(frozen=True)
class CredentialsReceived:
    """The client chose a mechanism and sent credentials; the caller must answer with ``complete``.

    ``username`` and ``password`` are None for ANONYMOUS (its trace string is ignored); for EXTERNAL ``username``
    is the authorization identity the client asked for (None: none), ``password`` None.
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


Event = CredentialsReceived | SaslDone | NoSaslHeader | ProtocolViolation


class SaslState(enum.Enum):
    """Where the exchange stands; the module docstring has the transition table."""

    AWAIT_HEADER = "await-header"
    AWAIT_INIT = "await-init"
    AWAIT_VERDICT = "await-verdict"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"
    NO_SASL = "no-sasl"
    ERROR = "error"


_IGNORING_INPUT = frozenset({SaslState.FAILED, SaslState.ERROR})
_HANDING_OFF = frozenset({SaslState.AUTHENTICATED, SaslState.NO_SASL})


class _Violation(Exception):
    """A protocol violation found while parsing; ``reply`` is queued for the peer before closing."""

    def __init__(self, description: str, reply: bytes = b"") -> None:
        super().__init__(description)
        self.description = description
        self.reply = reply


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
        except _Violation as violation:
            self._fail_protocol(violation)

    def next_event(self) -> Event | None:
        """Return the next event, or None when more bytes (or a ``complete`` call) are needed."""
        if self._events:
            return self._events.popleft()
        if self._handoff_ready:
            return self._hand_off()
        return None

    def complete(self, authenticated: bool, username: str | None = None, code: int | None = None) -> None:
        """Give the verdict on the last ``CredentialsReceived`` and queue the sasl-outcome.

        Args:
            authenticated: whether the credentials were accepted.
            username: the identity to report in ``SaslDone``; defaults to the username that was received.
            code: the sasl-code for a failure (1 auth, 2 sys, 3 sys-perm, 4 sys-temp; default 1). Must be
                None or 0 on success.

        Raises:
            SaslError: no verdict is awaited, or ``code`` does not fit ``authenticated``.
        """
        if self._state is not SaslState.AWAIT_VERDICT or self._credentials is None:
            raise SaslError(f"complete() called in state {self._state.name}; expected AWAIT_VERDICT")
        outcome = _outcome_code(authenticated, code)
        self._username = self._credentials.username if username is None else username
        self._credentials = None
        if authenticated:
            self._outgoing += _outcome_frame(OUTCOME_OK)
            self._state = SaslState.AUTHENTICATED
            self._handoff_ready = True
        else:
            self._fail_auth(self._username, outcome)

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
            elif self._state is SaslState.AWAIT_INIT:
                progressed = self._read_frame()
            else:
                progressed = False

    def _read_header(self) -> bool:
        head = bytes(self._buffer[:8])
        if not b"AMQP".startswith(head[:4]):  # not AMQP at all: no need to wait for all 8 bytes
            raise _Violation(_header_problem(head), reply=SASL_HEADER)
        if len(head) < len(SASL_HEADER):
            return False
        if head == AMQP_HEADER:
            self._state = SaslState.NO_SASL
            self._handoff_ready = True
            return False
        if head != SASL_HEADER:
            raise _Violation(_header_problem(head), reply=SASL_HEADER)
        del self._buffer[:8]
        self._outgoing += SASL_HEADER + _mechanisms_frame(self._mechanisms)
        self._state = SaslState.AWAIT_INIT
        return True

    def _read_frame(self) -> bool:
        body = _take_frame(self._buffer)
        if body is None:
            return False
        if body:  # an empty body is a heartbeat (part 2.3.2), which needs no answer
            self._on_performative(*_decode_performative(body))
        return True

    def _on_performative(self, name: str, fields: list[object]) -> None:
        if name != "sasl-init":
            raise _Violation(f"expected sasl-init, got {name}")
        mechanism, response, hostname = _init_fields(fields)
        if mechanism not in self._mechanisms:
            offered = ", ".join(self._mechanisms)
            raise _Violation(
                f"client chose mechanism {mechanism[:64]!r}, which was not offered ({offered})",
                reply=_outcome_frame(OUTCOME_AUTH),
            )
        try:
            credentials = CredentialsReceived(mechanism, *identity(mechanism, response), hostname)
        except BadCredentials as bad:
            self._fail_auth(bad.username, OUTCOME_AUTH)
            return
        self._credentials = credentials
        self._state = SaslState.AWAIT_VERDICT
        self._events.append(credentials)

    # -- endings --------------------------------------------------------------------------------------------

    def _fail_protocol(self, violation: _Violation) -> None:
        self._outgoing += violation.reply
        self._buffer.clear()
        self._state = SaslState.ERROR
        self._events.append(ProtocolViolation(violation.description))

    def _fail_auth(self, username: str | None, code: int) -> None:
        self._outgoing += _outcome_frame(code)
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
    if code not in _FAILURE_CODES:
        raise SaslError(f"a failed outcome needs code 1-4, not {code!r}")
    return code


def _header_problem(head: bytes) -> str:
    if not head.startswith(b"AMQP"):
        return f"not an AMQP protocol header: {head!r}"
    if head[4] == _TLS_PROTOCOL_ID:
        return "the client asked for TLS (protocol id 2), but TLS is not enabled on this listener"
    return f"unsupported protocol header {head!r}; this server speaks AMQP 1.0 over SASL ({SASL_HEADER!r})"


# -- helpers: frames -----------------------------------------------------------------------------------------


def _take_frame(buffer: bytearray) -> bytes | None:
    """Remove one whole frame from ``buffer`` and return its body, or None if it is not all here yet."""
    if len(buffer) < 4:
        return None
    size = int.from_bytes(buffer[:4], "big")
    if size < _FRAME_HEADER.size:
        raise _Violation(f"frame size {size} is smaller than a frame header")
    if size > MAX_FRAME_SIZE:
        raise _Violation(f"SASL frame of {size} bytes is larger than the {MAX_FRAME_SIZE} byte limit")
    if len(buffer) < size:
        return None
    frame = bytes(buffer[:size])
    del buffer[:size]
    _size, doff, frame_type, _channel = _FRAME_HEADER.unpack_from(frame)
    if frame_type != _SASL_FRAME_TYPE:
        raise _Violation(f"expected a SASL frame (type 1), got frame type {frame_type}")
    if doff < _MIN_DOFF or doff * 4 > size:
        raise _Violation(f"bad data offset {doff} in a frame of {size} bytes")
    return frame[doff * 4 :]


def _frame(body: bytes) -> bytes:
    return _FRAME_HEADER.pack(_FRAME_HEADER.size + len(body), _MIN_DOFF, _SASL_FRAME_TYPE, 0) + body


def _mechanisms_frame(mechanisms: Sequence[str]) -> bytes:
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(SASL_MECHANISMS)
    data.put_list()
    data.enter()
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in mechanisms:
        data.put_symbol(name)
    data.exit()
    data.exit()
    data.exit()
    return _frame(bytes(data.encode()))


def _outcome_frame(code: int) -> bytes:
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(SASL_OUTCOME)
    data.put_list()
    data.enter()
    data.put_ubyte(code)
    data.exit()
    data.exit()
    return _frame(bytes(data.encode()))


def _decode_performative(body: bytes) -> tuple[str, list[object]]:
    """Decode a SASL frame body into (performative name, list fields).

    proton's decoder accepts every wire encoding (list0/8/32, str8/32, sym8/32, vbin8/32). Bytes after the
    performative are ignored, as proton itself does for SASL frames.
    """
    data = Data()
    try:
        data.decode(body)
    except DataException as exc:
        raise _Violation(f"undecodable SASL frame body: {exc}") from exc
    data.rewind()
    data.next()
    try:
        value = data.get_object()
    except Exception as exc:  # noqa: BLE001 - the bytes are the peer's; whatever fails to decode is its error
        # proton decodes symbols as ASCII, strings as UTF-8 and chars with chr(), and recurses per nesting level.
        raise _Violation(f"undecodable SASL frame body: {type(exc).__name__}") from exc
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise _Violation("SASL frame body is not a described list")
    # Binary values come back as memoryviews into the Data object; copy them before it goes away.
    fields: list[object] = [bytes(item) if isinstance(item, memoryview) else item for item in value.value]
    return _performative_name(value.descriptor), fields


def _performative_name(descriptor: object) -> str:
    """Name the performative whether its descriptor is a code (0x41) or a symbol (amqp:sasl-init:list)."""
    code = _SYMBOLIC_DESCRIPTORS.get(descriptor) if isinstance(descriptor, str) else descriptor
    if isinstance(code, int) and code in _PERFORMATIVE_NAMES:
        return _PERFORMATIVE_NAMES[code]
    return f"unknown performative {descriptor!r}"


def _init_fields(fields: list[object]) -> tuple[str, bytes | None, str | None]:
    """Check sasl-init's fields: mechanism (symbol, mandatory), initial-response (binary), hostname."""
    mechanism, response, hostname = (fields + [None, None, None])[:3]
    if not isinstance(mechanism, str):
        raise _Violation("sasl-init has no mechanism")
    if response is not None and not isinstance(response, bytes):
        raise _Violation("sasl-init initial-response is not binary")
    if hostname is not None and not isinstance(hostname, str):
        raise _Violation("sasl-init hostname is not a string")
    return str(mechanism), response, None if hostname is None else str(hostname)
