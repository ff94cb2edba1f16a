"""Decoding AMQP 1.0 values from bytes: a reader per format code, bounds-checked, and ``decode_value``.

Every reader has the shape ``read(buf, pos, end) -> (value, next)``; malformed input raises ``CodecError``
with an offset. ``read_value`` reads any value, ``skip`` steps over one by its size prefix without decoding it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Any

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
# Decoding. A reader takes (buf, pos just past the format code, end of the enclosing value).

_Reader = Callable[[bytes, int, int], tuple[Any, int]]

U32 = struct.Struct(">I")
U32X2 = struct.Struct(">II")


def truncated(what: str, pos: int) -> CodecError:
    return CodecError(f"truncated {what} at offset {pos}")


def _constant(value: object) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[object, int]:
        return value, pos

    return read


def _read_list0(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
    return [], pos


def _one_byte(values: tuple[object, ...], what: str) -> _Reader:
    """One-octet values come from a table of 256 prebuilt objects, indexed by the octet."""

    def read(buf: bytes, pos: int, end: int) -> tuple[object, int]:
        if pos >= end:
            raise truncated(what, pos)
        return values[buf[pos]], pos + 1

    return read


def _octets(wrap: Callable[[int], object], signed: bool) -> tuple[object, ...]:
    return tuple(wrap(o - 256 if signed and o > 127 else o) for o in range(256))


def _fixed(fmt: str, wrap: Callable[[Any], object], what: str) -> _Reader:
    unpack_from = struct.Struct(fmt).unpack_from
    size = struct.calcsize(fmt)

    def read(buf: bytes, pos: int, end: int) -> tuple[object, int]:
        nxt = pos + size
        if nxt > end:
            raise truncated(what, pos)
        return wrap(unpack_from(buf, pos)[0]), nxt

    return read


def _raw_bytes(size: int, wrap: Callable[[bytes], object], what: str) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[object, int]:
        nxt = pos + size
        if nxt > end:
            raise truncated(what, pos)
        return wrap(buf[pos:nxt]), nxt

    return read


def _read_boolean(buf: bytes, pos: int, end: int) -> tuple[bool, int]:
    if pos >= end:
        raise truncated("boolean", pos)
    octet = buf[pos]
    if octet > 1:
        raise CodecError(f"boolean octet 0x{octet:02x} at offset {pos} is neither 0 nor 1")
    return octet == 1, pos + 1


def _read_char(buf: bytes, pos: int, end: int) -> tuple[Char, int]:
    if pos + 4 > end:
        raise truncated("char", pos)
    point = U32.unpack_from(buf, pos)[0]
    if point > 0x10FFFF:
        raise CodecError(f"char 0x{point:x} at offset {pos} is not a Unicode code point")
    return Char(chr(point)), pos + 4


def _read_uuid(buf: bytes, pos: int, end: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > end:
        raise truncated("uuid", pos)
    return uuid.UUID(bytes=buf[pos : pos + 16]), pos + 16


def _span32(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a 4-byte size prefix at ``pos``; return the (start, stop) of the bytes it counts."""
    if pos + 4 > end:
        raise truncated(f"{what} size", pos)
    start = pos + 4
    stop = start + U32.unpack_from(buf, pos)[0]
    if stop > end:
        raise truncated(what, pos)
    return start, stop


def _utf8(chunk: bytes, pos: int, kind: str) -> str:
    try:
        return str(chunk, "utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"{kind} at offset {pos} is not valid UTF-8: {exc.reason}") from None


_SYMBOLS: dict[bytes, Symbol] = {}  # symbols are a small vocabulary: decode each spelling once
_SYMBOLS_MAX = 4096


def _new_symbol(chunk: bytes, pos: int) -> Symbol:
    symbol = Symbol(_utf8(chunk, pos, "symbol"))
    if len(_SYMBOLS) >= _SYMBOLS_MAX:
        _SYMBOLS.clear()
    _SYMBOLS[chunk] = symbol
    return symbol


def _read_vbin8(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    if pos >= end:
        raise truncated("binary size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise truncated("binary", pos)
    return buf[pos + 1 : stop], stop


def _read_str8(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos >= end:
        raise truncated("string size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise truncated("string", pos)
    return _utf8(buf[pos + 1 : stop], pos, "string"), stop


def _read_sym8(buf: bytes, pos: int, end: int) -> tuple[Symbol, int]:
    if pos >= end:
        raise truncated("symbol size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise truncated("symbol", pos)
    chunk = buf[pos + 1 : stop]
    return _SYMBOLS.get(chunk) or _new_symbol(chunk, pos), stop


def _read_vbin32(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    start, stop = _span32(buf, pos, end, "binary")
    return buf[start:stop], stop


def _read_str32(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    start, stop = _span32(buf, pos, end, "string")
    return _utf8(buf[start:stop], pos, "string"), stop


def _read_sym32(buf: bytes, pos: int, end: int) -> tuple[Symbol, int]:
    start, stop = _span32(buf, pos, end, "symbol")
    chunk = buf[start:stop]
    return _SYMBOLS.get(chunk) or _new_symbol(chunk, pos), stop


def compound(buf: bytes, pos: int, end: int, width: int, what: str, dense: bool = True) -> tuple[int, int, int]:
    """Read the size and count of a list, map or array; return (count, first element, stop)."""
    if width == 1:
        if pos + 2 > end:
            raise truncated(f"{what} header", pos)
        size, count = buf[pos], buf[pos + 1]
        first = pos + 2
    else:
        if pos + 8 > end:
            raise truncated(f"{what} header", pos)
        size, count = U32X2.unpack_from(buf, pos)
        first = pos + 8
    stop = pos + width + size
    if size < width or stop > end:
        raise CodecError(f"{what} size {size} at offset {pos} does not fit its container")
    # Bound the work a hostile count can cause: list and map elements take at least one byte each.
    # Array elements share one constructor and may take none (proton encodes arrays of null that
    # way), so an array may not hold more elements than the whole buffer has bytes.
    if count > (stop - first if dense else len(buf)):
        raise CodecError(f"{what} count {count} at offset {pos} exceeds its {stop - first} bytes")
    return count, first, stop


def elements(buf: bytes, pos: int, end: int, width: int, what: str) -> tuple[list[Any], int]:
    """Read the body of a list or map (``pos`` just past its format code) as a list of its elements."""
    count, p, stop = compound(buf, pos, end, width, what)
    out: list[Any] = []
    append = out.append
    readers = READERS
    for _ in range(count):
        if p >= stop:
            raise truncated(f"{what} element", p)
        code = buf[p]
        if code == 0x40:  # null: the most common element of composite lists such as properties
            append(None)
            p += 1
        elif code == 0xA1:  # str8, inlined: ids and addresses in properties, keys of application-properties
            start = p + 2
            if start > stop:
                raise truncated("string size", p + 1)
            p = start + buf[start - 1]
            if p > stop:
                raise truncated("string", start - 1)
            append(_utf8(buf[start:p], start - 2, "string"))
        else:
            value, p = readers[code](buf, p + 1, stop)
            append(value)
    if p != stop:
        raise leftover(what, pos, stop - p)
    return out, stop


def leftover(what: str, pos: int, left: int) -> CodecError:
    return CodecError(f"{what} at offset {pos} has {left} bytes left after its elements")


def _list(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
        return elements(buf, pos, end, width, "list")

    return read


def pairs(items: list[Any], pos: int, what: str) -> Iterable[tuple[Any, Any]]:
    if len(items) & 1:
        raise CodecError(f"{what} at offset {pos} has an odd element count {len(items)}")
    pairs = iter(items)
    return zip(pairs, pairs, strict=True)


def _map(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[dict[Any, Any], int]:
        items, stop = elements(buf, pos, end, width, "map")
        try:
            return dict(pairs(items, pos, "map")), stop
        except TypeError:
            raise CodecError(f"map at offset {pos} has a key Python cannot hash") from None

    return read


def _array(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
        count, p, stop = compound(buf, pos, end, width, "array", dense=False)
        descriptors = []
        while True:  # constructor = format-code / %x00 descriptor constructor
            if p >= stop:
                raise truncated("array constructor", p)
            code = buf[p]
            p += 1
            if code != 0x00:
                break
            descriptor, p = read_value(buf, p, stop)
            descriptors.append(descriptor)
        reader = READERS[code]
        items = []
        for _ in range(count):
            value, p = reader(buf, p, stop)
            for descriptor in reversed(descriptors):
                value = Described(descriptor, value)
            items.append(value)
        if p != stop:
            raise leftover("array", pos, stop - p)
        return items, stop

    return read


def _read_described(buf: bytes, pos: int, end: int) -> tuple[Described, int]:
    descriptor, pos = read_value(buf, pos, end)
    value, pos = read_value(buf, pos, end)
    return Described(descriptor, value), pos


def read_value(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    """Read one self-describing value (format code included) at ``pos``."""
    if pos >= end:
        raise truncated("value", pos)
    return READERS[buf[pos]](buf, pos + 1, end)


def _bad_code(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    raise CodecError(f"unknown format code 0x{buf[pos - 1]:02x} at offset {pos - 1}")


_READER_TABLE: dict[int, _Reader] = {
    0x00: _read_described,
    0x40: _constant(None),
    0x41: _constant(True),
    0x42: _constant(False),
    0x43: _constant(UInt(0)),
    0x44: _constant(ULong(0)),
    0x45: _read_list0,
    0x50: _one_byte(_octets(UByte, False), "ubyte"),
    0x51: _one_byte(_octets(Byte, True), "byte"),
    0x52: _one_byte(_octets(UInt, False), "smalluint"),
    0x53: _one_byte(_octets(ULong, False), "smallulong"),
    0x54: _one_byte(_octets(Int, True), "smallint"),
    0x55: _one_byte(_octets(int, True), "smalllong"),
    0x56: _read_boolean,
    0x60: _fixed(">H", UShort, "ushort"),
    0x61: _fixed(">h", Short, "short"),
    0x70: _fixed(">I", UInt, "uint"),
    0x71: _fixed(">i", Int, "int"),
    0x72: _fixed(">f", Float, "float"),
    0x73: _read_char,
    0x74: _raw_bytes(4, Decimal32, "decimal32"),
    0x80: _fixed(">Q", ULong, "ulong"),
    0x81: _fixed(">q", int, "long"),
    0x82: _fixed(">d", float, "double"),
    0x83: _fixed(">q", Timestamp, "timestamp"),
    0x84: _raw_bytes(8, Decimal64, "decimal64"),
    0x94: _raw_bytes(16, Decimal128, "decimal128"),
    0x98: _read_uuid,
    0xA0: _read_vbin8,
    0xA1: _read_str8,
    0xA3: _read_sym8,
    0xB0: _read_vbin32,
    0xB1: _read_str32,
    0xB3: _read_sym32,
    0xC0: _list(1),
    0xC1: _map(1),
    0xD0: _list(4),
    0xD1: _map(4),
    0xE0: _array(1),
    0xF0: _array(4),
}
READERS: tuple[_Reader, ...] = tuple(_READER_TABLE.get(code, _bad_code) for code in range(256))

# How to step over a value without decoding it: fixed width >= 0, or one of these kinds.
_SIZE8, _SIZE32, _DESCRIBED, _INVALID = -1, -4, -8, -9
_WIDTH_TABLE = {0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0, 0x00: _DESCRIBED}
_WIDTH_TABLE.update(dict.fromkeys((0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56), 1))
_WIDTH_TABLE.update(dict.fromkeys((0x60, 0x61), 2))
_WIDTH_TABLE.update(dict.fromkeys((0x70, 0x71, 0x72, 0x73, 0x74), 4))
_WIDTH_TABLE.update(dict.fromkeys((0x80, 0x81, 0x82, 0x83, 0x84), 8))
_WIDTH_TABLE.update(dict.fromkeys((0x94, 0x98), 16))
_WIDTH_TABLE.update(dict.fromkeys((0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0), _SIZE8))
_WIDTH_TABLE.update(dict.fromkeys((0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0), _SIZE32))
_WIDTHS: tuple[int, ...] = tuple(_WIDTH_TABLE.get(code, _INVALID) for code in range(256))


def skip(buf: bytes, pos: int, end: int) -> int:
    """Return the position just past the value at ``pos``, using only its format code and size prefix."""
    if pos >= end:
        raise truncated("value", pos)
    code = buf[pos]
    width = _WIDTHS[code]
    if width >= 0:
        nxt = pos + 1 + width
    elif width == _SIZE8:
        if pos + 2 > end:
            raise truncated("size", pos + 1)
        nxt = pos + 2 + buf[pos + 1]
    elif width == _SIZE32:
        if pos + 5 > end:
            raise truncated("size", pos + 1)
        nxt = pos + 5 + U32.unpack_from(buf, pos + 1)[0]
    elif width == _DESCRIBED:
        return skip(buf, skip(buf, pos + 1, end), end)
    else:
        raise CodecError(f"unknown format code 0x{code:02x} at offset {pos}")
    if nxt > end:
        raise truncated("value", pos)
    return nxt


def decode_value(buf: bytes, offset: int = 0) -> tuple[object, int]:
    """Decode the AMQP value whose format code is at ``buf[offset]``.

    Args:
        buf: encoded bytes (``bytes`` or ``bytearray``).
        offset: where the value starts.

    Returns:
        ``(value, next_offset)``: the decoded value and the offset just past it.

    Raises:
        CodecError: the bytes are not a complete, well-formed AMQP value.
    """
    if offset < 0:
        raise CodecError(f"negative offset {offset}")
    try:
        return read_value(buf if type(buf) is bytes else bytes(buf), offset, len(buf))
    except RecursionError:
        raise CodecError(f"value at offset {offset} is nested too deeply") from None
