"""Message groups (JMSXGroupID, AMQP group-id) on queues, end to end with the Qpid JMS client's wire behaviour
(tests/support/jms) and rhea: one consumer per group, in order; the group moves when its owner leaves;
JMSXGroupSeq -1 closes it; a kill -9 in the middle loses nothing and keeps each group's order (engine.groups).
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.jms import Consumer, JmsWire
from tests.support.rhea import run_rhea

CLOSE = 0xFFFFFFFF  # what the JMS client writes for JMSXGroupSeq = -1


def everything(consumers: list[Consumer], count: int) -> list[list[str]]:
    """The bodies each consumer got (accepted), until ``count`` in all arrived."""
    got: list[list[str]] = [[] for _ in consumers]
    for _ in range(200):  # bounded: at most about 60 s of polls
        for i, consumer in enumerate(consumers):
            received = consumer.poll(0.1)
            while received is not None:
                got[i].append(received.accept().body)
                received = consumer.poll(0.05)
        if sum(map(len, got)) >= count:
            return got
    raise AssertionError(f"{sum(map(len, got))} of {count} arrived: {got}")


def owners(got: list[list[str]]) -> dict[str, list[int]]:
    """group -> the consumers that got any of its messages ("A3" is message 3 of group A)."""
    found: dict[str, set[int]] = {}
    for i, bodies in enumerate(got):
        for body in bodies:
            found.setdefault(body[0], set()).add(i)
    return {group: sorted(who) for group, who in found.items()}


def in_group_order(got: list[list[str]]) -> bool:
    return all(
        [int(b[1:]) for b in bodies if b[0] == group] == sorted(int(b[1:]) for b in bodies if b[0] == group)
        for bodies in got
        for group in "ABC"
    )


def test_each_group_goes_to_one_consumer_in_order(make_server, store_url):
    server = make_server(store_url)
    queue = f"groups-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumers = [session.consumer(queue), session.consumer(queue)]
        producer = session.producer(queue)
        for n in range(1, 7):
            for group in "ABC":
                producer.send(f"{group}{n}", group_id=group)
        got = everything(consumers, 18)
    assert {group: len(who) for group, who in owners(got).items()} == {"A": 1, "B": 1, "C": 1}
    assert sorted(map(len, got)) == [6, 12]  # three groups over two consumers: all of one or two groups each
    assert in_group_order(got)


def test_the_group_moves_when_its_owner_closes_and_nothing_is_lost(make_server, store_url):
    server = make_server(store_url)
    queue = f"groups-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        owner = session.consumer(queue)
        producer = session.producer(queue)
        for n in range(1, 5):
            producer.send(f"A{n}", group_id="A")
        assert owner.receive().accept().body == "A1"
        other = session.consumer(queue)  # A belongs to the first consumer: nothing for this one yet
        producer.send("A5", group_id="A")
        assert other.poll(0.5) is None
        owner.close()  # A2..A5 were sent to it unsettled: they come back, and the group moves
        assert [other.receive().accept().body for _ in range(4)] == ["A2", "A3", "A4", "A5"]
        producer.send("A6", group_id="A")
        assert other.receive().accept().body == "A6"


def test_group_sequence_minus_one_closes_the_group(server):
    queue = f"groups-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumers = [session.consumer(queue), session.consumer(queue)]
        producer = session.producer(queue)
        producer.send("A1", group_id="A", group_sequence=1)
        producer.send("A2", group_id="A", group_sequence=CLOSE)
        first = everything(consumers, 2)
        assert [len(bodies) for bodies in first].count(2) == 1  # both to the owner, the second closing the group
        for n in range(3, 11):
            producer.send(f"A{n}", group_id="A", group_sequence=CLOSE)  # each closes it again at once
        later = everything(consumers, 8)
    assert all(later), later  # no owner any more: round robin over both consumers


def test_kill_9_while_a_group_is_owned_redelivers_the_rest_in_order_to_one_consumer(make_server, store_url):
    server = make_server(store_url)
    queue = f"groups-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumer = session.consumer(queue)
        producer = session.producer(queue)
        for n in range(1, 9):
            producer.send(f"A{n}", group_id="A")
            producer.send(f"B{n}", group_id="B")
        taken = [consumer.receive() for _ in range(6)]
        for received in taken:
            received.accept()  # A1-A3 and B1-B3: the consumer owns both groups
        accepted = sorted(r.body for r in taken)
        session.producer(f"{queue}.flush").send("round trip")  # a synchronous send: the accepts were read
        time.sleep(1.5)  # an accept is persisted within one second (docs/bookmarks.md)
    server.kill()
    server.start()
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumers = [session.consumer(queue), session.consumer(queue)]
        got = everything(consumers, 16 - len(accepted))
    every = sorted(f"{group}{n}" for group in "AB" for n in range(1, 9))
    assert sorted(accepted + [body for bodies in got for body in bodies]) == every
    assert all(len(who) == 1 for who in owners(got).values())
    assert in_group_order(got)


@pytest.mark.interop
def test_groups_sent_by_rhea_stick_to_one_jms_consumer_each(server):
    queue = f"groups-{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumers = [session.consumer(queue), session.consumer(queue)]
        run_rhea(
            "send", "--url", server.url, "--address", queue, "--capability", "queue", "--count", 12,
            "--body", "m{i}", "--group-id", "g", "--group-modulo", 3,
        )  # fmt: skip
        got = everything(consumers, 12)
    # rhea's message i is in group g(i mod 3): a consumer gets whole groups.
    groups_of = [{int(body[1:]) % 3 for body in bodies} for bodies in got]
    assert not (groups_of[0] & groups_of[1]) and sum(map(len, got)) == 12
    for bodies in got:
        for group in range(3):
            seqs = [int(b[1:]) for b in bodies if int(b[1:]) % 3 == group]
            assert seqs == sorted(seqs)
