"""engine.codec, cross-checked against proton's own encoder and decoder.

Proton is the reference: values and messages are encoded with ``proton.Data`` / ``proton.Message`` and
what ``engine.codec`` reads from those bytes must match what proton reads back. Hand-built encodings
cover the forms proton never writes (str32, list32, map8, symbol descriptors, ...), and a table of
malformed inputs checks that every failure is a ``CodecError``.
"""

from __future__ import annotations

import enum
import math
import random
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Message,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from proton import Described as ProtonDescribed

from subgate.engine import codec
from subgate.engine.codec import (
    Byte,
    Char,
    CodecError,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Envelope,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    application_properties,
    decode_value,
    encode_value,
    scan,
    with_annotations,
    with_delivery_count,
)

# --------------------------------------------------------------------------------------------------
# Proton as the reference.

_WRAPPERS: dict[type, Callable[[object], object]] = {
    ubyte: UByte, ushort: UShort, uint: UInt, ulong: ULong, byte: Byte, short: Short, int32: Int,
    timestamp: Timestamp, symbol: Symbol, char: Char, float32: Float,
    decimal32: lambda v: Decimal32(struct.pack(">I", v)),
    decimal64: lambda v: Decimal64(struct.pack(">Q", v)),
    decimal128: Decimal128,
    memoryview: bytes,
}  # fmt: skip


def from_proton(value: object) -> object:
    """The value engine.codec should decode where proton decoded ``value``."""
    convert = _WRAPPERS.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, ProtonDescribed):
        return Described(from_proton(value.descriptor), from_proton(value.value))
    if isinstance(value, Array):
        elements = [from_proton(e) for e in value.elements]
        if value.descriptor is UNDESCRIBED:
            return elements
        return [Described(from_proton(value.descriptor), e) for e in elements]
    if isinstance(value, list):
        return [from_proton(v) for v in value]
    if isinstance(value, dict):
        return {from_proton(k): from_proton(v) for k, v in value.items()}
    return value


def assert_same(actual: object, expected: object) -> None:
    """Equal values of exactly the same types, all the way down (dict order included)."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, list):
        assert len(actual) == len(expected), (actual, expected)  # type: ignore[arg-type]
        for a, e in zip(actual, expected, strict=True):  # type: ignore[call-overload]
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert len(actual) == len(expected), (actual, expected)  # type: ignore[arg-type]
        for (ka, va), (ke, ve) in zip(actual.items(), expected.items(), strict=True):  # type: ignore[attr-defined]
            assert_same(ka, ke)
            assert_same(va, ve)
    elif isinstance(expected, Described):
        assert_same(actual.descriptor, expected.descriptor)  # type: ignore[attr-defined]
        assert_same(actual.value, expected.value)  # type: ignore[attr-defined]
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual)  # type: ignore[arg-type]
    else:
        assert actual == expected


def proton_encode(value: object) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def proton_decode(raw: bytes) -> tuple[object, int]:
    """Proton's decoding of the first value in ``raw``, converted while proton still owns the memory
    its binary values point into."""
    data = Data()
    size = data.decode(raw)
    return from_proton(data.get_object()), size


def proton_sections(raw: bytes) -> list[tuple[int, object, int, int]]:
    """(section code, value, start, end) of every section, as proton decodes them."""
    sections, pos = [], 0
    while pos < len(raw):
        described, size = proton_decode(raw[pos:])
        assert isinstance(described, Described)
        sections.append((int(described.descriptor), described.value, pos, pos + size))
        pos += size
    return sections


MESSAGE_FIELDS = (
    "durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "user_id", "address",
    "subject", "reply_to", "correlation_id", "content_type", "content_encoding", "expiry_time",
    "creation_time", "group_id", "group_sequence", "reply_to_group_id", "instructions", "annotations",
    "properties", "body", "inferred",
)  # fmt: skip


def message_fields(raw: bytes) -> dict[str, object]:
    msg = Message()
    msg.decode(raw)
    return {name: from_proton(getattr(msg, name)) for name in MESSAGE_FIELDS}


# Builders for encodings proton never writes.


def sym32(text: str) -> bytes:
    return b"\xb3" + struct.pack(">I", len(text)) + text.encode()


def str32(text: str) -> bytes:
    return b"\xb1" + struct.pack(">I", len(text)) + text.encode()


def vbin32(data: bytes) -> bytes:
    return b"\xb0" + struct.pack(">I", len(data)) + data


def list32(*items: bytes) -> bytes:
    body = b"".join(items)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def map32(*items: bytes) -> bytes:
    body = b"".join(items)
    return b"\xd1" + struct.pack(">II", len(body) + 4, len(items)) + body


def by_name(name: str) -> bytes:
    return b"\x00\xa3" + bytes((len(name),)) + name.encode()


def by_code(code: int) -> bytes:
    return b"\x00\x80" + struct.pack(">Q", code)


UINT_1000 = b"\x70\x00\x00\x03\xe8"
ULONG_2 = b"\x80" + bytes(7) + b"\x02"
TIMESTAMP_1, TIMESTAMP_2 = b"\x83" + bytes(7) + b"\x01", b"\x83" + bytes(7) + b"\x02"


# --------------------------------------------------------------------------------------------------
# Values: decode_value against proton.Data, and encode_value back through proton.

VALUES = [
    None, True, False,
    ubyte(0), ubyte(255), ushort(0), ushort(65535),
    uint(0), uint(7), uint(255), uint(256), uint(2**32 - 1),
    ulong(0), ulong(7), ulong(256), ulong(2**64 - 1),
    byte(-128), byte(127), short(-32768), short(32767),
    int32(-1), int32(127), int32(-129), int32(2**31 - 1), int32(-(2**31)),
    0, -1, 127, -128, 128, 2**63 - 1, -(2**63),
    float32(1.5), float32(-0.0), 1.25, -1e300, float("inf"), float("nan"),
    timestamp(1700000000123), timestamp(-1), timestamp(0),
    char("a"), char("é"), char("\U0001f600"),
    decimal32(7), decimal64(2**64 - 1), decimal128(b"0123456789abcdef"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    b"", b"bin", b"\x00\xff" * 200,
    "", "h\u00e9llo \U0001f600", "x" * 300,
    symbol(""), symbol("amqp:header:list"), symbol("s" * 300),
    [], [1, "a", None, [symbol("n")]], [None] * 300, list(range(100)),
    {}, {"a": 1, "b": [True]}, {symbol("k"): ulong(1), ulong(2): None}, {i: str(i) for i in range(100)},
    ProtonDescribed(symbol("d"), 5), ProtonDescribed(ulong(0x70), [True]),
]  # fmt: skip

ARRAYS = [
    Array(UNDESCRIBED, Data.INT),
    Array(UNDESCRIBED, Data.INT, 1, 2, -3),
    Array(UNDESCRIBED, Data.NULL, None, None),
    Array(UNDESCRIBED, Data.BOOL, True, False),
    Array(UNDESCRIBED, Data.UBYTE, 1, 255),
    Array(UNDESCRIBED, Data.ULONG, ulong(0), ulong(1)),
    Array(UNDESCRIBED, Data.STRING, "a", "bc"),
    Array(UNDESCRIBED, Data.SYMBOL, symbol("a"), symbol("b")),
    Array(UNDESCRIBED, Data.UUID, uuid.UUID(int=1)),
    Array(UNDESCRIBED, Data.LIST, [1], [2, "x"]),
    Array(UNDESCRIBED, Data.MAP, {"a": 1}),
    Array(UNDESCRIBED, Data.ARRAY, Array(UNDESCRIBED, Data.INT, 1)),
    Array(symbol("d"), Data.STRING, "a", "b"),
    Array(ulong(9), Data.LONG, 1),
]


def _value_id(value: object) -> str:
    return f"{type(value).__name__}:{value!r}"[:40]


@pytest.mark.parametrize("value", VALUES + ARRAYS, ids=_value_id)
def test_decode_value_agrees_with_proton(value: object) -> None:
    raw = proton_encode(value)
    expected, size = proton_decode(raw)
    decoded, end = decode_value(raw, 0)
    assert end == size == len(raw)
    assert_same(decoded, expected)


@pytest.mark.parametrize("value", VALUES, ids=_value_id)
def test_encode_value_round_trips_through_proton(value: object) -> None:
    ours = from_proton(value)
    raw = encode_value(ours)
    decoded, size = proton_decode(raw)
    assert size == len(raw)
    assert_same(decoded, ours)
    decoded, end = decode_value(raw, 0)
    assert end == len(raw)
    assert_same(decoded, ours)


def test_codec_imports_only_the_standard_library() -> None:
    check = "import sys, subgate.engine.codec; sys.exit('proton' in sys.modules or 'cproton' in sys.modules)"
    root = Path(__file__).resolve().parents[3]
    assert subprocess.run([sys.executable, "-c", check], cwd=root, check=False).returncode == 0


def test_decode_value_at_offset_and_from_bytearray() -> None:
    raw = bytearray(b"\x40\xa1\x02hi\x40")
    assert decode_value(raw, 1) == ("hi", 5)


# Encodings proton never writes, or writes only in one of the allowed forms.
HAND_BUILT = [
    ("43", UInt(0)),
    ("44", ULong(0)),
    ("52 05", UInt(5)),
    ("53 05", ULong(5)),
    ("54 ff", Int(-1)),
    ("55 80", -128),
    ("51 ff", Byte(-1)),
    ("56 01", True),
    ("56 00", False),
    ("70 00 00 01 00", UInt(256)),
    ("81 ff ff ff ff ff ff ff fe", -2),
    ("a0 00", b""),
    ("b0 00 00 00 02 01 02", b"\x01\x02"),
    ("b1 00 00 00 03 61 62 63", "abc"),
    ("b3 00 00 00 03 61 62 63", Symbol("abc")),
    ("45", []),
    ("c0 01 00", []),
    ("d0 00 00 00 04 00 00 00 00", []),
    ("d0 00 00 00 07 00 00 00 02 40 52 01", [None, UInt(1)]),
    ("c1 01 00", {}),
    ("d1 00 00 00 08 00 00 00 02 a3 01 6b 41", {Symbol("k"): True}),
    ("e0 02 00 40", []),
    ("e0 02 03 41", [True, True, True]),
    ("e0 04 02 52 01 02", [UInt(1), UInt(2)]),
    ("f0 00 00 00 07 00 00 00 02 a1 00 00", ["", ""]),
    # Described element constructor, and a descriptor that is itself described.
    ("e0 08 02 00 a3 01 64 52 01 02", [Described(Symbol("d"), UInt(1)), Described(Symbol("d"), UInt(2))]),
    ("e0 08 01 00 53 01 00 53 02 40", [Described(ULong(1), Described(ULong(2), None))]),
    ("00 a3 01 64 00 53 01 40", Described(Symbol("d"), Described(ULong(1), None))),
    ("00 00 53 01 a1 01 78 40", Described(Described(ULong(1), "x"), None)),
    ("73 00 00 d8 00", Char("\ud800")),
    ("72 7f 80 00 00", Float(math.inf)),
    ("74 01 02 03 04", Decimal32(b"\x01\x02\x03\x04")),
]


@pytest.mark.parametrize(("encoded", "expected"), HAND_BUILT, ids=[h for h, _ in HAND_BUILT])
def test_decode_hand_built(encoded: str, expected: object) -> None:
    raw = bytes.fromhex(encoded)
    decoded, end = decode_value(raw, 0)
    assert end == len(raw)
    assert_same(decoded, expected)


MALFORMED_VALUES = [
    ("", "truncated value at offset 0"),
    ("01", "unknown format code 0x01 at offset 0"),
    ("c0 02 01 01", "unknown format code 0x01 at offset 3"),
    ("50", "truncated ubyte"),
    ("51", "truncated byte"),
    ("60 00", "truncated ushort"),
    ("70 00 00 00", "truncated uint"),
    ("80 00", "truncated ulong"),
    ("83 00", "truncated timestamp"),
    ("74 00", "truncated decimal32"),
    ("94 00", "truncated decimal128"),
    ("98 00", "truncated uuid"),
    ("73 00", "truncated char"),
    ("73 00 11 00 00", "not a Unicode code point"),
    ("56", "truncated boolean"),
    ("56 02", "neither 0 nor 1"),
    ("a0", "truncated binary size"),
    ("a0 02 00", "truncated binary at offset 1"),
    ("a1", "truncated string size"),
    ("a1 02 61", "truncated string at offset 1"),
    ("a1 01 ff", "string at offset 1 is not valid UTF-8"),
    ("a3", "truncated symbol size"),
    ("a3 02 61", "truncated symbol at offset 1"),
    ("a3 01 ff", "symbol at offset 1 is not valid UTF-8"),
    ("b0 00 00", "truncated binary size"),
    ("b1 00 00 00 09 61", "truncated string at offset 1"),
    ("b3 00 00 00 01 ff", "not valid UTF-8"),
    ("b3 00 00 00 02 61", "truncated symbol"),
    ("c0 01", "truncated list header at offset 1"),
    ("d0 00 00 00 04 00 00", "truncated list header"),
    ("c0 00 00", "list size 0 at offset 1 does not fit"),
    ("d0 00 00 00 02 00 00 00 00", "list size 2 at offset 1 does not fit"),
    ("c0 05 01 40", "list size 5 at offset 1 does not fit"),
    ("c0 02 05 40", "list count 5 at offset 1 exceeds its 1 bytes"),
    ("c0 03 02 52 01", "truncated list element at offset 5"),
    ("c0 03 01 40 40", "list at offset 1 has 1 bytes left"),
    ("c0 02 01 a1", "truncated string size at offset 4"),
    ("c0 03 01 a1 05", "truncated string at offset 4"),
    ("c0 04 01 a1 01 ff", "string at offset 3 is not valid UTF-8"),
    ("c0 03 01 70 00", "truncated uint"),
    ("c1 02 01 40", "map at offset 1 has an odd element count 1"),
    ("c1 03 02 45 40", "map at offset 1 has a key Python cannot hash"),
    ("d1 00 00 00", "truncated map header"),
    ("e0 01 00", "truncated array constructor at offset 3"),
    ("e0 03 01 00 a3", "truncated symbol size"),
    ("e0 03 01 00 53", "truncated smallulong"),
    ("e0 04 01 52 01 00", "array at offset 1 has 1 bytes left"),
    ("e0 03 01 70 00", "truncated uint"),
    ("e0 02 01 01", "unknown format code 0x01 at offset 3"),
    ("f0 00 00 00 05 ff ff ff ff 40", "array count 4294967295"),
    ("00", "truncated value at offset 1"),
    ("00 53 01", "truncated value at offset 3"),
    ("00" * 5000 + "40", "nested too deeply"),
]


@pytest.mark.parametrize(("encoded", "message"), MALFORMED_VALUES, ids=[m for _, m in MALFORMED_VALUES])
def test_decode_malformed_raises_codec_error(encoded: str, message: str) -> None:
    with pytest.raises(CodecError, match=message.replace("(", r"\(")):
        decode_value(bytes.fromhex(encoded), 0)


def test_decode_deep_lists_raise_codec_error() -> None:
    depth = 3000
    raw = b"".join(b"\xd0" + struct.pack(">II", 4 + 9 * (depth - i - 1) + 1, 1) for i in range(depth)) + b"\x40"
    with pytest.raises(CodecError, match="nested too deeply"):
        decode_value(raw, 0)


def test_decode_negative_offset() -> None:
    with pytest.raises(CodecError, match="negative offset"):
        decode_value(b"\x40", -1)


def test_symbol_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec.decode, "_SYMBOLS", {})
    monkeypatch.setattr(codec.decode, "_SYMBOLS_MAX", 2)
    for name in ("a", "b", "c", "a"):
        value, _ = decode_value(encode_value(Symbol(name)), 0)
        assert_same(value, Symbol(name))
    assert len(codec.decode._SYMBOLS) <= 2


# --------------------------------------------------------------------------------------------------
# encode_value: exact bytes at the edges of each compact form, and errors.


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


ENCODINGS = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (0, "55 00"),
    (127, "55 7f"),
    (-128, "55 80"),
    (128, "81 00 00 00 00 00 00 00 80"),
    (-129, "81 ff ff ff ff ff ff ff 7f"),
    (Colour.RED, "55 01"),
    (UInt(0), "43"),
    (UInt(255), "52 ff"),
    (UInt(256), "70 00 00 01 00"),
    (ULong(0), "44"),
    (ULong(1), "53 01"),
    (ULong(2**64 - 1), "80 ff ff ff ff ff ff ff ff"),
    (Int(-128), "54 80"),
    (Int(128), "71 00 00 00 80"),
    (UByte(200), "50 c8"),
    (Byte(-2), "51 fe"),
    (UShort(258), "60 01 02"),
    (Short(-2), "61 ff fe"),
    (Timestamp(5), "83 00 00 00 00 00 00 00 05"),
    (Float(1.5), "72 3f c0 00 00"),
    (1.5, "82 3f f8 00 00 00 00 00 00"),
    (Char("a"), "73 00 00 00 61"),
    (Decimal64(bytes(8)), "84" + " 00" * 8),
    (Decimal128(bytes(16)), "94" + " 00" * 16),
    (uuid.UUID(int=1), "98" + " 00" * 15 + " 01"),
    ("hi", "a1 02 68 69"),
    (Name("hi"), "a1 02 68 69"),
    ("x" * 256, "b1 00 00 01 00" + " 78" * 256),
    (Symbol("s"), "a3 01 73"),
    (b"\x01", "a0 01 01"),
    (bytearray(b"\x01"), "a0 01 01"),
    (memoryview(b"\x01"), "a0 01 01"),
    ([], "45"),
    ((), "45"),
    ([None], "c0 02 01 40"),
    ((True, False), "c0 03 02 41 42"),
    ([None] * 256, "d0 00 00 01 04 00 00 01 00" + " 40" * 256),
    ([b"x" * 253], "d0 00 00 01 03 00 00 00 01 a0 fd" + " 78" * 253),
    ([b"x" * 252], "c0 ff 01 a0 fc" + " 78" * 252),
    ({}, "c1 01 00"),
    ({Symbol("k"): None}, "c1 05 02 a3 01 6b 40"),
    (Described(ULong(0x70), []), "00 53 70 45"),
]


@pytest.mark.parametrize(("value", "encoded"), ENCODINGS, ids=[e[:30] for _, e in ENCODINGS])
def test_encode_value_bytes(value: object, encoded: str) -> None:
    assert encode_value(value) == bytes.fromhex(encoded)


BAD_ENCODINGS = [
    (2**63, CodecError, "out of range for AMQP long"),
    (UByte(256), CodecError, "out of range for AMQP ubyte"),
    (Byte(128), CodecError, "out of range for AMQP byte"),
    (UShort(-1), CodecError, "ushort"),
    (Short(40000), CodecError, "short"),
    (UInt(-1), CodecError, "uint"),
    (UInt(2**32), CodecError, "uint"),
    (ULong(2**64), CodecError, "ulong"),
    (Int(2**31), CodecError, "out of range for AMQP int"),
    (Timestamp(2**63), CodecError, "timestamp"),
    (Float(1e300), CodecError, "float"),
    (Char("ab"), CodecError, "single code point"),
    (Decimal32(b"123"), CodecError, "decimal32 needs 4 bytes, got 3"),
    (Symbol("\u00e9"), CodecError, "not ASCII"),
    (object(), TypeError, "cannot encode object"),
    ({1.5j: 1}, TypeError, "cannot encode complex"),
]


@pytest.mark.parametrize(("value", "error", "message"), BAD_ENCODINGS, ids=[m for _, _, m in BAD_ENCODINGS])
def test_encode_value_errors(value: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        encode_value(value)


def test_wrapper_types_repr_and_str() -> None:
    assert repr(ULong(5)) == "ULong(5)" and str(ULong(5)) == "5" and f"{Byte(-1)}" == "-1"
    assert repr(Symbol("a")) == "Symbol('a')" and str(Symbol("a")) == "a"
    assert repr(Char("a")) == "Char('a')" and repr(Float(1.5)) == "Float(1.5)"
    assert Described(Symbol("d"), 1) == Described("d", 1) and isinstance(hash(Described(ULong(1), None)), int)


# --------------------------------------------------------------------------------------------------
# Messages built by proton: scan against proton's own decoding of the same bytes.

HEADER_STRIPPED = "header-stripped"


def _annotated() -> Message:
    msg = Message(body="x")
    msg.annotations = {
        symbol("x-opt-jms-msg-type"): byte(3),
        symbol("x-opt-to-type"): symbol("queue"),
        symbol("x-opt-time"): timestamp(1700000000123),
        symbol("x-opt-list"): [1, "a"],
        symbol("x-opt-ulong"): ulong(2**64 - 1),
        ulong(42): "ulong key",
    }
    return msg


def _jms() -> Message:
    msg = Message(durable=True, address="topic://orders", id="ID:abc:1", creation_time=1700000000.123)
    msg.body, msg.inferred = b"x" * 900, True
    msg.annotations = {symbol("x-opt-jms-msg-type"): byte(3), symbol("x-opt-jms-dest"): byte(1)}
    return msg


def _all_properties() -> Message:
    return Message(
        id=uuid.UUID(int=7), correlation_id=ulong(9), user_id=b"user", address="q", subject="subj",
        reply_to="replies", content_type=symbol("text/plain"), content_encoding=symbol("gzip"),
        expiry_time=1700000001.5, creation_time=1700000000.25, group_id="g", group_sequence=3,
        reply_to_group_id="rg", body={"k": "v"},
    )  # fmt: skip


APP_PROPERTIES = {
    "null": None, "bool": True, "ubyte": ubyte(1), "byte": byte(-1), "ushort": ushort(2),
    "short": short(-2), "uint": uint(3), "int": int32(-3), "ulong": ulong(4), "long": 2**40,
    "float": float32(0.5), "double": 0.25, "char": char("c"), "timestamp": timestamp(5),
    "uuid": uuid.UUID(int=5), "binary": b"\x00", "string": "s", "symbol": symbol("sym"),
    "decimal32": decimal32(1), "decimal64": decimal64(2), "decimal128": decimal128(bytes(16)),
}  # fmt: skip

MESSAGES: dict[str, Callable[[], Message]] = {
    "empty": Message,
    "durable": lambda: Message(durable=True, body="hi"),
    "priority-ttl": lambda: Message(priority=9, ttl=1.5, body="x"),
    "low-priority": lambda: Message(priority=0, body=None),
    "first-acquirer-count": lambda: Message(first_acquirer=True, delivery_count=7),
    "big-count": lambda: Message(delivery_count=70000, ttl=2**32 / 1000 - 0.001),
    "whole-header": lambda: Message(durable=True, priority=1, ttl=10, first_acquirer=True, delivery_count=2),
    "annotations": _annotated,
    "jms": _jms,
    "id-str": lambda: Message(id="id-1", correlation_id="c-1"),
    "id-uuid": lambda: Message(id=uuid.UUID(int=3), correlation_id=uuid.UUID(int=4)),
    "id-ulong": lambda: Message(id=ulong(2**64 - 1), correlation_id=ulong(1)),
    "id-binary": lambda: Message(id=b"\x01\x02", correlation_id=b""),
    "all-properties": _all_properties,
    "app-properties": lambda: Message(properties=APP_PROPERTIES, body=[1, 2]),
    "delivery-annotations": lambda: Message(instructions={symbol("x-opt-da"): 1}, durable=True, body=True),
    "da-and-properties-only": lambda: Message(instructions={symbol("da"): "v"}, subject="s"),
    "body-data": lambda: Message(body=b"data", inferred=True),
    "body-sequence": lambda: Message(body=[1, "two"], inferred=True),
    "body-value-map": lambda: Message(body={"a": [1.5]}, properties={"p": 1}),
    "large-body": lambda: Message(body=b"z" * 70000, inferred=True, durable=True),
}


def _encode(name: str) -> bytes:
    raw = bytes(MESSAGES[name]().encode())
    return raw


def message_cases() -> list[tuple[str, bytes]]:
    cases = [(name, _encode(name)) for name in MESSAGES]
    # Proton always writes a header; these messages have none.
    for name in ("empty", "annotations", "id-str", "body-data", "jms", "da-and-properties-only"):
        raw = _encode(name)
        header_end = proton_sections(raw)[0][3]
        cases.append((f"{name}-{HEADER_STRIPPED}", raw[header_end:]))
    # Proton's Message cannot write a footer but reads past one.
    footer = proton_encode(ProtonDescribed(ulong(0x78), {symbol("x-opt-signature"): b"sig"}))
    for name in ("jms", "annotations", "body-sequence"):
        cases.append((f"{name}-with-footer", _encode(name) + footer))
    return cases


def _hand_built_with_ulong_descriptors() -> bytes:
    """Every section under a full 8-byte ulong descriptor, with 32-bit sizes throughout (proton reads
    these; it ignores sections under symbolic descriptors, so those are checked separately below)."""
    return b"".join(
        [
            by_code(0x70) + list32(b"\x56\x01", b"\x50\x09", UINT_1000, b"\x56\x00", b"\x70\x00\x00\x00\x05"),
            by_code(0x71) + map32(sym32("x-opt-da"), b"\x40"),
            by_code(0x72) + map32(sym32("x-opt-a"), str32("v"), ULONG_2, b"\x41", sym32("x-opt-c"), b"\x53\x01"),
            by_code(0x73) + list32(str32("id"), vbin32(b"user"), str32("to"), b"\x40", b"\x40", b"\x40", sym32("t/p")),
            by_code(0x74) + map32(str32("k"), str32("v")),
            by_code(0x75) + vbin32(b"one"),
            by_code(0x78) + map32(),
        ]
    )


MESSAGE_CASES = message_cases() + [("hand-built-ulong-descriptors", _hand_built_with_ulong_descriptors())]


def expected_envelope(raw: bytes) -> Envelope:
    """The Envelope of ``raw`` as proton decodes its sections."""
    env = Envelope(body_start=len(raw))
    for code, value, start, end in proton_sections(raw):
        if code == 0x70:
            fields = list(value) + [None] * 5  # type: ignore[call-overload]
            env.header_end = end
            env.durable, env.first_acquirer = fields[0] is True, fields[3] is True
            env.priority = 4 if fields[1] is None else int(fields[1])
            env.ttl = None if fields[2] is None else int(fields[2])
            env.delivery_count = int(fields[4] or 0)
        elif code == 0x72:
            env.annotations_start, env.annotations_end = start, end
            env.annotations = {str(k): v for k, v in value.items()}  # type: ignore[attr-defined]
        elif code == 0x73:
            fields = list(value) + [None] * 13  # type: ignore[call-overload]
            env.properties_start, env.properties_end = start, end
            (env.message_id, env.user_id, env.to, env.subject, env.reply_to, env.correlation_id,
             env.content_type, _, expiry, created, env.group_id, sequence,
             env.reply_to_group_id) = fields[:13]  # fmt: skip
            env.absolute_expiry_time = None if expiry is None else int(expiry)
            env.creation_time = None if created is None else int(created)
            env.group_sequence = None if sequence is None else int(sequence)
        elif code == 0x74:
            env.app_properties_start, env.app_properties_end = start, end
        elif code >= 0x75 and env.body_start == len(raw):
            env.body_start = start
    return env


@pytest.mark.parametrize(("name", "raw"), MESSAGE_CASES, ids=[n for n, _ in MESSAGE_CASES])
def test_scan_agrees_with_proton(name: str, raw: bytes) -> None:
    env = scan(raw)
    expected = expected_envelope(raw)
    for slot in Envelope.__slots__:
        assert_same(getattr(env, slot), getattr(expected, slot))


def test_scan_jms_message_fields() -> None:
    raw = _encode("jms")
    env = scan(bytearray(raw))
    assert (env.durable, env.to, env.message_id, env.creation_time) == (
        True,
        "topic://orders",
        "ID:abc:1",
        1700000000123,
    )
    assert env.annotations == {"x-opt-jms-msg-type": 3, "x-opt-jms-dest": 1}
    assert all(type(key) is str for key in env.annotations)
    assert raw[env.body_start : env.body_start + 3] == b"\x00\x53\x75"
    assert (env.app_properties_start, env.app_properties_end) == (-1, -1)


def test_scan_annotation_keys_are_strings() -> None:
    env = scan(_encode("annotations"))
    keys = ["x-opt-jms-msg-type", "x-opt-to-type", "x-opt-time", "x-opt-list", "x-opt-ulong", "42"]
    assert list(env.annotations) == keys
    assert all(type(key) is str for key in env.annotations)


def test_scan_empty_input() -> None:
    assert scan(b"") == Envelope(body_start=0)


@pytest.mark.parametrize(("name", "raw"), MESSAGE_CASES, ids=[n for n, _ in MESSAGE_CASES])
def test_application_properties_agree_with_proton(name: str, raw: bytes) -> None:
    env = scan(raw)
    expected = message_fields(raw)["properties"]
    if env.app_properties_start < 0:
        assert application_properties(raw, env) == {} and not expected
    else:
        assert_same(application_properties(raw, env), expected)


def test_application_properties_of_every_type() -> None:
    raw = _encode("app-properties")
    props = application_properties(bytearray(raw), scan(raw))
    assert list(props) == list(APP_PROPERTIES)
    assert_same(props, {k: from_proton(v) for k, v in APP_PROPERTIES.items()})


# --------------------------------------------------------------------------------------------------
# with_delivery_count


@pytest.mark.parametrize("count", [0, 1, 255, 256, 2**32 - 1])
@pytest.mark.parametrize(("name", "raw"), MESSAGE_CASES, ids=[n for n, _ in MESSAGE_CASES])
def test_with_delivery_count(name: str, raw: bytes, count: int) -> None:
    env = scan(raw)
    out = with_delivery_count(raw, env, count)
    new = scan(out)
    assert out[new.header_end :] == raw[env.header_end :]  # everything after the header, byte for byte
    assert new.header_start == 0 and new.header_end > 0 and new.delivery_count == count
    assert (new.durable, new.priority, new.ttl, new.first_acquirer) == (
        env.durable, env.priority, env.ttl, env.first_acquirer,
    )  # fmt: skip
    assert message_fields(out) == {**message_fields(raw), "delivery_count": count}


def test_with_delivery_count_builds_a_minimal_header() -> None:
    assert with_delivery_count(b"", Envelope(), 0) == bytes.fromhex("00 53 70 45")
    assert with_delivery_count(b"", Envelope(), 3) == bytes.fromhex("00 53 70 c0 07 05 40 40 40 40 52 03")
    env = Envelope(durable=True, priority=9, ttl=1000, first_acquirer=True)
    assert with_delivery_count(b"", env, 0) == bytes.fromhex("00 53 70 c0 0a 04 41 50 09 70 00 00 03 e8 41")


def test_with_delivery_count_out_of_range() -> None:
    with pytest.raises(CodecError, match="out of range"):
        with_delivery_count(b"", Envelope(), 2**32)
    with pytest.raises(CodecError, match="out of range"):
        with_delivery_count(b"", Envelope(), -1)


# --------------------------------------------------------------------------------------------------
# with_annotations


def annotation_entries(raw: bytes, env: Envelope) -> list[tuple[object, bytes]]:
    """(key, bytes of the key/value entry) of every message annotation in order, found with decode_value."""
    if env.annotations_start < 0:
        return []
    descriptor, pos = decode_value(raw, env.annotations_start + 1)
    assert descriptor == 0x72
    pos += 3 if raw[pos] == 0xC1 else 9  # format code, size, count
    entries = []
    while pos < env.annotations_end:
        key, value_pos = decode_value(raw, pos)
        _, stop = decode_value(raw, value_pos)
        entries.append((key, raw[pos:stop]))
        pos = stop
    return entries


EXTRAS = [
    {"x-opt-new": "v"},
    {"x-opt-jms-msg-type": Byte(5)},
    {"x-opt-jms-msg-type": Byte(5), "x-opt-to-type": None, "x-opt-n": 7, "x-opt-b": b"\x01"},
    {
        "x-opt-ulong": ULong(2**64 - 1),
        "x-opt-ts": Timestamp(1),
        "x-opt-sym": Symbol("s"),
        "x-opt-flag": False,
    },
    {"x-opt-big": "y" * 300},
    {"42": "a symbol key, not the ulong key 42"},
]


def _proton_annotation(value: object) -> object:
    converted = {Byte: byte, ULong: ulong, Timestamp: timestamp, Symbol: symbol}.get(type(value))
    return value if converted is None else converted(value)


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda extra: ",".join(extra)[:40])
@pytest.mark.parametrize(("name", "raw"), MESSAGE_CASES, ids=[n for n, _ in MESSAGE_CASES])
def test_with_annotations(name: str, raw: bytes, extra: dict[str, object]) -> None:
    env = scan(raw)
    out = with_annotations(raw, env, extra)
    new = scan(out)
    # Sections before and after message-annotations are unchanged, and it sits where it belongs.
    before = env.annotations_start if env.annotations_start >= 0 else new.annotations_start
    after = env.annotations_end if env.annotations_start >= 0 else before
    assert out[:before] == raw[:before]
    assert out[new.annotations_end :] == raw[after:]
    assert new.annotations_start >= new.header_end
    assert new.annotations_end <= min(
        p for p in (new.properties_start, new.app_properties_start, new.body_start) if p >= 0
    )
    # Every entry that was not replaced keeps its exact bytes and position; new ones come last.
    old_entries, new_entries = annotation_entries(raw, env), annotation_entries(out, new)
    replaced = {key for key, _ in old_entries if type(key) is Symbol and key in extra}
    assert [k for k, _ in new_entries] == [k for k, _ in old_entries] + [Symbol(k) for k in extra if k not in replaced]
    for (key, old_bytes), (_, new_bytes) in zip(old_entries, new_entries, strict=False):
        if key in replaced:
            assert new_bytes == encode_value(key) + encode_value(extra[key])  # type: ignore[index]
        else:
            assert new_bytes == old_bytes
    # Proton reads the same message with only the annotations changed.
    expected_annotations = dict(message_fields(raw)["annotations"] or {})  # type: ignore[call-overload]
    expected_annotations.update({symbol(k): _proton_annotation(v) for k, v in extra.items()})
    fields = message_fields(out)
    assert_same(from_proton(dict(fields.pop("annotations"))), from_proton(expected_annotations))
    assert fields == {k: v for k, v in message_fields(raw).items() if k != "annotations"}


def test_with_annotations_copies_entries_it_would_encode_differently() -> None:
    # An annotations map8 whose value is a long in its 8-byte form, which encode_value never writes.
    section = bytes.fromhex("00 53 72 c1 0f 02 a3 03 6f 6c 64 81 00 00 00 00 00 00 00 01")
    raw = bytes.fromhex("00 53 70 45") + section + bytes.fromhex("00 53 77 40")
    out = with_annotations(raw, scan(raw), {"new": UByte(1)})
    new_section = "00 53 72 c1 16 04 a3 03 6f 6c 64 81 00 00 00 00 00 00 00 01 a3 03 6e 65 77 50 01"
    assert out == bytes.fromhex("00 53 70 45" + new_section + "00 53 77 40")
    assert message_fields(out)["annotations"] == {symbol("old"): 1, symbol("new"): ubyte(1)}


def test_with_annotations_empty_extra_is_identity() -> None:
    raw = _encode("jms")
    assert with_annotations(bytearray(raw), scan(raw), {}) == raw


@pytest.mark.parametrize(
    ("extra", "error", "message"),
    [
        ({1: "v"}, CodecError, "key 1 is not a string"),
        ({"\u00e9": "v"}, CodecError, "not ASCII"),
        ({"k": object()}, TypeError, "cannot encode"),
        ({"k": UInt(-1)}, CodecError, "out of range"),
    ],
)
def test_with_annotations_errors(extra: dict[object, object], error: type[Exception], message: str) -> None:
    raw = _encode("jms")
    with pytest.raises(error, match=message):
        with_annotations(raw, scan(raw), extra)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Hand-built messages: encodings proton never writes.


HAND_MESSAGE = b"".join(
    [
        by_name("amqp:header:list")
        + list32(b"\x56\x01", b"\x50\x09", UINT_1000, b"\x56\x00", b"\x70\x00\x00\x00\x05"),
        by_code(0x71) + map32(sym32("x-opt-da"), b"\x40"),
        b"\x00" + sym32("amqp:message-annotations:map")
        + map32(sym32("x-opt-a"), str32("v"), ULONG_2, b"\x41"),
        by_code(0x73)
        + list32(str32("id"), vbin32(b"user"), str32("to"), str32("subject"), str32("reply"), b"\x40",
                 sym32("text/plain"), b"\x40", TIMESTAMP_2, TIMESTAMP_1, str32("group"), b"\x40", b"\x40"),
        by_name("amqp:application-properties:map") + map32(str32("k"), str32("v")),
        by_name("amqp:data:binary") + vbin32(b"one"),
        by_code(0x75) + b"\xa0\x03two",
        by_name("amqp:footer:map") + map32(),
    ]
)  # fmt: skip


def test_scan_hand_built_message() -> None:
    env = scan(HAND_MESSAGE)
    assert (env.durable, env.priority, env.ttl, env.first_acquirer, env.delivery_count) == (
        True,
        9,
        1000,
        False,
        5,
    )
    assert env.annotations == {"x-opt-a": "v", "2": True}
    assert (env.message_id, env.user_id, env.to, env.subject, env.reply_to, env.correlation_id) == (
        "id", b"user", "to", "subject", "reply", None,
    )  # fmt: skip
    assert (env.content_type, env.absolute_expiry_time, env.creation_time, env.group_id) == (
        "text/plain",
        2,
        1,
        "group",
    )
    assert application_properties(HAND_MESSAGE, env) == {"k": "v"}
    assert HAND_MESSAGE[env.body_start :].startswith(by_name("amqp:data:binary"))


def test_rewrites_of_hand_built_message() -> None:
    env = scan(HAND_MESSAGE)
    out = with_delivery_count(HAND_MESSAGE, env, 6)
    new = scan(out)
    assert out[new.header_end :] == HAND_MESSAGE[env.header_end :]
    assert (new.durable, new.priority, new.ttl, new.first_acquirer, new.delivery_count) == (
        True,
        9,
        1000,
        False,
        6,
    )
    out = with_annotations(HAND_MESSAGE, env, {"x-opt-a": "w", "x-opt-b": 1})
    new = scan(out)
    assert new.annotations == {"x-opt-a": "w", "2": True, "x-opt-b": 1}
    # The symbolic descriptor and the ulong-keyed entry are kept as they were.
    ann = out[new.annotations_start : new.annotations_end]
    assert ann.startswith(b"\x00" + sym32("amqp:message-annotations:map") + b"\xc1")
    assert ULONG_2 + b"\x41" in ann
    assert out[: env.annotations_start] == HAND_MESSAGE[: env.annotations_start]
    assert out[new.annotations_end :] == HAND_MESSAGE[env.annotations_end :]


def test_header_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec.sections, "_HEADER_CACHE", {})
    monkeypatch.setattr(codec.sections, "_HEADER_CACHE_MAX", 1)
    for count in (1, 2, 1):
        raw = with_delivery_count(b"", Envelope(), count)
        assert scan(raw).delivery_count == count
    assert len(codec.sections._HEADER_CACHE) == 1


def test_header_with_extra_fields_and_properties_with_all_fields() -> None:
    header = b"\x00\x53\x70\xc0\x07\x06\x41\x40\x40\x40\x40\x40"
    props = b"\x00\x53\x73\xc0\x0f\x0d" + b"\x40" * 12 + b"\xa1\x00"
    env = scan(header + props)
    assert env.durable and env.properties_end == len(header + props) and env.to is None
    assert env.group_sequence is None and env.reply_to_group_id == ""


def test_scan_group_sequence_and_reply_to_group_id() -> None:
    env = scan(_encode("all-properties"))
    assert (env.group_sequence, env.reply_to_group_id) == (3, "rg")
    assert type(env.group_sequence) is int
    props = b"\x00\x53\x73\xc0\x11\x0c" + b"\x40" * 11 + b"\x70\xff\xff\xff\xff"  # uint group-sequence
    assert scan(props).group_sequence == 2**32 - 1


# Malformed messages: (hex, message). Section descriptors: 00 53 7x.
MALFORMED_MESSAGES = [
    ("40", "expected a described section at offset 0, found 0x40"),
    ("00", "truncated value at offset 1"),
    ("00 53", "truncated smallulong at offset 2"),
    ("00 53 79 45", "unknown section descriptor 0x79 at offset 0"),
    ("00 53 6f 45", "unknown section descriptor 0x6f"),
    ("00 80 00 00 00 01 00 00 00 70 45", "unknown section descriptor 0x0"),
    ("00 a3 03 66 6f 6f 45", "unknown section descriptor 0x0"),
    ("00 a1 01 78 45", "neither a ulong nor a symbol"),
    ("00 53 73 45 00 53 70 45", "section 0x70 at offset 4 may not follow section 0x73"),
    ("00 53 70 45 00 53 70 45", "section 0x70 at offset 4 may not follow section 0x70"),
    ("00 53 75 a0 00 00 53 76 45", "section 0x76 at offset 5 may not follow section 0x75"),
    ("00 53 77 40 00 53 77 40", "section 0x77 at offset 4 may not follow section 0x77"),
    ("00 53 78 c1 01 00 00 53 77 40", "may not follow section 0x78"),
    ("00 53 70", "truncated value at offset 3"),
    ("00 53 70 c1 01 00", "header at offset 3 has format code 0xc1, not a list"),
    ("00 53 70 c0 03 01 a1 00", "header at offset 3 has a field of the wrong type"),
    ("00 53 70 c0 04 02 40 55 04", "header at offset 3 has a field of the wrong type"),
    ("00 53 70 c0 02 01 42 00 53 70 c0 04 01 70 00 00", "may not follow"),
    ("00 53 70 c0 02 02 41", "header count 2 at offset 4 exceeds its 1 bytes"),
    ("00 53 72", "truncated message-annotations at offset 3"),
    ("00 53 72 45", "message-annotations at offset 3 has format code 0x45, not a map"),
    ("00 53 72 c1 02 01 40", "message-annotations at offset 4 has an odd element count 1"),
    ("00 53 72 c1 03 02 52 01", "truncated message-annotations value at offset 8"),
    ("00 53 72 c1 05 04 52 01 52 01", "truncated message-annotations key at offset 10"),
    ("00 53 72 c1 04 02 40 40 40", "message-annotations at offset 4 has 1 bytes left"),
    ("00 53 72 c1 03 02 a3 05", "truncated symbol"),
    ("00 53 73 c0 09 03 40", "properties size 9 at offset 4 does not fit"),
    ("00 53 73 c0 05 03 40 40 55 01", "properties at offset 3 has a field of the wrong type"),
    ("00 53 73 c0 04 02 40 a1 00", "properties at offset 3 has a field of the wrong type"),
    ("00 53 73 c1 01 00", "properties at offset 3 has format code 0xc1, not a list"),
    ("00 53 73 c0 0e 0c" + " 40" * 11 + " a1 00", "properties at offset 3 has a field of the wrong type"),
    ("00 53 73 c0 0d 0c" + " 40" * 11 + " 41", "properties at offset 3 has a field of the wrong type"),
    ("00 53 73 c0 0f 0d" + " 40" * 12 + " 52 01", "properties at offset 3 has a field of the wrong type"),
    ("00 53 74", "truncated value at offset 3"),
    ("00 53 74 01", "unknown format code 0x01 at offset 3"),
    ("00 53 74 a1", "truncated size at offset 4"),
    ("00 53 74 b1 00 00", "truncated size at offset 4"),
    ("00 53 74 a1 05 61", "truncated value at offset 3"),
    ("00 53 74 b1 00 00 00 05 61", "truncated value at offset 3"),
    ("00 53 75 00", "truncated value at offset 4"),
    ("00 53 75 00 53 01", "truncated value at offset 6"),
]


@pytest.mark.parametrize(("encoded", "message"), MALFORMED_MESSAGES, ids=[m for _, m in MALFORMED_MESSAGES])
def test_scan_malformed_raises_codec_error(encoded: str, message: str) -> None:
    with pytest.raises(CodecError, match=message.replace("(", r"\(")):
        scan(bytes.fromhex(encoded))


def test_scan_deeply_nested_annotations() -> None:
    nested = b"\x00\x53\x01" * 3000 + b"\x40"
    raw = b"\x00\x53\x72" + map32(b"\xa3\x01k", nested)
    with pytest.raises(CodecError, match="nested too deeply"):
        scan(raw)


def test_scan_skips_described_values_without_decoding() -> None:
    raw = b"\x00\x53\x77\x00\x53\x01\x00\xa3\x01d\xa1\x01x"
    assert scan(raw).body_start == 0


MALFORMED_APPLICATION_PROPERTIES = [
    (b"\xc1\x04\x02\x52\x01\x40", "key UInt\\(1\\) is not a string"),
    (b"\xc0\x01\x00", "application-properties at offset 3 has format code 0xc0, not a map"),
    (b"\xc1\x02\x01\x40", "odd element count"),
    (map32(b"\xa1\x01k", b"\x00\x53\x01" * 3000 + b"\x40"), "nested too deeply"),
]


@pytest.mark.parametrize(("value", "message"), MALFORMED_APPLICATION_PROPERTIES, ids=lambda v: str(v)[:30])
def test_application_properties_malformed(value: bytes, message: str) -> None:
    raw = b"\x00\x53\x74" + value
    env = scan(raw)
    with pytest.raises(CodecError, match=message):
        application_properties(raw, env)


def test_application_properties_symbol_keys_become_str() -> None:
    raw = b"\x00\x53\x74\xc1\x05\x02\xa3\x01k\x41"
    props = application_properties(raw, scan(raw))
    assert props == {"k": True} and type(next(iter(props))) is str


# --------------------------------------------------------------------------------------------------
# A small deterministic fuzz: whatever the bytes, only CodecError comes out, and rewrites stay coherent.


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        pos, choice = rng.randrange(len(out)), rng.random()
        if choice < 0.5:
            out[pos] = rng.randrange(256)
        elif choice < 0.7:
            del out[pos : pos + rng.randint(1, 8)]
        elif choice < 0.85:
            out[pos:pos] = rng.randbytes(rng.randint(1, 4))
        else:
            del out[pos:]
    return bytes(out)


def test_mutated_input_raises_only_codec_error() -> None:
    rng = random.Random(1729)
    seeds = [raw for _, raw in MESSAGE_CASES if len(raw) < 4096] + [HAND_MESSAGE]
    seeds += [proton_encode(value) for value in VALUES + ARRAYS]
    scanned = 0
    for _ in range(4000):
        raw = _mutate(rng, rng.choice(seeds))
        try:
            decode_value(raw, 0)
        except CodecError:
            pass
        try:
            env = scan(raw)
            application_properties(raw, env)
        except CodecError:
            continue
        scanned += 1
        out = with_delivery_count(raw, env, 3)
        assert scan(out).delivery_count == 3 and out.endswith(raw[env.header_end :])
        assert scan(with_annotations(raw, env, {"x-opt-z": Byte(1)})).annotations["x-opt-z"] == 1
    assert scanned > 100  # the mutations left enough valid messages to exercise the rewrites


@pytest.mark.parametrize("entries", [1, 40])  # map8, and a map32 (over 255 bytes)
def test_a_new_annotation_is_appended_to_an_existing_map_keeping_every_entry(entries):
    from proton import Message as ProtonMessage
    from proton import symbol as proton_symbol

    annotations = {proton_symbol(f"x-opt-k{i}"): "v" * 10 for i in range(entries)}
    raw = ProtonMessage(body="b", durable=True, annotations=annotations).encode()
    out = codec.with_annotations(raw, codec.scan(raw), {"x-opt-bookmark": "p|1|"})
    decoded = ProtonMessage()
    decoded.decode(out)
    assert dict(decoded.annotations) == {**annotations, proton_symbol("x-opt-bookmark"): "p|1|"}
    assert decoded.body == "b" and decoded.durable
    assert codec.scan(out).annotations["x-opt-bookmark"] == "p|1|"


@pytest.mark.parametrize("text", ["p|1|", "", "é" * 100, "b" * 240, "c" * 300])  # str8, str32, map8 to map32
@pytest.mark.parametrize(("name", "raw"), MESSAGE_CASES, ids=[n for n, _ in MESSAGE_CASES])
def test_with_string_annotation_gives_the_bytes_of_with_annotations(name: str, raw: bytes, text: str) -> None:
    env = scan(raw)
    for key in ("x-opt-bookmark", "x-opt-jms-msg-type"):  # new for most cases; present in the JMS ones
        expected = with_annotations(raw, env, {key: text})
        assert codec.with_string_annotation(raw, env, key, text) == expected
        assert codec.with_string_annotation(raw, env, key, text) == expected  # the key's encoding now cached


def test_with_string_annotation_on_a_map_with_many_entries() -> None:
    annotations = {symbol(f"x-opt-k{i}"): "v" for i in range(130)}  # 260 elements: a map32 by count
    raw = Message(body="b", annotations=annotations).encode()
    env = scan(raw)
    assert codec.with_string_annotation(raw, env, "x-opt-bookmark", "p|1|") == with_annotations(
        raw, env, {"x-opt-bookmark": "p|1|"}
    )
