"""Replay from bookmarks over real sockets (design.md §3, docs/bookmarks.md), on SQLite and PostgreSQL.

Every kind of start value (EPOCH, NOW, a time, a bookmark, a list) on plain, durable, shared durable and shared
volatile subscriptions; the refusal of malformed and unknown values; the echo of the applied filter; the seam
from replay to live delivery while a publisher keeps publishing; a durable subscription that resumes from its
stored position, also after ``kill -9``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from proton import Described, Message, Terminus, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, Copy, DurableSubscription, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver, LinkDetached

from tests.e2e.conftest import STORES
from tests.support.amqp import Capabilities, connect, nothing_arrives, sender
from tests.support.server import SubgateProcess, module_server

BOOKMARK_KEY = "subgate-bookmark"
BOOKMARK_DESCRIPTOR = "subgate:bookmark:string"
EPOCH, NOW = "0", "0|1|"


@pytest.fixture(scope="module", params=STORES)
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    # Small pages, so that every replay here crosses several of them.
    with module_server(request, tmp_path_factory, "replay", request.param, ("--page-messages", "50")) as server:
        yield server


class Bookmark(LinkOption):
    """The replay filter on a receiver's source, optionally with more source fields (durable, shared)."""

    def __init__(self, value: str, *capabilities: str, durable: bool = False) -> None:
        self.value = value
        self.capabilities = capabilities
        self.durable = durable

    def apply(self, link: Any) -> None:
        source = link.source
        source.filter.put_dict({symbol(BOOKMARK_KEY): Described(symbol(BOOKMARK_DESCRIPTOR), self.value)})
        Capabilities("topic", *self.capabilities).apply(link)
        if self.durable:
            source.durability = Terminus.DELIVERIES
            source.expiry_policy = Terminus.EXPIRE_NEVER


def subscribe(
    conn: BlockingConnection,
    topic: str,
    value: str | None,
    *caps: str,
    name: str | None = None,
    durable: bool = False,
    credit: int = 200,
) -> BlockingReceiver:
    options: list[LinkOption] = [Bookmark(value, *caps, durable=durable)] if value is not None else []
    if value is None:
        options.append(Capabilities("topic", *caps))
        if durable:
            options += [DurableSubscription(), Copy()]
    return conn.create_receiver(topic, name=name or f"r-{uuid.uuid4().hex[:8]}", credit=credit, options=options)


def publish(conn: BlockingConnection, topic: str, bodies: list[str], **fields: Any) -> None:
    snd = sender(conn, topic, "topic")
    for body in bodies:
        snd.send(Message(body=body, durable=True, **fields))
    snd.close()


def drain(rcv: BlockingReceiver, count: int, timeout: float = 15) -> list[Message]:
    got = []
    for _ in range(count):
        got.append(rcv.receive(timeout=timeout))
        rcv.accept()
    return got


def bodies(messages: list[Message]) -> list[Any]:
    return [m.body for m in messages]


def bookmark_of(message: Message) -> str:
    return str(message.annotations["x-opt-bookmark"])


def echoed(rcv: BlockingReceiver) -> dict[str, object]:
    data = rcv.link.remote_source.filter
    data.rewind()
    value = data.get_object() if data.next() else {}
    return {str(k): getattr(v, "value", v) for k, v in value.items()}


def refusal(attach: Any) -> tuple[str, str, bool]:
    with pytest.raises(LinkDetached) as caught:
        attach()
    link = caught.value.link
    condition = link.remote_condition
    return condition.name, condition.description, link.remote_source.type == Terminus.UNSPECIFIED


# -- start values on a plain subscription ------------------------------------------------------------------------
def test_epoch_replays_every_journaled_message_of_the_topic_then_goes_live(broker, uid):
    topic = f"replay/epoch/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, [f"m{i}" for i in range(120)])  # nobody subscribed: the journal keeps them
        rcv = subscribe(conn, topic, EPOCH)
        assert echoed(rcv) == {BOOKMARK_KEY: EPOCH}
        replayed = drain(rcv, 120)
        assert bodies(replayed) == [f"m{i}" for i in range(120)]
        assert all(bookmark_of(m).endswith("|") for m in replayed)
        publish(conn, topic, ["live"])
        assert bodies(drain(rcv, 1)) == ["live"]
        assert nothing_arrives(rcv)
    finally:
        conn.close()


def test_now_replays_nothing(broker, uid):
    topic = f"replay/now/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, ["old"])
        rcv = subscribe(conn, topic, NOW)
        assert echoed(rcv) == {BOOKMARK_KEY: NOW}
        publish(conn, topic, ["new"])
        assert bodies(drain(rcv, 1)) == ["new"]
        assert nothing_arrives(rcv)
    finally:
        conn.close()


def test_a_bookmark_replays_what_follows_it_and_a_list_resumes_after_the_earliest(broker, uid):
    topic = f"replay/bookmark/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, [f"m{i}" for i in range(6)])
        marks = [bookmark_of(m) for m in drain(subscribe(conn, topic, EPOCH), 6)]
        after_two = subscribe(conn, topic, marks[2])
        assert bodies(drain(after_two, 3)) == ["m3", "m4", "m5"]
        assert nothing_arrives(after_two)
        # Discarded out of order: m1 and m3 are done, m2 is not; resume after m1 and skip m3.
        listed = subscribe(conn, topic, f"{marks[3]},{marks[1]}")
        assert echoed(listed) == {BOOKMARK_KEY: f"{marks[3]},{marks[1]}"}
        assert bodies(drain(listed, 3)) == ["m2", "m4", "m5"]
        assert nothing_arrives(listed)
    finally:
        conn.close()


def test_a_timestamp_replays_what_was_journaled_after_that_second(broker, uid):
    topic = f"replay/time/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, ["before"])
        time.sleep(1.2)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        time.sleep(1.2)
        publish(conn, topic, ["after1", "after2"])
        rcv = subscribe(conn, topic, stamp)
        assert bodies(drain(rcv, 2)) == ["after1", "after2"]
        assert nothing_arrives(rcv)
        future = subscribe(conn, topic, "29991231T235959")
        assert nothing_arrives(future)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "value, named",
    [
        ("yesterday", "'yesterday'"),
        ("20261345T000000", "'20261345T000000'"),
        ("pub|x|", "'pub|x|'"),
        ("pub|1|,nonsense", "'nonsense'"),
        ("nobody-published-this|42|", "'nobody-published-this|42|'"),
    ],
)
def test_malformed_and_unknown_values_are_refused_naming_the_value(broker, uid, value, named):
    topic = f"replay/bad/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, ["x"])
        condition, description, null_source = refusal(lambda: subscribe(conn, topic, value))
        assert condition == "amqp:invalid-field"
        assert named in description
        assert null_source
        ok = subscribe(conn, topic, EPOCH)  # the connection carries on
        assert bodies(drain(ok, 1)) == ["x"]
    finally:
        conn.close()


# -- every kind of subscription ------------------------------------------------------------------------------------
@pytest.mark.parametrize("caps", [("shared",), ("shared", "global")], ids=["shared", "shared-global"])
def test_shared_volatile_and_shared_durable_subscriptions_replay(broker, uid, caps):
    topic = f"replay/shared/{uid}"
    conn = connect(broker.url, container_id=f"app-{uid}")
    try:
        publish(conn, topic, [f"m{i}" for i in range(70)])
        volatile = subscribe(conn, topic, EPOCH, *caps, name=f"sv{uid}")
        assert bodies(drain(volatile, 70)) == [f"m{i}" for i in range(70)]
        durable = subscribe(conn, topic, EPOCH, *caps, name=f"sd{uid}", durable=True)
        assert bodies(drain(durable, 70)) == [f"m{i}" for i in range(70)]
        assert nothing_arrives(durable)
    finally:
        conn.close()


def test_a_durable_subscription_starts_at_its_bookmark_and_resumes_its_position_after_kill(make_server, store_url):
    server = make_server(store_url, "--page-messages", "20")
    topic = "replay/durable"
    conn = connect(server.url, container_id="durable-app")
    publish(conn, topic, [f"m{i}" for i in range(60)])
    rcv = subscribe(conn, topic, EPOCH, name="d1", durable=True, credit=0)
    rcv.flow(10)
    got = [rcv.receive(timeout=15) for _ in range(10)]
    assert bodies(got) == [f"m{i}" for i in range(10)]
    # Accept out of order: m0..m4 and m7; m5, m6, m8, m9 stay unaccepted.
    for index in (0, 1, 2, 3, 4, 7):
        delivery = rcv.fetcher.unsettled[index]
        delivery.update(delivery.ACCEPTED)
        delivery.settle()
    conn.wait(lambda: conn.conn.transport is None or conn.conn.transport.pending() <= 0, timeout=10)
    time.sleep(2.5)  # positions are persisted within a second (docs/bookmarks.md)
    server.kill()
    server.start()
    conn = connect(server.url, container_id="durable-app")
    try:
        # A changed bookmark on re-attach is not a change of subscription: the stored position wins.
        again = subscribe(conn, topic, NOW, name="d1", durable=True, credit=100)
        assert echoed(again) == {}
        rest = drain(again, 54)
        assert bodies(rest) == ["m5", "m6", "m8", "m9"] + [f"m{i}" for i in range(10, 60)]
        # The count they had: none of them had a recorded failure (a crash records nothing per delivery).
        assert [m.delivery_count for m in rest[:4]] == [0, 0, 0, 0]
        assert nothing_arrives(again)
    finally:
        conn.close()


def test_the_seam_between_replay_and_live_delivery_has_no_gap_and_no_duplicate(broker, uid):
    topic = f"replay/seam/{uid}"
    total, before = 3000, 800
    pub_conn = connect(broker.url)
    sub_conn = connect(broker.url)
    sent = threading.Event()
    published: list[int] = []

    def keep_publishing() -> None:
        snd = sender(pub_conn, topic, "topic")
        for i in range(total):
            snd.send(Message(body=i, durable=True))
            published.append(i)
        sent.set()

    try:
        worker = threading.Thread(target=keep_publishing, daemon=True)
        worker.start()
        deadline = time.monotonic() + 60
        while len(published) < before and time.monotonic() < deadline:
            time.sleep(0.01)
        rcv = subscribe(sub_conn, topic, EPOCH, credit=300)
        seen = [m.body for m in drain(rcv, total, timeout=30)]
        worker.join(timeout=60)
        assert sent.is_set()
        assert seen == list(range(total))
        assert nothing_arrives(rcv)
    finally:
        sub_conn.close()
        pub_conn.close()


def test_a_topic_selector_replays_its_topics_in_journal_order(broker, uid):
    conn = connect(broker.url)
    try:
        a, b, other = sender(conn, f"sel/{uid}/a", "topic"), sender(conn, f"sel/{uid}/b", "topic"), None
        other = sender(conn, f"elsewhere/{uid}", "topic")
        expected = []
        for i in range(60):
            target = a if i % 3 == 0 else b if i % 3 == 1 else other
            target.send(Message(body=f"m{i}", durable=True))
            if target is not other:
                expected.append(f"m{i}")
        rcv = subscribe(conn, f">sel/{uid}/", EPOCH)
        assert echoed(rcv) == {BOOKMARK_KEY: EPOCH}
        assert bodies(drain(rcv, len(expected))) == expected
        assert nothing_arrives(rcv)
        b.send(Message(body="live", durable=True))
        assert bodies(drain(rcv, 1)) == ["live"]
    finally:
        conn.close()


# -- every start value on every kind of subscription -----------------------------------------------------------------
@pytest.fixture(scope="module")
def journaled(shared_server: SubgateProcess) -> dict[str, Any]:
    """Six messages on one topic, a UTC second stamp between the third and the fourth, and their bookmarks."""
    topic = f"replay/matrix/{uuid.uuid4().hex[:8]}"
    conn = connect(shared_server.url)
    try:
        publish(conn, topic, ["m0", "m1", "m2"])
        time.sleep(1.1)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        time.sleep(1.1)
        publish(conn, topic, ["m3", "m4", "m5"])
        marks = [bookmark_of(m) for m in drain(subscribe(conn, topic, EPOCH), 6)]
    finally:
        conn.close()
    return {"topic": topic, "stamp": stamp, "marks": marks}


KINDS = {
    "plain": ((), False),
    "durable": ((), True),
    "shared-durable": (("shared",), True),
    "shared-volatile": (("shared",), False),
    "shared-global": (("shared", "global"), True),
    "selector": ((), False),
}
VALUES = {
    "epoch": (lambda data: EPOCH, ["m0", "m1", "m2", "m3", "m4", "m5"]),
    "now": (lambda data: NOW, []),
    "time": (lambda data: data["stamp"], ["m3", "m4", "m5"]),
    "bookmark": (lambda data: data["marks"][1], ["m2", "m3", "m4", "m5"]),
    "list": (lambda data: f"{data['marks'][3]},{data['marks'][1]}", ["m2", "m4", "m5"]),
}


@pytest.mark.parametrize("value_name", list(VALUES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_start_value_on_every_kind_of_subscription(broker, journaled, kind, value_name):
    caps, durable = KINDS[kind]
    value_of, expected = VALUES[value_name]
    value = value_of(journaled)
    address = f"*{journaled['topic']}" if kind == "selector" else journaled["topic"]  # a full-path regex
    conn = connect(broker.url, container_id=f"matrix-{uuid.uuid4().hex[:8]}")
    try:
        rcv = subscribe(conn, address, value, *caps, name=f"{kind}-{value_name}", durable=durable)
        assert echoed(rcv) == {BOOKMARK_KEY: value}
        assert bodies(drain(rcv, len(expected))) == expected
        assert nothing_arrives(rcv, 0.3)
        if durable:
            rcv.close()  # closed (not detached): the subscription goes
    finally:
        conn.close()


class _PrefetchingReplayer(MessagingHandler):
    """A proton ``MessagingHandler`` with its default prefetch: credit goes out with the attach, before the server
    has answered it (and so while the server holds the attach to place the replay)."""

    def __init__(self, url: str, topic: str, value: str, expected: int) -> None:
        super().__init__(prefetch=10)
        self.url, self.topic, self.value, self.expected = url, topic, value, expected
        self.bodies: list[object] = []

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url)
        event.container.create_receiver(conn, self.topic, options=[Bookmark(self.value)])
        event.container.schedule(15.0, self)  # a bound: stop whatever happened

    def on_message(self, event: Any) -> None:
        self.bodies.append(event.message.body)
        if len(self.bodies) >= self.expected:
            event.connection.close()
            event.container.stop()

    def on_timer_task(self, event: Any) -> None:
        event.container.stop()


def test_credit_granted_before_a_held_attach_is_answered_is_used(broker, uid):
    topic = f"replay/prefetch/{uid}"
    conn = connect(broker.url)
    try:
        publish(conn, topic, [f"m{i}" for i in range(5)])
    finally:
        conn.close()
    handler = _PrefetchingReplayer(broker.url, topic, EPOCH, 5)
    Container(handler).run()
    assert handler.bodies == [f"m{i}" for i in range(5)]
