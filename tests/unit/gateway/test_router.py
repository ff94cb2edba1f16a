"""Router bookkeeping that protects durability: the low-water mark never passes an uncommitted message."""

from __future__ import annotations

from subgate.engine.nodes import Message
from subgate.engine.records import Catalog
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings


class FakeWriter:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


def make_router(max_id: int = 10) -> Router:
    return Router(Settings(), FakeWriter(), Catalog([], [], max_id, 0, 0))  # type: ignore[arg-type]


def test_low_water_of_an_empty_queue_stops_below_the_oldest_uncommitted_message():
    router = make_router()
    queue = router.create("q", "queue", durable=True)
    for seq in (11, 12, 13):
        router._next_seq = seq
        router.submitted(seq)
    assert router.safe_low_water(queue) == 10
    router.committed(11)
    assert router.safe_low_water(queue) == 11
    router.committed(13)  # out of order: 12 is still on its way
    assert router.safe_low_water(queue) == 11
    router.committed(12)
    assert router.safe_low_water(queue) == 13


def test_low_water_follows_the_oldest_message_held():
    router = make_router()
    queue = router.create("q", "queue", durable=True)
    queue.push(Message(15, b"", journaled=True))
    assert router.safe_low_water(queue) == 14
    router.submitted(12)
    assert router.safe_low_water(queue) == 11


# -- which messages go to the journal -------------------------------------------------------------------------


def raw(*, durable: bool) -> bytes:
    from proton import Message as ProtonMessage

    return bytes(ProtonMessage(body="x", durable=durable).encode())


def paging_router(*, page_messages: int = 2, **settings: object) -> Router:
    return Router(Settings(page_messages=page_messages, **settings), FakeWriter(), Catalog([], [], 10, 0, 0))  # type: ignore[arg-type]


def fill(queue, count: int, first: int = 1) -> None:
    for seq in range(first, first + count):
        queue.push(Message(seq, b"", journaled=True))


def prepared(router: Router, node, *, durable: bool, behind: int = 0):
    from subgate.engine import codec

    data = raw(durable=durable)
    return router.prepare(data, codec.scan(data), node, None, "c1/p", behind)


def test_persistent_messages_to_durable_nodes_are_journaled_as_before():
    router = paging_router()
    ingest = prepared(router, router.create("q", "queue", durable=True), durable=True)
    assert ingest.record is not None and ingest.record.durable and ingest.message.journaled
    assert prepared(router, router.create("tmp", "queue", durable=False), durable=True).record is None


def test_a_non_persistent_message_is_journaled_while_its_queue_pages():
    router = paging_router(page_messages=2)
    queue = router.create("q", "queue", durable=True)
    assert prepared(router, queue, durable=False).record is None  # not paging: memory only, as before
    fill(queue, 3)
    assert queue.paging
    ingest = prepared(router, queue, durable=False)
    assert ingest.record is not None and not ingest.record.durable and ingest.message.journaled
    assert ingest.record.bookmark == f"c1/p|{ingest.message.seq}|"


def test_a_non_persistent_message_behind_journaled_ones_of_its_publisher_is_journaled():
    router = paging_router(page_messages=0)  # also without paging: it must not overtake them
    queue = router.create("q", "queue", durable=True)
    ingest = prepared(router, queue, durable=False, behind=1)
    assert ingest.record is not None and not ingest.record.durable
    assert prepared(router, router.create("tmp", "queue", durable=False), durable=False, behind=1).record is None


def test_a_topic_journals_non_persistent_messages_while_a_durable_subscription_pages():
    router = paging_router(page_messages=2, journal_branches=("t=off",))  # journaled only for subscriptions
    topic = router.create("t", "topic", durable=True)
    assert prepared(router, topic, durable=False, behind=1).record is None  # no durable subscription
    assert prepared(router, topic, durable=True).record is None
    topic.durable_subscriptions = 1
    assert prepared(router, topic, durable=False).record is None
    topic.queue_paging(True)
    assert router.pages(topic)
    assert prepared(router, topic, durable=False).record is not None
    topic.queue_paging(False)
    assert not router.pages(topic)


def test_journal_non_persistent_journals_them_all_as_before():
    router = paging_router(journal_non_persistent=True)
    ingest = prepared(router, router.create("q", "queue", durable=True), durable=False)
    assert ingest.record is not None and not ingest.record.durable


def test_a_late_record_keeps_the_sequence_and_adds_the_bookmark():
    router = paging_router()
    queue = router.create("q", "queue", durable=True)
    ingest = prepared(router, queue, durable=False)
    late = router.journal_late(ingest, queue, "c1/p")
    assert late.record is not None and late.record.id == ingest.message.seq == late.message.seq
    assert late.message.journaled and b"x-opt-bookmark" in late.message.raw
    assert late.record.payload == late.message.raw


def test_earlier_runs_non_durable_rows_are_left_out_of_page_reads():
    assert paging_router().pager.non_durable_after == 10  # the journal's highest id at start-up
    assert paging_router(journal_non_persistent=True).pager.non_durable_after == 0  # those survive restarts


def test_a_topic_journals_persistent_messages_for_replay_by_its_branch_mode():
    router = paging_router(journal_branches=("audit=all", "scratch=off"))
    plain = router.create("prices/fx", "topic", durable=True)
    audit = router.create("audit/trades", "topic", durable=True)
    scratch = router.create("scratch/x", "topic", durable=True)
    assert prepared(router, plain, durable=True).record is not None  # no subscription needed
    assert prepared(router, plain, durable=False).record is None
    assert prepared(router, audit, durable=False).record is not None
    assert prepared(router, scratch, durable=True).record is None
    temporary = router.create("$temp.topic.x", "topic", durable=False)
    assert prepared(router, temporary, durable=True).record is None
