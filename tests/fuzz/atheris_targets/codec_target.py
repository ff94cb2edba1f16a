"""atheris target: the AMQP codec (``subgate.engine.codec``) fed arbitrary bytes as a value and as a message.

Contract checked (the codec's docstring): ``decode_value``, ``scan``, ``application_properties`` and
``encode_value`` of what was decoded raise ``CodecError`` and nothing else (no ``IndexError``, ``struct.error``,
``RecursionError``, ``UnicodeDecodeError``); a decoded value ends inside the input. For a message that scans, the
rewrites the broker makes (``with_delivery_count``, ``with_annotations``, ``moved_copy``) give bytes that scan
again with the rewritten fields, and a scan through an ``AnnotationMemo`` (primed with the same message, as a
publisher link repeats its annotations) reads the same annotations as a scan without it.
"""

from __future__ import annotations

import uuid

from proton import Message, symbol, ulong

from subgate.engine.codec import (
    AnnotationMemo,
    CodecError,
    Described,
    Symbol,
    ULong,
    application_properties,
    decode_value,
    encode_value,
    moved_copy,
    scan,
    with_annotations,
    with_delivery_count,
)

INSTRUMENT = ("subgate.engine.codec",)
MAX_LEN = 4096
DICTIONARY = (
    b"\x00\x53\x70",  # header
    b"\x00\x53\x71",  # delivery-annotations
    b"\x00\x53\x72",  # message-annotations
    b"\x00\x53\x73",  # properties
    b"\x00\x53\x74",  # application-properties
    b"\x00\x53\x75",  # data
    b"\x00\x53\x77",  # amqp-value
    b"\x00\x53\x78",  # footer
    b"\xa3\x13x-opt-publisher-seq",
    b"\xc0",
    b"\xd0",
    b"\xc1",
    b"\xd1",
    b"\xe0",
    b"\xf0",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x00\x00\x00",
)


def seeds() -> list[bytes]:
    """Real encodings: proton messages of several shapes, and values from ``encode_value``."""
    plain = Message(body="hello")
    full = Message(
        id="ID:1",
        correlation_id=uuid.UUID(int=7),
        subject="s",
        reply_to="q",
        durable=True,
        priority=7,
        ttl=5.0,
        delivery_count=2,
        group_id="g",
        group_sequence=3,
        user_id=b"alice",
        content_type=symbol("text/plain"),
        properties={"color": "red", "n": 5, "f": 1.5, "b": True, "u": uuid.UUID(int=1)},
        annotations={symbol("x-opt-publisher-seq"): ulong(9), symbol("x-opt-delivery-time"): 17},
        instructions={symbol("x-opt-di"): "v"},
        body={"nested": [1, [2, [3, {"k": b"v"}]]]},
    )
    binary = Message(body=b"\x00" * 40, properties={"k": None})
    listed = Message(body=[1, "two", 3.0, None, True])
    encoded = [message.encode() for message in (plain, full, binary, listed)]
    values: list[object] = [
        None,
        True,
        -5,
        2**40,
        "text",
        b"bin",
        Symbol("sym"),
        ULong(3),
        [1, [2, [3]]],
        {"a": {"b": {"c": 1}}},
        Described(ULong(0x77), "v"),
    ]
    return encoded + [encode_value(value) for value in values]


def test_one(data: bytes) -> None:
    try:
        value, end = decode_value(data)
    except CodecError:
        pass
    else:
        assert 0 < end <= len(data), (end, len(data))
        try:
            encode_value(value)
        except CodecError:
            pass
    try:
        env = scan(data)
    except CodecError:
        return
    try:
        application_properties(data, env)
    except CodecError:
        pass
    _check_rewrites(data, env)


def _check_rewrites(data: bytes, env: object) -> None:
    memo = AnnotationMemo("x-opt-publisher-seq")
    first = scan(data, memo)
    again = scan(data, memo)
    plain = scan(data).annotations
    assert repr(again.annotations) == repr(first.annotations) == repr(plain), (again.annotations, plain)  # NaN-safe
    counted = scan(with_delivery_count(data, first, 5))
    assert counted.delivery_count == 5, counted.delivery_count
    annotated = scan(with_annotations(data, first, {"x-opt-fuzz": 1}))
    assert annotated.annotations.get("x-opt-fuzz") == 1, annotated.annotations
    moved = scan(moved_copy(data, first, {"x-opt-moved": "q"}, keep_expiry=False))
    assert moved.annotations.get("x-opt-moved") == "q", moved.annotations
