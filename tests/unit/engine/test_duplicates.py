"""Duplicate detection by publisher identity (engine.duplicates)."""

from __future__ import annotations

import pytest

from subgate.engine import codec
from subgate.engine.codec import AnnotationMemo
from subgate.engine.duplicates import DUPLICATE, PUBLISHER_SEQ, PublisherMarks, identity_through, publisher_identity
from subgate.mapping.errors import INVALID_FIELD, Refused


def test_identity_from_the_annotations():
    assert publisher_identity(None) is None
    assert publisher_identity({"x-opt-jms-dest": 0}) is None
    assert publisher_identity({"x-opt-publisher-id": "p", "x-opt-publisher-seq": 3}) == ("p", 3)


@pytest.mark.parametrize(
    "annotations",
    [
        {"x-opt-publisher-id": "p"},
        {"x-opt-publisher-seq": 1},
        {"x-opt-publisher-id": 5, "x-opt-publisher-seq": 1},
        {"x-opt-publisher-id": "p", "x-opt-publisher-seq": -1},
        {"x-opt-publisher-id": "p", "x-opt-publisher-seq": True},
        {"x-opt-publisher-id": "p" * 513, "x-opt-publisher-seq": 1},
    ],
)
def test_bad_annotations_are_refused(annotations):
    with pytest.raises(Refused) as caught:
        publisher_identity(annotations)
    assert caught.value.condition == INVALID_FIELD


def _admit(marks: PublisherMarks, publisher: str, seq: int) -> bool:
    """True (and the mark raised) when the message was not a duplicate."""
    identity = _check(marks, AnnotationMemo(PUBLISHER_SEQ), _numbered(publisher, seq))
    assert identity in (DUPLICATE, (publisher, seq))
    return identity is not DUPLICATE


def _check(marks: PublisherMarks, memo: AnnotationMemo, raw: bytes) -> tuple[str, int] | None:
    hits = memo.hits
    return marks.check(memo, hits, codec.scan(raw, memo).annotations)


def test_a_seq_not_above_the_mark_is_a_duplicate_and_counted():
    marks = PublisherMarks({"p": 10})
    assert not _admit(marks, "p", 10) and not _admit(marks, "p", 3)
    assert _admit(marks, "p", 11) and _admit(marks, "q", 0)
    assert not _admit(marks, "p", 11) and _admit(marks, "p", 12)
    assert marks.view("p") == {"publisher-id": "p", "high-water": 12, "duplicates": 3}


def test_a_refused_message_gets_its_publishers_mark_back():
    marks = PublisherMarks({"p": 10})
    memo = AnnotationMemo(PUBLISHER_SEQ)
    for _ in range(3):  # let through, then refused for another reason (a full queue): still new the next time
        assert _check(marks, memo, _numbered("p", 11)) == ("p", 11)
        marks.refused(("p", 11))
    assert memo.hits == 2 and marks.view("p")["high-water"] == 10
    assert _check(marks, memo, _numbered("p", 11)) == ("p", 11)
    assert _check(marks, memo, _numbered("p", 11)) is DUPLICATE  # recalled through the memo: judged the same
    assert _check(marks, memo, _numbered("p", 12)) == ("p", 12)
    assert _check(marks, memo, _numbered("other", 1)) == ("other", 1)  # another map: decoded in full
    marks.refused(("other", 1))  # a publisher seen first in a refused message has no mark at all
    assert "other" not in marks.marks
    from proton import Message

    assert _check(marks, memo, bytes(Message(body=b"x").encode())) is None


def test_a_write_that_failed_lowers_the_mark_so_that_the_resend_is_taken():
    marks = PublisherMarks()
    assert _admit(marks, "p", 1) and _admit(marks, "p", 2)
    marks.not_written("p", 2)
    assert _admit(marks, "p", 2)
    marks.not_written("p", 1)  # a later one was taken since: the mark goes below the failed one anyway
    assert _admit(marks, "p", 1)


def _numbered(publisher: str | None, seq: int) -> bytes:
    """A loadgen-shaped message: header, annotations map32 {x-opt-publisher-id: str32 (null for None),
    x-opt-publisher-seq: ulong}, a data section."""
    import struct

    entries = b"\xa3\x12x-opt-publisher-id"
    entries += b"\x40" if publisher is None else b"\xb1" + struct.pack(">I", len(publisher)) + publisher.encode()
    entries += b"\xa3\x13x-opt-publisher-seq\x80" + struct.pack(">Q", seq)
    section = b"\x00\x53\x72\xd1" + struct.pack(">II", len(entries) + 4, 4) + entries
    return b"\x00\x53\x70\xc0\x02\x01\x41" + section + b"\x00\x53\x75\xa0\x01x"


def _through(memo: AnnotationMemo, raw: bytes) -> tuple[str, int] | None:
    hits = memo.hits
    return identity_through(memo, hits, codec.scan(raw, memo).annotations)


def test_identity_through_the_memo_gives_what_publisher_identity_gives():
    memo = AnnotationMemo(PUBLISHER_SEQ)
    for seq in (1, 2, 300, 2**40, 2**63 - 1):
        raw = _numbered("feed-1", seq)
        assert _through(memo, raw) == publisher_identity(codec.scan(raw).annotations) == ("feed-1", seq)
    assert memo.hits == 4 and memo.note == "feed-1"
    with pytest.raises(Refused, match="from 0 to 9223372036854775807"):  # a recalled seq out of range: refused
        _through(memo, _numbered("feed-1", 2**63))
    assert _through(memo, _numbered("feed-2", 7)) == ("feed-2", 7)  # another map: decoded, a new note
    assert memo.note == "feed-2"
    assert _through(memo, _numbered("feed-2", 8)) == ("feed-2", 8)


def test_identity_through_the_memo_of_maps_without_or_with_a_bad_identity():
    memo = AnnotationMemo(PUBLISHER_SEQ)
    from proton import Message, byte, symbol

    plain = bytes(Message(body=b"x", annotations={symbol("x-opt-jms-msg-type"): byte(3)}).encode())
    for _ in range(3):
        assert _through(memo, plain) is None
    assert memo.note == "" and memo.hits == 2
    for seq in (5, 6):  # a null id is a missing one: refused every time, recalled or not
        with pytest.raises(Refused, match="go together"):
            _through(memo, _numbered(None, seq))
