"""The backlog limit over a real socket (issue 19, item 3): ``--max-backlog-messages`` bounds what a durable queue or
durable subscription holds, journaled messages included (they page to disk, so without it an unconsumed queue grows
the store without bound). ``--backlog-full-policy fail`` rejects the next message with
``amqp:resource-limit-exceeded``; ``block`` withholds the publishers' credit until a consumer drains the queue to
80 %. A topic with a full durable subscription is full as a whole. Nothing accepted is lost (a restart included), and
other queues and clients are not affected.
"""

from __future__ import annotations

import pytest
from proton import Message

from tests.support.amqp import (
    SharedDurable,
    all_accepted,
    connect,
    nothing_arrives,
    outcome,
    receive_bodies,
    receiver,
    send_while_credit,
    sender,
)

LIMIT = 40
FULL = "amqp:resource-limit-exceeded"


def flags(policy: str, *extra: str) -> tuple[str, ...]:
    # Pages of 10: most of the backlog is in the journal only, and still counts.
    return ("--max-backlog-messages", str(LIMIT), "--backlog-full-policy", policy, "--page-messages", "10", *extra)


def store(request: pytest.FixtureRequest, name: str) -> str | None:
    return request.getfixturevalue("postgres_url") if name == "postgres" else None


@pytest.mark.parametrize("store_name", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_fail_rejects_past_the_limit_and_loses_nothing(make_server, request, store_name):
    server = make_server(store(request, store_name), *flags("fail"))
    conn = connect(server.url)
    snd = sender(conn, "bl.fail")
    answers = [outcome(conn, snd, Message(body=f"m{i}", durable=True)) for i in range(LIMIT + 2)]
    assert answers == ["accepted"] * LIMIT + [FULL, FULL]
    relay = sender(conn, None)  # an anonymous relay is answered the same, and its other destinations are served
    assert outcome(conn, relay, Message(address="bl.fail", body="r", durable=True)) == FULL
    assert outcome(conn, relay, Message(address="bl.other", body="o", durable=True)) == "accepted"
    conn.close()
    server.kill()  # nothing accepted is lost, and the recovered queue is still full
    server.start()
    conn = connect(server.url)
    snd = sender(conn, "bl.fail")
    assert outcome(conn, snd, Message(body="after-restart", durable=True)) == FULL
    rcv = receiver(conn, "bl.fail", credit=20)
    assert receive_bodies(rcv, LIMIT) == [f"m{i}" for i in range(LIMIT)]
    assert outcome(conn, snd, Message(body="again", durable=True)) == "accepted"  # drained: taken again
    assert receive_bodies(rcv, 1) == ["again"]
    assert nothing_arrives(rcv)
    assert receive_bodies(receiver(conn, "bl.other"), 1) == ["o"]
    conn.close()


def test_block_withholds_credit_until_a_consumer_drains_and_then_resumes(make_server):
    server = make_server(None, *flags("block", "--credit-window", "10"))
    conn = connect(server.url)
    snd = sender(conn, "bl.block")
    bodies = [f"m{i}" for i in range(2 * LIMIT)]
    first = send_while_credit(conn, snd, bodies, wait=1.0, durable=True)
    assert LIMIT <= len(first) <= LIMIT + 10  # the credit it had when the queue filled, no more
    assert all_accepted(conn, first)
    assert snd.link.credit == 0
    other = sender(connect(server.url), "bl.elsewhere")  # another queue, another client: served
    assert outcome(other.connection, other, Message(body="x", durable=True)) == "accepted"
    consumer = connect(server.url)
    rcv = receiver(consumer, "bl.block", credit=10)
    got: list[str] = []
    sent = first
    for _ in range(10):  # each round drains what was sent, which gives the publisher credit again
        got += receive_bodies(rcv, len(sent))
        sent = send_while_credit(conn, snd, bodies[len(got) :], wait=5.0, durable=True)
        assert sent and all_accepted(conn, sent)
        if len(got) + len(sent) == len(bodies):
            break
    got += receive_bodies(rcv, len(sent))
    assert got == bodies
    assert nothing_arrives(rcv)
    consumer.close()
    conn.close()


def test_fail_on_a_topic_rejects_for_every_subscriber_when_a_durable_subscription_is_full(make_server):
    server = make_server(None, *flags("fail"))
    conn = connect(server.url)
    durable = conn.create_receiver("bl/topic", name="sub|global", credit=0, options=[SharedDurable()])
    fast = receiver(conn, "bl/topic", "topic", credit=100)
    snd = sender(conn, "bl/topic", "topic")
    answers = [outcome(conn, snd, Message(body=f"t{i}", durable=True)) for i in range(LIMIT + 1)]
    assert answers == ["accepted"] * LIMIT + [FULL]
    # The rejected message went to no subscriber: the fast one has exactly what was accepted.
    assert receive_bodies(fast, LIMIT) == [f"t{i}" for i in range(LIMIT)]
    assert nothing_arrives(fast)
    durable.flow(LIMIT)
    assert receive_bodies(durable, LIMIT) == [f"t{i}" for i in range(LIMIT)]
    assert outcome(conn, snd, Message(body="again", durable=True)) == "accepted"
    assert receive_bodies(fast, 1) == ["again"]
    conn.close()


def test_block_on_a_topic_stops_its_publishers_until_the_durable_subscription_drains(make_server):
    server = make_server(None, *flags("block", "--credit-window", "10"))
    conn = connect(server.url)
    durable = conn.create_receiver("bl/btopic", name="sub|global", credit=0, options=[SharedDurable()])
    snd = sender(conn, "bl/btopic", "topic")
    bodies = [f"t{i}" for i in range(2 * LIMIT)]
    first = send_while_credit(conn, snd, bodies, wait=1.0, durable=True)
    assert LIMIT <= len(first) <= LIMIT + 10
    assert all_accepted(conn, first)
    assert snd.link.credit == 0
    durable.flow(len(first))
    assert receive_bodies(durable, len(first)) == bodies[: len(first)]
    rest = send_while_credit(conn, snd, bodies[len(first) :], wait=5.0, durable=True)
    assert rest and all_accepted(conn, rest)
    durable.flow(len(rest))
    assert receive_bodies(durable, len(rest)) == bodies[len(first) : len(first) + len(rest)]
    conn.close()


def test_address_settings_set_the_limit_and_policy_per_queue_name_pattern(make_server):
    server = make_server(None, "--address-settings", "capped.#:max_backlog_messages=5;backlog_full_policy=fail")
    conn = connect(server.url)
    capped, free = sender(conn, "capped.a"), sender(conn, "free.a")
    answers = [outcome(conn, capped, Message(body=i, durable=True)) for i in range(6)]
    assert answers == ["accepted"] * 5 + [FULL]
    assert [outcome(conn, free, Message(body=i, durable=True)) for i in range(8)] == ["accepted"] * 8  # no limit
    conn.close()
