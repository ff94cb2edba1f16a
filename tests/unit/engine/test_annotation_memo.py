"""codec.memo: a publisher link's annotation map decoded once gives exactly what decoding every message gives."""

from __future__ import annotations

import random

import pytest
from proton import Message, symbol, ulong

from subgate.engine import codec
from subgate.engine.codec import AnnotationMemo, CodecError, ULong

SEQ = "x-opt-publisher-seq"


def message(annotations: dict[object, object] | None, body: bytes = b"x" * 64) -> bytes:
    msg = Message(body=body, durable=True)
    if annotations is not None:
        msg.annotations = annotations
    return bytes(msg.encode())


def with_id(seq: int, publisher: str = "feed-1", **more: object) -> bytes:
    annotations: dict[object, object] = {symbol("x-opt-publisher-id"): publisher, symbol(SEQ): ulong(seq)}
    annotations.update({symbol(k.replace("_", "-")): v for k, v in more.items()})
    return message(annotations)


def test_the_seq_hole_is_read_from_each_message_and_the_rest_comes_from_the_template():
    memo = AnnotationMemo(SEQ)
    first = codec.scan(with_id(1000), memo)  # proton writes a seq below 256 as a smallulong: no hole then
    assert memo.hits == 0
    for seq in (1001, 1002, 2**40, 2**63 - 1):
        env = codec.scan(with_id(seq), memo)
        assert env.annotations == {"x-opt-publisher-id": "feed-1", SEQ: seq}
        assert type(env.annotations[SEQ]) is ULong
        assert env.annotations == codec.scan(with_id(seq)).annotations
    assert memo.hits == 4
    assert first.annotations[SEQ] == 1000


def test_a_recalled_map_is_a_copy():
    memo = AnnotationMemo(SEQ)
    codec.scan(with_id(1000), memo)
    env = codec.scan(with_id(1001), memo)
    env.annotations["x-opt-publisher-id"] = "changed"
    assert codec.scan(with_id(1002), memo).annotations["x-opt-publisher-id"] == "feed-1"
    assert memo.hits == 2


def test_a_constant_map_without_the_hole_key_is_recalled_whole():
    memo = AnnotationMemo(SEQ)
    jms = {symbol("x-opt-jms-msg-type"): 5, symbol("x-opt-jms-dest"): 1}
    codec.scan(message(jms), memo)
    env = codec.scan(message(jms, b"other body"), memo)
    assert memo.hits == 1
    assert env.annotations == {"x-opt-jms-msg-type": 5, "x-opt-jms-dest": 1}


@pytest.mark.parametrize(
    "second",
    [
        with_id(1001, publisher="feed-2"),  # another id, same length
        with_id(1001, publisher="feed-10"),  # another length
        with_id(1001, x_opt_delivery_delay=5),  # one more entry
        with_id(7),  # the seq as a smallulong
        message({symbol("x-opt-publisher-id"): "feed-1", symbol(SEQ): 7}),  # the seq as a long, not a ulong
        message(None),
    ],
)
def test_anything_else_is_decoded_in_full(second):
    memo = AnnotationMemo(SEQ)
    codec.scan(with_id(1000), memo)
    assert codec.scan(second, memo).annotations == codec.scan(second).annotations
    assert memo.hits == 0


def test_maps_with_mutable_values_are_not_kept():
    memo = AnnotationMemo(SEQ)
    nested = {symbol("x-opt-list"): [1, 2], symbol(SEQ): ulong(1000)}
    codec.scan(message(nested), memo)
    env = codec.scan(message(nested), memo)
    assert memo.hits == 0
    assert env.annotations["x-opt-list"] == [1, 2]


def test_a_message_cut_inside_a_matching_section_is_still_malformed():
    memo = AnnotationMemo(SEQ)
    codec.scan(with_id(1000), memo)
    raw = with_id(1001)
    env = codec.scan(raw)
    for cut in range(env.annotations_start + 1, env.annotations_end):
        with pytest.raises(CodecError):
            codec.scan(raw[:cut], memo)


def test_random_byte_changes_give_what_full_decoding_gives():
    """Every mutation of a learned message: the memo's answer (or error) equals the plain scan's."""
    rng = random.Random(20261125)
    base = with_id(4100, x_opt_jms_dest=1)
    hits = 0
    for _ in range(3000):
        memo = AnnotationMemo(SEQ)
        codec.scan(with_id(4000, x_opt_jms_dest=1), memo)
        raw = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        mutated = bytes(raw)
        try:
            expected = codec.scan(mutated)
        except CodecError:
            with pytest.raises(CodecError):
                codec.scan(mutated, memo)
            continue
        assert codec.scan(mutated, memo) == expected
        hits += memo.hits
    assert hits > 300  # a mutation outside the annotations leaves them to the memo


def _framed(header: Message, seq: int) -> bytes:
    header.annotations = {symbol("x-opt-publisher-id"): "feed-1", symbol(SEQ): ulong(seq)}
    return bytes(header.encode())


def test_a_repeated_header_is_recalled_with_the_map_and_a_changed_one_is_read():
    memo = AnnotationMemo(SEQ)
    codec.scan(_framed(Message(body=b"b", durable=True, priority=4), 1000), memo)
    same = _framed(Message(body=b"b", durable=True, priority=4), 1001)
    assert codec.scan(same, memo) == codec.scan(same)  # header and map from the memo's lead
    assert memo.hits == 1
    for priority, ttl in ((9, None), (4, 5.0), (0, 1.5)):  # the lead differs: the header is read, the map recalled
        varied = Message(body=b"b", durable=False, priority=priority)
        if ttl is not None:
            varied.ttl = ttl
        other = _framed(varied, 1002)
        env = codec.scan(other, memo)
        assert env == codec.scan(other)
        assert (env.durable, env.priority, env.ttl) == (False, priority, None if ttl is None else int(ttl * 1000))
    assert memo.hits == 4
    again = _framed(Message(body=b"b", durable=True, priority=4), 1003)
    assert codec.scan(again, memo) == codec.scan(again)
    assert memo.hits == 5


def test_a_lead_with_delivery_annotations_is_recalled_whole():
    memo = AnnotationMemo(SEQ)
    first = Message(body=b"b", durable=True)
    first.instructions = {symbol("x-opt-da"): "v"}
    codec.scan(_framed(first, 1000), memo)
    for da in ("v", "w"):  # equal: recalled with the lead; different: read, the map recalled
        later = Message(body=b"b", durable=True)
        later.instructions = {symbol("x-opt-da"): da}
        raw = _framed(later, 1001)
        assert codec.scan(raw, memo) == codec.scan(raw)
    assert memo.hits == 2
