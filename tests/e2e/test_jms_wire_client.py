"""The Qpid-JMS-shaped wire client (tests/support/jms/) against a running server, and its frame shapes.

The end-to-end tests cover what the server supports today: connect, the open it answers, queue and topic
consumers, drain, the anonymous relay and the ClientID-in-use refusal. The shape tests read back the frames the
client wrote (``JmsWire.sent``) and compare them with docs/jms-amqp-mapping.md; they do not depend on how the
broker answers, so they hold whether or not the broker implements durable subscriptions or transactions yet.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from proton import Described, byte, symbol, timestamp, ubyte, uint, ulong

from tests.support.cli import run_subgate
from tests.support.jms import (
    DURABLE,
    OUTCOMES,
    SHARED,
    SHARED_DURABLE,
    TOPIC,
    ConnectionRefused,
    JmsError,
    JmsMessage,
    JmsWire,
    RefusedLocally,
    SaslFailed,
    SendFailed,
    SubscriptionTracker,
    WireFrame,
    encode_message,
    sections,
)

GENERATED_ID = re.compile(r"ID:[0-9a-f-]{36}:1")
DEFAULT_OUTCOME = Described(ulong(0x27), [True])
EMPTY_TARGET = Described(ulong(0x29), [])
SECTION_PREFIX = b"\x00\x53"  # a described section with a smallulong descriptor


def sent_attach(jms: JmsWire, name: str) -> WireFrame:
    return next(f for f in jms.sent("attach") if f["name"] == name)


def names(value: object) -> list[str]:
    return [str(v) for v in value.elements]  # type: ignore[attr-defined]


# -- connection ----------------------------------------------------------------------------------------------------
def test_connect_sends_the_qpid_jms_open_and_reads_the_broker_open(server):
    with JmsWire.connect(server.address) as jms:
        assert {"sole-connection-for-container", "DELAYED_DELIVERY", "ANONYMOUS-RELAY", "SHARED-SUBS"} <= (
            jms.offered_capabilities
        )
        assert jms.remote_properties["product"] == "subgate"
        sasl_init = jms.sent("sasl-init")[0]
        assert sasl_init.fields == [symbol("ANONYMOUS"), b"", "127.0.0.1"]  # empty response, URI host
        opened = jms.sent("open")[0]
        assert GENERATED_ID.fullmatch(opened["container-id"])
        assert opened["hostname"] == "127.0.0.1"
        assert (opened["max-frame-size"], opened["channel-max"], opened["idle-time-out"]) == (1048576, 32767, 30000)
        assert names(opened["desired-capabilities"]) == [
            "sole-connection-for-container",
            "DELAYED_DELIVERY",
            "ANONYMOUS-RELAY",
            "SHARED-SUBS",
        ]
        assert opened["offered-capabilities"] is None
        assert sorted(opened["properties"]) == ["platform", "product", "version"]
        assert opened["properties"][symbol("product")] == "QpidJMS"
        # the hidden connection session begins once the broker's open is in (§1.7), with proton-j's windows
        begin = jms.sent("begin")[0]
        assert jms.frames.index(begin) > jms.frames.index(jms.received("open")[0])
        assert (begin["incoming-window"], begin["outgoing-window"], begin["handle-max"]) == (2047, 2**31 - 1, 65535)
        assert not [f for f in jms.sent("flow") if f["handle"] is None]  # no session-level flow after begin
    assert jms.sent()[-1].name == "close"


def test_plain_sasl_with_a_known_user_and_refusal_of_a_wrong_password(make_server, sqlite_url, tmp_path: Path):
    for args in (("db", "upgrade"), ("users", "add", "alice", "--password", "s3cret")):
        result = run_subgate(*args, "--store", sqlite_url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    server = make_server(sqlite_url)
    with JmsWire.connect(server.address, user="alice", password="s3cret") as jms:
        assert jms.sasl_mechanism == "PLAIN"
        assert jms.sent("sasl-init")[0].fields == [symbol("PLAIN"), b"\x00alice\x00s3cret", "127.0.0.1"]
    with pytest.raises(SaslFailed) as failed:
        JmsWire.connect(server.address, user="alice", password="wrong")
    assert failed.value.code == 1


def test_client_id_in_use_is_refused_with_invalid_field_container_id(server):
    with JmsWire.connect(server.address, client_id="app1") as first:
        with pytest.raises(ConnectionRefused) as refused:
            JmsWire.connect(server.address, client_id="app1")
        error = refused.value
        assert error.condition == "amqp:invalid-field"
        assert "app1" in (error.description or "")
        assert error.info == {symbol("invalid-field"): symbol("container-id")}
        assert all(isinstance(v, symbol) for pair in error.info.items() for v in pair)  # §1.6: both symbols
        assert first.session().producer("still-open").send("ok").outcome.accepted
    with JmsWire.connect(server.address, client_id="app1") as again:  # the ClientID is free once closed
        assert again.container_id == "app1"


def test_refused_connection_answers_the_close_and_begins_no_session(server):
    with JmsWire.connect(server.address, client_id="dup"):
        wire = JmsWire("127.0.0.1", server.port, client_id="dup")
        wire.sasl(None, None)
        with pytest.raises(ConnectionRefused):
            wire.open()
    assert [f.name for f in wire.sent()] == ["sasl-init", "open", "close"]
    assert wire.sent("close")[0].fields == []  # C→B close() without an error
    assert wire.received("open")[0]["properties"][symbol("amqp:connection-establishment-failed")] is True


# -- queues and topics ---------------------------------------------------------------------------------------------
def test_queue_producer_and_consumer_round_trip_in_order(server):
    with JmsWire.connect(server.address, client_id="app1") as jms:
        session = jms.session()
        producer = session.producer("orders")
        for i in range(3):
            assert producer.send(f"m{i}", properties={"n": i}).outcome.accepted  # persistent: synchronous
        consumer = session.consumer("orders")
        got = [consumer.receive().accept() for _ in range(3)]
        assert [m.body for m in got] == ["m0", "m1", "m2"]
        assert [m.message.properties["n"] for m in got] == [0, 1, 2]
        first = got[0].message
        assert first.id == f"{producer.id}-1"  # ID:<producer-id>-<n>, one "ID:" prefix (§7.4)
        assert first.address == "orders"
        assert first.durable
        assert isinstance(first.annotations[symbol("x-opt-jms-msg-type")], byte)
        assert first.annotations[symbol("x-opt-jms-dest")] == byte(0)
        assert consumer.name == f"qpid-jms:receiver:{session.id}:1:orders"  # consumers count apart from producers
        assert consumer.poll(0.3) is None
        accepts = [f for f in jms.sent("disposition") if f.channel == jms.sent("attach")[-1].channel]
        assert [(f["settled"], f["state"]) for f in accepts] == [(True, Described(ulong(0x24), []))] * 3


def test_queue_consumer_outcomes_come_back_with_the_right_delivery_count(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        session.producer("outcomes").send("x")
        consumer = session.consumer("outcomes")
        assert consumer.receive().release().state == "released"
        again = consumer.receive()
        assert again.delivery_count == 0  # released: no increment
        again.modify(failed=True)
        third = consumer.receive()
        assert third.delivery_count == 1
        third.reject()
        assert consumer.poll(0.3) is None


def test_non_persistent_send_has_no_header_and_is_not_awaited(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        pending = session.producer("np").send("light", persistent=False)
        assert pending.outcome is None  # asynchronous
        assert pending.wait().accepted
        transfer = jms.sent("transfer")[-1]
        assert transfer.payload.startswith(SECTION_PREFIX + b"\x72")  # message-annotations first, no header
        assert session.consumer("np").receive().accept().body == "light"


def test_plain_topic_consumers_each_get_a_copy_and_flow_prefetch_after_the_attach(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        consumers = [session.consumer("prices", TOPIC) for _ in range(2)]
        session.producer("prices", TOPIC).send("tick")
        assert [c.receive().accept().body for c in consumers] == ["tick", "tick"]
        attach = sent_attach(jms, consumers[0].name)
        source = attach.terminus("source")
        assert consumers[0].name.startswith(f"qpid-jms:receiver:{session.id}:") and consumers[0].name.endswith(
            ":prices"
        )
        assert source is not None
        assert (source["address"], source["durable"], source["expiry-policy"]) == ("prices", 0, "link-detach")
        assert source["distribution-mode"] is None
        assert names(source["capabilities"]) == ["topic"]
        assert source["default-outcome"] == DEFAULT_OUTCOME
        assert attach["target"] == EMPTY_TARGET
        after_reply = jms.frames[jms.frames.index(jms.last_attach_from_broker(consumers[0].name)) + 1 :]
        first_flow = next(f for f in after_reply if f.sent and f.name == "flow")
        assert (first_flow["link-credit"], first_flow["drain"]) == (1000, False)
        assert [c.close() for c in consumers] == [None, None]


def test_drain_is_answered_and_credit_is_restored(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        producer = session.producer("drained")
        consumer = session.consumer("drained", prefetch=5)
        producer.send("a")
        producer.send("b")
        consumer.receive().accept()
        assert consumer.drain() in (0, 1)  # "b" may already be buffered
        assert consumer.credit == 0
        drain = [f for f in jms.sent("flow") if f["drain"]][-1]
        assert drain["link-credit"] > 0
        assert [m.accept().body for m in consumer.take_buffered()] == ["b"]
        sent_before = len(jms.sent())
        assert consumer.drain() == 0  # no credit: nothing to drain, no frame
        assert len(jms.sent()) == sent_before
        consumer.top_up()
        assert (jms.sent()[-1].name, jms.sent()[-1]["drain"], consumer.credit) == ("flow", False, 5)
        producer.send("c")
        assert consumer.receive().accept().body == "c"


def test_browse_enumerates_without_consuming(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        producer = session.producer("browsed")
        producer.send("a")
        producer.send("b")
        assert [m.body for m in session.browse("browsed")] == ["a", "b"]
        browse_attach = jms.sent("attach")[-1]
        assert browse_attach["snd-settle-mode"] == 1
        assert browse_attach.terminus("source")["distribution-mode"] == "copy"  # type: ignore[index]
        consumer = session.consumer("browsed")
        assert [consumer.receive().accept().body for _ in range(2)] == ["a", "b"]


def test_anonymous_relay_producer_routes_by_to_and_rejects_a_message_without_it(server):
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        queue = session.consumer("relay-q")
        topic = session.consumer("relay-t", TOPIC)
        relay = session.producer(None)
        assert relay.name.endswith(":null")
        assert sent_attach(jms, relay.name)["target"] == EMPTY_TARGET
        relay.send("to-queue", to="relay-q")
        relay.send("to-topic", to="relay-t", to_kind=TOPIC)
        assert queue.receive().accept().body == "to-queue"
        received = topic.receive().accept()
        assert received.body == "to-topic"
        assert received.message.annotations[symbol("x-opt-jms-dest")] == byte(1)
        with pytest.raises(SendFailed) as failed:
            relay.send("nowhere")
        assert failed.value.condition == "amqp:not-found"
        relay.send("still-works", to="relay-q")
        assert queue.receive().accept().body == "still-works"


# -- frame shapes of the attaches for features the broker may not have yet ------------------------------------------
def test_durable_subscriber_attach_shape(server):
    with JmsWire.connect(server.address, client_id="app1") as jms:
        session = jms.session()
        consumer = session.consumer("prices", DURABLE, name="sub", selector="color = 'red'", no_local=True, check=False)
        attach = sent_attach(jms, "sub")
        assert (attach["role"], attach["snd-settle-mode"], attach["rcv-settle-mode"]) == (True, 0, 0)
        assert attach["target"] == EMPTY_TARGET
        assert attach["initial-delivery-count"] is None and attach["max-message-size"] is None
        assert attach["desired-capabilities"] is None
        source = attach.terminus("source")
        assert source == {
            "type": 0x28,
            "address": "prices",
            "durable": 2,
            "expiry-policy": "never",
            "timeout": 0,
            "dynamic": False,
            "dynamic-node-properties": None,
            "distribution-mode": "copy",
            "filter": {
                symbol("no-local"): Described(ulong(0x0000468C00000003), "NoLocalFilter{}"),
                symbol("jms-selector"): Described(ulong(0x0000468C00000004), "color = 'red'"),
            },
            "default-outcome": DEFAULT_OUTCOME,
            "outcomes": source["outcomes"],
            "capabilities": source["capabilities"],
        }
        assert names(source["outcomes"]) == list(OUTCOMES)
        assert names(source["capabilities"]) == ["topic"]
        assert isinstance(source["expiry-policy"], symbol)
        # proton's own view of the source agrees with what went on the wire
        local_filter = consumer.link.source.filter
        local_filter.rewind()
        local_filter.next()
        assert local_filter.get_object()[symbol("jms-selector")].value == "color = 'red'"
        if consumer.refusal is None:  # a broker without durable subscriptions refuses; the attach is what counts
            consumer.detach()
            assert jms.sent("detach")[-1]["closed"] in (None, False)  # a durable consumer closes with closed=false


@pytest.mark.parametrize(
    ("client_id", "link_name", "desired"), [("app1", "gone", None), (None, "gone|global", ["shared", "global"])]
)
def test_unsubscribe_lookup_attach_has_a_null_source(server, client_id, link_name, desired):
    with JmsWire.connect(server.address, client_id=client_id) as jms:
        with contextlib.suppress(JmsError):  # the broker's answer is not what this test checks
            jms.unsubscribe("gone")
        attach = sent_attach(jms, link_name)
        assert attach.channel == jms.sent("begin")[0].channel  # the hidden connection session
        assert (attach["role"], attach["snd-settle-mode"], attach["rcv-settle-mode"]) == (True, 0, 0)
        assert attach["source"] is None
        assert attach["target"] == EMPTY_TARGET
        assert (names(attach["desired-capabilities"]) if desired else attach["desired-capabilities"]) == desired
        assert not [f for f in jms.sent("flow") if f.channel == attach.channel and f["handle"] == attach["handle"]]


def test_coordinator_attach_shape(server):
    with JmsWire.connect(server.address) as jms:
        with contextlib.suppress(JmsError):
            jms.session(transacted=True, declare=False)
        attach = sent_attach(jms, f"qpid-jms:coordinator:{jms.connection_id}:1")
        assert (attach["role"], attach["snd-settle-mode"], attach["rcv-settle-mode"]) == (False, 0, 0)
        source = attach.terminus("source")
        assert source is not None and names(source["outcomes"]) == list(OUTCOMES)
        assert source["address"] is None and source["default-outcome"] is None
        target = attach.terminus("target")
        assert target is not None and target["type"] == 0x30
        assert names(target["capabilities"]) == ["amqp:local-transactions"]


# -- client-side rules (no broker needed) --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "has_client_id", "expected"),
    [
        (SHARED_DURABLE, True, ["s", "s|2", "s|3"]),
        (SHARED_DURABLE, False, ["s|global", "s|global2", "s|global3"]),
        (SHARED, True, ["s|volatile1", "s|volatile2", "s|volatile3"]),
        (SHARED, False, ["s|global-volatile1", "s|global-volatile2", "s|global-volatile3"]),
    ],
)
def test_shared_link_names_count_since_the_name_was_last_unused(kind, has_client_id, expected):
    tracker = SubscriptionTracker()
    first = tracker.reserve("s", kind, "t", None, has_client_id)
    second = tracker.reserve("s", kind, "t", None, has_client_id)
    tracker.release("s", kind, first)
    third = tracker.reserve("s", kind, "t", None, has_client_id)  # open A, open B, close A, open C (§2.3)
    assert [first, second, third] == expected
    tracker.release("s", kind, second)
    tracker.release("s", kind, third)
    assert tracker.reserve("s", kind, "t", None, has_client_id) == expected[0]  # all closed: counter restarts


def test_subscription_guards_of_the_client():
    tracker = SubscriptionTracker()
    assert tracker.reserve("s", SHARED_DURABLE, "t", None, True) == "s"
    assert tracker.reserve("s", SHARED, "t", None, True) == "s|volatile1"  # durable and volatile apart
    assert tracker.reserve("x", DURABLE, "t", None, True) == "x"
    for name, kind, address, has_client_id in [
        ("x", DURABLE, "t", True),  # a second active exclusive subscriber
        ("s", DURABLE, "t", True),  # exclusive while shared is active
        ("x", SHARED_DURABLE, "t", True),  # shared while exclusive is active
        ("s", SHARED_DURABLE, "other", True),  # different topic while active
        ("y", DURABLE, "t", False),  # no ClientID
        ("a|b", SHARED, "t", True),
        ("", SHARED, "t", True),
    ]:
        with pytest.raises(RefusedLocally):
            tracker.reserve(name, kind, address, None, has_client_id)
    assert tracker.active("s") and tracker.active("x") and not tracker.active("y")


def test_message_encoding_follows_the_jms_mapping():
    plain = dict(message_id="ID:p-1", to="q", to_kind="queue", now_ms=1000)
    non_persistent = sections(encode_message(JmsMessage.of("t"), persistent=False, **plain))  # type: ignore[arg-type]
    assert [int(s.descriptor) for s in non_persistent] == [0x72, 0x73, 0x77]  # no header section at all
    assert non_persistent[0].value == {
        symbol("x-opt-jms-msg-type"): byte(5),
        symbol("x-opt-jms-dest"): byte(0),
    }
    assert all(type(v) is byte for v in non_persistent[0].value.values())
    assert non_persistent[1].value == ["ID:p-1", None, "q", None, None, None, None, None, None, timestamp(1000)]
    persistent = sections(encode_message(JmsMessage.of("t"), **plain))  # type: ignore[arg-type]
    assert persistent[0] == Described(ulong(0x70), [True])  # header [durable=true] only
    with_ttl = sections(encode_message(JmsMessage.of(b"\x01"), ttl=5000, priority=7, **plain))  # type: ignore[arg-type]
    assert with_ttl[0] == Described(ulong(0x70), [True, ubyte(7), uint(5000)])
    assert with_ttl[2].value[6] == symbol("application/octet-stream")
    assert with_ttl[2].value[8] == timestamp(6000)  # absolute-expiry-time = creation-time + ttl
    assert with_ttl[-1] == Described(ulong(0x75), b"\x01")
    bare = sections(encode_message(JmsMessage.of(None), **plain))  # type: ignore[arg-type]
    assert [int(s.descriptor) for s in bare] == [0x70, 0x72, 0x73]  # a plain Message has no body section
    delayed = sections(encode_message(JmsMessage.of([1, "a"]), delay=500, **plain))  # type: ignore[arg-type]
    assert delayed[1].value[symbol("x-opt-delivery-time")] == 1500
    assert delayed[-1] == Described(ulong(0x76), [1, "a"])  # StreamMessage: amqp-sequence
