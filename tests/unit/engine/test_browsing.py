"""Browsing (engine.browsing): a browser sees every available message of a queue once, in order, including the
ones a paging queue left in the journal, which it reads a page at a time for itself without touching the queue.
Pure: the journal is a dict of rows plus the set of acknowledged sequences, and page reads are answered by hand.
"""

from __future__ import annotations

import random

import pytest

from subgate.engine import nodes
from subgate.engine.browsing import Browser
from subgate.engine.nodes import Message, Queue
from subgate.mapping.outcomes import settle_outcome
from tests.unit.gateway.test_paging import Consumer

ACCEPT = settle_outcome("accepted")
NOW = 1_000_000_000


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodes, "now_ms", lambda: NOW)


class Journal:
    """Journal rows by sequence, what the queue's cursor acknowledged, and the reads asked for (answered by hand,
    as the store would: the unacknowledged rows in range, at most ``limit``)."""

    cursor_id = 1
    acks_since_low_water = 0

    def __init__(self) -> None:
        self.rows: dict[int, Message] = {}
        self.acked: set[int] = set()
        self.queue_reads: list[tuple[Queue, int, int, int]] = []
        self.browse_reads: list[tuple[Browser, int, int, int]] = []

    # Cursor
    def discarded(self, seq: int) -> None:
        self.acked.add(seq)

    def failed(self, seq: int, failures: int) -> None:
        pass

    def on_page(self, queue: Queue, after: int, upto: int, limit: int) -> None:
        self.queue_reads.append((queue, after, upto, limit))

    def on_browse(self, browser: Browser, after: int, upto: int, limit: int) -> None:
        self.browse_reads.append((browser, after, upto, limit))

    def _read(self, after: int, upto: int, limit: int) -> tuple[list[Message], int]:
        found = [self.rows[s] for s in sorted(self.rows) if after < s <= upto and s not in self.acked][:limit]
        return found, (upto if len(found) < limit else found[-1].seq)

    def answer_queue(self) -> None:
        queue, after, upto, limit = self.queue_reads.pop(0)
        found, reached = self._read(after, upto, limit)
        queue.page_loaded([(m, 0) for m in found], after, reached)

    def answer_browser(self, keep: bool = True) -> None:
        browser, after, upto, limit = self.browse_reads.pop(0)
        found, reached = self._read(after, upto, limit)
        # The browser gets its own copies of the rows, as gateway.paging.restored makes them.
        browser.page_loaded([Message(m.seq, m.raw, journaled=True) for m in found if keep or m.seq % 2], reached)


def paged_queue(limit: int = 4) -> tuple[Queue, Journal]:
    journal = Journal()
    queue = Queue("q", cursor=journal)
    queue.use_journal_pages(limit, journal.on_page, journal.on_browse)
    return queue, journal


def publish(queue: Queue, journal: Journal, *seqs: int) -> None:
    for seq in seqs:
        message = Message(seq, f"m{seq}".encode(), journaled=True)
        journal.rows[seq] = message
        queue.push(message)


def walk(browser: Browser, journal: Journal, credit: int = 3) -> list[int]:
    """Browse to the end with ``credit`` per round, answering the browser's reads; the sequences shown."""
    shown: list[int] = []
    for _ in range(1000):
        got = browser.take(credit)
        shown += [m.seq for m in got]
        if journal.browse_reads:
            assert len(journal.browse_reads) == 1  # one read at a time
            journal.answer_browser()
        elif len(got) < credit:
            return shown
    raise AssertionError("the browse did not end")


def test_a_browser_of_a_queue_in_memory_sees_everything_in_order_across_rounds():
    queue = Queue("q")
    for seq in (3, 1, 2, 5, 4):
        queue.push(Message(seq, b"x"))
    browser = Browser(queue)
    assert [m.seq for m in browser.take(2)] == [1, 2]
    assert [m.seq for m in browser.take(10)] == [3, 4, 5]
    assert browser.take(10) == []
    assert not browser.reading
    assert len(queue.waiting) == 5  # nothing removed


def test_a_browser_sees_the_paged_out_messages_in_order_a_page_at_a_time():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 21))
    browser = Browser(queue)
    assert [m.seq for m in browser.take(10)] == [1, 2, 3, 4]  # memory, then a read of the journal-only part
    [(_, after, upto, limit)] = journal.browse_reads
    assert (after, upto, limit) == (4, 20, 2)  # a page: half the limit, and never more than the credit left
    journal.answer_browser()
    assert walk(browser, journal) == list(range(5, 21))
    # The queue is exactly as before: still paging, nothing paged in, nothing asked for, nothing acknowledged.
    assert queue.paging and len(queue.waiting) == 4 and queue.depth == 20
    assert journal.queue_reads == [] and journal.acked == set()


def test_the_page_read_is_bounded_by_the_credit_left():
    queue, journal = paged_queue(limit=40)
    publish(queue, journal, *range(1, 101))
    browser = Browser(queue)
    assert len(browser.take(41)) == 40
    assert [limit for *_, limit in journal.browse_reads] == [1]


def test_no_read_without_credit_left():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 11))
    browser = Browser(queue)
    assert len(browser.take(4)) == 4
    assert journal.browse_reads == []  # the next flow reads
    assert browser.take(0) == []
    assert journal.browse_reads == []


def test_the_browser_filter_applies_to_memory_and_pages():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 13))
    browser = Browser(queue, lambda m: m.seq % 3 == 0)
    assert walk(browser, journal, credit=2) == [3, 6, 9, 12]


def test_expired_and_delayed_rows_are_not_shown():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2)
    for seq, fields in ((3, {"expires": NOW - 1}), (4, {"deliver_at": NOW + 60_000}), (5, {"expires": NOW + 1})):
        message = Message(seq, b"x", journaled=True, **fields)
        journal.rows[seq] = message
        queue.push(message)
    browser = Browser(queue)
    shown: list[int] = []
    for _ in range(10):
        shown += [m.seq for m in browser.take(5)]
        if not journal.browse_reads:
            break
        browser_, after, upto, limit = journal.browse_reads.pop(0)
        rows = [journal.rows[s] for s in sorted(journal.rows) if after < s <= upto][:limit]
        browser_.page_loaded(rows, upto if len(rows) < limit else rows[-1].seq)
    assert shown == [1, 2, 5]


def test_a_message_the_queue_pages_in_meanwhile_is_shown_once():
    queue, journal = paged_queue(limit=4)
    publish(queue, journal, *range(1, 13))
    consumer = Consumer()
    queue.add_consumer(consumer)
    browser = Browser(queue)
    assert [m.seq for m in browser.take(10)] == [1, 2, 3, 4]
    journal.answer_browser()  # rows 5 and 6 for the browser
    consumer.credit = 3
    queue.dispatch()  # takes 1, 2, 3 and asks for a page: 5 and 6 come into memory too
    journal.answer_queue()
    assert [m.seq for m in queue.waiting.above(4)] == [5, 6]
    assert walk(browser, journal) == list(range(5, 13))


def test_a_non_journaled_message_above_the_horizon_waits_for_the_journal_rows_before_it():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, 1, 2)
    queue.push(Message(9, b"routed early"))  # e.g. a non-persistent message of another producer
    publish(queue, journal, 3, 4)  # paging from 3
    browser = Browser(queue)
    assert walk(browser, journal, credit=2) == [1, 2, 3, 4, 9]


def test_a_page_for_a_closed_browser_is_dropped():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, *range(1, 9))
    browser = Browser(queue)
    called: list[int] = []
    browser.on_rows = lambda: called.append(1)
    browser.take(5)
    assert browser.reading
    browser.close()
    journal.answer_browser()
    assert called == [] and not browser.reading
    assert browser.take(5) == []
    assert queue.paging and queue.depth == 8 and journal.queue_reads == []


def test_a_failed_read_ends_the_walk():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, *range(1, 9))
    browser = Browser(queue)
    called: list[bool] = []
    browser.on_rows = lambda: called.append(browser.failed)
    browser.take(5)
    journal.browse_reads.clear()
    browser.page_failed()
    assert called == [True]
    assert browser.take(5) == [] and journal.browse_reads == []


def test_the_answer_continues_the_walk_through_on_rows():
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, *range(1, 6))
    browser = Browser(queue)
    shown: list[int] = []
    browser.on_rows = lambda: shown.extend(m.seq for m in browser.take(10))
    shown += [m.seq for m in browser.take(10)]
    for _ in range(10):
        if not journal.browse_reads:
            break
        journal.answer_browser()
    assert shown == [1, 2, 3, 4, 5]


def test_rows_filtered_out_of_a_page_move_the_walk_on():
    """A subscription's pages come filtered (selector, no-local): a page may bring nothing to show."""
    queue, journal = paged_queue(limit=2)
    publish(queue, journal, *range(1, 11))
    browser = Browser(queue)
    shown = [m.seq for m in browser.take(100)]
    for _ in range(20):
        if not journal.browse_reads:
            break
        journal.answer_browser(keep=False)  # only odd rows come back
        shown += [m.seq for m in browser.take(100)]
    assert shown == [1, 2, 3, 5, 7, 9]


@pytest.mark.parametrize("seed", range(40))
def test_browsing_while_consumers_take_messages_never_repeats_and_never_skips_an_untouched_message(seed):
    """Random interleavings of publishing, consuming (with acknowledgements) and browsing: the browser's view is
    strictly increasing, and every message nobody consumed before the browse ended was shown."""
    rng = random.Random(seed)
    queue, journal = paged_queue(limit=rng.choice([2, 4, 10]))
    consumer = Consumer()
    queue.add_consumer(consumer)
    publish(queue, journal, *range(1, 31))
    next_seq = 31
    browser = Browser(queue, None)
    shown: list[int] = []
    for _ in range(300):
        step = rng.random()
        if step < 0.3:
            shown += [m.seq for m in browser.take(rng.randint(0, 4))]
        elif step < 0.45 and journal.browse_reads:
            journal.answer_browser()
        elif step < 0.6 and journal.queue_reads:
            journal.answer_queue()
        elif step < 0.8:
            consumer.credit += 1
            queue.dispatch()
            for message in consumer.got:
                if message.seq in queue._outstanding:
                    queue.settle(message, ACCEPT, consumer)
        elif next_seq <= 60:
            publish(queue, journal, next_seq)
            next_seq += 1
    # Finish the walk.
    for _ in range(200):
        got = browser.take(5)
        shown += [m.seq for m in got]
        if journal.browse_reads:
            journal.answer_browser()
        elif not got:
            break
    consumed = {m.seq for m in consumer.got}
    assert shown == sorted(set(shown))  # in order, never twice
    assert set(range(1, next_seq)) - consumed <= set(shown)  # nothing still available was skipped
