"""AMQP 1.0 message bytes: read what the broker routes on, rewrite header and annotations in place.

This module owns the AMQP 1.0 type system as bytes (AMQP 1.0 part 1, "Types") and the section layout of a
message (part 3, section 3.2). It knows nothing about links, deliveries or proton and imports only the
standard library: the broker forwards every message as the bytes it received and never decodes and
re-encodes a whole message.

Theory of operation
-------------------
* ``scan`` walks the sections once. It decodes the header, the message-annotations and the properties,
  and only records the spans of delivery-annotations, application-properties, body sections and footer,
  skipping each with its size prefix (O(1) per section). The result is one small ``Envelope``.
* ``with_delivery_count`` and ``with_annotations`` build the few new bytes and splice them between
  unchanged slices of the original; existing annotation entries are copied byte for byte.
* ``decode_value`` reads any AMQP value. Every reader has the shape ``read(buf, pos, end) -> (value, next)``
  where ``pos`` is just past the format code and ``end`` bounds the enclosing value, so a value can never
  run past its container. Readers check bounds themselves: malformed or truncated input raises
  ``CodecError`` with an offset, never ``IndexError`` or ``struct.error``.
* Exact AMQP types that matter when a value is encoded again (symbol, ulong, byte, timestamp, ...) decode
  to the small wrapper classes below, which are ``int``/``str``/``float``/``bytes`` subclasses and compare
  equal to plain values. ``long`` decodes to ``int``, ``double`` to ``float``, ``string`` to ``str``,
  ``binary`` to ``bytes``, ``uuid`` to ``uuid.UUID``, lists and arrays to ``list``, maps to ``dict``;
  decimals stay as their raw bytes. Symbols are read as UTF-8 (a superset of the ASCII the spec asks
  for) but only ASCII symbols are written.
* Work a hostile peer can cause is bounded by the input size: a list or map may not count more elements
  than it has bytes, and an array (whose elements may take no bytes, as proton's arrays of null do) not
  more than the whole buffer has bytes. Nesting too deep for Python's stack is a ``CodecError``.
* Two bounded caches, emptied when full, keep repeated work off the hot path: the ``Symbol`` for each
  symbol spelling seen, and the decoded header for each header encoding (there are few distinct ones).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Byte",
    "Char",
    "CodecError",
    "Decimal128",
    "Decimal32",
    "Decimal64",
    "Described",
    "Envelope",
    "Float",
    "Int",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "application_properties",
    "decode_value",
    "encode_value",
    "scan",
    "with_annotations",
    "with_delivery_count",
]


class CodecError(ValueError):
    """Malformed or truncated AMQP bytes (the message says what and at which offset), or a value that
    has no AMQP encoding in its declared type (out of range)."""


# --------------------------------------------------------------------------------------------------
# Wrapper types: a Python value that remembers its exact AMQP type.


class _ExactInt(int):
    """Base of the integer wrappers. ``str()`` gives the plain number, ``repr()`` names the type."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int.__repr__(self)})"

    __str__ = int.__repr__


class UByte(_ExactInt):
    """AMQP ubyte (0..255)."""

    __slots__ = ()


class UShort(_ExactInt):
    """AMQP ushort (0..65535)."""

    __slots__ = ()


class UInt(_ExactInt):
    """AMQP uint (0..2**32-1)."""

    __slots__ = ()


class ULong(_ExactInt):
    """AMQP ulong (0..2**64-1)."""

    __slots__ = ()


class Byte(_ExactInt):
    """AMQP byte (-128..127)."""

    __slots__ = ()


class Short(_ExactInt):
    """AMQP short (-32768..32767)."""

    __slots__ = ()


class Int(_ExactInt):
    """AMQP int (32-bit signed)."""

    __slots__ = ()


class Timestamp(_ExactInt):
    """AMQP timestamp: milliseconds since the Unix epoch (64-bit signed)."""

    __slots__ = ()


class Symbol(str):
    """AMQP symbol (ASCII)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """AMQP char: one Unicode code point."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Char({str.__repr__(self)})"


class Float(float):
    """AMQP float (IEEE 754 binary32); a plain ``float`` encodes as double."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float.__repr__(self)})"


class Decimal32(bytes):
    """AMQP decimal32, kept as its 4 raw IEEE 754 bytes."""

    __slots__ = ()


class Decimal64(bytes):
    """AMQP decimal64, kept as its 8 raw IEEE 754 bytes."""

    __slots__ = ()


class Decimal128(bytes):
    """AMQP decimal128, kept as its 16 raw IEEE 754 bytes."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Described:
    """A described value: ``descriptor`` (usually a Symbol or ULong) and the value it describes."""

    descriptor: object
    value: object


# --------------------------------------------------------------------------------------------------
# Decoding. A reader takes (buf, pos just past the format code, end of the enclosing value).

_Reader = Callable[[bytes, int, int], tuple[Any, int]]

_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")


def _truncated(what: str, pos: int) -> CodecError:
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
            raise _truncated(what, pos)
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
            raise _truncated(what, pos)
        return wrap(unpack_from(buf, pos)[0]), nxt

    return read


def _raw_bytes(size: int, wrap: Callable[[bytes], object], what: str) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[object, int]:
        nxt = pos + size
        if nxt > end:
            raise _truncated(what, pos)
        return wrap(buf[pos:nxt]), nxt

    return read


def _read_boolean(buf: bytes, pos: int, end: int) -> tuple[bool, int]:
    if pos >= end:
        raise _truncated("boolean", pos)
    octet = buf[pos]
    if octet > 1:
        raise CodecError(f"boolean octet 0x{octet:02x} at offset {pos} is neither 0 nor 1")
    return octet == 1, pos + 1


def _read_char(buf: bytes, pos: int, end: int) -> tuple[Char, int]:
    if pos + 4 > end:
        raise _truncated("char", pos)
    point = _U32.unpack_from(buf, pos)[0]
    if point > 0x10FFFF:
        raise CodecError(f"char 0x{point:x} at offset {pos} is not a Unicode code point")
    return Char(chr(point)), pos + 4


def _read_uuid(buf: bytes, pos: int, end: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > end:
        raise _truncated("uuid", pos)
    return uuid.UUID(bytes=buf[pos : pos + 16]), pos + 16


def _span32(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Read a 4-byte size prefix at ``pos``; return the (start, stop) of the bytes it counts."""
    if pos + 4 > end:
        raise _truncated(f"{what} size", pos)
    start = pos + 4
    stop = start + _U32.unpack_from(buf, pos)[0]
    if stop > end:
        raise _truncated(what, pos)
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
        raise _truncated("binary size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise _truncated("binary", pos)
    return buf[pos + 1 : stop], stop


def _read_str8(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    if pos >= end:
        raise _truncated("string size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise _truncated("string", pos)
    return _utf8(buf[pos + 1 : stop], pos, "string"), stop


def _read_sym8(buf: bytes, pos: int, end: int) -> tuple[Symbol, int]:
    if pos >= end:
        raise _truncated("symbol size", pos)
    stop = pos + 1 + buf[pos]
    if stop > end:
        raise _truncated("symbol", pos)
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


def _compound(buf: bytes, pos: int, end: int, width: int, what: str, dense: bool = True) -> tuple[int, int, int]:
    """Read the size and count of a list, map or array; return (count, first element, stop)."""
    if width == 1:
        if pos + 2 > end:
            raise _truncated(f"{what} header", pos)
        size, count = buf[pos], buf[pos + 1]
        first = pos + 2
    else:
        if pos + 8 > end:
            raise _truncated(f"{what} header", pos)
        size, count = _U32X2.unpack_from(buf, pos)
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


def _elements(buf: bytes, pos: int, end: int, width: int, what: str) -> tuple[list[Any], int]:
    """Read the body of a list or map (``pos`` just past its format code) as a list of its elements."""
    count, p, stop = _compound(buf, pos, end, width, what)
    out: list[Any] = []
    append = out.append
    readers = _READERS
    for _ in range(count):
        if p >= stop:
            raise _truncated(f"{what} element", p)
        code = buf[p]
        if code == 0x40:  # null: the most common element of composite lists such as properties
            append(None)
            p += 1
        elif code == 0xA1:  # str8, inlined: ids and addresses in properties, keys of application-properties
            start = p + 2
            if start > stop:
                raise _truncated("string size", p + 1)
            p = start + buf[start - 1]
            if p > stop:
                raise _truncated("string", start - 1)
            append(_utf8(buf[start:p], start - 2, "string"))
        else:
            value, p = readers[code](buf, p + 1, stop)
            append(value)
    if p != stop:
        raise _leftover(what, pos, stop - p)
    return out, stop


def _leftover(what: str, pos: int, left: int) -> CodecError:
    return CodecError(f"{what} at offset {pos} has {left} bytes left after its elements")


def _list(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
        return _elements(buf, pos, end, width, "list")

    return read


def _pairs(items: list[Any], pos: int, what: str) -> Iterable[tuple[Any, Any]]:
    if len(items) & 1:
        raise CodecError(f"{what} at offset {pos} has an odd element count {len(items)}")
    pairs = iter(items)
    return zip(pairs, pairs, strict=True)


def _map(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[dict[Any, Any], int]:
        items, stop = _elements(buf, pos, end, width, "map")
        try:
            return dict(_pairs(items, pos, "map")), stop
        except TypeError:
            raise CodecError(f"map at offset {pos} has a key Python cannot hash") from None

    return read


def _array(width: int) -> _Reader:
    def read(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
        count, p, stop = _compound(buf, pos, end, width, "array", dense=False)
        descriptors = []
        while True:  # constructor = format-code / %x00 descriptor constructor
            if p >= stop:
                raise _truncated("array constructor", p)
            code = buf[p]
            p += 1
            if code != 0x00:
                break
            descriptor, p = _read(buf, p, stop)
            descriptors.append(descriptor)
        reader = _READERS[code]
        items = []
        for _ in range(count):
            value, p = reader(buf, p, stop)
            for descriptor in reversed(descriptors):
                value = Described(descriptor, value)
            items.append(value)
        if p != stop:
            raise _leftover("array", pos, stop - p)
        return items, stop

    return read


def _read_described(buf: bytes, pos: int, end: int) -> tuple[Described, int]:
    descriptor, pos = _read(buf, pos, end)
    value, pos = _read(buf, pos, end)
    return Described(descriptor, value), pos


def _read(buf: bytes, pos: int, end: int) -> tuple[Any, int]:
    """Read one self-describing value (format code included) at ``pos``."""
    if pos >= end:
        raise _truncated("value", pos)
    return _READERS[buf[pos]](buf, pos + 1, end)


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
_READERS: tuple[_Reader, ...] = tuple(_READER_TABLE.get(code, _bad_code) for code in range(256))

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


def _skip(buf: bytes, pos: int, end: int) -> int:
    """Return the position just past the value at ``pos``, using only its format code and size prefix."""
    if pos >= end:
        raise _truncated("value", pos)
    code = buf[pos]
    width = _WIDTHS[code]
    if width >= 0:
        nxt = pos + 1 + width
    elif width == _SIZE8:
        if pos + 2 > end:
            raise _truncated("size", pos + 1)
        nxt = pos + 2 + buf[pos + 1]
    elif width == _SIZE32:
        if pos + 5 > end:
            raise _truncated("size", pos + 1)
        nxt = pos + 5 + _U32.unpack_from(buf, pos + 1)[0]
    elif width == _DESCRIBED:
        return _skip(buf, _skip(buf, pos + 1, end), end)
    else:
        raise CodecError(f"unknown format code 0x{code:02x} at offset {pos}")
    if nxt > end:
        raise _truncated("value", pos)
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
        return _read(buf if type(buf) is bytes else bytes(buf), offset, len(buf))
    except RecursionError:
        raise CodecError(f"value at offset {offset} is nested too deeply") from None


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
    return bytes((code32,)) + _U32.pack(len(payload)) + payload


def _encode_string(value: str) -> bytes:
    return _sized(0xA1, 0xB1, value.encode("utf-8"))


def _encode_symbol(value: str) -> bytes:
    try:
        return _sized(0xA3, 0xB3, value.encode("ascii"))
    except UnicodeEncodeError:
        raise CodecError(f"symbol {value!r} is not ASCII") from None


def _encode_binary(value: bytes | bytearray | memoryview) -> bytes:
    return _sized(0xA0, 0xB0, bytes(value))


def _encode_char(value: str) -> bytes:
    if len(value) != 1:
        raise CodecError(f"char {value!r} is not a single code point")
    return b"\x73" + _U32.pack(ord(value))


def _decimal(code: int, size: int) -> _Encoder:
    def encode(value: bytes) -> bytes:
        if len(value) != size:
            raise CodecError(f"decimal{size * 8} needs {size} bytes, got {len(value)}")
        return bytes((code,)) + bytes(value)

    return encode


def _compound_bytes(code8: int, code32: int, count: int, body: bytes) -> bytes:
    """Frame list/map elements: the 1-byte size/count form when both fit, else the 4-byte form."""
    if count < 256 and len(body) < 255:
        return bytes((code8, len(body) + 1, count)) + body
    return bytes((code32,)) + _U32X2.pack(len(body) + 4, count) + body


def _encode_list(value: list[Any] | tuple[Any, ...]) -> bytes:
    if not value:
        return b"\x45"
    return _compound_bytes(0xC0, 0xD0, len(value), b"".join(map(encode_value, value)))


def _encode_map(value: dict[Any, Any]) -> bytes:
    body = b"".join(encode_value(k) + encode_value(v) for k, v in value.items())
    return _compound_bytes(0xC1, 0xD1, 2 * len(value), body)


def _encode_described(value: Described) -> bytes:
    return b"\x00" + encode_value(value.descriptor) + encode_value(value.value)


_ENCODERS: dict[type, _Encoder] = {
    type(None): lambda value: b"\x40",
    bool: lambda value: b"\x41" if value else b"\x42",
    int: _compact_signed(0x55, _packer(0x81, "q", "long")),
    float: _packer(0x82, "d", "double"),
    str: _encode_string,
    bytes: _encode_binary,
    bytearray: _encode_binary,
    memoryview: _encode_binary,
    Symbol: _encode_symbol,
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
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        encoder = next((_ENCODERS[c] for c in type(value).__mro__ if c in _ENCODERS), None)
        if encoder is None:
            raise TypeError(f"cannot encode {type(value).__name__} as AMQP")
    return encoder(value)


# --------------------------------------------------------------------------------------------------
# Message sections.

_HEADER, _DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS, _PROPERTIES = 0x70, 0x71, 0x72, 0x73
_APPLICATION_PROPERTIES, _DATA, _SEQUENCE, _VALUE, _FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78

_SECTION_NAMES = {
    "amqp:header:list": _HEADER,
    "amqp:delivery-annotations:map": _DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": _MESSAGE_ANNOTATIONS,
    "amqp:properties:list": _PROPERTIES,
    "amqp:application-properties:map": _APPLICATION_PROPERTIES,
    "amqp:data:binary": _DATA,
    "amqp:amqp-sequence:list": _SEQUENCE,
    "amqp:value:*": _VALUE,
    "amqp:footer:map": _FOOTER,
}


def _allowed_transitions() -> frozenset[int]:
    """Pairs (previous << 8 | next) of section codes allowed by AMQP 1.0 part 3, section 3.2.

    header? delivery-annotations? message-annotations? properties? application-properties?
    (data+ | amqp-sequence+ | amqp-value) footer?   -- the body is optional here, as proton allows.
    """
    allowed: set[int] = set()
    for previous in (0, *range(_HEADER, _APPLICATION_PROPERTIES + 1)):
        allowed.update(previous << 8 | nxt for nxt in range(max(previous + 1, _HEADER), _FOOTER + 1))
    for body in (_DATA, _SEQUENCE, _VALUE):
        allowed.add(body << 8 | _FOOTER)
    allowed.update((_DATA << 8 | _DATA, _SEQUENCE << 8 | _SEQUENCE))
    return frozenset(allowed)


_TRANSITIONS = _allowed_transitions()


def _section_code(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read the descriptor of the section at ``pos``; return (section code, offset of its value)."""
    if buf[pos] != 0x00:
        raise CodecError(f"expected a described section at offset {pos}, found 0x{buf[pos]:02x}")
    if pos + 3 <= end and buf[pos + 1] == 0x53:  # smallulong descriptor: what everyone sends
        return buf[pos + 2], pos + 3
    descriptor, nxt = _read(buf, pos + 1, end)
    if isinstance(descriptor, ULong):
        return (descriptor if descriptor <= 0xFF else 0), nxt
    if isinstance(descriptor, Symbol):
        return _SECTION_NAMES.get(descriptor, 0), nxt
    raise CodecError(f"section descriptor at offset {pos + 1} is neither a ulong nor a symbol")


def _order_error(previous: int, code: int, pos: int) -> CodecError:
    if not _HEADER <= code <= _FOOTER:
        return CodecError(f"unknown section descriptor 0x{code:x} at offset {pos}")
    return CodecError(f"section 0x{code:x} at offset {pos} may not follow section 0x{previous:x}")


_LIST_WIDTHS = {0xC0: 1, 0xD0: 4, 0x45: 0}
_MAP_WIDTHS = {0xC1: 1, 0xD1: 4}


def _composite(buf: bytes, pos: int, end: int, widths: dict[int, int], what: str) -> tuple[int, int]:
    """Check that the value at ``pos`` is a list (or map) as ``widths`` allows; return its size width
    (0 for list0) and the offset just past its format code."""
    if pos >= end:
        raise _truncated(what, pos)
    width = widths.get(buf[pos])
    if width is None:
        kind = "list" if widths is _LIST_WIDTHS else "map"
        raise CodecError(f"{what} at offset {pos} has format code 0x{buf[pos]:02x}, not a {kind}")
    return width, pos + 1


def _fields(buf: bytes, pos: int, end: int, what: str) -> tuple[list[Any], int]:
    """Read the list at ``pos`` (format code included) as its elements."""
    width, pos = _composite(buf, pos, end, _LIST_WIDTHS, what)
    if width == 0:
        return [], pos
    return _elements(buf, pos, end, width, what)


def _map_items(buf: bytes, pos: int, end: int, what: str) -> tuple[list[Any], int]:
    """Read the map at ``pos`` (format code included) as a flat [key, value, ...] list."""
    width, pos = _composite(buf, pos, end, _MAP_WIDTHS, what)
    return _elements(buf, pos, end, width, what)


_NO_FIELDS = (None,) * 13
_Header = tuple[bool, int, "int | None", bool, int]
_DEFAULT_HEADER: _Header = (False, 4, None, False, 0)


_HEADER_CACHE: dict[bytes, _Header] = {}  # few distinct headers exist: decode each encoding once
_HEADER_CACHE_MAX = 1024


def _header(buf: bytes, pos: int, end: int) -> tuple[_Header, int]:
    """Decode the header list into (durable, priority, ttl, first-acquirer, delivery-count)."""
    nxt = _skip(buf, pos, end)
    encoded = buf[pos:nxt]
    header = _HEADER_CACHE.get(encoded)
    if header is None:
        header = _decode_header(buf, pos, nxt)
        if len(_HEADER_CACHE) >= _HEADER_CACHE_MAX:
            _HEADER_CACHE.clear()
        _HEADER_CACHE[encoded] = header
    return header, nxt


def _decode_header(buf: bytes, pos: int, end: int) -> _Header:
    fields, _ = _fields(buf, pos, end, "header")
    if len(fields) < 5:
        fields += _NO_FIELDS[len(fields) : 5]
    durable, priority, ttl, first, count = fields[:5]
    if not (
        (durable is None or type(durable) is bool)
        and (priority is None or type(priority) is UByte)
        and (ttl is None or type(ttl) is UInt)
        and (first is None or type(first) is bool)
        and (count is None or type(count) is UInt)
    ):
        raise CodecError(f"header at offset {pos} has a field of the wrong type: {fields[:5]!r}")
    # Plain ints: these go to storage and arithmetic, where the AMQP type no longer matters.
    return (
        durable is True,
        4 if priority is None else int(priority),
        None if ttl is None else int(ttl),
        first is True,
        0 if count is None else int(count),
    )


def _annotations(buf: bytes, pos: int, end: int) -> tuple[dict[str, object], int]:
    """Decode the message-annotations map; keys become plain str (ulong 7 becomes "7")."""
    width, pos = _composite(buf, pos, end, _MAP_WIDTHS, "message-annotations")
    count, p, stop = _compound(buf, pos, end, width, "message-annotations")
    if count & 1:
        raise CodecError(f"message-annotations at offset {pos} has an odd element count {count}")
    out: dict[str, object] = {}
    readers = _READERS
    for _ in range(count >> 1):
        if p >= stop:
            raise _truncated("message-annotations key", p)
        key, p = readers[buf[p]](buf, p + 1, stop)
        if p >= stop:
            raise _truncated("message-annotations value", p)
        value, p = readers[buf[p]](buf, p + 1, stop)
        out[str(key)] = value
    if p != stop:
        raise _leftover("message-annotations", pos, stop - p)
    return out, stop


def _properties(buf: bytes, pos: int, end: int) -> tuple[list[Any], int]:
    """Decode the properties list, padded to 13 fields and type-checked where the broker reads it.
    Message and correlation ids keep their AMQP type (ULong, UUID, bytes or str)."""
    fields, nxt = _fields(buf, pos, end, "properties")
    if len(fields) < 13:
        fields += _NO_FIELDS[len(fields) : 13]
    _, user_id, to, subject, reply_to, _, ctype, _, expiry, created, group, group_seq, reply_group = fields[:13]
    if not (
        (user_id is None or type(user_id) is bytes)
        and (to is None or isinstance(to, str))
        and (subject is None or isinstance(subject, str))
        and (reply_to is None or isinstance(reply_to, str))
        and (ctype is None or isinstance(ctype, str))
        and (expiry is None or isinstance(expiry, int))
        and (created is None or isinstance(created, int))
        and (group is None or isinstance(group, str))
        and (group_seq is None or (isinstance(group_seq, int) and type(group_seq) is not bool))
        and (reply_group is None or isinstance(reply_group, str))
    ):
        raise CodecError(f"properties at offset {pos} has a field of the wrong type: {fields[:13]!r}")
    if expiry is not None:
        fields[8] = int(expiry)  # plain int milliseconds, like the header fields
    if created is not None:
        fields[9] = int(created)
    if group_seq is not None:
        fields[11] = int(group_seq)  # a plain int, like the timestamps
    return fields, nxt


@dataclass(slots=True)
class Envelope:
    """What the broker routes on, read by ``scan``.

    Spans are [start, end) byte offsets of whole sections, descriptor included; an absent header is
    (0, 0), any other absent section (-1, -1). Header fields and the two timestamps are plain ints
    (milliseconds); ``annotations`` has plain str keys (a ulong key 7 becomes "7") and decoded values;
    ``message_id``/``correlation_id`` keep their AMQP type (str, ULong, uuid.UUID or bytes);
    ``group_sequence`` is a plain int. ``body_start`` is the first body section, else the footer, else
    ``len(raw)``.
    Treat it as read-only: ``with_delivery_count``/``with_annotations`` take it as a map of ``raw``.
    """

    header_start: int = 0
    header_end: int = 0
    durable: bool = False
    priority: int = 4
    ttl: int | None = None
    first_acquirer: bool = False
    delivery_count: int = 0
    annotations_start: int = -1
    annotations_end: int = -1
    annotations: dict[str, object] = field(default_factory=dict)
    properties_start: int = -1
    properties_end: int = -1
    to: str | None = None
    message_id: object = None
    creation_time: int | None = None
    absolute_expiry_time: int | None = None
    group_id: str | None = None
    subject: str | None = None
    correlation_id: object = None
    reply_to: str | None = None
    user_id: bytes | None = None
    content_type: str | None = None
    app_properties_start: int = -1
    app_properties_end: int = -1
    body_start: int = 0
    group_sequence: int | None = None
    reply_to_group_id: str | None = None


def scan(raw: bytes) -> Envelope:
    """Walk the sections of an encoded message once and return its ``Envelope``.

    Decodes the header, message-annotations and properties; records the spans of the other sections,
    skipping each through its size prefix without decoding it.

    Raises:
        CodecError: the sections are malformed, truncated, unknown or out of order.
    """
    try:
        return _scan(raw if type(raw) is bytes else bytes(raw))
    except RecursionError:
        raise CodecError("message-annotations or properties nested too deeply") from None


def _scan(raw: bytes) -> Envelope:
    end = len(raw)
    pos = previous = 0
    header_end = 0
    header = _DEFAULT_HEADER
    annotations: dict[str, object] = {}
    ann_start = ann_end = prop_start = prop_end = app_start = app_end = body_start = -1
    props: Sequence[Any] = _NO_FIELDS
    while pos < end:
        start = pos
        code, pos = _section_code(raw, pos, end)
        if (previous << 8 | code) not in _TRANSITIONS:
            raise _order_error(previous, code, start)
        previous = code
        if code == _MESSAGE_ANNOTATIONS:
            annotations, pos = _annotations(raw, pos, end)
            ann_start, ann_end = start, pos
        elif code == _PROPERTIES:
            props, pos = _properties(raw, pos, end)
            prop_start, prop_end = start, pos
        elif code == _HEADER:
            header, pos = _header(raw, pos, end)
            header_end = pos
        else:
            pos = _skip(raw, pos, end)
            if code == _APPLICATION_PROPERTIES:
                app_start, app_end = start, pos
            elif code >= _DATA and body_start < 0:
                body_start = start
    msg_id, user_id, to, subject, reply_to, corr_id, ctype, _, expiry, created, group, seq, reply_group = props[:13]
    durable, priority, ttl, first, count = header
    return Envelope(
        0, header_end, durable, priority, ttl, first, count,
        ann_start, ann_end, annotations, prop_start, prop_end,
        to, msg_id, created, expiry, group, subject, corr_id, reply_to, user_id, ctype,
        app_start, app_end, end if body_start < 0 else body_start, seq, reply_group,
    )  # fmt: skip


def application_properties(raw: bytes, env: Envelope) -> dict[str, object]:
    """Decode the application-properties section that ``scan`` located (``{}`` when there is none).

    Raises:
        CodecError: the section is malformed or a key is not a string.
    """
    if env.app_properties_start < 0:
        return {}
    end = env.app_properties_end
    raw = raw if type(raw) is bytes else bytes(raw)
    try:
        _, pos = _section_code(raw, env.app_properties_start, end)
        items, _ = _map_items(raw, pos, end, "application-properties")
    except RecursionError:
        raise CodecError("application-properties nested too deeply") from None
    props = {}
    for key, value in _pairs(items, env.app_properties_start, "application-properties"):
        if not isinstance(key, str):
            raise CodecError(f"application-properties key {key!r} is not a string")
        props[str(key)] = value
    return props


# --------------------------------------------------------------------------------------------------
# Rewrites.

_LARGE_TAIL = 64 * 1024  # below this, copying a slice is cheaper than making a memoryview of it


def _splice(raw: bytes, start: int, middle: bytes, stop: int) -> bytes:
    """``raw[:start] + middle + raw[stop:]``, without an extra copy of a large tail."""
    tail: bytes | memoryview = raw[stop:] if len(raw) - stop < _LARGE_TAIL else memoryview(raw)[stop:]
    return b"".join((raw[:start], middle, tail))


def _encode_uint(value: int) -> bytes:
    return _ENCODERS[UInt](value)


def _header_section(durable: bool, priority: int, ttl: int | None, first: bool, count: int) -> bytes:
    """Encode a header section; default fields are null and trailing defaults are left out."""
    fields = [
        b"\x41" if durable else b"\x40",
        b"\x40" if priority == 4 else _ENCODERS[UByte](priority),
        b"\x40" if ttl is None else _encode_uint(ttl),
        b"\x41" if first else b"\x40",
        b"\x40" if count == 0 else _encode_uint(count),
    ]
    while fields and fields[-1] == b"\x40":
        fields.pop()
    if not fields:
        return b"\x00\x53\x70\x45"
    body = b"".join(fields)
    return bytes((0x00, 0x53, 0x70, 0xC0, len(body) + 1, len(fields))) + body


def with_delivery_count(raw: bytes, env: Envelope, count: int) -> bytes:
    """Return the message with header delivery-count set to ``count``.

    Every other header field is kept and a header is added when the message had none; the bytes after
    the header are copied unchanged. ``env`` must come from ``scan(raw)``.

    Raises:
        CodecError: ``count`` is not a uint.
    """
    if not 0 <= count <= 0xFFFFFFFF:
        raise CodecError(f"delivery-count {count} is out of range for AMQP uint")
    header = _header_section(env.durable, env.priority, env.ttl, env.first_acquirer, count)
    return _splice(raw, 0, header, env.header_end)


def _annotation_entries(raw: bytes, env: Envelope) -> tuple[bytes, list[tuple[object, int, int]]]:
    """Split the existing message-annotations section into its descriptor bytes and the
    (key, start, stop) span of every key/value entry."""
    end = env.annotations_end
    raw = raw if type(raw) is bytes else bytes(raw)
    _, pos = _section_code(raw, env.annotations_start, end)
    width = 1 if raw[pos] == 0xC1 else 4
    count, p, _ = _compound(raw, pos + 1, end, width, "map")
    entries = []
    for _ in range(count // 2):
        key, value_pos = _read(raw, p, end)
        stop = _skip(raw, value_pos, end)
        entries.append((key, p, stop))
        p = stop
    return raw[env.annotations_start : pos], entries


_ANNOTATION_KEYS: dict[str, bytes] = {}


def _annotation_section(descriptor: bytes, entries: Iterable[bytes], count: int) -> bytes:
    return descriptor + _compound_bytes(0xC1, 0xD1, 2 * count, b"".join(entries))


def with_annotations(raw: bytes, env: Envelope, extra: dict[str, object]) -> bytes:
    """Return the message with the ``extra`` message-annotations added or replaced (symbol keys).

    Existing entries keep their exact bytes and position; a replaced entry is re-encoded in place and
    new ones go at the end. Without a message-annotations section one is inserted after the header and
    delivery-annotations. ``env`` must come from ``scan(raw)``.

    Raises:
        CodecError: a key is not an ASCII string or a value is out of range.
        TypeError: a value has no AMQP encoding.
    """
    if not extra:
        return bytes(raw)
    fresh: dict[str, bytes] = {}
    for key, value in extra.items():
        if not isinstance(key, str):
            raise CodecError(f"message-annotation key {key!r} is not a string")
        encoded_key = _ANNOTATION_KEYS.get(key)
        if encoded_key is None:
            encoded_key = _encode_symbol(key)
            if len(_ANNOTATION_KEYS) < 64:  # the broker's own few keys (x-opt-bookmark): encoded once
                _ANNOTATION_KEYS[key] = encoded_key
        fresh[key] = encoded_key + encode_value(value)
    if env.annotations_start < 0:
        # Insert before the first of properties, application-properties and body (every message has a body).
        at = env.properties_start
        if at < 0:
            at = env.app_properties_start if env.app_properties_start >= 0 else env.body_start
        if at < 0:
            at = len(raw)
        section = _annotation_section(b"\x00\x53\x72", fresh.values(), len(fresh))
        return _splice(raw, at, section, at)
    descriptor, entries = _annotation_entries(raw, env)
    parts = []
    for name, start, stop in entries:
        replaced = fresh.pop(name, None) if isinstance(name, Symbol) else None
        parts.append(raw[start:stop] if replaced is None else replaced)
    parts.extend(fresh.values())
    section = _annotation_section(descriptor, parts, len(parts))
    return _splice(raw, env.annotations_start, section, env.annotations_end)
