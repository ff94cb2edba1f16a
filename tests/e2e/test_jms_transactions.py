"""Local transactions as Qpid JMS drives them, end to end over real sockets (mapping doc §6, §9.5, B.3).

Every scenario runs on SQLite and on PostgreSQL: one shared server per store with unique queue and topic names
per test, and a fresh server for the restart / ``kill -9`` test. Emptiness is shown with a drain, never with a
sleep.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import STORES
from tests.support.jms import (
    DURABLE,
    TOPIC,
    Consumer,
    JmsSession,
    JmsWire,
    Received,
)
from tests.support.server import SubgateProcess, module_server

UNKNOWN_ID = "amqp:transaction:unknown-id"


# -- fixtures ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=STORES)
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    """One server per store for the whole module."""
    with module_server(request, tmp_path_factory, "jms-transactions", request.param) as server:
        yield server


# -- helpers -------------------------------------------------------------------------------------------------------
def leftover(consumer: Consumer) -> list[tuple[object, int]]:
    """(body, delivery-count) of whatever the broker has for ``consumer`` now, accepted; [] when nothing."""
    consumer.drain()
    got = consumer.take_buffered()
    for received in got:
        received.accept()
    consumer.top_up()
    return [(m.body, m.delivery_count) for m in got]


def fill(session: JmsSession, queue: str, count: int, prefix: str = "m") -> None:
    producer = session.producer(queue)
    for i in range(count):
        producer.send(f"{prefix}{i}")


def received(items: list[Received]) -> list[tuple[object, int]]:
    return [(m.body, m.delivery_count) for m in items]


# -- the coordinator (§6.1, §6.2) ----------------------------------------------------------------------------------
def test_coordinator_attach_is_answered_and_declare_gives_a_txn_id(broker):
    with JmsWire.connect(broker.address) as jms:
        first = jms.session(transacted=True)
        second = jms.session(transacted=True)
        assert first.coordinator is not None
        reply = jms.last_attach_from_broker(first.coordinator.name)
        assert reply is not None
        target = reply.terminus("target")
        assert target is not None and target["type"] == 0x30  # a coordinator target, not null
        assert first.coordinator.credit > 0  # the broker granted credit on the coordinator link
        assert first.declare_outcome is not None and first.declare_outcome.state == "declared"
        assert isinstance(first.txn_id, bytes) and first.txn_id
        assert isinstance(second.txn_id, bytes) and second.txn_id and second.txn_id != first.txn_id
        previous = first.txn_id
        assert first.commit().state == "accepted"  # an empty transaction commits; the next one is declared
        assert first.txn_id and first.txn_id != previous
        control_dispositions = [f for f in jms.received("disposition") if f.channel == reply.channel]
        assert control_dispositions and all(f["settled"] for f in control_dispositions)


def test_a_discharge_or_send_under_an_unknown_transaction_is_rejected(broker, uid):
    with JmsWire.connect(broker.address) as jms:
        tx = jms.session(transacted=True)
        outcome = tx.send_discharge(False, txn_id=b"no-such-txn").wait()
        assert (outcome.state, outcome.condition) == ("rejected", UNKNOWN_ID)
        sent = tx.producer(f"q-{uid}").send("x", txn_id=b"no-such-txn").wait()
        assert sent.state == "rejected" and sent.condition == UNKNOWN_ID
        assert tx.commit().state == "accepted"  # the session's own transaction is unharmed
        assert leftover(jms.session().consumer(f"q-{uid}")) == []


# -- transactional sends (§6.3) ------------------------------------------------------------------------------------
def test_transactional_sends_are_visible_only_after_commit(broker, uid):
    queue, topic = f"q-{uid}", f"t-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms, JmsWire.connect(broker.address) as other:
        watcher_session = other.session()
        watcher = watcher_session.consumer(queue)
        subscriber = watcher_session.consumer(topic, TOPIC)
        durable = jms.session().consumer(topic, DURABLE, name="d")
        tx = jms.session(transacted=True)
        to_queue, to_topic = tx.producer(queue), tx.producer(topic, TOPIC)
        pending = [to_queue.send(f"q{i}") for i in range(3)] + [to_topic.send("t0")]
        for item in pending:
            outcome = item.wait()
            assert outcome.accepted and outcome.transactional and outcome.txn_id == tx.txn_id  # §6.3
        assert (leftover(watcher), leftover(subscriber), leftover(durable)) == ([], [], [])
        assert tx.commit().state == "accepted"
        assert leftover(watcher) == [("q0", 0), ("q1", 0), ("q2", 0)]
        assert leftover(subscriber) == [("t0", 0)]
        assert leftover(durable) == [("t0", 0)]
        to_queue.send("after-commit")  # the next transaction works as well
        assert leftover(watcher) == []
        assert tx.commit().state == "accepted"
        assert leftover(watcher) == [("after-commit", 0)]
        durable.detach()
        jms.unsubscribe("d")


def test_transactional_sends_are_discarded_on_rollback(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        watcher = jms.session().consumer(queue)
        tx = jms.session(transacted=True)
        producer = tx.producer(queue)
        for i in range(2):
            producer.send(f"rolled-back-{i}").wait()
        assert tx.rollback().state == "accepted"
        assert leftover(watcher) == []
        producer.send("kept")
        assert tx.commit().state == "accepted"
        assert leftover(watcher) == [("kept", 0)]


# -- transactional acknowledgements (§6.4, §6.5) -------------------------------------------------------------------
def test_rollback_returns_received_messages_with_delivery_count_plus_one(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 5)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue)
        got = [consumer.receive().accept() for _ in range(3)]  # m3, m4 stay prefetched, never handed out
        assert [m.state for m in got] == ["accepted"] * 3
        acks = jms.sent("disposition")[-3:]
        assert all(f["settled"] and int(f["state"].descriptor) == 0x34 for f in acks)  # transactional-state
        assert tx.rollback().state == "accepted"  # drain, discharge(fail) + declare, release, re-flow
        again = [consumer.receive() for _ in range(5)]
        assert received(again) == [("m0", 1), ("m1", 1), ("m2", 1), ("m3", 0), ("m4", 0)]
        for message in again:
            message.accept()
        assert tx.commit().state == "accepted"
        consumer.close()
        assert leftover(jms.session().consumer(queue)) == []


def test_commit_removes_acknowledged_messages_and_keeps_the_rest(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 4)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue, prefetch=2)
        assert [consumer.receive().accept().body for _ in range(2)] == ["m0", "m1"]
        assert tx.commit().state == "accepted"
        consumer.close()  # nothing prefetched left to release: credit was used up
        assert leftover(jms.session().consumer(queue)) == [("m2", 0), ("m3", 0)]


def test_acknowledged_messages_stay_locked_until_the_discharge(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 1)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue, prefetch=1)
        consumer.receive().accept()  # settled, but only enlisted in the transaction
        competitor = jms.session().consumer(queue)
        assert leftover(competitor) == []  # not available to anyone while the transaction is open
        assert tx.rollback().state == "accepted"
        consumer.close()
        assert leftover(competitor) == [("m0", 1)]


def test_rollback_with_the_prefetch_used_up_needs_no_drain(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 3)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue, prefetch=3)
        first = [consumer.receive().accept() for _ in range(3)]
        assert received(first) == [("m0", 0), ("m1", 0), ("m2", 0)]
        drains_before = len([f for f in jms.sent("flow") if f["drain"]])
        assert tx.rollback().state == "accepted"
        assert len([f for f in jms.sent("flow") if f["drain"]]) == drains_before  # credit 0: nothing to drain
        assert received([consumer.receive().accept() for _ in range(3)]) == [("m0", 1), ("m1", 1), ("m2", 1)]
        assert tx.commit().state == "accepted"


def test_a_consumer_without_messages_can_close_before_commit_and_rollback(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        tx = jms.session(transacted=True)
        assert tx.consumer(queue).close() is None
        assert tx.commit().state == "accepted"
        assert tx.consumer(queue).close() is None
        assert tx.rollback().state == "accepted"


def test_one_transaction_per_message_keeps_the_order(broker, uid):
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 10)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue)
        seen = []
        for _ in range(10):
            seen.append(consumer.receive().accept().body)
            assert tx.commit().state == "accepted"
        assert seen == [f"m{i}" for i in range(10)]
        assert leftover(consumer) == []
        consumer.close()
        assert leftover(jms.session().consumer(queue)) == []


def test_transactions_on_a_durable_subscription(broker, uid):
    topic = f"t-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        tx = jms.session(transacted=True)
        sub = tx.consumer(topic, DURABLE, name="txsub")
        publisher = jms.session().producer(topic, TOPIC)
        for i in range(3):
            publisher.send(f"m{i}")
        assert [sub.receive().accept().body for _ in range(2)] == ["m0", "m1"]
        assert tx.rollback().state == "accepted"
        again = [sub.receive().accept() for _ in range(3)]
        assert received(again) == [("m0", 1), ("m1", 1), ("m2", 0)]
        assert tx.commit().state == "accepted"
        sub.detach()
        resumed = jms.session().consumer(topic, DURABLE, name="txsub")
        assert leftover(resumed) == []
        resumed.detach()
        jms.unsubscribe("txsub")


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_acks_of_a_consumer_closed_inside_the_transaction_still_count(broker, uid, outcome):
    """A consumer closed while its session's transaction is open (Qpid JMS defers that close, other clients do
    not): its prefetch is released at the detach, its transactional acks wait for the discharge."""
    queue = f"q-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), queue, 4)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue)
        assert [consumer.receive().accept().body for _ in range(2)] == ["m0", "m1"]
        assert consumer.close() is None  # m2, m3 prefetched and unsettled: released
        watcher = jms.session().consumer(queue)
        assert leftover(watcher) == [("m2", 0), ("m3", 0)]  # m0, m1 stay locked to the transaction
        assert (tx.commit() if outcome == "commit" else tx.rollback()).state == "accepted"
        assert leftover(watcher) == ([] if outcome == "commit" else [("m0", 1), ("m1", 1)])


@pytest.mark.parametrize("change", ["unsubscribe", "replace"])
def test_a_commit_after_its_subscription_went_away_still_commits_its_sends(broker, uid, change):
    """The transaction acknowledged a message of a durable subscription that was then removed (unsubscribed, or
    replaced by a re-subscribe with another selector) before the commit: those acknowledgements are moot, the
    commit must still succeed and route the transaction's messages."""
    topic, queue = f"t-{uid}", f"q-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        plain = jms.session()
        plain.consumer(topic, DURABLE, name="gone").detach()
        plain.producer(topic, TOPIC).send("m0")
        tx = jms.session(transacted=True)
        sub = tx.consumer(topic, DURABLE, name="gone")
        assert sub.receive().accept().body == "m0"
        tx.producer(queue).send("sent-in-the-transaction").wait()
        sub.detach()
        if change == "unsubscribe":
            jms.unsubscribe("gone")
        else:
            plain.consumer(topic, DURABLE, name="gone", selector="n = 1").detach()
        outcome = tx.commit()
        assert (outcome.state, outcome.condition, outcome.description) == ("accepted", None, None)
        assert leftover(plain.consumer(queue)) == [("sent-in-the-transaction", 0)]
        if change == "replace":
            jms.unsubscribe("gone")


# -- ending a session or connection with an open transaction -------------------------------------------------------
def test_session_close_rolls_the_transaction_back(broker, uid):
    source, target = f"src-{uid}", f"dst-{uid}"
    with JmsWire.connect(broker.address) as jms:
        fill(jms.session(), source, 1)
        tx = jms.session(transacted=True)
        consumer = tx.consumer(source, prefetch=1)
        consumer.receive().accept()
        tx.producer(target).send("uncommitted").wait()
        assert tx.close() is None  # discharge(fail=true), then end
        frames = [f.name for f in jms.sent() if f.channel == jms.sent("begin")[-1].channel]
        assert frames[-2:] == ["transfer", "end"]
        session = jms.session()
        assert leftover(session.consumer(target)) == []
        assert leftover(session.consumer(source)) == [("m0", 1)]


@pytest.mark.parametrize("how", ["close", "loss"])
def test_connection_end_rolls_the_transaction_back(broker, uid, how):
    source, target = f"src-{uid}", f"dst-{uid}"
    with JmsWire.connect(broker.address) as setup:
        fill(setup.session(), source, 1)
    jms = JmsWire.connect(broker.address)
    tx = jms.session(transacted=True)
    consumer = tx.consumer(source, prefetch=1)
    consumer.receive().accept()
    tx.producer(target).send("uncommitted").wait()
    if how == "close":
        jms.close()  # discharge(fail=true), then close
    else:
        jms.abort()  # no discharge at all: the broker rolls back by itself
    with JmsWire.connect(broker.address) as after:
        session = after.session()
        assert leftover(session.consumer(target)) == []
        assert leftover(session.consumer(source)) == [("m0", 1)]


def test_connection_loss_counts_a_rolled_back_delivery_once(broker, uid):
    """With credit left on the consumers, the rollback of a lost connection's transactions must not hand the
    returned messages to that connection's own (dead) consumer links: each was delivered once, failed once."""
    queues = [f"q{i}-{uid}" for i in range(5)]
    with JmsWire.connect(broker.address) as setup:
        for queue in queues:
            fill(setup.session(), queue, 1)
    jms = JmsWire.connect(broker.address)
    for queue in queues:
        tx = jms.session(transacted=True)
        tx.consumer(queue).receive().accept()  # default prefetch: credit left after the receive
    jms.abort()
    with JmsWire.connect(broker.address) as after:
        session = after.session()
        assert [leftover(session.consumer(queue)) for queue in queues] == [[("m0", 1)]] * 5


# -- restart and crash (both stores) -------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["restart", "kill-9"])
def test_committed_work_survives_a_restart_and_rolled_back_work_does_not(make_server, store_url, how):
    server = make_server(store_url)
    with JmsWire.connect(server.address, client_id="app") as jms:
        plain = jms.session()
        fill(plain, "txq", 6)
        sub = plain.consumer("txt", DURABLE, name="txsub")
        sub.detach()
        to_topic = plain.producer("txt", TOPIC)
        for i in range(4):
            to_topic.send(f"s{i}")
        tx = jms.session(transacted=True)
        consumer = tx.consumer("txq", prefetch=2)
        sub = tx.consumer("txt", DURABLE, name="txsub", prefetch=2)
        producer = tx.producer("txout")
        assert [consumer.receive().accept().body for _ in range(2)] == ["m0", "m1"]
        assert [sub.receive().accept().body for _ in range(2)] == ["s0", "s1"]
        producer.send("committed").wait()
        assert tx.commit().state == "accepted"  # acks and send written in one database transaction
        consumer.top_up()
        sub.top_up()
        assert [consumer.receive().accept().body for _ in range(2)] == ["m2", "m3"]
        assert [sub.receive().accept().body for _ in range(2)] == ["s2", "s3"]
        producer.send("rolled-back").wait()
        assert tx.rollback(redeclare=False).state == "accepted"
        consumer.detach()  # whatever was redelivered meanwhile is released (count unchanged)
        sub.detach()
        fill(plain, "txopen", 1)
        assert tx.declare().state == "declared"  # a transaction left open at the stop / crash
        tx.consumer("txopen", prefetch=1).receive().accept()
        producer.send("in-doubt").wait()
        plain.producer("barrier").send("barrier")  # accepted once the failure counts before it are written
        if how == "restart":
            assert server.stop() == 0
        else:
            server.kill()
        jms.abort()
    server.start()
    with JmsWire.connect(server.address, client_id="app") as jms:
        session = jms.session()
        assert leftover(session.consumer("txq")) == [("m2", 1), ("m3", 1), ("m4", 0), ("m5", 0)]
        assert leftover(session.consumer("txout")) == [("committed", 0)]  # neither rolled-back nor in-doubt
        assert [body for body, _ in leftover(session.consumer("txopen"))] == ["m0"]  # its ack never committed
        resumed = session.consumer("txt", DURABLE, name="txsub")
        assert leftover(resumed) == [("s2", 1), ("s3", 1)]
        resumed.detach()
        jms.unsubscribe("txsub")
