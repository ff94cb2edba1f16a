"""Duplicate detection by publisher identity over real sockets (design.md §3), on SQLite and PostgreSQL.

A message annotated ``x-opt-publisher-id``/``x-opt-publisher-seq`` whose seq is not above its publisher's
high-water mark is accepted and neither journaled nor delivered again, also after ``kill -9``; bad annotations
are rejected with ``amqp:invalid-field``; a publisher without them gets the server's bookmark.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa
from proton import Delivery, Message, symbol, ulong

from tests.support.amqp import Capabilities, connect, nothing_arrives, outcome, receive_bodies, receiver, sender

PUBLISHER_ID = symbol("x-opt-publisher-id")
PUBLISHER_SEQ = symbol("x-opt-publisher-seq")


def numbered(body: Any, publisher: str, seq: int, *, durable: bool = True) -> Message:
    return Message(body=body, durable=durable, annotations={PUBLISHER_ID: publisher, PUBLISHER_SEQ: ulong(seq)})


def journal_rows(store_url: str, address: str) -> int:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(sa.text("SELECT count(*) FROM messages WHERE address = :a"), {"a": address}).scalar()
            )
    finally:
        engine.dispose()


def test_a_resent_message_is_accepted_and_neither_journaled_nor_delivered_again(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    try:
        rcv = receiver(conn, "dup.topic", "topic", credit=100)
        queue_rcv = receiver(conn, "dup.q", "queue", credit=100)
        to_topic, to_queue = sender(conn, "dup.topic", "topic"), sender(conn, "dup.q", "queue")
        for seq in range(1, 11):
            to_topic.send(numbered(f"t{seq}", "feed-1", seq))
            to_queue.send(numbered(f"q{seq}", "feed-2", seq))
        for seq in range(5, 11):  # re-sent: accepted (send() raises on any other outcome)
            to_topic.send(numbered(f"t{seq}", "feed-1", seq))
            to_queue.send(numbered(f"q{seq}", "feed-2", seq))
        to_topic.send(numbered("t3-late", "feed-1", 3))  # below the mark: a duplicate too
        assert receive_bodies(rcv, 10) == [f"t{seq}" for seq in range(1, 11)]
        assert receive_bodies(queue_rcv, 10) == [f"q{seq}" for seq in range(1, 11)]
        assert nothing_arrives(rcv) and nothing_arrives(queue_rcv)
        to_topic.send(numbered("t11", "feed-1", 11))
        msg = rcv.receive(timeout=10)
        rcv.accept()
        assert msg.body == "t11"
        assert msg.annotations["x-opt-bookmark"] == "feed-1|11|"  # the publisher's own numbering
    finally:
        conn.close()
    assert journal_rows(store_url, "dup.topic") == 11
    assert journal_rows(store_url, "dup.q") == 10


def test_resending_the_last_hundred_after_kill_journals_and_delivers_nothing_twice(make_server, store_url):
    server = make_server(store_url)
    conn = connect(server.url)
    snd = sender(conn, "dup.crash", "queue")
    for seq in range(1, 301):
        snd.send(numbered(seq, "feed-crash", seq))  # each confirmed: committed
    server.kill()
    server.start()
    conn = connect(server.url)
    try:
        snd = sender(conn, "dup.crash", "queue")
        for seq in range(201, 301):
            snd.send(numbered(seq, "feed-crash", seq))
        snd.send(numbered(301, "feed-crash", 301))
        rcv = receiver(conn, "dup.crash", "queue", credit=400)
        assert receive_bodies(rcv, 301) == list(range(1, 302))
        assert nothing_arrives(rcv)
    finally:
        conn.close()
    assert journal_rows(store_url, "dup.crash") == 301


@pytest.mark.parametrize(
    "annotations, named",
    [
        ({PUBLISHER_ID: "only-id"}, "x-opt-publisher-seq is missing"),
        ({PUBLISHER_SEQ: ulong(1)}, "x-opt-publisher-id is missing"),
        ({PUBLISHER_ID: "p", PUBLISHER_SEQ: "seven"}, "x-opt-publisher-seq must be a ulong"),
        ({PUBLISHER_ID: "", PUBLISHER_SEQ: ulong(1)}, "x-opt-publisher-id must be a string"),
    ],
)
def test_bad_publisher_annotations_are_rejected_and_the_link_carries_on(server, annotations, named):
    conn = connect(server.url)
    try:
        snd = sender(conn, "dup.bad", "queue")
        delivery = snd.link.send(Message(body="x", durable=True, annotations=annotations))
        conn.wait(lambda: bool(delivery.remote_state), timeout=10, msg="no outcome")
        assert delivery.remote_state == Delivery.REJECTED
        condition = delivery.remote.condition
        assert condition is not None and condition.name == "amqp:invalid-field"
        assert named in condition.description
        snd.send(Message(body="fine", durable=True))
        rcv = receiver(conn, "dup.bad", "queue")
        assert receive_bodies(rcv, 1) == ["fine"]
    finally:
        conn.close()


def test_without_annotations_the_bookmark_is_the_link_and_the_journal_sequence(server):
    conn = connect(server.url, container_id="plain-app")
    try:
        rcv = receiver(conn, "dup.plain", "topic")
        snd = conn.create_sender("dup.plain", name="feed", options=[Capabilities("topic")])
        snd.send(Message(body="x", durable=True))
        msg = rcv.receive(timeout=10)
        rcv.accept()
        publisher, seq, empty = str(msg.annotations["x-opt-bookmark"]).split("|")
        assert (publisher, empty) == ("plain-app/feed", "") and int(seq) > 0
    finally:
        conn.close()


def test_a_numbered_message_the_server_refused_is_taken_when_sent_again(make_server):
    # A rejection (here a full backlog) stored nothing, so it must not raise the publisher's mark: the re-send is a
    # new message, not a duplicate to be confirmed and dropped.
    server = make_server(None, "--max-backlog-messages", "2", "--backlog-full-policy", "fail")
    conn = connect(server.url)
    try:
        snd = sender(conn, "dup.full", "queue")
        answers = [outcome(conn, snd, numbered(f"m{seq}", "feed-full", seq)) for seq in (1, 2, 3)]
        assert answers == ["accepted", "accepted", "amqp:resource-limit-exceeded"]
        rcv = receiver(conn, "dup.full", "queue", credit=10)
        assert receive_bodies(rcv, 2) == ["m1", "m2"]
        answers = [outcome(conn, snd, numbered("m3", "feed-full", 3))]
        while answers[-1] != "accepted" and len(answers) < 50:  # the queue is free once the accepts are in
            time.sleep(0.1)
            answers.append(outcome(conn, snd, numbered("m3", "feed-full", 3)))
        assert answers[-1] == "accepted" and set(answers[:-1]) <= {"amqp:resource-limit-exceeded"}
        assert receive_bodies(rcv, 1) == ["m3"]
        assert outcome(conn, snd, numbered("m3", "feed-full", 3)) == "accepted"  # now it is a duplicate
        assert nothing_arrives(rcv)
    finally:
        conn.close()
