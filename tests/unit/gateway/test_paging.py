"""Paging of durable queues: ``Queue`` keeps at most ``pages.limit`` available messages in memory and reads the
rest back through ``on_page`` (engine.nodes); ``Pager`` turns journal rows into messages, filtered like the
topic filtered them (gateway.paging). Pure: the journal is a list of rows and the page reads are recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from subgate.engine import nodes
from subgate.engine.nodes import Message, Queue
from subgate.engine.records import PageRead, StoredMessage
from subgate.gateway.paging import Pager, row_filter
from subgate.mapping.outcomes import settle_outcome

ACCEPT = settle_outcome("accepted")
RELEASE = settle_outcome("released")


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodes, "now_ms", lambda: 1_000_000_000)


class Consumer:
    def __init__(self, credit: int = 0) -> None:
        self.credit = credit
        self.got: list[Message] = []

    def deliver(self, message: Message, failures: int) -> None:
        self.credit -= 1
        self.got.append(message)

    def accepts(self, message: Message) -> bool:
        return True

    @property
    def seqs(self) -> list[int]:
        return [m.seq for m in self.got]


class Journal:
    """Rows by sequence, and the page reads a queue asked for (answered by ``answer``)."""

    def __init__(self) -> None:
        self.rows: dict[int, Message] = {}
        self.reads: list[tuple[Queue, int, int, int]] = []

    def on_page(self, queue: Queue, after: int, upto: int, limit: int) -> None:
        self.reads.append((queue, after, upto, limit))

    def answer(self) -> None:
        """Answer the oldest read from the rows, as the store would (at most ``limit`` rows in range)."""
        queue, after, upto, limit = self.reads.pop(0)
        found = [self.rows[s] for s in sorted(self.rows) if after < s <= upto][:limit]
        reached = upto if len(found) < limit else found[-1].seq
        queue.page_loaded([(m, 0) for m in found], after, reached)


def journaled(seq: int) -> Message:
    return Message(seq, f"m{seq}".encode(), journaled=True)


def paged_queue(limit: int = 4) -> tuple[Queue, Journal]:
    queue = Queue("q")
    journal = Journal()
    queue.use_journal_pages(limit, journal.on_page)
    return queue, journal


def publish(queue: Queue, journal: Journal, *seqs: int) -> None:
    for seq in seqs:
        message = journaled(seq)
        journal.rows[seq] = message
        queue.push(message)


def drain(queue: Queue, journal: Journal, consumer: Consumer) -> None:
    """Take everything, answering page reads as they come, until the queue is empty."""
    for _ in range(1000):
        consumer.credit = 1
        queue.dispatch()
        for message in list(consumer.got):
            if message.seq in queue._outstanding:
                queue.settle(message, ACCEPT, consumer)
        if journal.reads:
            journal.answer()
        elif not len(queue.waiting) and not queue.paging:
            return
    raise AssertionError("did not drain")


def test_a_full_queue_leaves_new_journaled_messages_to_the_journal():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 11))
    assert len(queue.waiting) == 4
    assert queue.depth == 10
    assert queue.paging
    assert queue.low_water() == 0  # nothing is discarded yet
    assert journal.reads == []  # no consumer yet: nothing asks for a page


def test_messages_come_back_in_order_page_by_page():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 11))
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert consumer.seqs == list(range(1, 11))
    assert not queue.paging
    assert queue.depth == 0


def test_a_page_is_asked_for_at_half_the_limit_and_only_once():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 11))
    consumer = Consumer(credit=1)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert journal.reads == []  # 3 left in memory
    consumer.credit = 2
    queue.dispatch()
    assert [(after, upto, limit) for _, after, upto, limit in journal.reads] == [(4, 10, 2)]
    consumer.credit = 1
    queue.dispatch()
    assert len(journal.reads) == 1  # one read in flight at a time


def test_messages_published_while_paging_go_to_the_journal_and_come_back():
    queue, journal = paged_queue(limit=2)
    consumer = Consumer()
    queue.add_consumer(consumer)
    publish(queue, journal, 1, 2, 3, 4)
    consumer.credit = 2
    queue.dispatch()
    publish(queue, journal, 5, 6)  # while a read of (2, 4] is in flight
    drain(queue, journal, consumer)
    assert consumer.seqs == [1, 2, 3, 4, 5, 6]


def test_a_straggler_below_the_paged_range_is_kept_in_memory():
    """A transaction's message is routed at its commit, after later ones: older than the paged range, kept."""
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 4, 5, 6)  # paging from 4
    publish(queue, journal, 3)  # older than the paged range: kept
    publish(queue, journal, 7)
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert sorted(consumer.seqs) == [1, 2, 3, 4, 5, 6, 7]
    assert len(consumer.seqs) == 7


def test_a_late_commit_inside_the_range_stays_in_the_journal_and_keeps_its_place():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 5, 6)  # paging: 3, 5 and 6 in the journal only
    journal.rows[4] = journaled(4)  # committed by a transaction after 5 and 6 were routed
    queue.push(journal.rows[4])
    assert len(queue.waiting) == 2 and queue.depth == 6
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert consumer.seqs == [1, 2, 3, 4, 5, 6]


def test_a_late_commit_after_a_read_keeps_its_place():
    """The read ran before the transaction's commit (so it did not see row 4) and its answer came first (the
    writer answers in order): 4 then lies above the paged range's new start, and a later read returns it."""
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 5, 6)
    consumer = Consumer(credit=1)
    queue.add_consumer(consumer)
    queue.dispatch()  # 1 goes out: a read of (2, 6], one row
    assert [(after, upto, limit) for _, after, upto, limit in journal.reads] == [(2, 6, 1)]
    journal.answer()  # row 3: paged from 3 on
    journal.rows[4] = journaled(4)
    queue.push(journal.rows[4])
    drain(queue, journal, consumer)
    assert consumer.seqs == [1, 2, 3, 4, 5, 6]


def test_the_queue_says_when_it_starts_and_stops_paging():
    queue, journal = paged_queue(limit=2)
    changes: list[bool] = []
    queue.on_paging = changes.append
    publish(queue, journal, 1, 2, 3, 4)
    assert changes == [True]
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert changes == [True, False]
    publish(queue, journal, 5, 6, 7)
    queue.purge()
    assert changes == [True, False, True, False]
    queue.purge()
    assert changes == [True, False, True, False]


def test_non_journaled_messages_stay_in_memory_while_paging():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3)
    queue.push(Message(4, b"m4"))
    assert len(queue.waiting) == 3
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert sorted(consumer.seqs) == [1, 2, 3, 4]


def test_low_water_never_passes_a_paged_message():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 4)
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    for message in consumer.got:
        queue.settle(message, ACCEPT, consumer)
    assert len(queue.waiting) == 0
    assert queue.low_water() == 2  # 3 and 4 are only in the journal


def test_released_messages_keep_their_place_while_paging():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 4)
    consumer = Consumer(credit=1)
    queue.add_consumer(consumer)
    queue.dispatch()
    queue.settle(consumer.got[0], RELEASE, consumer)
    consumer.got.clear()
    drain(queue, journal, consumer)
    assert consumer.seqs == [1, 2, 3, 4]


def test_purge_stops_paging_and_a_stale_answer_is_ignored():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 4)
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    assert journal.reads
    queue.purge()
    assert not queue.paging
    journal.answer()
    assert len(queue.waiting) == 0


def test_a_failed_read_is_asked_again_by_the_next_dispatch():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2, 3, 4)
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    journal.reads.clear()
    queue.pages.failed()  # the next dispatch asks again
    queue.dispatch()
    assert len(journal.reads) == 1


def test_recovery_pages_the_rest():
    queue, journal = paged_queue(limit=2)
    for seq in (11, 12):
        queue.push(journaled(seq))
    for seq in range(13, 17):
        journal.rows[seq] = journaled(seq)
    queue.page_from(12, 16, 4)
    assert queue.depth == 6
    consumer = Consumer()
    queue.add_consumer(consumer)
    drain(queue, journal, consumer)
    assert consumer.seqs == list(range(11, 17))


def test_without_a_limit_nothing_pages():
    queue = Queue("q")
    for seq in range(1, 5001):
        queue.push(journaled(seq))
    assert len(queue.waiting) == 5000
    assert not queue.paging


# -- Pager: rows to messages ---------------------------------------------------------------------------------


class FakeWriter:
    def __init__(self) -> None:
        self.pages: list[tuple[PageRead, Any]] = []

    def submit_page(self, read: PageRead, token: Any) -> None:
        self.pages.append((read, token))


def stored(seq: int, publisher: str = "c9/snd", payload: bytes | None = None) -> StoredMessage:
    raw = payload if payload is not None else b"\x00\x53\x75\xa0\x01" + bytes([seq % 256])
    return StoredMessage(seq, raw, 0, None, None, publisher)


def test_pager_reads_through_the_writer_and_filters_rows():
    writer = FakeWriter()
    pager = Pager(writer, page_messages=2)
    queue = Queue("t#1")
    pager.attach(queue, 7, "t", row_filter("me", None))
    for seq in (1, 2, 3, 4, 5):
        queue.push(Message(seq, b"x", journaled=True))
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    [(read, token)] = writer.pages
    assert read == PageRead(7, "t", 2, 5, 1)
    consumer.credit = 10
    token([stored(3, publisher="me/snd")])  # a full page of one row, filtered out (no-local)
    assert queue.paging and len(queue.waiting) == 0
    (read, token) = writer.pages[1]
    assert read == PageRead(7, "t", 3, 5, 1)
    token([stored(4)])
    (read, token) = writer.pages[2]
    token([])  # the rest of the range is empty
    assert consumer.seqs == [1, 2, 4]
    assert not queue.paging
    assert pager.pages == 3


def test_pager_failed_read():
    writer = FakeWriter()
    pager = Pager(writer, page_messages=2)
    queue = Queue("q")
    pager.attach(queue, 1, "q")
    for seq in (1, 2, 3, 4):
        queue.push(Message(seq, b"x", journaled=True))
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    writer.pages.pop()[1](RuntimeError("store down"))
    consumer.credit = 1
    queue.dispatch()
    assert len(writer.pages) == 1


def test_pager_with_zero_page_messages_leaves_queues_in_memory():
    queue = Queue("q")
    Pager(FakeWriter(), page_messages=0).attach(queue, 1, "q")
    assert queue.pages.limit == 0 and queue.pages.on_page is None


def test_row_filter():
    assert row_filter(None, None) is None
    mine = row_filter("c1", None)
    assert mine is not None
    assert not mine(stored(1, publisher="c1/snd"))
    assert mine(stored(1, publisher="c10/snd"))
    selected = row_filter(None, lambda raw: raw.endswith(b"\x02"))
    assert selected is not None
    assert selected(stored(2)) and not selected(stored(3))


class Cursor:
    """Records what the queue discarded (``engine.messages.Cursor``)."""

    cursor_id = 1

    def __init__(self) -> None:
        self.acks_since_low_water = 0
        self.discarded_seqs: list[int] = []

    def discarded(self, seq: int) -> None:
        self.discarded_seqs.append(seq)
        self.acks_since_low_water += 1

    def failed(self, seq: int, failures: int) -> None:
        pass


def test_purge_in_steps_takes_memory_first_then_the_journal_only_part_at_once():
    queue, journal = paged_queue(limit=4)
    cursor = Cursor()
    queue.cursor = cursor
    publish(queue, journal, *range(1, 11))  # 1..4 in memory, 5..10 in the journal only
    consumer = Consumer(credit=1)
    queue.add_consumer(consumer)
    queue.dispatch()  # 1 is out for delivery: a purge leaves it
    assert queue.purge(2) == 2
    assert cursor.discarded_seqs == [2, 3] and queue.paging and queue.depth == 8
    assert queue.purge(2) == 1 + 6  # 4, then nothing waits in memory: 5..10 go as well
    assert not queue.paging and queue.depth == 1 and cursor.discarded_seqs == [2, 3, 4]
    assert queue.purge(2) == 0
    queue.settle(consumer.got[0], ACCEPT, consumer)
    assert queue.depth == 0 and queue.low_water() == -1  # the router writes its next sequence as the mark


def test_purge_of_a_queue_whose_memory_is_empty_still_moves_the_low_water_mark():
    queue, journal = paged_queue(limit=2)
    cursor = Cursor()
    queue.cursor = cursor
    publish(queue, journal, 1, 2, 3, 4)
    consumer = Consumer(credit=2)
    queue.add_consumer(consumer)
    queue.dispatch()
    for message in consumer.got:
        queue.settle(message, ACCEPT, consumer)
    cursor.acks_since_low_water = 0  # the housekeeping wrote the mark
    assert queue.purge(10) == 2  # 3 and 4, in the journal only
    assert cursor.acks_since_low_water == 1 and queue.depth == 0
