"""Queues, topics and temporary destinations as Qpid JMS uses them, end to end (mapping doc §5, §9.2, §9.3).

Temporary queues and topics (§5.3), node types by capability (§5.1), QueueBrowser (§5.4), pull consumers and
drain (§5.5), outcomes and delivery counts (§5.7), TTL and delayed delivery (§7.2), selectors on queues and
no-local on topics (§2.4). One server (SQLite) serves the module; names are unique per test. Emptiness is shown
with a drain, which the broker must answer only after sending what it has.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from proton import Message, symbol

from tests.support.amqp import connect
from tests.support.jms import (
    QUEUE,
    TEMP_QUEUE,
    TEMP_TOPIC,
    TOPIC,
    Consumer,
    JmsWire,
    LinkRefused,
    Received,
    SendFailed,
)
from tests.support.server import SubgateProcess, module_server

NOT_FOUND = "amqp:not-found"
RESOURCE_DELETED = "amqp:resource-deleted"
PRECONDITION_FAILED = "amqp:precondition-failed"


@pytest.fixture(scope="module")
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "destinations") as server:
        yield server


def leftover(consumer: Consumer) -> list[object]:
    """Bodies of whatever the broker has for ``consumer`` now (accepted); [] when it has nothing."""
    consumer.drain()
    got = consumer.take_buffered()
    for received in got:
        received.accept()
    consumer.top_up()
    return [m.body for m in got]


def take(consumer: Consumer, count: int) -> list[object]:
    return [consumer.receive().accept().body for _ in range(count)]


def pull_no_wait(consumer: Consumer) -> Received | None:
    """``receiveNoWait()`` on a prefetch-0 consumer: flow(link-credit=1, drain=true), then the answer (§5.5)."""
    link = consumer.link
    link.drain(1)
    consumer.wire.flush()
    consumer.wire.pump(lambda: link.credit == 0, None, f"the drain answer on {consumer.name!r}")
    link.drain_mode = False
    return consumer.buffer.popleft() if consumer.buffer else None


# -- temporary destinations (§5.3) ---------------------------------------------------------------------------------
def test_temporary_queue_is_usable_until_deleted_and_refused_afterwards(broker):
    with JmsWire.connect(broker.address) as jms, JmsWire.connect(broker.address) as other:
        temp = jms.create_temporary_queue()
        assert temp.address is not None and temp.address.startswith("$temp.queue.")
        target = jms.last_attach_from_broker(temp.name).terminus("target")  # type: ignore[union-attr]
        assert target is not None and target["address"] == temp.address and target["dynamic"] is True
        assert jms.create_temporary_queue().address != temp.address  # unique per creation
        session = jms.session()
        consumer = session.consumer(temp)
        assert consumer.kind == TEMP_QUEUE  # source capability temporary-queue, the broker's address
        session.producer(temp).send("direct")
        other_session = other.session()
        relay = other_session.producer(None)
        relay.send("relayed", to=temp)  # x-opt-jms-dest 2 (temporary queue)
        foreign = other_session.producer(temp)
        foreign.send("foreign")
        assert take(consumer, 3) == ["direct", "relayed", "foreign"]
        consumer.close()
        assert temp.delete() is None and temp.remote_closed is True
        other.pump(lambda: foreign.remote_closed is not None, None, "the detach of the deleted queue's producer")
        assert foreign.remote_error is not None and foreign.remote_error.condition == RESOURCE_DELETED
        with pytest.raises(SendFailed) as send_failed:
            relay.send("late", to=temp)
        assert send_failed.value.condition == NOT_FOUND
        with pytest.raises(LinkRefused) as producer_refused:
            other_session.producer(temp)
        assert producer_refused.value.condition == NOT_FOUND
        with pytest.raises(LinkRefused) as consumer_refused:
            session.consumer(temp)
        assert consumer_refused.value.condition == NOT_FOUND


@pytest.mark.parametrize("how", ["close", "loss"])
def test_temporary_destinations_are_deleted_with_their_connection(broker, how):
    creator = JmsWire.connect(broker.address)
    temp_queue, temp_topic = creator.create_temporary_queue(), creator.create_temporary_topic()
    with JmsWire.connect(broker.address) as other:
        session = other.session()
        to_queue, to_topic = session.producer(temp_queue), session.producer(temp_topic)
        to_queue.send("before")
        to_topic.send("before")
        if how == "close":
            creator.close()
        else:
            creator.abort()
        other.pump(
            lambda: to_queue.remote_closed is not None and to_topic.remote_closed is not None,
            None,
            "the detach of the producers of the deleted nodes",
        )
        assert [p.remote_error.condition for p in (to_queue, to_topic) if p.remote_error] == [RESOURCE_DELETED] * 2
        relay = session.producer(None)
        for temp in (temp_queue, temp_topic):
            with pytest.raises(SendFailed) as failed:
                relay.send("after", to=temp)
            assert failed.value.condition == NOT_FOUND
            with pytest.raises(LinkRefused) as refused:
                session.producer(temp)
            assert refused.value.condition == NOT_FOUND


def test_temporary_topic_gives_every_consumer_a_copy(broker):
    with JmsWire.connect(broker.address) as jms:
        temp = jms.create_temporary_topic()
        assert temp.address is not None and temp.address.startswith("$temp.topic.")
        session = jms.session()
        consumers = [session.consumer(temp), session.consumer(temp)]
        assert {c.kind for c in consumers} == {TEMP_TOPIC}
        session.producer(temp).send("tick")
        assert [leftover(c) for c in consumers] == [["tick"], ["tick"]]
        for consumer in consumers:
            consumer.close()
        assert temp.delete() is None
        with pytest.raises(LinkRefused) as refused:
            session.consumer(temp)
        assert refused.value.condition == NOT_FOUND


# -- node type by capability (§5.1) --------------------------------------------------------------------------------
def test_capabilities_decide_queue_or_topic_and_a_clash_is_refused(broker, uid):
    queue, topic = f"q-{uid}", f"t-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        queue_consumers = [session.consumer(queue), session.consumer(queue)]
        topic_consumers = [session.consumer(topic, TOPIC), session.consumer(topic, TOPIC)]
        to_queue, to_topic = session.producer(queue), session.producer(topic, TOPIC)
        for i in range(4):
            to_queue.send(f"q{i}")
            to_topic.send(f"t{i}")
        split = [leftover(c) for c in queue_consumers]
        assert sorted(split[0] + split[1]) == ["q0", "q1", "q2", "q3"] and split[0] and split[1]  # competing
        assert [leftover(c) for c in topic_consumers] == [["t0", "t1", "t2", "t3"]] * 2  # a copy each
        for address, kind in ((topic, QUEUE), (queue, TOPIC)):
            with pytest.raises(LinkRefused) as producer_refused:
                session.producer(address, kind)
            assert producer_refused.value.condition == PRECONDITION_FAILED
            with pytest.raises(LinkRefused) as consumer_refused:
                session.consumer(address, kind)
            assert consumer_refused.value.condition == PRECONDITION_FAILED


# -- QueueBrowser (§5.4) -------------------------------------------------------------------------------------------
def test_queue_browser_copies_without_consuming_and_ends_by_drain(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        producer = session.producer(queue)
        for i, color in enumerate(["red", "blue", "red"]):
            producer.send(f"m{i}", properties={"color": color})
        browsed = session.browse(queue)
        assert [m.body for m in browsed] == ["m0", "m1", "m2"]
        assert all(m.presettled and m.delivery_count == 0 for m in browsed)  # pre-settled copies
        assert [m.body for m in session.browse(queue, prefetch=1)] == ["m0", "m1", "m2"]
        assert [m.body for m in session.browse(queue, selector="color = 'red'")] == ["m0", "m2"]
        consumer = session.consumer(queue)
        got = [consumer.receive().accept() for _ in range(3)]
        assert [(m.body, m.delivery_count) for m in got] == [("m0", 0), ("m1", 0), ("m2", 0)]  # nothing was taken
        before = len(jms.received("flow"))
        assert session.browse(queue) == []  # an empty queue: the first drain ends the enumeration
        answers = [f for f in jms.received("flow")[before:] if f["drain"]]
        assert answers and answers[0]["link-credit"] == 0
        browser_close = jms.sent("detach")[-1]
        assert browser_close["closed"] is True and jms.received("detach")[-1]["closed"] is True


# -- pull consumers and drain (§5.5) -------------------------------------------------------------------------------
def test_pull_consumer_with_prefetch_zero_gets_one_message_per_credit(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms, JmsWire.connect(broker.address) as other:
        session = jms.session()
        producer = session.producer(queue)
        producer.send("a")
        producer.send("b")
        consumer = session.consumer(queue, prefetch=0)
        attach = jms.sent("attach")[-1]
        link_flows = [f for f in jms.sent("flow") if f.channel == attach.channel and f["handle"] == attach["handle"]]
        assert link_flows == []  # no credit at attach
        jms.wait(0.2)
        assert not consumer.buffer  # without credit the broker sends nothing
        consumer.flow(1)  # receive(): flow(link-credit=1)
        assert consumer.receive().accept().body == "a"
        assert consumer.credit == 0 and not consumer.buffer  # exactly one
        pulled = pull_no_wait(consumer)  # receiveNoWait(): flow(1, drain=true)
        assert pulled is not None and pulled.accept().body == "b"
        assert pull_no_wait(consumer) is None  # empty: the broker answers the drain with credit 0
        answer = jms.received("flow")[-1]
        assert (answer["drain"], answer["link-credit"]) == (True, 0)
        other_producer = other.session().producer(queue)
        other_producer.send("c")  # waits on the queue: no credit
        consumer.flow(1)
        assert take(consumer, 1) == ["c"]
        consumer.flow(1)  # receive(timeout) on an empty queue: flow(1), and a message published meanwhile arrives
        other_producer.send("d")
        assert take(consumer, 1) == ["d"]


# -- outcomes and delivery counts (§5.7) ---------------------------------------------------------------------------
def test_each_outcome_sets_the_next_delivery_count(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        session.producer(queue).send("x")
        a = session.consumer(queue)
        first = a.receive()
        assert first.delivery_count == 0
        first.release()  # released: unchanged, may come back to the same consumer
        again = a.receive()
        assert (again.body, again.delivery_count) == ("x", 0)
        again.modify(failed=True)  # modified{delivery-failed}: +1
        third = a.receive()
        assert third.delivery_count == 1 and third.message.delivery_count == 1
        third.modify(failed=False, undeliverable=False)  # modified{} with neither flag: like released
        fourth = a.receive()
        assert fourth.delivery_count == 1
        fourth.modify(failed=False, undeliverable=True)  # not to this consumer again, count unchanged
        assert leftover(a) == []
        b = session.consumer(queue)
        fifth = b.receive()
        assert fifth.delivery_count == 1
        fifth.modify(failed=True, undeliverable=True)  # +1, and not to b either
        assert leftover(a) == [] and leftover(b) == []
        c = session.consumer(queue)
        sixth = c.receive()
        assert sixth.delivery_count == 2
        sixth.reject()  # rejected: removed
        assert leftover(c) == []
        assert leftover(session.consumer(queue)) == []


def test_unsettled_messages_are_released_by_an_orderly_detach(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        producer = session.producer(queue)
        producer.send("m0")
        producer.send("m1")
        consumer = session.consumer(queue)
        assert [consumer.receive().body for _ in range(2)] == ["m0", "m1"]  # never settled
        assert consumer.close() is None
        after = session.consumer(queue)
        got = [after.receive().accept() for _ in range(2)]
        assert [(m.body, m.delivery_count) for m in got] == [("m0", 0), ("m1", 0)]  # JMSRedelivered=false


@pytest.mark.parametrize("how", ["loss", "close"])
def test_unsettled_messages_come_back_redelivered_after_an_abrupt_end(broker, uid, how):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as setup:
        producer = setup.session().producer(queue)
        producer.send("m0")
        producer.send("m1")
    jms = JmsWire.connect(broker.address)
    consumer = jms.session().consumer(queue)
    assert [consumer.receive().body for _ in range(2)] == ["m0", "m1"]  # never settled
    if how == "loss":
        jms.abort()
    else:
        jms.close()  # connection close without settling first (§5.7): the default outcome applies
    with JmsWire.connect(broker.address) as after:
        consumer = after.session().consumer(queue)
        got = [consumer.receive().accept() for _ in range(2)]
        assert [(m.body, m.delivery_count) for m in got] == [("m0", 1), ("m1", 1)]  # JMSRedelivered=true


# -- expiry and delayed delivery (§7.2, §7.3) ----------------------------------------------------------------------
def test_expired_messages_are_not_delivered(broker, uid):
    queue, topic = f"q-{uid}", f"t-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        session.consumer(topic, "durable", name="ttl").detach()
        for address, kind in ((queue, QUEUE), (topic, TOPIC)):
            producer = session.producer(address, kind)
            producer.send("short", ttl=100)
            producer.send("long", ttl=60_000)
            producer.send("forever")
        jms.wait(0.3)  # past the short time-to-live
        consumer = session.consumer(queue)
        got = [consumer.receive().accept() for _ in range(2)]
        assert [m.body for m in got] == ["long", "forever"]
        assert got[0].message.ttl == 60.0  # the header is forwarded (proton gives seconds)
        assert leftover(consumer) == []
        subscription = session.consumer(topic, "durable", name="ttl")
        assert leftover(subscription) == ["long", "forever"]
        subscription.detach()
        jms.unsubscribe("ttl")


def test_delayed_messages_are_held_until_their_delivery_time(broker, uid):
    queue, topic = f"q-{uid}", f"t-{uid}"
    with JmsWire.connect(broker.address) as jms:
        assert "DELAYED_DELIVERY" in jms.offered_capabilities
        session = jms.session()
        consumers = [session.consumer(queue), session.consumer(topic, TOPIC)]
        for address, kind in ((queue, QUEUE), (topic, TOPIC)):
            producer = session.producer(address, kind)
            producer.send("later", delay=1500)  # x-opt-delivery-time = now + 1.5 s
            producer.send("now")
        for consumer in consumers:
            assert take(consumer, 1) == ["now"]
            assert leftover(consumer) == []  # "later" is held
        for consumer in consumers:
            later = consumer.receive().accept()
            arrived_ms = time.time() * 1000
            assert later.body == "later"
            assert arrived_ms >= later.message.annotations[symbol("x-opt-delivery-time")]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_delayed_message_held_over_a_restart_is_delivered_at_its_time(make_server, tmp_path, request, store):
    """Delayed messages are journaled with their delivery time; after a restart they still come, not before."""
    url = f"sqlite:///{tmp_path / 'delayed.db'}" if store == "sqlite" else request.getfixturevalue("postgres_url")
    server = make_server(url)
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        session.consumer("delayed-t", "durable", name="d").detach()
        session.producer("delayed-q").send("later", delay=1500)
        session.producer("delayed-t", TOPIC).send("later", delay=1500)
    assert server.stop() == 0
    server.start()
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        consumers = [session.consumer("delayed-q"), session.consumer("delayed-t", "durable", name="d")]
        with contextlib.suppress(TimeoutError):  # due about 0.7 s after the restart; 8 s is plenty
            jms.pump(lambda: all(c.buffer for c in consumers), 8, "the delayed messages after the restart")
        assert [[m.body for m in c.buffer] for c in consumers] == [["later"], ["later"]]
        for consumer in consumers:
            message = consumer.receive().accept()
            assert time.time() * 1000 >= message.message.annotations[symbol("x-opt-delivery-time")]
        consumers[1].detach()
        jms.unsubscribe("d")


def test_a_non_jms_client_can_delay_with_x_opt_delivery_delay(broker, uid):
    queue = f"q-{uid}"
    conn = connect(broker.url)
    try:
        sender = conn.create_sender(queue)
        sent_ms = time.time() * 1000
        sender.send(Message(body="delayed", durable=True, annotations={symbol("x-opt-delivery-delay"): 1500}))
        sender.send(Message(body="now", durable=True))
    finally:
        conn.close()
    with JmsWire.connect(broker.address) as jms:
        consumer = jms.session().consumer(queue)
        assert take(consumer, 1) == ["now"]
        assert leftover(consumer) == []
        assert take(consumer, 1) == ["delayed"]
        assert time.time() * 1000 >= sent_ms + 1500


def test_a_message_that_expires_while_out_for_delivery_is_dropped_when_it_comes_back(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        session.producer(queue).send("brief", ttl=500)
        consumer = session.consumer(queue)
        held = consumer.receive()  # delivered before it expired, not settled
        jms.wait(0.6)
        held.release()
        assert leftover(consumer) == []
        assert leftover(session.consumer(queue)) == []


# -- selectors on queues, no-local on topics (§2.4) ----------------------------------------------------------------
def test_a_queue_selector_leaves_other_messages_in_order_for_other_consumers(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        session = jms.session()
        producer = session.producer(queue)

        def send(numbers: range) -> None:
            for i in numbers:
                producer.send(f"m{i}", properties={"color": "red" if i % 2 == 0 else "blue"})

        send(range(6))
        red = session.consumer(queue, selector="color = 'red'")
        assert take(red, 3) == ["m0", "m2", "m4"]
        assert leftover(red) == []
        rest = session.consumer(queue)
        got = [rest.receive().accept() for _ in range(3)]
        assert [(m.body, m.delivery_count) for m in got] == [("m1", 0), ("m3", 0), ("m5", 0)]
        rest.close()
        blue = session.consumer(queue, selector="color = 'blue'")
        send(range(6, 12))
        assert take(red, 3) == ["m6", "m8", "m10"]
        assert take(blue, 3) == ["m7", "m9", "m11"]
        assert leftover(red) == [] and leftover(blue) == []


def test_no_local_topic_consumer_skips_its_own_connections_messages(broker, uid):
    topic = f"t-{uid}"
    with JmsWire.connect(broker.address) as mine, JmsWire.connect(broker.address) as theirs:
        session = mine.session()
        no_local = session.consumer(topic, TOPIC, no_local=True)
        everything = session.consumer(topic, TOPIC)
        session.producer(topic, TOPIC).send("mine")
        theirs.session().producer(topic, TOPIC).send("theirs")
        assert leftover(no_local) == ["theirs"]
        assert leftover(everything) == ["mine", "theirs"]
