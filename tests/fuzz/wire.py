"""A byte-level AMQP 1.0 encoder for the fuzz cases, and the splitter that cuts a byte stream into frames.

It owns what proton's encoder refuses to write: strings and symbols are given as raw bytes (``Str``, ``Sym``),
so a text field can hold invalid UTF-8 or a non-ASCII symbol. Every other value has an explicit type wrapper, so
the width on the wire is what the case asks for. Pure: no sockets, no proton, no randomness.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
HEADER_SIZE = 8
FRAME_HEADER = struct.Struct(">IBBH")  # size, data offset (4-byte words), type, channel
AMQP_FRAME, SASL_FRAME = 0x00, 0x01


@dataclass(frozen=True)
class Str:
    """A ``string`` whose UTF-8 bytes are given as is (valid or not)."""

    raw: bytes


@dataclass(frozen=True)
class Sym:
    """A ``symbol`` whose bytes are given as is (ASCII or not)."""

    raw: bytes


@dataclass(frozen=True)
class UInt:
    value: int


@dataclass(frozen=True)
class ULong:
    value: int


@dataclass(frozen=True)
class UByte:
    value: int


@dataclass(frozen=True)
class UShort:
    value: int


@dataclass(frozen=True)
class Timestamp:
    value: int


@dataclass(frozen=True)
class Raw:
    """Bytes already encoded (a ``byte``, or anything the other wrappers cannot say)."""

    data: bytes


@dataclass(frozen=True)
class SymArray:
    """An ``array`` of symbols (capabilities, locales, outcomes)."""

    items: tuple[bytes, ...]


@dataclass(frozen=True)
class Map:
    """A ``map``; pairs keep their order (and may hold any key type, valid or not)."""

    pairs: tuple[tuple[Value, Value], ...]


@dataclass(frozen=True)
class Described:
    descriptor: Value
    value: Value


Value = (
    None
    | bool
    | bytes
    | str
    | Str
    | Sym
    | UInt
    | ULong
    | UByte
    | UShort
    | Timestamp
    | Raw
    | SymArray
    | Map
    | Described
    | list
)


def _sized(small: int, large: int, payload: bytes) -> bytes:
    if len(payload) <= 0xFF:
        return bytes([small, len(payload)]) + payload
    return bytes([large]) + struct.pack(">I", len(payload)) + payload


def _compound(small: int, large: int, count: int, body: bytes) -> bytes:
    if len(body) + 1 <= 0xFF and count <= 0xFF:
        return bytes([small, len(body) + 1, count]) + body
    return bytes([large]) + struct.pack(">II", len(body) + 4, count) + body


def _uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value <= 0xFF:
        return bytes([0x52, value])
    return b"\x70" + struct.pack(">I", value)


def _ulong(value: int) -> bytes:
    if value == 0:
        return b"\x44"
    if value <= 0xFF:
        return bytes([0x53, value])
    return b"\x80" + struct.pack(">Q", value)


def _symbols(items: tuple[bytes, ...]) -> bytes:
    wide = any(len(item) > 0xFF for item in items)
    if wide:
        body = b"".join(struct.pack(">I", len(item)) + item for item in items)
        return b"\xf0" + struct.pack(">II", len(body) + 5, len(items)) + b"\xb3" + body
    body = b"".join(bytes([len(item)]) + item for item in items)
    if len(body) + 2 <= 0xFF:
        return bytes([0xE0, len(body) + 2, len(items), 0xA3]) + body
    return b"\xf0" + struct.pack(">II", len(body) + 5, len(items)) + b"\xa3" + body


def encode(value: Value) -> bytes:
    """The AMQP encoding of ``value`` (plain ``str`` is UTF-8 encoded, plain ``bytes`` is ``binary``)."""
    if value is None:
        return b"\x40"
    if isinstance(value, bool):
        return b"\x41" if value else b"\x42"
    if isinstance(value, bytes):
        return _sized(0xA0, 0xB0, value)
    if isinstance(value, str):
        return _sized(0xA1, 0xB1, value.encode())
    return _encode_typed(value)


def _encode_typed(value: Value) -> bytes:
    if isinstance(value, Str):
        return _sized(0xA1, 0xB1, value.raw)
    if isinstance(value, Sym):
        return _sized(0xA3, 0xB3, value.raw)
    if isinstance(value, UInt):
        return _uint(value.value)
    if isinstance(value, ULong):
        return _ulong(value.value)
    if isinstance(value, UByte):
        return bytes([0x50, value.value])
    if isinstance(value, UShort):
        return b"\x60" + struct.pack(">H", value.value)
    if isinstance(value, Timestamp):
        return b"\x83" + struct.pack(">q", value.value)
    if isinstance(value, Raw):
        return value.data
    if isinstance(value, SymArray):
        return _symbols(value.items)
    if isinstance(value, Map):
        body = b"".join(encode(k) + encode(v) for k, v in value.pairs)
        return _compound(0xC1, 0xD1, 2 * len(value.pairs), body)
    if isinstance(value, Described):
        return b"\x00" + encode(value.descriptor) + encode(value.value)
    if isinstance(value, list):
        if not value:
            return b"\x45"
        return _compound(0xC0, 0xD0, len(value), b"".join(encode(item) for item in value))
    raise TypeError(f"cannot encode {value!r}")


def performative(code: int, fields: list[Value]) -> bytes:
    """``described(ulong code, list fields)`` with trailing nulls trimmed, as real clients write it."""
    while fields and fields[-1] is None:
        fields = fields[:-1]
    return encode(Described(ULong(code), list(fields)))


def frame(body: bytes, *, frame_type: int = AMQP_FRAME, channel: int = 0) -> bytes:
    return FRAME_HEADER.pack(FRAME_HEADER.size + len(body), 2, frame_type, channel) + body


def split_units(stream: bytes) -> list[bytes]:
    """Cut a client-to-server stream into protocol headers and frames, in order; a torn tail is one last unit.

    A unit starting with ``AMQP`` is an 8-byte protocol header; anything else is a frame read by its size field
    (a size under 8 makes the rest one unit, as a server could not go on past it either).
    """
    units: list[bytes] = []
    pos = 0
    while pos < len(stream):
        if stream.startswith(b"AMQP", pos):
            size = HEADER_SIZE
        elif len(stream) - pos >= 4:
            size = max(struct.unpack_from(">I", stream, pos)[0], 0)
            if size < FRAME_HEADER.size:
                size = len(stream) - pos
        else:
            size = len(stream) - pos
        units.append(stream[pos : pos + size])
        pos += size
    return units
