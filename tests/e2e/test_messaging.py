"""Queues, topics, credit, drain, outcomes, TTL and anonymous relay over real sockets (proton clients)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from proton import Message

from tests.support.amqp import (
    connect,
    nothing_arrives,
    nothing_buffered,
    receive_bodies,
    receiver,
    send_all,
    sender,
    settle_last,
)


def test_queue_send_and_receive_in_order(server):
    conn = connect(server.url)
    send_all(sender(conn, "orders", "queue"), [f"m{i}" for i in range(50)], durable=True)
    rcv = receiver(conn, "orders", "queue")
    assert receive_bodies(rcv, 50) == [f"m{i}" for i in range(50)]
    assert nothing_arrives(rcv)
    conn.close()


def test_competing_consumers_share_a_queue(server):
    conn = connect(server.url)
    r1 = receiver(conn, "work", "queue", credit=10)
    r2 = receiver(conn, "work", "queue", credit=10)
    send_all(sender(conn, "work", "queue"), range(20))
    got1 = receive_bodies(r1, 10)
    got2 = receive_bodies(r2, 10)
    assert sorted(got1 + got2) == list(range(20))
    assert got1 and got2
    conn.close()


def test_topic_fans_out_to_every_consumer(server):
    conn = connect(server.url)
    receivers = [receiver(conn, "prices", "topic") for _ in range(4)]
    time.sleep(0.1)
    send_all(sender(conn, "prices", "topic"), ["a", "b", "c"])
    for rcv in receivers:
        assert receive_bodies(rcv, 3) == ["a", "b", "c"]
    conn.close()


def test_topic_without_subscribers_accepts_and_drops(server):
    conn = connect(server.url)
    send_all(sender(conn, "quiet", "topic"), ["lost"])  # accepted (send raises otherwise)
    rcv = receiver(conn, "quiet", "topic")
    assert nothing_arrives(rcv)
    conn.close()


def test_credit_limits_deliveries_and_drain_is_answered(server):
    conn = connect(server.url)
    send_all(sender(conn, "credit", "queue"), range(5))
    rcv = receiver(conn, "credit", "queue", credit=0)
    assert nothing_buffered(conn, rcv)  # no credit, nothing sent
    rcv.flow(2)
    assert receive_bodies(rcv, 2) == [0, 1]
    assert nothing_buffered(conn, rcv)
    # drain with more credit than messages: the 3 left arrive, then the drain is answered with credit 0
    link = rcv.link
    # (credit 10 with 3 messages can only reach 0 through the server's drained flow)
    link.drain(10)
    conn.wait(lambda: link.credit == 0, timeout=5, msg="drain was not answered")
    assert len(rcv.fetcher.incoming) == 3
    assert receive_bodies(rcv, 3) == [2, 3, 4]
    # a drain on an empty queue is answered at once
    link.drain(5)
    conn.wait(lambda: link.credit == 0, timeout=5, msg="drain on empty queue was not answered")
    assert not rcv.fetcher.incoming
    conn.close()


@pytest.mark.parametrize(
    ("outcome", "comes_back", "delivery_count"),
    [
        ("accepted", False, None),
        ("rejected", False, None),
        ("released", True, 0),
        ("modified", True, 0),
        ("modified-failed", True, 1),
    ],
)
def test_outcomes_and_delivery_counts(server, outcome, comes_back, delivery_count):
    conn = connect(server.url)
    send_all(sender(conn, "outcomes", "queue"), ["x"])
    rcv = receiver(conn, "outcomes", "queue", credit=1)
    first = rcv.receive(timeout=5)
    assert first.delivery_count == 0
    settle_last(rcv, outcome)
    if comes_back:
        again = rcv.receive(timeout=5)
        assert again.body == "x"
        assert again.delivery_count == delivery_count
        rcv.accept()
    assert nothing_arrives(rcv)
    conn.close()


def test_undeliverable_here_goes_to_another_consumer_only(server):
    conn = connect(server.url)
    send_all(sender(conn, "picky", "queue"), ["only-once-here"])
    r1 = receiver(conn, "picky", "queue", credit=5)
    assert r1.receive(timeout=5).body == "only-once-here"
    settle_last(r1, "modified-failed-undeliverable")
    assert nothing_arrives(r1)
    r2 = receiver(conn, "picky", "queue", credit=5)
    again = r2.receive(timeout=5)
    assert again.body == "only-once-here"
    assert again.delivery_count == 1
    r2.accept()
    conn.close()


def test_unsettled_messages_return_when_consumer_detaches(server):
    conn = connect(server.url)
    send_all(sender(conn, "detach", "queue"), ["a", "b"])
    r1 = receiver(conn, "detach", "queue", credit=5)
    r1.receive(timeout=5)
    r1.receive(timeout=5)
    r1.close()  # orderly detach: unsettled deliveries are released (count unchanged)
    r2 = receiver(conn, "detach", "queue", credit=5)
    got = [r2.receive(timeout=5) for _ in range(2)]
    r2.accept()
    assert [m.body for m in got] == ["a", "b"]
    assert [m.delivery_count for m in got] == [0, 0]
    conn.close()


VANISHING_CONSUMER = """
import os, sys
from proton.utils import BlockingConnection
conn = BlockingConnection(sys.argv[1], timeout=10)
rcv = conn.create_receiver("lost", credit=5)
print(rcv.receive(timeout=10).body, flush=True)
os._exit(0)  # vanish: no disposition, no detach, no close frame
"""


def test_unsettled_messages_count_as_failed_after_connection_loss(server):
    c1 = connect(server.url)
    send_all(sender(c1, "lost", "queue"), ["a"])
    c1.close()
    out = subprocess.run([sys.executable, "-c", VANISHING_CONSUMER, server.url], capture_output=True, timeout=30)
    assert out.stdout.strip() == b"a", out.stderr
    c2 = connect(server.url)
    again = receiver(c2, "lost", "queue").receive(timeout=10)
    assert again.body == "a"
    assert again.delivery_count == 1
    c2.close()


def test_ttl_expiry(server):
    conn = connect(server.url)
    snd = sender(conn, "ttl", "queue")
    snd.send(Message(body="short", ttl=0.2))
    snd.send(Message(body="long", ttl=60))
    snd.send(Message(body="forever"))
    time.sleep(0.5)
    rcv = receiver(conn, "ttl", "queue")
    assert receive_bodies(rcv, 2) == ["long", "forever"]
    assert nothing_arrives(rcv)
    conn.close()


def test_absolute_expiry_time(server):
    conn = connect(server.url)
    snd = sender(conn, "abs-expiry", "queue")
    snd.send(Message(body="past", expiry_time=time.time() - 10))
    snd.send(Message(body="future", expiry_time=time.time() + 60))
    rcv = receiver(conn, "abs-expiry", "queue")
    assert receive_bodies(rcv, 1) == ["future"]
    assert nothing_arrives(rcv)
    conn.close()


def test_anonymous_relay_routes_by_to(server):
    conn = connect(server.url)
    rq = receiver(conn, "relay-q", "queue")
    rt = receiver(conn, "relay-t", "topic")
    time.sleep(0.1)
    snd = sender(conn, None)
    snd.send(Message(address="relay-q", body="to-queue"))
    snd.send(Message(address="relay-t", body="to-topic"))
    assert receive_bodies(rq, 1) == ["to-queue"]
    assert receive_bodies(rt, 1) == ["to-topic"]
    conn.close()


def test_anonymous_relay_without_to_is_rejected(server):
    from proton.utils import SendException

    conn = connect(server.url)
    snd = sender(conn, None)
    with pytest.raises(SendException):
        snd.send(Message(body="nowhere"))
    snd.send(Message(address="still-works", body="ok"))  # the link stays usable
    conn.close()


def test_delayed_delivery(server):
    conn = connect(server.url)
    snd = sender(conn, "later", "queue")
    due = int((time.time() + 0.8) * 1000)
    snd.send(Message(body="delayed", annotations={"x-opt-delivery-time": due}))
    snd.send(Message(body="now"))
    rcv = receiver(conn, "later", "queue")
    assert receive_bodies(rcv, 1) == ["now"]
    assert nothing_arrives(rcv, 0.3)
    msg = rcv.receive(timeout=5)
    rcv.accept()
    assert msg.body == "delayed"
    assert time.time() * 1000 >= due - 5
    conn.close()


def test_presettled_consumer_and_publisher(server):
    from tests.support.amqp import PreSettled

    conn = connect(server.url)
    snd = conn.create_sender("presettled", options=[PreSettled()])
    for i in range(3):
        snd.send(Message(body=i))
    rcv = conn.create_receiver("presettled", credit=10, options=[PreSettled()])
    assert [rcv.receive(timeout=5).body for _ in range(3)] == [0, 1, 2]
    rcv2 = receiver(conn, "presettled", "queue")
    assert nothing_arrives(rcv2)  # at-most-once: gone once sent
    conn.close()


def test_browse_leaves_messages_on_the_queue(server):
    from tests.support.amqp import BrowseCopy

    conn = connect(server.url)
    send_all(sender(conn, "browse", "queue"), ["a", "b"])
    browser = receiver(conn, "browse", "queue", options=[BrowseCopy()])
    assert [browser.receive(timeout=5).body for _ in range(2)] == ["a", "b"]
    browser.close()
    rcv = receiver(conn, "browse", "queue")
    assert receive_bodies(rcv, 2) == ["a", "b"]
    conn.close()


def test_connection_open_offers_capabilities_and_properties(server):
    conn = connect(server.url)
    offered = {str(c) for c in conn.conn.remote_offered_capabilities}
    assert {"ANONYMOUS-RELAY", "DELAYED_DELIVERY", "SHARED-SUBS", "sole-connection-for-container"} <= offered
    props = {str(k): v for k, v in conn.conn.remote_properties.items()}
    assert props["product"] == "subgate"
    assert "version" in props
    conn.close()
