"""Bookmark stores: what they filter, where they resume, and that the logged and ring files survive a crash."""

from __future__ import annotations

import os
import random

import pytest

from subgate.client import EPOCH, NOW, LoggedBookmarkStore, MemoryBookmarkStore, RingBookmarkStore
from subgate.client.stores import BookmarkStore


def marks(*seqs: int) -> list[str]:
    return [f"p|{s}|" for s in seqs]


@pytest.fixture(params=["memory", "logged"])
def store(request, tmp_path) -> BookmarkStore:
    if request.param == "memory":
        return MemoryBookmarkStore()
    return LoggedBookmarkStore(tmp_path / "sub.log")


def test_an_unknown_subscription_has_no_recovery_bookmark(store):
    assert store.recovery_bookmark("s") is None


def test_discarding_in_order_resumes_after_the_last_discarded(store):
    store.set_start("s", EPOCH)
    for mark in marks(1, 2, 3):
        assert store.log("s", mark)
    assert store.recovery_bookmark("s") == EPOCH
    store.discard("s", "p|1|")
    store.discard("s", "p|2|")
    assert store.recovery_bookmark("s") == "p|2|"
    assert store.is_pending("s", "p|3|") and not store.is_pending("s", "p|2|")


def test_out_of_order_discards_resume_at_the_earliest_undiscarded_and_list_the_later_discards(store):
    store.set_start("s", NOW)
    for mark in marks(1, 2, 3, 4, 5):
        store.log("s", mark)
    for seq in (1, 3, 5):
        store.discard("s", f"p|{seq}|")
    assert store.recovery_bookmark("s") == "p|1|,p|3|,p|5|"
    assert store.log("s", "p|3|") is False  # already discarded: a duplicate
    assert store.log("s", "p|2|") is False  # redelivered in this process: out of order, the app holds it
    assert store.dropped == 2


def test_out_of_order_messages_from_one_publisher_are_dropped_and_counted(store):
    store.set_start("s", EPOCH)
    assert [store.log("s", m) for m in marks(1000, 1002, 999)] == [True, True, False]
    assert store.dropped == 1


def test_set_start_begins_the_record_afresh(store):
    store.set_start("s", EPOCH)
    store.log("s", "p|1|")
    store.log("s", "p|2|")
    store.discard("s", "p|1|")
    store.set_start("s", "p|9|")
    assert store.recovery_bookmark("s") == "p|9|"
    store.set_start("s", EPOCH)
    assert store.log("s", "p|1|") and store.log("s", "p|2|")  # replayed on purpose: not out of order


def test_a_logged_store_reopened_resumes_where_the_last_process_left_off(tmp_path):
    path = tmp_path / "sub.log"
    first = LoggedBookmarkStore(path)
    first.set_start("s", EPOCH)
    for mark in marks(1, 2, 3, 4):
        first.log("s", mark)
    first.discard("s", "p|1|")
    first.discard("s", "p|3|")
    first.close()
    again = LoggedBookmarkStore(path)
    assert again.recovery_bookmark("s") == "p|1|,p|3|"
    assert again.log("s", "p|2|") is True  # received but never discarded: the new process gets it again
    assert again.log("s", "p|3|") is False  # discarded: filtered


def _reference(records: list[tuple[str, str]]) -> str | None:
    store = MemoryBookmarkStore()
    store.set_start("s", EPOCH)
    for kind, mark in records:
        store.log("s", mark) if kind == "R" else store.discard("s", mark)
    return store.recovery_bookmark("s")


def test_a_logged_store_cut_at_any_byte_recovers_a_consistent_prefix(tmp_path):
    """A process killed mid-write leaves a prefix of the file: recovery is what the records before the cut say."""
    rng = random.Random(14)
    path = tmp_path / "full.log"
    store = LoggedBookmarkStore(path)
    store.set_start("s", EPOCH)
    records: list[tuple[str, str]] = []
    received: list[str] = []
    for seq in range(1, 41):
        received.append(f"p|{seq}|")
        store.log("s", received[-1])
        records.append(("R", received[-1]))
        if rng.random() < 0.7:
            mark = received.pop(rng.randrange(len(received)))
            store.discard("s", mark)
            records.append(("D", mark))
    store.close()
    data = path.read_bytes()
    line_ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    for cut in sorted(rng.sample(range(len(data) + 1), 60)) + [0, len(data)]:
        cut_path = tmp_path / f"cut-{cut}.log"
        cut_path.write_bytes(data[:cut])
        whole_lines = sum(1 for end in line_ends if end <= cut)
        recovered = LoggedBookmarkStore(cut_path)
        expected = _reference(records[: max(0, whole_lines - 1)]) if whole_lines else None
        assert recovered.recovery_bookmark("s") == expected, cut
        assert os.path.getsize(cut_path) == (line_ends[whole_lines - 1] if whole_lines else 0)  # partial line cut
        recovered.close()


def test_a_logged_store_compacts_itself_and_keeps_its_answers(tmp_path):
    path = tmp_path / "sub.log"
    store = LoggedBookmarkStore(path, compact_after=100)
    store.set_start("s", EPOCH)
    for seq in range(1, 501):
        store.log("s", f"p|{seq}|")
        if seq != 250:
            store.discard("s", f"p|{seq}|")
    expected = store.recovery_bookmark("s")
    assert expected is not None and expected.startswith("p|249|,p|251|")
    lines = path.read_text().splitlines()
    assert len(lines) < 600  # fewer than the 1,001 records written: the discarded head was dropped
    assert lines[0].startswith('["S", "s", "p|')  # the start moved past EPOCH
    store.close()
    assert LoggedBookmarkStore(path).recovery_bookmark("s") == expected
    assert not (tmp_path / "sub.log.compacting").exists()


def test_a_ring_store_keeps_the_last_discarded_per_subscription_and_does_not_filter(tmp_path):
    path = tmp_path / "ring"
    ring = RingBookmarkStore(path, slots=4)
    ring.set_start("a", EPOCH)
    assert ring.recovery_bookmark("a") == EPOCH
    for seq in range(1, 6):
        assert ring.log("a", f"p|{seq}|")
        ring.discard("a", f"p|{seq}|")
    ring.discard("b", "q|9|")
    assert ring.log("a", "p|3|") is True  # no filtering
    ring.close()
    size = os.path.getsize(path)
    again = RingBookmarkStore(path, slots=4)
    assert again.recovery_bookmark("a") == "p|5|" and again.recovery_bookmark("b") == "q|9|"
    assert os.path.getsize(path) == size  # fixed size


def test_a_torn_ring_write_leaves_the_previous_value(tmp_path):
    path = tmp_path / "ring"
    ring = RingBookmarkStore(path, slots=2)
    ring.discard("a", "p|1|")
    ring.discard("a", "p|2|")
    ring.close()
    # The next write goes to the entry holding p|1| (counter 1, the older); tear it: half the bytes are garbage.
    with open(path, "r+b") as f:
        f.seek(512 + 10)
        f.write(b"\xff" * 20)
    assert RingBookmarkStore(path, slots=2).recovery_bookmark("a") == "p|2|"


def test_a_full_ring_says_so(tmp_path):
    ring = RingBookmarkStore(tmp_path / "ring", slots=1)
    ring.discard("a", "p|1|")
    with pytest.raises(ValueError, match="no free slot"):
        ring.discard("b", "p|1|")


@pytest.mark.parametrize("compact_after", [10_000, 5])
def test_what_was_discarded_before_the_start_stays_filtered_after_a_restart(tmp_path, compact_after):
    """A durable subscription's server may redeliver messages discarded just before a crash (its acks are
    persisted a moment later): the store still knows them, per publisher, after reopening and compaction."""
    path = tmp_path / "sub.log"
    store = LoggedBookmarkStore(path, compact_after=compact_after)
    store.set_start("d", EPOCH)
    for seq in range(1, 11):
        store.log("d", f"p|{seq}|")
        store.log("d", f"q|{seq}|")
    for seq in range(1, 11):
        store.discard("d", f"p|{seq}|")
        if seq < 10:
            store.discard("d", f"q|{seq}|")
    store.close()
    assert ('"W"' in path.read_text()) == (compact_after == 5)  # compacted: the per-publisher marks kept
    again = LoggedBookmarkStore(path)
    assert again.recovery_bookmark("d") == "p|10|"
    assert [again.log("d", f"p|{seq}|") for seq in (8, 9, 10)] == [False, False, False]
    assert again.log("d", "q|8|") is False
    assert again.log("d", "q|10|") is True  # never discarded: delivered again
    assert again.log("d", "p|11|") is True
