"""The memory limit over a real socket (issue 11, defect 7): non-persistent messages to a queue with no consumer
used to stay in memory without bound. With ``--memory-limit-messages`` a queue holds at most that many messages
that are not in the journal; ``--memory-full-policy fail`` rejects the next one with
``amqp:resource-limit-exceeded``, ``block`` withholds its publishers' credit until a consumer drains it. Nothing
accepted is lost, persistent messages still page, and a topic's full subscription drops its copy only.
"""

from __future__ import annotations

import pytest
from proton import Message

from tests.support.amqp import (
    all_accepted,
    connect,
    nothing_arrives,
    outcome,
    receive_bodies,
    receiver,
    send_all,
    send_while_credit,
    sender,
)

LIMIT = 50
FULL = "amqp:resource-limit-exceeded"


def flags(policy: str, *extra: str) -> tuple[str, ...]:
    return ("--memory-limit-messages", str(LIMIT), "--memory-full-policy", policy, *extra)


@pytest.mark.parametrize("address", ["np.fail", None], ids=["link", "anonymous-relay"])
def test_fail_rejects_the_message_past_the_limit_and_loses_nothing(make_server, address):
    server = make_server(None, *flags("fail"))
    conn = connect(server.url)
    snd = sender(conn, address)
    to = {"address": "np.fail"} if address is None else {}
    answers = [outcome(conn, snd, Message(body=f"n{i}", durable=False, **to)) for i in range(LIMIT + 2)]
    assert answers == ["accepted"] * LIMIT + [FULL, FULL]
    # Persistent messages are journaled and page: the limit does not apply to them.
    assert [outcome(conn, snd, Message(body=f"p{i}", durable=True, **to)) for i in range(60)] == ["accepted"] * 60
    rcv = receiver(conn, "np.fail", credit=20)
    assert receive_bodies(rcv, LIMIT + 60) == [f"n{i}" for i in range(LIMIT)] + [f"p{i}" for i in range(60)]
    assert outcome(conn, snd, Message(body="again", durable=False, **to)) == "accepted"  # drained: taken again
    assert receive_bodies(rcv, 1) == ["again"]
    assert nothing_arrives(rcv)
    conn.close()


def test_block_withholds_credit_until_a_consumer_drains_and_then_resumes(make_server):
    server = make_server(None, *flags("block", "--credit-window", "10"))
    conn = connect(server.url)
    snd = sender(conn, "np.block")
    bodies = [f"m{i}" for i in range(3 * LIMIT)]
    first = send_while_credit(conn, snd, bodies, wait=1.0)
    # The queue filled at LIMIT; what the link still had credit for came in, then no more credit.
    assert LIMIT <= len(first) <= LIMIT + 10
    assert all_accepted(conn, first)
    assert snd.link.credit == 0
    consumer = connect(server.url)
    rcv = receiver(consumer, "np.block", credit=10)
    got: list[str] = []
    sent = first
    for _ in range(10):  # each round drains what was sent, which gives the publisher credit again (no stall)
        got += receive_bodies(rcv, len(sent))
        sent = send_while_credit(conn, snd, bodies[len(got) :], wait=5.0)
        assert sent and all_accepted(conn, sent)
        if len(got) + len(sent) == len(bodies):
            break
    got += receive_bodies(rcv, len(sent))
    assert got == bodies
    assert nothing_arrives(rcv)
    consumer.close()
    conn.close()


def test_block_rejects_on_an_anonymous_relay_instead_of_stopping_every_queue(make_server):
    server = make_server(None, *flags("block"))
    conn = connect(server.url)
    relay = sender(conn, None)
    answers = [outcome(conn, relay, Message(address="np.relay", body=i, durable=False)) for i in range(LIMIT + 1)]
    assert answers == ["accepted"] * LIMIT + [FULL]
    assert outcome(conn, relay, Message(address="np.other", body="x", durable=False)) == "accepted"
    assert relay.link.credit > 0  # the relay link keeps its credit: other queues are not blocked
    conn.close()


@pytest.mark.parametrize("policy", ["block", "fail"])
def test_a_full_topic_subscription_drops_its_copy_and_the_publisher_goes_on(make_server, policy):
    server = make_server(None, *flags(policy))
    conn = connect(server.url)
    slow = receiver(conn, "np.topic", "topic", credit=0)  # takes nothing yet: its queue fills
    fast = receiver(conn, "np.topic", "topic", credit=10)
    snd = sender(conn, "np.topic", "topic")
    for i in range(LIMIT + 20):  # every one accepted; the fast subscriber keeps up and gets them all
        send_all(snd, [f"t{i}"], durable=False)
        assert receive_bodies(fast, 1) == [f"t{i}"]
    slow.flow(200)
    assert receive_bodies(slow, LIMIT) == [f"t{i}" for i in range(LIMIT)]
    assert nothing_arrives(slow)
    conn.close()
