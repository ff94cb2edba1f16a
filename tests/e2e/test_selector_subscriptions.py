"""Durable subscriptions on Diffusion topic selectors (issue 18 item 4, docs/jms.md "Durable subscriptions on topic
selectors"): non-shared and shared durable subscriptions whose topic is a selector keep a backlog across every topic
the selector matches, topics created later included, in journal order; JMS selector and no-local apply; restart and
kill -9 safe; unsubscribe as for path subscriptions. Qpid JMS client wire behaviour and rhea, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

from tests.support.jms import DURABLE, SHARED_DURABLE, TOPIC, JmsWire
from tests.support.rhea import run_rhea


def _branch() -> str:
    return f"news{uuid.uuid4().hex[:6]}"


def _publish(jms: JmsWire, pairs: list[tuple[str, str]], **fields) -> None:
    session = jms.session()
    for topic, body in pairs:
        session.producer(topic, TOPIC).send(body, **fields)


@pytest.mark.parametrize("restart", ["none", "kill"])
def test_a_durable_subscription_on_a_selector_keeps_every_matching_topic_in_journal_order(
    make_server, store_url, restart
):
    server = make_server(store_url)
    branch = _branch()
    selector = f"?{branch}/.*"
    with JmsWire.connect(server.address, client_id="sel-app") as jms:
        _publish(jms, [(f"{branch}/eu", "before")])  # before the subscription: not in it
        assert jms.session().consumer(selector, DURABLE, name="s").detach() is None
        _publish(
            jms,
            [(f"{branch}/eu", "1"), ("other/x", "no"), (f"{branch}/us", "2"), (f"{branch}/asia", "3"), (branch, "no")],
        )  # news/asia is created after the subscription; the branch root itself is not under ?news/.*
    if restart == "kill":
        server.kill()
        server.start()
    with JmsWire.connect(server.address, client_id="sel-app") as jms:
        consumer = jms.session().consumer(selector, DURABLE, name="s")
        first = consumer.receive()
        assert first.body == "1"
        first.accept()
        second = consumer.receive()
        assert second.body == "2"  # not accepted: comes back after the restart below
    server.kill()
    server.start()
    with JmsWire.connect(server.address, client_id="sel-app") as jms:
        consumer = jms.session().consumer(selector, DURABLE, name="s")
        got = [consumer.receive() for _ in range(2)]
        assert [r.body for r in got] == ["2", "3"]  # "1" was accepted before the kill
        for received in got:
            received.accept()
        assert consumer.poll(0.5) is None
        _publish(jms, [(f"{branch}/eu", "live")])
        assert consumer.receive().accept().body == "live"


def test_jms_selector_and_no_local_apply_to_a_selector_subscription(make_server, store_url):
    server = make_server(store_url)
    branch = _branch()
    with JmsWire.connect(server.address, client_id="mine") as jms:
        consumer = jms.session().consumer(f">{branch}//", DURABLE, name="s", selector="color = 'red'", no_local=True)
        _publish(jms, [(f"{branch}/a", "own")], properties={"color": "red"})  # no-local: dropped
        consumer.detach()
    with JmsWire.connect(server.address, client_id="other") as jms:
        _publish(jms, [(f"{branch}/a", "blue")], properties={"color": "blue"})
        _publish(jms, [(f"{branch}/b", "red")], properties={"color": "red"})
    server.stop()
    server.start()
    with JmsWire.connect(server.address, client_id="mine") as jms:
        consumer = jms.session().consumer(f">{branch}//", DURABLE, name="s", selector="color = 'red'", no_local=True)
        assert consumer.receive().accept().body == "red"
        assert consumer.poll(0.5) is None


def test_shared_durable_selector_subscription_shares_and_unsubscribe_removes_it(make_server, store_url):
    server = make_server(store_url)
    branch = _branch()
    selector = f"?{branch}/.*"
    with JmsWire.connect(server.address, client_id="shared-app") as jms:
        one = jms.session().consumer(selector, SHARED_DURABLE, name="pool")
        two = jms.session().consumer(selector, SHARED_DURABLE, name="pool")
        _publish(jms, [(f"{branch}/t{i}", f"m{i}") for i in range(6)])
        bodies = []
        for _ in range(6):
            for consumer in (one, two):
                received = consumer.poll(0.2)
                if received is not None:
                    bodies.append(received.accept().body)
            if len(bodies) == 6:
                break
        while len(bodies) < 6:
            bodies.append(one.receive().accept().body)
        assert sorted(bodies) == [f"m{i}" for i in range(6)]
        assert one.arrived and two.arrived  # both took a share
        one.detach()  # Qpid JMS closes a durable consumer with a plain detach: the subscription stays
        two.detach()
        jms.unsubscribe("pool")
        _publish(jms, [(f"{branch}/t0", "after")])
        again = jms.session().consumer(selector, SHARED_DURABLE, name="pool")
        assert again.poll(0.5) is None  # a new subscription: nothing from before it


def test_a_changed_selector_replaces_the_subscription(make_server, store_url):
    server = make_server(store_url)
    branch = _branch()
    with JmsWire.connect(server.address, client_id="swap") as jms:
        jms.session().consumer(f"?{branch}/a.*", DURABLE, name="s").detach()
        _publish(jms, [(f"{branch}/a1", "old")])
        consumer = jms.session().consumer(f"?{branch}/b.*", DURABLE, name="s")  # changed topic: replaced
        assert consumer.poll(0.5) is None
        _publish(jms, [(f"{branch}/a1", "no"), (f"{branch}/b1", "yes")])
        assert consumer.receive().accept().body == "yes"
        assert consumer.poll(0.3) is None


def test_rhea_publishes_to_topics_a_durable_selector_subscription_collects(make_server, store_url):
    server = make_server(store_url)
    branch = _branch()
    with JmsWire.connect(server.address, client_id="rhea-sel") as jms:
        jms.session().consumer(f"?{branch}/.*", DURABLE, name="s").detach()
    for leaf in ("x", "y"):
        run_rhea(
            "send", "--url", server.url, "--address", f"{branch}/{leaf}", "--capability", "topic", "--count", 2,
            "--durable", "--body", f"{leaf}{{i}}",
        )  # fmt: skip
    server.kill()
    server.start()
    with JmsWire.connect(server.address, client_id="rhea-sel") as jms:
        consumer = jms.session().consumer(f"?{branch}/.*", DURABLE, name="s")
        assert [consumer.receive().accept().body for _ in range(4)] == ["x0", "x1", "y0", "y1"]
