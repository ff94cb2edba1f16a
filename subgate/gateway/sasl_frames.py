"""The bytes of the AMQP 1.0 SASL layer (part 5.3): protocol headers, frames, and the performatives a SASL server
reads and writes (sasl-mechanisms, sasl-init, sasl-challenge, sasl-response, sasl-outcome).

Owns framing and decoding only; ``gateway.sasl`` owns the exchange. Whatever the peer's bytes get wrong raises
``Violation`` (its ``reply``, if any, is queued for the peer before the socket is closed).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from proton import Data, DataException, Described

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
TLS_PROTOCOL_ID = 2

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
FAILURE_CODES = frozenset({OUTCOME_AUTH, OUTCOME_SYS, OUTCOME_SYS_PERM, OUTCOME_SYS_TEMP})


class Violation(Exception):
    """A protocol violation found while parsing; ``reply`` is queued for the peer before closing."""

    def __init__(self, description: str, reply: bytes = b"") -> None:
        super().__init__(description)
        self.description = description
        self.reply = reply


def take_frame(buffer: bytearray) -> bytes | None:
    """Remove one whole frame from ``buffer`` and return its body, or None if it is not all here yet."""
    if len(buffer) < 4:
        return None
    size = int.from_bytes(buffer[:4], "big")
    if size < _FRAME_HEADER.size:
        raise Violation(f"frame size {size} is smaller than a frame header")
    if size > MAX_FRAME_SIZE:
        raise Violation(f"SASL frame of {size} bytes is larger than the {MAX_FRAME_SIZE} byte limit")
    if len(buffer) < size:
        return None
    frame = bytes(buffer[:size])
    del buffer[:size]
    _size, doff, frame_type, _channel = _FRAME_HEADER.unpack_from(frame)
    if frame_type != _SASL_FRAME_TYPE:
        raise Violation(f"expected a SASL frame (type 1), got frame type {frame_type}")
    if doff < _MIN_DOFF or doff * 4 > size:
        raise Violation(f"bad data offset {doff} in a frame of {size} bytes")
    return frame[doff * 4 :]


def _frame(body: bytes) -> bytes:
    return _FRAME_HEADER.pack(_FRAME_HEADER.size + len(body), _MIN_DOFF, _SASL_FRAME_TYPE, 0) + body


def mechanisms_frame(mechanisms: Sequence[str]) -> bytes:
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


def outcome_frame(code: int, additional_data: bytes | None = None) -> bytes:
    """sasl-outcome with ``code``, and ``additional-data`` when given (SCRAM's server-final message)."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(SASL_OUTCOME)
    data.put_list()
    data.enter()
    data.put_ubyte(code)
    if additional_data is not None:
        data.put_binary(additional_data)
    data.exit()
    data.exit()
    return _frame(bytes(data.encode()))


def challenge_frame(challenge: bytes) -> bytes:
    """sasl-challenge carrying ``challenge`` (mandatory binary)."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(SASL_CHALLENGE)
    data.put_list()
    data.enter()
    data.put_binary(challenge)
    data.exit()
    data.exit()
    return _frame(bytes(data.encode()))


def decode_performative(body: bytes) -> tuple[str, list[object]]:
    """Decode a SASL frame body into (performative name, list fields).

    proton's decoder accepts every wire encoding (list0/8/32, str8/32, sym8/32, vbin8/32). Bytes after the
    performative are ignored, as proton itself does for SASL frames.
    """
    data = Data()
    try:
        data.decode(body)
    except DataException as exc:
        raise Violation(f"undecodable SASL frame body: {exc}") from exc
    data.rewind()
    data.next()
    try:
        value = data.get_object()
    except Exception as exc:  # noqa: BLE001 - the bytes are the peer's; whatever fails to decode is its error
        # proton decodes symbols as ASCII, strings as UTF-8 and chars with chr(), and recurses per nesting level.
        raise Violation(f"undecodable SASL frame body: {type(exc).__name__}") from exc
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise Violation("SASL frame body is not a described list")
    # Binary values come back as memoryviews into the Data object; copy them before it goes away.
    fields: list[object] = [bytes(item) if isinstance(item, memoryview) else item for item in value.value]
    return _performative_name(value.descriptor), fields


def _performative_name(descriptor: object) -> str:
    """Name the performative whether its descriptor is a code (0x41) or a symbol (amqp:sasl-init:list)."""
    code = _SYMBOLIC_DESCRIPTORS.get(descriptor) if isinstance(descriptor, str) else descriptor
    if isinstance(code, int) and code in _PERFORMATIVE_NAMES:
        return _PERFORMATIVE_NAMES[code]
    return f"unknown performative {descriptor!r}"


def init_fields(fields: list[object]) -> tuple[str, bytes | None, str | None]:
    """Check sasl-init's fields: mechanism (symbol, mandatory), initial-response (binary), hostname."""
    mechanism, response, hostname = (fields + [None, None, None])[:3]
    if not isinstance(mechanism, str):
        raise Violation("sasl-init has no mechanism")
    if response is not None and not isinstance(response, bytes):
        raise Violation("sasl-init initial-response is not binary")
    if hostname is not None and not isinstance(hostname, str):
        raise Violation("sasl-init hostname is not a string")
    return str(mechanism), response, None if hostname is None else str(hostname)


def response_field(fields: list[object]) -> bytes:
    """Check sasl-response's one field: response (binary, mandatory)."""
    response = fields[0] if fields else None
    if not isinstance(response, bytes):
        raise Violation("sasl-response has no binary response")
    return response
