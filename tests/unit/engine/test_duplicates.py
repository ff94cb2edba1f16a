"""Duplicate detection by publisher identity (engine.duplicates)."""

from __future__ import annotations

import pytest

from subgate.engine.duplicates import PublisherMarks, publisher_identity
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


def test_a_seq_not_above_the_mark_is_a_duplicate_and_counted():
    marks = PublisherMarks({"p": 10})
    assert not marks.admit("p", 10) and not marks.admit("p", 3)
    assert marks.admit("p", 11) and marks.admit("q", 0)
    assert marks.is_duplicate("p", 11) and not marks.is_duplicate("p", 12)
    assert marks.view("p") == {"publisher-id": "p", "high-water": 11, "duplicates": 2}


def test_a_write_that_failed_lowers_the_mark_so_that_the_resend_is_taken():
    marks = PublisherMarks()
    assert marks.admit("p", 1) and marks.admit("p", 2)
    marks.not_written("p", 2)
    assert marks.admit("p", 2)
    marks.not_written("p", 1)  # a later one was admitted since: the mark goes below the failed one anyway
    assert marks.admit("p", 1)
