"""Encoding Python values (and the exact-type classes of ``codec.types``) as AMQP 1.0 bytes: ``encode_value``."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from subgate.engine.codec.decode import U32, U32X2
from subgate.engine.codec.types import (
    Byte,
    Char,
    CodecError,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

# --------------------------------------------------------------------------------------------------
# Encoding.

_Encoder = Callable[[Any], bytes]


def _packer(code: int, fmt: str, amqp_type: str) -> _Encoder:
    pack = struct.Struct(">B" + fmt).pack

    def encode(value: Any) -> bytes:
        try:
            return pack(code, value)
        except (struct.error, OverflowError):
            raise CodecError(f"{value!r} is out of range for AMQP {amqp_type}") from None

    return encode


def _compact_unsigned(zero: int, small: int, code: int, fmt: str, amqp_type: str) -> _Encoder:
    """uint/ulong: the zero-width form for 0, the one-byte form below 256, else the full width."""
    full = _packer(code, fmt, amqp_type)
    zero_bytes = bytes((zero,))

    def encode(value: Any) -> bytes:
        if value == 0:
            return zero_bytes
        if 0 < value < 256:
            return bytes((small, value))
        return full(value)

    return encode


def _compact_signed(small: int, full: _Encoder) -> _Encoder:
    """int/long: the one-byte form for -128..127, else the full width."""

    def encode(value: Any) -> bytes:
        if -128 <= value <= 127:
            return bytes((small, value & 0xFF))
        return full(value)

    return encode


def _sized(code8: int, code32: int, payload: bytes) -> bytes:
    if len(payload) < 256:
        return bytes((code8, len(payload))) + payload
    return bytes((code32,)) + U32.pack(len(payload)) + payload


def _encode_string(value: str) -> bytes:
    return _sized(0xA1, 0xB1, value.encode("utf-8"))


def encode_symbol(value: str) -> bytes:
    try:
        return _sized(0xA3, 0xB3, value.encode("ascii"))
    except UnicodeEncodeError:
        raise CodecError(f"symbol {value!r} is not ASCII") from None


def _encode_binary(value: bytes | bytearray | memoryview) -> bytes:
    return _sized(0xA0, 0xB0, bytes(value))


def _encode_char(value: str) -> bytes:
    if len(value) != 1:
        raise CodecError(f"char {value!r} is not a single code point")
    return b"\x73" + U32.pack(ord(value))


def _decimal(code: int, size: int) -> _Encoder:
    def encode(value: bytes) -> bytes:
        if len(value) != size:
            raise CodecError(f"decimal{size * 8} needs {size} bytes, got {len(value)}")
        return bytes((code,)) + bytes(value)

    return encode


def compound_head(code8: int, code32: int, count: int, size: int) -> bytes:
    """The constructor, size and count of a list/map whose elements take ``size`` bytes: the 1-byte size/count
    form when both fit, else the 4-byte form."""
    if count < 256 and size < 255:
        return bytes((code8, size + 1, count))
    return bytes((code32,)) + U32X2.pack(size + 4, count)


def compound_bytes(code8: int, code32: int, count: int, body: bytes) -> bytes:
    """Frame list/map elements (``compound_head`` then ``body``)."""
    return compound_head(code8, code32, count, len(body)) + body


def _encode_list(value: list[Any] | tuple[Any, ...]) -> bytes:
    if not value:
        return b"\x45"
    return compound_bytes(0xC0, 0xD0, len(value), b"".join(map(encode_value, value)))


def _encode_map(value: dict[Any, Any]) -> bytes:
    body = b"".join(encode_value(k) + encode_value(v) for k, v in value.items())
    return compound_bytes(0xC1, 0xD1, 2 * len(value), body)


def _encode_described(value: Described) -> bytes:
    return b"\x00" + encode_value(value.descriptor) + encode_value(value.value)


ENCODERS: dict[type, _Encoder] = {
    type(None): lambda value: b"\x40",
    bool: lambda value: b"\x41" if value else b"\x42",
    int: _compact_signed(0x55, _packer(0x81, "q", "long")),
    float: _packer(0x82, "d", "double"),
    str: _encode_string,
    bytes: _encode_binary,
    bytearray: _encode_binary,
    memoryview: _encode_binary,
    Symbol: encode_symbol,
    UByte: _packer(0x50, "B", "ubyte"),
    UShort: _packer(0x60, "H", "ushort"),
    UInt: _compact_unsigned(0x43, 0x52, 0x70, "I", "uint"),
    ULong: _compact_unsigned(0x44, 0x53, 0x80, "Q", "ulong"),
    Byte: _packer(0x51, "b", "byte"),
    Short: _packer(0x61, "h", "short"),
    Int: _compact_signed(0x54, _packer(0x71, "i", "int")),
    Timestamp: _packer(0x83, "q", "timestamp"),
    Float: _packer(0x72, "f", "float"),
    Char: _encode_char,
    Decimal32: _decimal(0x74, 4),
    Decimal64: _decimal(0x84, 8),
    Decimal128: _decimal(0x94, 16),
    uuid.UUID: lambda value: b"\x98" + value.bytes,
    list: _encode_list,
    tuple: _encode_list,
    dict: _encode_map,
    Described: _encode_described,
}


def encode_value(value: object) -> bytes:
    """Encode one Python value as AMQP.

    ``None``, ``bool``, ``int`` (as long), ``float`` (as double), ``str`` (as string), ``bytes`` (as
    binary), ``uuid.UUID``, ``list``/``tuple`` (as list), ``dict`` (as map), ``Described`` and every wrapper
    type of this module. Subclasses encode as their nearest supported base class.

    Raises:
        CodecError: the value is out of range for its AMQP type.
        TypeError: the value has no AMQP encoding here.
    """
    encoder = ENCODERS.get(type(value))
    if encoder is None:
        encoder = next((ENCODERS[c] for c in type(value).__mro__ if c in ENCODERS), None)
        if encoder is None:
            raise TypeError(f"cannot encode {type(value).__name__} as AMQP")
    return encoder(value)
