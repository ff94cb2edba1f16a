"""AMQP 1.0 on the byte level: performative and section codes, the field names of each performative and terminus,
encoding and decoding of values and whole frames (``WireFrame``), cutting a byte stream into frames (``_Splitter``)
and the list helpers that make proton-c's field lists look like proton-j's. No socket, no state: everything here is
a pure function of its arguments, and every other module of the package builds on it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proton import UNDESCRIBED, Array, Data, Described, symbol, ulong

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
HEADER_SIZE = 8
_FRAME = struct.Struct(">IBBH")  # size, doff, type, channel
AMQP_FRAME, SASL_FRAME = 0x00, 0x01
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_OUTCOME = 0x40, 0x41, 0x42, 0x44
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x24, 0x25, 0x26, 0x27
SOURCE, TARGET, DELETE_ON_CLOSE = 0x28, 0x29, 0x2B
COORDINATOR, DECLARE, DISCHARGE, DECLARED, TRANSACTIONAL_STATE = 0x30, 0x31, 0x32, 0x33, 0x34
HEADER, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = 0x70, 0x72, 0x73, 0x74
DATA, AMQP_SEQUENCE, AMQP_VALUE = 0x75, 0x76, 0x77

FIELDS: dict[int, tuple[str, ...]] = {
    OPEN: ("container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out", "outgoing-locales",
           "incoming-locales", "offered-capabilities", "desired-capabilities", "properties"),
    BEGIN: ("remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max",
            "offered-capabilities", "desired-capabilities", "properties"),
    ATTACH: ("name", "handle", "role", "snd-settle-mode", "rcv-settle-mode", "source", "target", "unsettled",
             "incomplete-unsettled", "initial-delivery-count", "max-message-size", "offered-capabilities",
             "desired-capabilities", "properties"),
    FLOW: ("next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle", "delivery-count",
           "link-credit", "available", "drain", "echo", "properties"),
    TRANSFER: ("handle", "delivery-id", "delivery-tag", "message-format", "settled", "more", "rcv-settle-mode",
               "state", "resume", "aborted", "batchable"),
    DISPOSITION: ("role", "first", "last", "settled", "state", "batchable"),
    DETACH: ("handle", "closed", "error"),
    END: ("error",),
    CLOSE: ("error",),
    SASL_MECHANISMS: ("sasl-server-mechanisms",),
    SASL_INIT: ("mechanism", "initial-response", "hostname"),
    SASL_OUTCOME: ("code", "additional-data"),
}  # fmt: skip
TERMINUS_FIELDS: dict[int, tuple[str, ...]] = {
    SOURCE: ("address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties",
             "distribution-mode", "filter", "default-outcome", "outcomes", "capabilities"),
    TARGET: ("address", "durable", "expiry-policy", "timeout", "dynamic", "dynamic-node-properties", "capabilities"),
    COORDINATOR: ("capabilities",),
}  # fmt: skip
_TERMINUS_DEFAULTS: dict[int, tuple[Any, ...]] = {
    SOURCE: (None, 0, None, 0, False, None, None, None, None, None, None),
    TARGET: (None, 0, None, 0, False, None, None),
    COORDINATOR: (None,),
}
_NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer", DISPOSITION: "disposition",
    DETACH: "detach", END: "end", CLOSE: "close", SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init",
    SASL_CHALLENGE: "sasl-challenge", SASL_OUTCOME: "sasl-outcome",
}  # fmt: skip


def _plain(value: Any) -> Any:
    """Copy decoded values out of proton's buffers (binary values come back as memoryviews that dangle)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Described):
        return Described(value.descriptor, _plain(value.value))
    if isinstance(value, Array):
        return Array(value.descriptor, value.type, *[_plain(v) for v in value.elements])
    return value


def _decode(raw: bytes) -> tuple[Any, int]:
    """The first encoded value in ``raw`` (copied out of proton's buffers) and how many bytes it took."""
    data = Data()
    consumed = data.decode(raw)
    data.rewind()
    data.next()
    return _plain(data.get_object()), consumed


def _encode(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def described_list(code: int, fields: list[Any]) -> Described:
    return Described(ulong(code), fields)


def symbols(*names: str) -> Array:
    return Array(UNDESCRIBED, Data.SYMBOL, *[symbol(n) for n in names])


@dataclass(frozen=True)
class WireFrame:
    """One frame as it crossed the socket (after this client's rewriting). ``code`` is None for a heartbeat."""

    sent: bool
    frame_type: int
    channel: int
    code: int | None
    fields: list[Any]
    payload: bytes = b""

    @property
    def name(self) -> str:
        if self.code is None:
            return "empty"
        return _NAMES.get(self.code, hex(self.code))

    def __getitem__(self, name: str) -> Any:
        index = FIELDS[self.code or 0].index(name)
        return self.fields[index] if index < len(self.fields) else None

    def terminus(self, name: str) -> dict[str, Any] | None:
        """The named source/target of an attach as a dict of its fields (None for a null terminus)."""
        return terminus_fields(self[name])

    def __repr__(self) -> str:
        arrow = "C->B" if self.sent else "B->C"
        return f"{arrow} ch{self.channel} {self.name}{self.fields}"


def symbol_names(value: Any) -> set[str]:
    """The names in a multiple-symbol field: an array of symbols, a single symbol, or null (no names)."""
    return {str(s) for s in (value.elements if isinstance(value, Array) else [value] if value else [])}


def terminus_fields(value: Any) -> dict[str, Any] | None:
    """source/target/coordinator ``Described`` -> {field name: value}; absent fields are None."""
    if value is None:
        return None
    names = TERMINUS_FIELDS[int(value.descriptor)]
    values = list(value.value) + [None] * len(names)
    return {"type": int(value.descriptor), **dict(zip(names, values, strict=False))}


def _frame_bytes(frame_type: int, channel: int, body: bytes) -> bytes:
    return _FRAME.pack(_FRAME.size + len(body), 2, frame_type, channel) + body


def _decode_frame(sent: bool, raw: bytes) -> WireFrame:
    _size, doff, frame_type, channel = _FRAME.unpack_from(raw)
    body = raw[doff * 4 :]
    if not body:
        return WireFrame(sent, frame_type, channel, None, [])
    value, consumed = _decode(body)
    return WireFrame(sent, frame_type, channel, int(value.descriptor), list(value.value), bytes(body[consumed:]))


class _Splitter:
    """Cuts one direction of the byte stream into the protocol header and whole frames."""

    def __init__(self, header: bool) -> None:
        self._buffer = b""
        self._header = header

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        chunks: list[bytes] = []
        if self._header:
            if len(self._buffer) < HEADER_SIZE:
                return chunks
            chunks.append(self._buffer[:HEADER_SIZE])
            self._buffer, self._header = self._buffer[HEADER_SIZE:], False
        while len(self._buffer) >= _FRAME.size:
            size = _FRAME.unpack_from(self._buffer)[0]
            if len(self._buffer) < size:
                break
            chunks.append(self._buffer[:size])
            self._buffer = self._buffer[size:]
        return chunks


def _is_default(value: Any, default: Any) -> bool:
    if value is None:
        return True
    return default is not None and isinstance(value, bool) == isinstance(default, bool) and value == default


def _trim(values: list[Any], defaults: tuple[Any, ...] = ()) -> list[Any]:
    """Drop trailing fields that are null or equal to their default, as proton-j encodes lists."""
    values = list(values)
    while values and _is_default(values[-1], defaults[len(values) - 1] if len(values) <= len(defaults) else None):
        values.pop()
    return values


def _set(values: list[Any], index: int, value: Any) -> list[Any]:
    values = list(values) + [None] * max(0, index + 1 - len(values))
    values[index] = value
    return values


def _put_symbols(data: Data, names: Iterable[str]) -> None:
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in names:
        data.put_symbol(symbol(name))
    data.exit()
