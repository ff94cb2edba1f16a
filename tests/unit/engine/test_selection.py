"""engine.selection: selector identifiers read from encoded messages (mapping doc §7.7, §7.4)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import (
    Message,
    byte,
    char,
    decimal32,
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

from subgate.engine import codec, selection
from subgate.engine.selection import compile_selector, jms_correlation_id, jms_message_id, message_lookup
from subgate.mapping.selectors import SelectorError

CREATED_MS = 1_700_000_000_500


def encode(**fields: Any) -> bytes:
    return bytes(Message(**fields).encode())


# (message fields, identifier, expected value)
HEADER_CASES: list[tuple[dict[str, object], str, object]] = [
    ({"durable": True}, "JMSDeliveryMode", "PERSISTENT"),
    ({"durable": False}, "JMSDeliveryMode", "NON_PERSISTENT"),
    ({}, "JMSDeliveryMode", "NON_PERSISTENT"),
    ({}, "JMSPriority", 4),
    ({"priority": 0}, "JMSPriority", 0),
    ({"priority": 7}, "JMSPriority", 7),
    ({"priority": 200}, "JMSPriority", 9),  # the client reads values above 9 as 9
    ({"creation_time": CREATED_MS / 1000}, "JMSTimestamp", CREATED_MS),
    ({}, "JMSTimestamp", 0),
    ({"expiry_time": 1_700_000_001.25}, "JMSExpiration", 1_700_000_001_250),
    ({}, "JMSExpiration", 0),
    ({"subject": "car"}, "JMSType", "car"),
    ({}, "JMSType", None),
    ({"group_id": "g1"}, "JMSXGroupID", "g1"),
    ({}, "JMSXGroupID", None),
    ({"group_sequence": 3}, "JMSXGroupSeq", 3),
    ({}, "JMSXGroupSeq", None),
    ({"reply_to_group_id": "rg"}, "JMS_AMQP_REPLY_TO_GROUP_ID", "rg"),
    ({}, "JMS_AMQP_REPLY_TO_GROUP_ID", None),
    ({}, "JMSXDeliveryCount", 1),
    ({"delivery_count": 2}, "JMSXDeliveryCount", 3),
    # JMSDeliveryTime: x-opt-delivery-time when an integer, else the creation time
    ({"annotations": {symbol("x-opt-delivery-time"): timestamp(CREATED_MS + 5)}}, "JMSDeliveryTime", CREATED_MS + 5),
    ({"annotations": {symbol("x-opt-delivery-time"): 42}}, "JMSDeliveryTime", 42),
    ({"annotations": {symbol("x-opt-delivery-time"): True}, "creation_time": 1.0}, "JMSDeliveryTime", 1000),
    ({"annotations": {symbol("x-opt-delivery-time"): "soon"}}, "JMSDeliveryTime", 0),
    ({"creation_time": CREATED_MS / 1000}, "JMSDeliveryTime", CREATED_MS),
    ({}, "JMSDeliveryTime", 0),
    # message-id and correlation-id in their JMS string forms (§7.4)
    ({"id": "ID:abc:1:1:1-1"}, "JMSMessageID", "ID:abc:1:1:1-1"),
    ({"id": "abc"}, "JMSMessageID", "ID:AMQP_NO_PREFIX:abc"),
    ({"id": "ID:AMQP_UUID:x"}, "JMSMessageID", "ID:AMQP_STRING:ID:AMQP_UUID:x"),
    ({"id": "ID:AMQP_NO_PREFIX:x"}, "JMSMessageID", "ID:AMQP_STRING:ID:AMQP_NO_PREFIX:x"),
    ({"id": "ID:AMQP_OTHER:x"}, "JMSMessageID", "ID:AMQP_OTHER:x"),
    ({"id": uuid.UUID(int=5)}, "JMSMessageID", "ID:AMQP_UUID:00000000-0000-0000-0000-000000000005"),
    ({"id": ulong(2**64 - 1)}, "JMSMessageID", "ID:AMQP_ULONG:18446744073709551615"),
    ({"id": b"\x01\xab"}, "JMSMessageID", "ID:AMQP_BINARY:01AB"),
    ({}, "JMSMessageID", None),
    ({"correlation_id": "ID:abc"}, "JMSCorrelationID", "ID:abc"),
    ({"correlation_id": "abc"}, "JMSCorrelationID", "abc"),
    ({"correlation_id": "ID:AMQP_BINARY:01"}, "JMSCorrelationID", "ID:AMQP_STRING:ID:AMQP_BINARY:01"),
    ({"correlation_id": uuid.UUID(int=1)}, "JMSCorrelationID", "ID:AMQP_UUID:00000000-0000-0000-0000-000000000001"),
    ({"correlation_id": ulong(7)}, "JMSCorrelationID", "ID:AMQP_ULONG:7"),
    ({"correlation_id": b""}, "JMSCorrelationID", "ID:AMQP_BINARY:"),
    ({}, "JMSCorrelationID", None),
    # header names win over application-properties of the same name
    ({"priority": 7, "properties": {"JMSPriority": 1}}, "JMSPriority", 7),
    ({"properties": {"JMSType": "x"}}, "JMSType", None),
]


@pytest.mark.parametrize(
    ("fields", "name", "expected"), HEADER_CASES, ids=[f"{n}-{f!r}"[:80] for f, n, _ in HEADER_CASES]
)
def test_header_identifiers(fields: dict[str, object], name: str, expected: object) -> None:
    value = message_lookup(encode(**fields))(name)
    assert value == expected
    assert type(value) is type(expected)


APP_PROPERTIES = {
    "bool": True, "ubyte": ubyte(1), "byte": byte(-1), "ushort": ushort(2), "short": short(-2), "uint": uint(3),
    "int": int32(-3), "ulong": ulong(4), "long": 2**40, "float": float32(0.5), "double": 0.25, "char": char("c"),
    "timestamp": timestamp(5), "string": "s", "symbol": symbol("sym"), "null": None,
    "binary": b"\x00", "uuid": uuid.UUID(int=5), "list": [1], "map": {"k": 1}, "decimal32": decimal32(1),
}  # fmt: skip

# (application property, plain value); values with no selector type come back as the codec decodes them
APP_CASES: list[tuple[str, object]] = [
    ("bool", True),
    ("ubyte", 1),
    ("byte", -1),
    ("ushort", 2),
    ("short", -2),
    ("uint", 3),
    ("int", -3),
    ("ulong", 4),
    ("long", 2**40),
    ("float", 0.5),
    ("double", 0.25),
    ("char", "c"),
    ("timestamp", 5),
    ("string", "s"),
    ("symbol", "sym"),
    ("null", None),
    ("absent", None),
    ("binary", b"\x00"),
    ("uuid", uuid.UUID(int=5)),
    ("list", [1]),
    ("map", {"k": 1}),
]


@pytest.mark.parametrize(("name", "expected"), APP_CASES, ids=[n for n, _ in APP_CASES])
def test_application_properties_are_plain_values(name: str, expected: object) -> None:
    value = message_lookup(encode(properties=APP_PROPERTIES))(name)
    assert value == expected
    assert type(value) is type(expected)


def test_decimal_property_is_returned_as_decoded() -> None:
    value = message_lookup(encode(properties=APP_PROPERTIES))("decimal32")
    assert isinstance(value, codec.Decimal32)


def test_message_without_application_properties() -> None:
    lookup = message_lookup(encode(durable=True))
    assert lookup("color") is None
    assert lookup("JMSDeliveryMode") == "PERSISTENT"


def test_application_properties_are_decoded_lazily_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    decode = codec.application_properties

    def counting(raw: bytes, env: codec.Envelope) -> dict[str, object]:
        calls.append(1)
        return decode(raw, env)

    monkeypatch.setattr(codec, "application_properties", counting)
    lookup = message_lookup(encode(priority=6, properties={"a": int32(1), "b": "x"}))
    assert (lookup("JMSPriority"), lookup("JMSDeliveryMode")) == (6, "NON_PERSISTENT")
    assert calls == []
    assert (lookup("a"), lookup("b"), lookup("c"), lookup("a")) == (1, "x", None, 1)
    assert calls == [1]


def test_lookup_uses_a_given_envelope(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = encode(subject="t", properties={"a": 1})
    env = codec.scan(raw)

    def no_scan(raw: bytes) -> codec.Envelope:
        raise AssertionError("scanned again")

    monkeypatch.setattr(codec, "scan", no_scan)
    lookup = message_lookup(raw, env)
    assert (lookup("JMSType"), lookup("a")) == ("t", 1)


def test_lookup_caches_each_name(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def subject(env: codec.Envelope) -> object:
        calls.append("JMSType")
        return env.subject

    monkeypatch.setitem(selection._HEADERS, "JMSType", subject)
    lookup = message_lookup(encode(subject="t"))
    assert (lookup("JMSType"), lookup("JMSType")) == ("t", "t")
    assert calls == ["JMSType"]


@pytest.mark.parametrize(
    ("value", "message_id", "correlation_id"),
    [
        (None, None, None),
        (codec.Symbol("x"), "ID:AMQP_NO_PREFIX:x", "x"),
        (codec.Symbol("ID:x"), "ID:x", "ID:x"),
        ("ID:AMQP_ULONG:1", "ID:AMQP_STRING:ID:AMQP_ULONG:1", "ID:AMQP_STRING:ID:AMQP_ULONG:1"),
        ("ID:AMQP_STRING:s", "ID:AMQP_STRING:ID:AMQP_STRING:s", "ID:AMQP_STRING:ID:AMQP_STRING:s"),
        ("ID:", "ID:", "ID:"),
        ("", "ID:AMQP_NO_PREFIX:", ""),
        ("id:lower", "ID:AMQP_NO_PREFIX:id:lower", "id:lower"),
        (codec.ULong(0), "ID:AMQP_ULONG:0", "ID:AMQP_ULONG:0"),
        (5, None, None),  # a long is not an AMQP message-id type
        (codec.UInt(5), None, None),
        (codec.Decimal32(b"\x00" * 4), None, None),
        (1.5, None, None),
    ],
)
def test_id_strings(value: object, message_id: str | None, correlation_id: str | None) -> None:
    assert jms_message_id(value) == message_id
    assert jms_correlation_id(value) == correlation_id
    assert message_id is None or type(jms_message_id(value)) is str
    assert correlation_id is None or type(jms_correlation_id(value)) is str


# (selector, message fields, matches)
SELECTOR_CASES: list[tuple[str, dict[str, object], bool]] = [
    ("JMSDeliveryMode = 'PERSISTENT'", {"durable": True}, True),
    ("JMSDeliveryMode = 'PERSISTENT'", {}, False),
    ("JMSPriority > 5", {"priority": 6}, True),
    ("JMSPriority > 5", {}, False),
    ("JMSPriority = 4", {}, True),
    ("JMSMessageID = 'ID:AMQP_NO_PREFIX:abc'", {"id": "abc"}, True),
    ("JMSMessageID LIKE 'ID:AMQP_UUID:%'", {"id": uuid.UUID(int=5)}, True),
    ("JMSMessageID = 'ID:AMQP_ULONG:9'", {"id": ulong(9)}, True),
    ("JMSMessageID IS NULL", {}, True),
    ("JMSCorrelationID = 'abc'", {"correlation_id": "abc"}, True),
    ("JMSCorrelationID = 'ID:AMQP_BINARY:0A'", {"correlation_id": b"\n"}, True),
    ("JMSTimestamp >= 1700000000000", {"creation_time": CREATED_MS / 1000}, True),
    ("JMSTimestamp = 0", {}, True),
    ("JMSType = 'car' AND color = 'blue'", {"subject": "car", "properties": {"color": "blue"}}, True),
    ("JMSType = 'car' AND color = 'blue'", {"subject": "car", "properties": {"color": "red"}}, False),
    ("JMSXGroupID = 'g' AND JMSXGroupSeq = 2", {"group_id": "g", "group_sequence": 2}, True),
    ("JMSXGroupSeq IS NULL", {}, True),
    ("JMSExpiration = 0", {}, True),
    ("JMSXDeliveryCount > 1", {"delivery_count": 1}, True),
    ("weight > 2500", {"properties": {"weight": int32(3000)}}, True),
    ("weight > 2500", {"properties": {"weight": "3000"}}, False),
    ("weight BETWEEN 0.25 AND 0.75", {"properties": {"weight": float32(0.5)}}, True),
    ("small = 1", {"properties": {"small": byte(1)}}, True),
    ("sym = 'x'", {"properties": {"sym": symbol("x")}}, True),
    ("flag", {"properties": {"flag": True}}, True),
    ("NOT flag", {"properties": {"flag": False}}, True),
    ("data IS NOT NULL", {"properties": {"data": b"\x00"}}, True),
    ("data = 'x'", {"properties": {"data": b"x"}}, False),
    ("NOT (data = 'x')", {"properties": {"data": b"x"}}, True),
    ("color IS NULL", {}, True),
    ("Color = 'blue'", {"properties": {"color": "blue"}}, False),
]


@pytest.mark.parametrize(("text", "fields", "expected"), SELECTOR_CASES, ids=[t for t, _, _ in SELECTOR_CASES])
def test_compile_selector(text: str, fields: dict[str, object], expected: bool) -> None:
    matches = compile_selector(text)
    assert matches is not None
    assert matches(encode(**fields)) is expected


@pytest.mark.parametrize("text", [None, "", "   ", "\t\n"])
def test_compile_selector_blank_means_no_selector(text: str | None) -> None:
    assert compile_selector(text) is None


def test_compile_selector_invalid_raises() -> None:
    with pytest.raises(SelectorError, match="at position 15$") as info:
        compile_selector("JMSPriority AND")
    assert info.value.position == 15
    with pytest.raises(SelectorError) as info:
        compile_selector("a = 'x")
    assert info.value.position == 4


HAND_APP_PROPERTIES_WITH_NUMBER_KEY = bytes.fromhex("00 53 74 c1 04 02 55 01 40")


def test_compile_selector_on_undecodable_messages() -> None:
    by_header = compile_selector("JMSPriority = 4")
    by_property = compile_selector("a IS NULL")
    assert by_header is not None and by_property is not None
    assert by_header(b"\x40") is False  # not a message at all
    assert by_header(HAND_APP_PROPERTIES_WITH_NUMBER_KEY) is True  # application-properties never decoded
    assert by_property(HAND_APP_PROPERTIES_WITH_NUMBER_KEY) is False
    with pytest.raises(codec.CodecError):
        message_lookup(HAND_APP_PROPERTIES_WITH_NUMBER_KEY)("a")


def test_compile_selector_accepts_bytearray() -> None:
    matches = compile_selector("JMSType = 't' AND n = 1")
    assert matches is not None
    assert matches(bytearray(encode(subject="t", properties={"n": 1}))) is True  # type: ignore[arg-type]
