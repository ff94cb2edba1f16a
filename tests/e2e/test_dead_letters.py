"""Dead letters and expiry end to end (issue 18 item 2, docs/jms.md "Dead letters and expiry"): a message whose
delivery count reaches max_delivery_attempts (transaction rollbacks, modified{delivery-failed}, connection losses)
or that a consumer rejects moves to its dead letter address with where it came from and why; an expired one to the
expiry address; the move is atomic in the journal (kill -9 in the middle of moves loses and doubles nothing); per
pattern address settings from the flag and the TOML file. With the Qpid JMS client's wire behaviour and with rhea,
on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from subgate.cli.management import ManagementClient, ManagementError
from tests.support.amqp import connect, nothing_arrives, receiver
from tests.support.cli import run_subgate
from tests.support.jms import JmsWire
from tests.support.jms.errors import LinkRefused
from tests.support.rhea import run_rhea


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _origin(received) -> tuple[str, str, str]:
    annotations = received.message.annotations or {}
    return (
        annotations.get("x-opt-ORIG-ADDRESS"),
        annotations.get("x-opt-ORIG-QUEUE"),
        annotations.get("x-opt-subgate-reason"),
    )


def test_rollbacks_move_a_poison_message_to_the_dlq_after_ten_deliveries(make_server, store_url):
    server = make_server(store_url)
    queue = _name("orders")
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("poison")
        tx = jms.session(transacted=True)
        consumer = tx.consumer(queue)
        counts = []
        for _ in range(10):  # the default max_delivery_attempts
            received = consumer.receive()
            counts.append(received.delivery_count)
            received.accept()
            assert tx.rollback().state == "accepted"
        assert counts == list(range(10))
        assert consumer.poll(0.5) is None  # gone from the queue
        dead = jms.session().consumer("DLQ").receive()
        assert dead.body == "poison"
        assert _origin(dead) == (queue, queue, "max-delivery-attempts")
        assert dead.delivery_count == 0
        dead.accept()
    server.stop()
    server.start()
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        assert session.consumer(queue).poll(0.5) is None
        assert session.consumer("DLQ").poll(0.5) is None  # accepted there: gone for good


def test_modified_failed_counts_released_does_not_and_the_move_survives_a_restart(make_server, store_url):
    server = make_server(store_url, "--address-settings", "work.#:max_delivery_attempts=3")
    queue = f"work.{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("m")
        consumer = jms.session().consumer(queue)
        for _ in range(4):
            received = consumer.receive()
            assert received.delivery_count == 0
            received.release()  # not a delivery attempt (AMQP: released leaves the count alone)
        for count in range(3):
            received = consumer.receive()
            assert received.delivery_count == count
            received.modify(failed=True)
        assert consumer.poll(0.5) is None
    server.kill()
    server.start()
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        assert session.consumer(queue).poll(0.5) is None
        dead = session.consumer("DLQ").receive()
        assert (dead.body, _origin(dead)) == ("m", (queue, queue, "max-delivery-attempts"))


def test_a_rejected_message_goes_to_the_dead_letter_address_at_once(make_server, store_url):
    server = make_server(store_url)
    queue = _name("rej")
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("bad", priority=7, properties={"color": "red"})
        jms.session().consumer(queue).receive().reject()
        dead = jms.session().consumer("DLQ").receive()
        assert (dead.body, _origin(dead)) == ("bad", (queue, queue, "rejected"))
        assert dead.message.priority == 7 and dead.properties["color"] == "red"


def test_connection_losses_count_and_a_subscription_dead_letters_name_its_topic(make_server, store_url):
    server = make_server(store_url, "--address-settings", "#:max_delivery_attempts=2")
    topic = _name("news")
    with JmsWire.connect(server.address, client_id="dl-app") as jms:
        session = jms.session()
        session.consumer(topic, "durable", name="sub").detach()
        session.producer(topic, "topic").send("headline")
    for _ in range(2):  # a delivery lost with its connection counts as failed (default outcome)
        jms = JmsWire.connect(server.address, client_id="dl-app")
        jms.session().consumer(topic, "durable", name="sub").receive()
        jms.abort()
    with JmsWire.connect(server.address, client_id="dl-app") as jms:
        assert jms.session().consumer(topic, "durable", name="sub").poll(0.5) is None
        dead = jms.session().consumer("DLQ").receive()
        address, queue_name, reason = _origin(dead)
        assert (dead.body, address, reason) == ("headline", topic, "max-delivery-attempts")
        assert queue_name.startswith(topic + "#")


def test_an_expired_message_moves_to_the_expiry_queue_without_its_expiry(make_server, store_url):
    server = make_server(store_url)
    queue = _name("ttl")
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("stale", ttl=200)
        time.sleep(0.4)
        assert jms.session().consumer(queue).poll(0.3) is None  # expired: not delivered
        moved = jms.session().consumer("ExpiryQueue").receive()
        assert (moved.body, _origin(moved)) == ("stale", (queue, queue, "expired"))
        assert not moved.message.ttl and not moved.message.expiry_time  # it must not expire again
        assert moved.message.annotations["x-opt-ACTUAL-EXPIRY"] > 0


def test_an_empty_expiry_address_drops_expired_messages_as_before(make_server, store_url):
    server = make_server(store_url, "--address-settings", "#:expiry_address=")
    queue = _name("ttl")
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("stale", ttl=200)
        time.sleep(0.4)
        assert jms.session().consumer(queue).poll(0.3) is None
        assert jms.session().consumer("ExpiryQueue").poll(0.5) is None


def test_auto_created_dead_letter_resources_and_settings_from_the_toml_file(make_server, tmp_path, store_url):
    config = tmp_path / "subgate.toml"
    config.write_text(
        '[address_settings."#"]\n'
        "max_delivery_attempts = 1\n"
        "auto_create_dead_letter_resources = true\n"
        '[address_settings."billing.#"]\n'
        'dead_letter_address = "billing.dead"\n'
    )
    server = make_server(store_url, "--config", str(config))
    plain, billing = _name("plain"), f"billing.{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        for queue in (plain, billing):
            session.producer(queue).send(queue)
            session.consumer(queue).receive().modify(failed=True)
        assert session.consumer(f"DLQ.{plain}").receive().body == plain
        assert session.consumer(f"DLQ.{billing}").receive().body == billing  # auto-create merged from "#"
        assert session.consumer("DLQ").poll(0.3) is None


def test_a_redelivery_delay_holds_a_failed_message_back(make_server, store_url):
    server = make_server(store_url, "--address-settings", "#:redelivery_delay=1500")
    queue = _name("slow")
    with JmsWire.connect(server.address) as jms:
        jms.session().producer(queue).send("again")
        consumer = jms.session().consumer(queue)
        consumer.receive().modify(failed=True)
        assert consumer.poll(0.3) is None  # held for the delay
        assert consumer.receive(timeout=15).delivery_count == 1


def test_a_name_with_auto_create_off_for_its_pattern_is_not_created(make_server, store_url):
    server = make_server(store_url, "--address-settings", "nowhere.#:auto_create_queues=false")
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        with pytest.raises(LinkRefused) as refused:
            session.browser("nowhere.dlq")
        assert refused.value.condition == "amqp:not-found"
        with pytest.raises(LinkRefused):
            session.consumer("nowhere.dlq")  # still nothing there: the browse created nothing
        session.producer("elsewhere").send("x")  # other names are created as before
        assert session.consumer("elsewhere").receive().body == "x"


def test_a_bad_address_setting_stops_start_up_with_one_line(tmp_path):
    result = run_subgate(
        "serve", "--store", f"sqlite:///{tmp_path / 'x.db'}", "--address-settings", "#:max_tries=3", cwd=tmp_path
    )
    assert result.returncode != 0
    assert "unknown key 'max_tries'" in result.stderr


def test_kill_during_moves_loses_and_doubles_nothing(make_server, store_url):
    """Rejections move messages to the DLQ while the server is SIGKILLed: afterwards every message is in exactly
    one of the two queues (the copy's row and the original's removal commit together)."""
    server = make_server(store_url)
    queue = _name("atomic")
    bodies = [f"m{i}" for i in range(60)]
    with JmsWire.connect(server.address) as jms:
        producer = jms.session().producer(queue)
        for body in bodies:
            producer.send(body)
    jms = JmsWire.connect(server.address)
    consumer = jms.session().consumer(queue, prefetch=60)
    stop_after = random.randint(10, 40)
    for _ in range(stop_after):
        consumer.receive().reject()
    server.kill()
    jms.abort()
    server.start()
    seen: list[str] = []
    conn = connect(server.address)
    try:
        for address in (queue, "DLQ"):
            rcv = receiver(conn, address, credit=100)
            while True:
                try:
                    message = rcv.receive(timeout=1.5)
                except Exception:  # noqa: BLE001 - the proton Timeout: nothing more
                    break
                seen.append(message.body)
                rcv.accept()
            assert nothing_arrives(rcv, 0.2)
    finally:
        conn.close()
    assert sorted(seen) == sorted(bodies)


def test_rhea_modified_loop_ends_in_the_dlq(make_server, store_url):
    server = make_server(store_url, "--address-settings", "#:max_delivery_attempts=3")
    queue = _name("rhea")
    run_rhea("send", "--url", server.url, "--address", queue, "--count", 1, "--durable", "--body", "poison")
    lines = run_rhea("receive", "--url", server.url, "--address", queue, "--count", 3, "--outcome", "modify-failed")
    assert [line["message"]["delivery_count"] for line in lines if line.get("event") == "message"] == [0, 1, 2]
    lines = run_rhea("receive", "--url", server.url, "--address", "DLQ", "--count", 1)
    message = next(line["message"] for line in lines if line.get("event") == "message")
    assert message["body"] == "poison"
    annotations = message["message_annotations"]
    assert annotations["x-opt-ORIG-QUEUE"] == queue and annotations["x-opt-subgate-reason"] == "max-delivery-attempts"


def test_address_settings_change_through_management(make_server, store_url):
    server = make_server(store_url)
    queue = f"mgmt.{uuid.uuid4().hex[:8]}"
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        session.producer(queue).send("m")
        consumer = session.consumer(queue)  # an existing queue: the new settings reach it too
        with ManagementClient("127.0.0.1", server.port) as management:
            management.request("UPDATE", "address-settings", {"name": "mgmt.#", "settings": "max_delivery_attempts=1"})
            read = management.request("READ", "address-settings", {"name": queue}).body
            assert (read["max_delivery_attempts"], read["dead_letter_address"]) == (1, "DLQ")
            listed = management.request("QUERY", "address-settings", {}).body
            assert listed == [{"match": "mgmt.#", "settings": {"max_delivery_attempts": 1}}]
            with pytest.raises(ManagementError) as bad:
                management.request("UPDATE", "address-settings", {"name": "#", "settings": "max_tries=1"})
            assert bad.value.status == 400 and "max_tries" in bad.value.description
        consumer.receive().modify(failed=True)
        assert session.consumer("DLQ").receive().body == "m"
        with ManagementClient("127.0.0.1", server.port) as management:
            management.request("DELETE", "address-settings", {"name": "mgmt.#"})
            read = management.request("READ", "address-settings", {"name": queue}).body
            assert read["max_delivery_attempts"] == 10
