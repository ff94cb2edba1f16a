"""``wire.MessageEncoder``: the bytes it builds decode, with proton, to the message proton's own encoder makes."""

from __future__ import annotations

import pytest
from proton import Message

from subgate.client.wire import MessageEncoder, encode_with_proton


def decoded(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def summary(message: Message) -> tuple:
    body = bytes(message.body) if isinstance(message.body, memoryview) else message.body
    return body, message.durable, dict(message.annotations), message.properties


@pytest.mark.parametrize(
    ("body", "properties"),
    [
        (b"x" * 1024, None),  # vbin32 data section
        (b"ab", None),  # vbin8
        (b"", None),
        ("héllo", None),  # str8 amqp-value
        ("y" * 300, None),  # str32
        ({"pair": "EURUSD", "bid": 1.0841}, None),  # any other body: proton
        (b"with properties", {"venue": "lp1"}),  # properties: proton
        (None, None),
    ],
)
@pytest.mark.parametrize("publisher_id", ["feed-1", "é" * 300])  # str8 and str32 ids
def test_the_fast_encoding_decodes_like_protons(body, properties, publisher_id):
    encoder = MessageEncoder(publisher_id)
    for seq in (1, 255, 2**40 + 7):
        fast = decoded(encoder.encode(body, properties, seq))
        slow = decoded(encode_with_proton(body, properties, publisher_id, seq))
        assert summary(fast) == summary(slow)
        assert fast.annotations["x-opt-publisher-seq"] == seq
        assert fast.annotations["x-opt-publisher-id"] == publisher_id


def test_bytes_bodies_go_in_a_data_section_and_str_bodies_in_an_amqp_value():
    encoder = MessageEncoder("p")
    assert decoded(encoder.encode(b"raw", None, 1)).inferred  # a data section
    assert not decoded(encoder.encode("text", None, 1)).inferred  # an amqp-value
