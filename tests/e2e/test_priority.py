"""JMS priority end to end: a queue (and a durable subscription) delivers the highest priority first, FIFO within a
priority, also after a restart and a kill -9; with the Qpid JMS client's wire behaviour and with rhea, on SQLite and
PostgreSQL (engine.waiting, docs/jms.md "Priority")."""

from __future__ import annotations

import uuid

import pytest

from tests.support.jms import DURABLE, TOPIC, JmsWire
from tests.support.rhea import run_rhea

SENT = [1, 9, 4, 0, 7, 9, 2]  # the example
EXPECTED = ["p9-1", "p9-5", "p7-4", "p4-2", "p2-6", "p1-0", "p0-3"]  # "p<priority>-<send index>"


def body(index: int, priority: int) -> str:
    return f"p{priority}-{index}"


@pytest.mark.parametrize("restart", ["none", "stop", "kill"])
def test_a_queue_delivers_by_priority_also_after_a_restart(make_server, store_url, restart):
    server = make_server(store_url)
    queue = f"prio-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        producer = jms.session().producer(queue)
        for index, priority in enumerate(SENT):
            producer.send(body(index, priority), priority=priority)  # persistent: accepted after commit
    if restart == "stop":
        server.stop()
        server.start()
    elif restart == "kill":
        server.kill()
        server.start()
    with JmsWire.connect(server.address) as jms:
        consumer = jms.session().consumer(queue)
        assert [consumer.receive().accept().body for _ in SENT] == EXPECTED


def test_a_durable_subscription_delivers_its_backlog_by_priority(make_server, store_url):
    server = make_server(store_url)
    topic = f"prio-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address, client_id="prio-app") as jms:
        session = jms.session()
        assert session.consumer(topic, DURABLE, name="s").detach() is None
        producer = session.producer(topic, TOPIC)
        for index, priority in enumerate(SENT):
            producer.send(body(index, priority), priority=priority)
        again = session.consumer(topic, DURABLE, name="s")
        assert [again.receive().accept().body for _ in SENT] == EXPECTED


def test_one_priority_stays_in_send_order(server):
    queue = f"prio-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        producer = session.producer(queue)
        for index in range(20):
            producer.send(f"m{index}", priority=4)
        consumer = session.consumer(queue)
        assert [consumer.receive().accept().body for _ in range(20)] == [f"m{index}" for index in range(20)]


@pytest.mark.interop
def test_priorities_sent_by_rhea(server):
    queue = f"prio-{uuid.uuid4().hex[:8]}"
    run_rhea(
        "send", "--url", server.url, "--address", queue, "--capability", "queue", "--count", len(SENT),
        "--durable", "--body", "m{i}", "--priorities", ",".join(map(str, SENT)),
    )  # fmt: skip
    with JmsWire.connect(server.address) as jms:
        consumer = jms.session().consumer(queue)
        got = [consumer.receive().accept().body for _ in SENT]
    assert got == [f"m{entry.split('-')[1]}" for entry in EXPECTED]


@pytest.mark.parametrize("restart", ["none", "stop", "kill"])
def test_priority_also_orders_what_is_paged_out(make_server, store_url, restart):
    """A queue keeping 10 messages in memory holds 30 of priority 4 (20 of them paged out to the journal): the
    later 9s and 7s still come first, also after a restart and a kill -9 (engine.pages, "kept")."""
    server = make_server(store_url, "--page-messages", "10")
    queue = f"prio-paged-{uuid.uuid4().hex[:8]}"
    sent = [(f"low{i}", 4) for i in range(30)] + [(f"top{i}", 9) for i in range(5)] + [(f"mid{i}", 7) for i in range(3)]
    with JmsWire.connect(server.address) as jms:
        producer = jms.session().producer(queue)
        for body_text, priority in sent:
            producer.send(body_text, priority=priority)
    if restart == "stop":
        server.stop()
        server.start()
    elif restart == "kill":
        server.kill()
        server.start()
    expected = [f"top{i}" for i in range(5)] + [f"mid{i}" for i in range(3)] + [f"low{i}" for i in range(30)]
    with JmsWire.connect(server.address) as jms:
        consumer = jms.session().consumer(queue)
        assert [consumer.receive().accept().body for _ in sent] == expected
