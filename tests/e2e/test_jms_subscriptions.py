"""Topic subscriptions as Qpid JMS uses them, end to end over real sockets (mapping doc §2, §3, §4, §9.4).

Every scenario runs on SQLite and on PostgreSQL. Tests that need no fresh store share one server per store
(``broker``) and keep apart by unique topic, subscription and ClientID names; the restart / ``kill -9`` test
starts its own. Emptiness is shown with a drain (the broker must send what it has before it answers), never
with a sleep: sends are synchronous, so a message is routed before its send returns.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Described, Message, Terminus, symbol, ulong
from proton.reactor import LinkOption

from tests.e2e.conftest import STORES
from tests.support import jms as jms_support
from tests.support.amqp import Capabilities, connect
from tests.support.jms import (
    DURABLE,
    NO_LOCAL_FILTER,
    QUEUE,
    SELECTOR_FILTER,
    SHARED,
    SHARED_DURABLE,
    TOPIC,
    ConnectionRefused,
    Consumer,
    JmsError,
    JmsSession,
    JmsWire,
    LinkRefused,
    Received,
    RefusedLocally,
)
from tests.support.server import SubgateProcess, module_server

NOT_FOUND = "amqp:not-found"
ILLEGAL_STATE = "amqp:illegal-state"
RESOURCE_LOCKED = "amqp:resource-locked"
INVALID_FIELD = "amqp:invalid-field"


# -- fixtures ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=STORES)
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    """One server per store for the whole module."""
    with module_server(request, tmp_path_factory, "jms-subscriptions", request.param) as server:
        yield server


# -- helpers -------------------------------------------------------------------------------------------------------
def collect(*consumers: Consumer) -> list[list[Received]]:
    """Everything the broker has for each consumer right now, accepted: drain, take the buffer, re-flow."""
    found = []
    for consumer in consumers:
        consumer.drain()
        got = consumer.take_buffered()
        for received in got:
            received.accept()
        consumer.top_up()
        found.append(got)
    return found


def leftover(consumer: Consumer) -> list[object]:
    """Bodies of whatever the broker still has for ``consumer`` (``[]`` when it has nothing)."""
    return [m.body for m in collect(consumer)[0]]


def take(consumer: Consumer, count: int) -> list[object]:
    return [consumer.receive().accept().body for _ in range(count)]


def reply_source(jms: JmsWire, link_name: str) -> dict | None:
    attach = jms.last_attach_from_broker(link_name)
    assert attach is not None, f"no attach reply for {link_name!r}"
    return attach.terminus("source")


def capability_names(value: object) -> list[str]:
    if value is None:
        return []
    elements = getattr(value, "elements", None)
    return [str(v) for v in (elements if elements is not None else [value])]


def filter_values(source: dict) -> dict[str, object]:
    """{key: (descriptor, value)} of a source's filter map."""
    return {str(k): (int(v.descriptor), v.value) for k, v in (source["filter"] or {}).items()}


def publisher(address: str, uid: str) -> tuple[JmsWire, JmsSession]:
    jms = JmsWire.connect(address, client_id=f"pub-{uid}")
    return jms, jms.session()


# -- resume, detach and lifetimes (§2.6, B.1) --------------------------------------------------------------------
def test_durable_subscription_keeps_its_backlog_across_detach_and_unsubscribe_removes_it(broker, uid):
    topic = f"prices-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        pub = session.producer(topic, TOPIC)
        sub = session.consumer(topic, DURABLE, name="s")
        source = reply_source(jms, "s")
        assert source is not None
        assert (source["address"], source["durable"], str(source["expiry-policy"])) == (topic, 2, "never")
        pub.send("m0")
        pub.send("m1")
        assert sub.receive().accept().body == "m0"
        sub.receive()  # m1 delivered, never settled
        assert sub.detach() is None
        assert sub.remote_closed is False  # the broker answers detach(closed=false) with closed=false
        pub.send("m2")
        pub.send("m3")
        again = session.consumer(topic, DURABLE, name="s")  # same session, same link name: resume
        got = [again.receive().accept() for _ in range(3)]
        assert [(m.body, m.delivery_count) for m in got] == [("m1", 0), ("m2", 0), ("m3", 0)]  # released, in order
        assert leftover(again) == []
        again.detach()

        jms.unsubscribe("s")
        lookup = jms.last_attach_from_broker("s")
        assert lookup is not None
        described = lookup.terminus("source")
        assert described is not None  # found: a source, and the closing detach had no error
        assert (described["address"], described["durable"], str(described["expiry-policy"])) == (topic, 2, "never")
        assert capability_names(described["capabilities"]) == ["topic"]
        assert jms.received("detach")[-1]["closed"] is True

        pub.send("m4")  # nobody subscribed: dropped
        fresh = session.consumer(topic, DURABLE, name="s")
        assert leftover(fresh) == []  # a new subscription: nothing of the old one
        pub.send("m5")
        assert take(fresh, 1) == ["m5"]
        fresh.detach()
        jms.unsubscribe("s")


def test_durable_subscriptions_survive_session_end_and_connection_loss(broker, uid):
    topic = f"events-{uid}"
    cid = f"app-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)

    def subscribe(app: JmsWire, glob: JmsWire) -> list[Consumer]:
        app_session, glob_session = app.session(), glob.session()
        return [
            app_session.consumer(topic, DURABLE, name="d"),
            app_session.consumer(topic, SHARED_DURABLE, name="sd"),
            glob_session.consumer(topic, SHARED_DURABLE, name=f"gd{uid}"),
        ]

    app, glob = JmsWire.connect(broker.address, client_id=cid), JmsWire.connect(broker.address)
    subs = subscribe(app, glob)
    # 1. session end without detaching the links (§1.7): the subscriptions stay
    for wire in (app, glob):
        assert wire.sessions[0].close() is None
    pub.send("after-end")
    subs = subscribe(app, glob)
    assert [take(s, 1) for s in subs] == [["after-end"]] * 3

    # 2. connection loss with a delivered, unsettled message: it comes back marked redelivered
    pub.send("in-flight")
    assert [s.receive().body for s in subs] == ["in-flight"] * 3
    app.abort()
    glob.abort()
    app, glob = JmsWire.connect(broker.address, client_id=cid), JmsWire.connect(broker.address)
    pub.send("while-away")  # the ClientID was free again: the broker has seen the loss
    subs = subscribe(app, glob)
    for sub in subs:
        got = [sub.receive().accept() for _ in range(2)]
        assert [(m.body, m.delivery_count) for m in got] == [("in-flight", 1), ("while-away", 0)]

    # 3. an orderly connection close keeps them too
    app.close()
    glob.close()
    pub.send("after-close")
    app, glob = JmsWire.connect(broker.address, client_id=cid), JmsWire.connect(broker.address)
    subs = subscribe(app, glob)
    assert [take(s, 1) for s in subs] == [["after-close"]] * 3
    assert [leftover(s) for s in subs] == [[], [], []]
    for sub in subs:
        sub.detach()
    app.unsubscribe("d")
    app.unsubscribe("sd")
    glob.unsubscribe(f"gd{uid}")
    for wire in (app, glob, pub_wire):
        wire.close()


def test_plain_and_shared_volatile_subscriptions_end_with_their_last_link(broker, uid):
    topic = f"volatile-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        plain = session.consumer(topic, TOPIC)
        pub.send("p1")
        assert take(plain, 1) == ["p1"]
        assert plain.close() is None and plain.remote_closed is True

        first = session.consumer(topic, SHARED, name="v")
        second = session.consumer(topic, SHARED, name="v")
        assert (first.name, second.name) == ("v|volatile1", "v|volatile2")
        pub.send("a")
        assert sorted(m.body for batch in collect(first, second) for m in batch) == ["a"]
        assert first.close() is None and first.remote_closed is True  # volatile consumers close with closed=true
        pub.send("b")
        assert leftover(second) == ["b"]  # one link left: the subscription lives on
        second.close()
        pub.send("published-while-gone")
        again = session.consumer(topic, SHARED, name="v")
        assert again.name == "v|volatile1"
        assert leftover(again) == []  # the subscription went with its last link; nothing was kept
        # a volatile subscription also ends with the session that holds its last link
        session.close()
        pub.send("published-after-end")
        assert leftover(jms.session().consumer(topic, SHARED, name="v")) == []

    # global volatile on two connections: losing one connection keeps it for the other, losing both ends it
    x, y = JmsWire.connect(broker.address), JmsWire.connect(broker.address)
    on_x = x.session().consumer(topic, SHARED, name=f"gv{uid}")
    y_session = y.session()
    on_y = y_session.consumer(topic, SHARED, name=f"gv{uid}")
    assert on_x.name == on_y.name == f"gv{uid}|global-volatile1"
    x.abort()
    pub.send("e")
    assert on_y.receive().accept().body == "e"  # the subscription lives on with y
    y_session.close()
    pub.send("f")
    with JmsWire.connect(broker.address) as z:
        assert leftover(z.session().consumer(topic, SHARED, name=f"gv{uid}")) == []
    y.close()
    pub_wire.close()


def test_close_flags_per_kind_and_a_closed_durable_link_deletes_its_subscription(broker, uid):
    topic = f"flags-{uid}"
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        shared = session.consumer(topic, SHARED_DURABLE, name="sd")
        assert shared.detach() is None and shared.remote_closed is False
        jms.unsubscribe("sd")  # it was kept
        described = reply_source(jms, "sd")  # the lookup reply describes the shared subscription
        assert described is not None and capability_names(described["capabilities"]) == ["topic", "shared"]
        volatile = session.consumer(topic, SHARED, name="sv")
        assert volatile.close() is None and volatile.remote_closed is True
        # Qpid JMS never closes a durable consumer with closed=true; other AMQP clients destroy it that way
        durable = session.consumer(topic, DURABLE, name="d")
        assert durable.close() is None and durable.remote_closed is True
        with pytest.raises(JmsError) as gone:
            jms.unsubscribe("d")
        assert gone.value.condition == NOT_FOUND


# -- shared subscriptions (§2.3, §9.4) -----------------------------------------------------------------------------
@pytest.mark.parametrize("has_client_id", [True, False], ids=["client-id", "global"])
def test_shared_consumers_of_one_connection_split_one_subscription(broker, uid, has_client_id):
    topic = f"split-{uid}"
    sub = f"s{uid}"
    suffixes = ["", "|2", "|3"] if has_client_id else ["|global", "|global2", "|global3"]
    names = [sub + suffix for suffix in suffixes]
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}" if has_client_id else None) as jms:
        one, two = jms.session(), jms.session()  # two sessions share the connection's counter
        a = one.consumer(topic, SHARED_DURABLE, name=sub)
        b = two.consumer(topic, SHARED_DURABLE, name=sub)
        assert [a.name, b.name] == names[:2]
        for i in range(6):
            pub.send(f"m{i}")
        got_a, got_b = ([m.body for m in batch] for batch in collect(a, b))
        assert sorted(got_a + got_b) == [f"m{i}" for i in range(6)]  # each message once, to one of them
        assert got_a and got_b  # competing consumers of one subscription
        a.detach()
        c = one.consumer(topic, SHARED_DURABLE, name=sub)
        assert c.name == names[2]  # open A, open B, close A, open C
        for i in range(6, 10):
            pub.send(f"m{i}")
        got_b, got_c = ([m.body for m in batch] for batch in collect(b, c))
        assert sorted(got_b + got_c) == [f"m{i}" for i in range(6, 10)]
        b.detach()
        c.detach()
        jms.unsubscribe(sub)
        with pytest.raises(JmsError) as again:
            jms.unsubscribe(sub)  # it was one subscription
        assert again.value.condition == NOT_FOUND
    pub_wire.close()


def test_two_connections_without_client_id_share_one_global_subscription(broker, uid):
    topic = f"global-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    sub = f"g{uid}"
    x, y = JmsWire.connect(broker.address), JmsWire.connect(broker.address)
    assert x.container_id != y.container_id
    on_x = x.session().consumer(topic, SHARED_DURABLE, name=sub)
    on_y = y.session().consumer(topic, SHARED_DURABLE, name=sub)
    assert on_x.name == on_y.name == f"{sub}|global"  # the same link name on both connections (§2.3)
    source = reply_source(x, f"{sub}|global")
    assert source is not None and capability_names(source["capabilities"]) == ["topic", "shared", "global"]
    for i in range(10):
        pub.send(f"m{i}")
    got_x, got_y = ([m.body for m in batch] for batch in collect(on_x, on_y))
    assert sorted(got_x + got_y, key=lambda b: int(b[1:])) == [f"m{i}" for i in range(10)]
    assert got_x and got_y  # split between the connections, not copied
    on_x.detach()
    on_y.detach()
    pub.send("later")
    resumed = [w.session().consumer(topic, SHARED_DURABLE, name=sub) for w in (x, y)]
    assert sorted(m.body for batch in collect(*resumed) for m in batch) == ["later"]  # one backlog, once
    for consumer in resumed:
        consumer.detach()
    x.unsubscribe(sub)
    with pytest.raises(JmsError) as again:
        y.unsubscribe(sub)
    assert again.value.condition == NOT_FOUND
    for wire in (x, y, pub_wire):
        wire.close()


def test_a_lost_connection_hands_its_unsettled_messages_to_the_other_consumers_of_a_global_subscription(broker, uid):
    topic = f"handover-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    x, y = JmsWire.connect(broker.address), JmsWire.connect(broker.address)
    on_x = x.session().consumer(topic, SHARED_DURABLE, name=f"h{uid}")
    on_y = y.session().consumer(topic, SHARED_DURABLE, name=f"h{uid}")
    for i in range(4):
        pub.send(f"m{i}")
    on_x.drain()
    held_by_x = [m.body for m in on_x.take_buffered()]  # delivered to x, never settled
    assert held_by_x
    x.abort()
    got = [on_y.receive().accept() for _ in range(4)]
    expected = [(f"m{i}", 1 if f"m{i}" in held_by_x else 0) for i in range(4)]
    assert sorted((m.body, m.delivery_count) for m in got) == expected  # x's come back marked redelivered
    assert leftover(on_y) == []
    on_y.detach()
    y.unsubscribe(f"h{uid}")
    for wire in (y, pub_wire):
        wire.close()


def test_one_name_in_every_namespace_gives_separate_subscriptions(broker, uid):
    """(ClientID, durable) "n", (ClientID, volatile) "n", (global, durable) "n", (global, volatile) "n"."""
    topic = f"namespaces-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    n = f"n{uid}"
    app, glob = JmsWire.connect(broker.address, client_id=f"app-{uid}"), JmsWire.connect(broker.address)
    app_session, glob_session = app.session(), glob.session()
    subs = [
        app_session.consumer(topic, DURABLE, name=n),
        app_session.consumer(topic, SHARED, name=n),
        glob_session.consumer(topic, SHARED_DURABLE, name=n),
        glob_session.consumer(topic, SHARED, name=n),
    ]
    assert [s.name for s in subs] == [n, f"{n}|volatile1", f"{n}|global", f"{n}|global-volatile1"]
    pub.send("hello")
    assert [[m.body for m in batch] for batch in collect(*subs)] == [["hello"]] * 4  # a copy each
    subs[0].detach()
    subs[2].detach()
    app.unsubscribe(n)  # removes only the ClientID's durable one
    pub.send("after")
    assert leftover(glob_session.consumer(topic, SHARED_DURABLE, name=n)) == ["after"]
    assert leftover(subs[1]) == ["after"] and leftover(subs[3]) == ["after"]
    fresh = app_session.consumer(topic, DURABLE, name=n)
    assert leftover(fresh) == []
    fresh.detach()
    app.unsubscribe(n)
    glob.sessions[0].consumers[-1].detach()
    glob.unsubscribe(n)
    for wire in (app, glob, pub_wire):
        wire.close()


# -- unsubscribe (§3, B.2) -----------------------------------------------------------------------------------------
def test_unsubscribe_in_use_is_refused_with_resource_locked_until_the_subscription_is_idle(broker, uid):
    topic = f"locked-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    sub = f"s{uid}"
    x, y = JmsWire.connect(broker.address), JmsWire.connect(broker.address)
    on_x = x.session().consumer(topic, SHARED_DURABLE, name=sub)
    on_x2 = x.sessions[0].consumer(topic, SHARED_DURABLE, name=sub)
    on_y = y.session().consumer(topic, SHARED_DURABLE, name=sub)
    assert on_x2.name == f"{sub}|global2"
    on_x.detach()
    on_x2.detach()
    with pytest.raises(JmsError) as locked:
        x.unsubscribe(sub)  # y still consumes
    assert locked.value.condition == RESOURCE_LOCKED
    lookup = x.last_attach_from_broker(f"{sub}|global")
    assert lookup is not None and lookup.terminus("source") is not None  # found, then refused on the detach
    closing = [f for f in x.received("detach") if f.channel == lookup.channel][-1]
    assert closing["closed"] is True
    pub.send("still-there")
    assert leftover(on_y) == ["still-there"]  # the subscription was kept
    on_y.detach()
    pub.send("backlog")
    x.unsubscribe(sub)  # idle now: removed with its backlog
    fresh = y.session().consumer(topic, SHARED_DURABLE, name=sub)
    assert leftover(fresh) == []
    fresh.detach()
    y.unsubscribe(sub)
    for wire in (x, y, pub_wire):
        wire.close()


@pytest.mark.parametrize("has_client_id", [True, False], ids=["client-id", "no-client-id"])
def test_unsubscribe_of_an_unknown_name_is_not_found(broker, uid, has_client_id):
    with JmsWire.connect(broker.address, client_id=f"app-{uid}" if has_client_id else None) as jms:
        with pytest.raises(JmsError) as missing:
            jms.unsubscribe(f"never-{uid}")
        assert missing.value.condition == NOT_FOUND
        link_name = f"never-{uid}" if has_client_id else f"never-{uid}|global"
        reply = jms.last_attach_from_broker(link_name)
        assert reply is not None and reply["source"] is None  # null source, then detach(closed=true, not-found)
        assert [f for f in jms.received("detach") if f.channel == reply.channel][-1]["closed"] is True
        # volatile subscriptions are never looked up
        volatile = jms.session().consumer(f"t-{uid}", SHARED, name=f"vol{uid}")
        with pytest.raises(JmsError) as not_durable:
            jms.unsubscribe(f"vol{uid}")
        assert not_durable.value.condition == NOT_FOUND
        volatile.close()


def test_unsubscribe_is_scoped_by_client_id_or_global(broker, uid):
    topic = f"scoped-{uid}"
    with JmsWire.connect(broker.address) as glob, JmsWire.connect(broker.address, client_id=f"app-{uid}") as app:
        glob.session().consumer(topic, SHARED_DURABLE, name=f"gl{uid}").detach()
        with pytest.raises(JmsError) as other_scope:
            app.unsubscribe(f"gl{uid}")  # names (ClientID, "gl"), not the global one
        assert other_scope.value.condition == NOT_FOUND
        glob.unsubscribe(f"gl{uid}")


def test_detach_of_the_lookup_link_without_close_deletes_nothing(broker, uid):
    """§3.2: only detach(closed=true) on the lookup link unsubscribes (the client never sends closed=false)."""
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        jms.session().consumer(f"t-{uid}", DURABLE, name="kept").detach()
        link = jms._hidden().session.receiver("kept")
        link.source.type = Terminus.UNSPECIFIED
        lookup = jms_support._LinkEnd(jms, link)
        link.open()
        lookup._await_attach(None, check=True)
        assert lookup.detach() is None
        jms.unsubscribe("kept")  # still there


def test_refused_creation_leaves_no_subscription_behind(broker, uid):
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        for kind in (DURABLE, SHARED_DURABLE):
            with pytest.raises(LinkRefused) as refused:
                session.consumer(f"t-{uid}", kind, name="bad", selector="color = ")
            assert refused.value.condition == INVALID_FIELD
            with pytest.raises(JmsError) as missing:
                jms.unsubscribe("bad")
            assert missing.value.condition == NOT_FOUND


# -- refusals of the broker ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [QUEUE, TOPIC, DURABLE, SHARED_DURABLE, SHARED])
def test_a_bad_selector_is_refused_with_invalid_field(broker, uid, kind):
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        with pytest.raises(LinkRefused) as refused:
            jms.session().consumer(f"t-{uid}", kind, name="sel", selector="color = 'red' AND (")
        assert refused.value.condition == INVALID_FIELD
        assert refused.value.description
        name = jms.sent("attach")[-1]["name"]
        reply = jms.last_attach_from_broker(name)
        assert reply is not None and reply["source"] is None


def test_shared_and_non_shared_durable_subscriptions_cannot_share_a_name(broker, uid):
    topic = f"clash-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        session.consumer(topic, DURABLE, name="x").detach()
        session.consumer(topic, SHARED_DURABLE, name="y").detach()
        pub.send("kept")
        with pytest.raises(LinkRefused) as shared_on_exclusive:
            session.consumer(topic, SHARED_DURABLE, name="x")
        assert shared_on_exclusive.value.condition == ILLEGAL_STATE
        with pytest.raises(LinkRefused) as exclusive_on_shared:
            session.consumer(topic, DURABLE, name="y")
        assert exclusive_on_shared.value.condition == ILLEGAL_STATE
        for name, kind in (("x", DURABLE), ("y", SHARED_DURABLE)):  # both kept, with their backlogs
            resumed = session.consumer(topic, kind, name=name)
            assert leftover(resumed) == ["kept"]
            resumed.detach()
            jms.unsubscribe(name)
    pub_wire.close()


def test_a_second_exclusive_consumer_is_refused_with_resource_locked(broker, uid, monkeypatch):
    """A half-dead old connection with the same ClientID (§4): it does not ask to be the sole connection."""
    topic = f"exclusive-{uid}"
    cid = f"app-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    first = JmsWire.connect(broker.address, client_id=cid)
    active = first.session().consumer(topic, DURABLE, name="x")
    without_sole = tuple(c for c in jms_support.CONNECTION_CAPABILITIES if c != "sole-connection-for-container")
    monkeypatch.setattr(jms_support.connection, "CONNECTION_CAPABILITIES", without_sole)  # where open() reads it
    second = JmsWire.connect(broker.address, client_id=cid)
    with pytest.raises(LinkRefused) as refused:
        second.session().consumer(topic, DURABLE, name="x")
    assert refused.value.condition == RESOURCE_LOCKED
    assert refused.value.description
    pub.send("still-mine")
    assert leftover(active) == ["still-mine"]
    active.detach()
    pub.send("for-the-next")
    resumed = second.session().consumer(topic, DURABLE, name="x")  # free once the first detached
    assert leftover(resumed) == ["for-the-next"]
    resumed.detach()
    second.unsubscribe("x")
    for wire in (first, second, pub_wire):
        wire.close()


def test_client_id_in_use_is_refused_and_free_again_after_a_connection_loss(broker, uid):
    cid = f"app-{uid}"
    topic = f"cid-{uid}"
    first = JmsWire.connect(broker.address, client_id=cid)
    first.session().consumer(topic, DURABLE, name="d")
    with pytest.raises(ConnectionRefused) as refused:
        JmsWire.connect(broker.address, client_id=cid)
    assert refused.value.condition == INVALID_FIELD
    assert refused.value.info == {symbol("invalid-field"): symbol("container-id")}
    first.abort()
    with JmsWire.connect(broker.address, client_id=cid) as again:
        again.session().consumer(topic, DURABLE, name="d").detach()  # the subscription is resumable at once
        again.unsubscribe("d")


# -- re-subscribing with other details (§4) ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [DURABLE, SHARED_DURABLE], ids=["exclusive", "shared-global"])
def test_resubscribe_with_a_changed_selector_or_no_local_replaces_the_subscription(broker, uid, kind):
    topic = f"reselect-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}" if kind == DURABLE else None) as jms:
        session = jms.session()
        session.consumer(topic, kind, name=f"r{uid}", selector="color = 'red'").detach()
        pub.send("red-1", properties={"color": "red"})
        pub.send("blue-1", properties={"color": "blue"})
        changed = session.consumer(topic, kind, name=f"r{uid}", selector="color = 'blue'")
        source = reply_source(jms, changed.name)
        assert source is not None and filter_values(source)["jms-selector"] == (SELECTOR_FILTER, "color = 'blue'")
        pub.send("red-2", properties={"color": "red"})
        pub.send("blue-2", properties={"color": "blue"})
        assert leftover(changed) == ["blue-2"]  # red-1 (old backlog) is gone, the new selector applies
        changed.detach()
        if kind == DURABLE:  # a JMS shared consumer has no no-local
            pub.send("blue-3", properties={"color": "blue"})
            no_local = session.consumer(topic, kind, name=f"r{uid}", selector="color = 'blue'", no_local=True)
            pub.send("blue-4", properties={"color": "blue"})
            assert leftover(no_local) == ["blue-4"]  # no-local changed: blue-3 went with the old one
            no_local.detach()
        jms.unsubscribe(f"r{uid}")
    pub_wire.close()


@pytest.mark.parametrize("kind", [DURABLE, SHARED_DURABLE], ids=["exclusive", "shared-global"])
def test_resubscribe_with_a_changed_topic_replaces_the_subscription(broker, uid, kind):
    old, new = f"old-{uid}", f"new-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    to_old, to_new = pub_session.producer(old, TOPIC), pub_session.producer(new, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}" if kind == DURABLE else None) as jms:
        session = jms.session()
        session.consumer(old, kind, name=f"m{uid}").detach()
        to_old.send("old-backlog")
        moved = session.consumer(new, kind, name=f"m{uid}")
        to_old.send("old-after")
        to_new.send("new-1")
        assert leftover(moved) == ["new-1"]
        moved.detach()
        jms.unsubscribe(f"m{uid}")
    pub_wire.close()


def test_a_change_is_refused_while_a_shared_subscription_has_consumers(broker, uid):
    topic, other = f"active-{uid}", f"other-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    x, y = JmsWire.connect(broker.address), JmsWire.connect(broker.address)
    on_x = x.session().consumer(topic, SHARED_DURABLE, name=f"c{uid}", selector="n > 0")
    volatile_x = x.sessions[0].consumer(topic, SHARED, name=f"cv{uid}", selector="n > 0")
    y_session = y.session()
    for dest, kind, name, selector in [
        (topic, SHARED_DURABLE, f"c{uid}", "n > 5"),  # other selector
        (topic, SHARED_DURABLE, f"c{uid}", None),  # no selector
        (other, SHARED_DURABLE, f"c{uid}", "n > 0"),  # other topic
        (topic, SHARED, f"cv{uid}", "n > 5"),  # shared volatile: refused as well
    ]:
        with pytest.raises(LinkRefused) as refused:
            y_session.consumer(dest, kind, name=name, selector=selector)
        assert refused.value.condition == ILLEGAL_STATE, (dest, kind, selector)
    joined = y_session.consumer(topic, SHARED_DURABLE, name=f"c{uid}", selector="n > 0")  # identical: one more consumer
    for n in range(4):
        pub.send(f"m{n}", properties={"n": n})
    got = [m.body for batch in collect(on_x, joined) for m in batch]
    assert sorted(got) == ["m1", "m2", "m3"]  # unchanged subscription
    assert sorted(m.body for m in collect(volatile_x)[0]) == ["m1", "m2", "m3"]
    on_x.detach()
    joined.detach()
    x.unsubscribe(f"c{uid}")
    for wire in (x, y, pub_wire):
        wire.close()


# -- selectors and no-local on subscriptions (§2.4) ----------------------------------------------------------------
def test_selector_and_no_local_on_a_durable_subscription(broker, uid):
    topic = f"filtered-{uid}"
    cid = f"app-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    other = pub_session.producer(topic, TOPIC)
    app = JmsWire.connect(broker.address, client_id=cid)
    session = app.session()
    own = session.producer(topic, TOPIC)
    sub = session.consumer(topic, DURABLE, name="f", selector="color = 'red'", no_local=True)
    echoed = filter_values(reply_source(app, "f") or {})
    assert echoed == {
        "jms-selector": (SELECTOR_FILTER, "color = 'red'"),
        "no-local": (NO_LOCAL_FILTER, "NoLocalFilter{}"),
    }  # the broker echoes the filters it applies (§2.5)
    own.send("own-red", properties={"color": "red"})
    other.send("other-red", properties={"color": "red"})
    other.send("other-blue", properties={"color": "blue"})
    assert leftover(sub) == ["other-red"]
    sub.detach()
    own.send("own-red-2", properties={"color": "red"})
    other.send("other-red-2", properties={"color": "red"})
    other.send("other-blue-2", properties={"color": "blue"})
    app.close()
    # a new connection with the same ClientID is still "local"; the backlog was filtered on the way in
    with JmsWire.connect(broker.address, client_id=cid) as again:
        resumed_session = again.session()
        resumed_session.producer(topic, TOPIC).send("own-red-3", properties={"color": "red"})
        resumed = resumed_session.consumer(topic, DURABLE, name="f", selector="color = 'red'", no_local=True)
        assert leftover(resumed) == ["other-red-2"]
        resumed.detach()
        again.unsubscribe("f")
    pub_wire.close()


def test_selectors_on_shared_durable_and_shared_volatile_subscriptions(broker, uid):
    topic = f"shared-sel-{uid}"
    pub_wire, pub_session = publisher(broker.address, uid)
    pub = pub_session.producer(topic, TOPIC)
    with JmsWire.connect(broker.address, client_id=f"app-{uid}") as jms:
        session = jms.session()
        durable = [session.consumer(topic, SHARED_DURABLE, name="sd", selector="n >= 3") for _ in range(2)]
        volatile = [session.consumer(topic, SHARED, name="sv", selector="n >= 3") for _ in range(2)]
        for n in range(6):
            pub.send(f"m{n}", properties={"n": n})
        for pair in (durable, volatile):
            assert sorted(m.body for batch in collect(*pair) for m in batch) == ["m3", "m4", "m5"]
        for consumer in durable:
            consumer.detach()
        pub.send("m9", properties={"n": 9})
        pub.send("m0", properties={"n": 0})
        resumed = session.consumer(topic, SHARED_DURABLE, name="sd", selector="n >= 3")
        assert leftover(resumed) == ["m9"]  # the backlog holds only what matched
        resumed.detach()
        jms.unsubscribe("sd")
    pub_wire.close()


class _SharedNoLocalSource(LinkOption):
    """A non-JMS client's shared global volatile subscription with a no-local filter (Qpid JMS never sends
    no-local on a shared consumer, docs/jms.md promises it on every kind)."""

    def apply(self, link) -> None:
        source = link.source
        source.durability = Terminus.NONDURABLE
        source.expiry_policy = Terminus.EXPIRE_WITH_LINK
        Capabilities("topic", "shared", "global").apply(link)
        source.filter.put_object({symbol("no-local"): Described(ulong(NO_LOCAL_FILTER), "NoLocalFilter{}")})


def test_no_local_on_a_shared_subscription_of_another_amqp_client(broker, uid):
    topic = f"shared-nl-{uid}"
    local = connect(broker.url)
    remote = connect(broker.url)
    try:
        receiver = local.create_receiver(topic, name=f"nl{uid}|global-volatile1", options=[_SharedNoLocalSource()])
        local.create_sender(topic, options=[Capabilities("topic")]).send(Message(body="own"))
        remote.create_sender(topic, options=[Capabilities("topic")]).send(Message(body="remote"))
        assert receiver.receive(timeout=10).body == "remote"  # "own" would have come first
        receiver.accept()
    finally:
        local.close()
        remote.close()


# -- restart and crash (both stores) -------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["restart", "kill-9"])
def test_durable_backlogs_survive_a_restart_and_a_kill_9(make_server, store_url, how):
    """Backlogs, delivery counts and subscription details (topic, selector, no-local) come back; replaced and
    unsubscribed subscriptions stay as they were left; volatile subscriptions do not come back."""
    server = make_server(store_url)
    topic = "crash-topic"
    pub_wire, pub_session = publisher(server.address, "crash")
    pub = pub_session.producer(topic, TOPIC)
    app, glob = JmsWire.connect(server.address, client_id="app"), JmsWire.connect(server.address)
    app_session, glob_session = app.session(), glob.session()
    subs = [
        app_session.consumer(topic, DURABLE, name="d", selector="n >= 1", no_local=True),
        app_session.consumer(topic, SHARED_DURABLE, name="sd"),
        glob_session.consumer(topic, SHARED_DURABLE, name="gd"),
    ]
    volatile = glob_session.consumer(topic, SHARED, name="vol")
    app_session.consumer(topic, DURABLE, name="r", selector="n = 1").detach()
    app_session.consumer(topic, DURABLE, name="u").detach()
    for n in range(5):
        pub.send(f"m{n}", properties={"n": n})
    app_session.producer(topic, TOPIC).send("own", properties={"n": 7})  # no-local: not for "d"
    for sub in subs:
        sub.receive().accept()  # acknowledged: gone for good
        sub.receive().modify(failed=True)  # a failed delivery: count 1
        sub.receive()  # delivered, left unsettled at the detach: released
        sub.detach()
    assert leftover(volatile) == [f"m{n}" for n in range(5)] + ["own"]
    app_session.consumer(topic, DURABLE, name="r", selector="n = 5").detach()  # replaced: m1 dropped
    app.unsubscribe("u")
    pub.send("m5", properties={"n": 5})
    # a synchronous persistent send behind the acks and failure counts: once it is accepted, they are written
    app_session.producer("barrier").send("barrier")
    glob_session.producer("barrier").send("barrier")
    for wire in (app, glob, pub_wire):
        wire.abort()
    if how == "restart":
        assert server.stop() == 0
    else:
        server.kill()
    server.start()

    expected = {
        "d": [("m2", 1), ("m3", 0), ("m4", 0), ("m5", 0)],  # m1 was the first match and was accepted
        "sd": [("m1", 1), ("m2", 0), ("m3", 0), ("m4", 0), ("own", 0), ("m5", 0)],
        "gd": [("m1", 1), ("m2", 0), ("m3", 0), ("m4", 0), ("own", 0), ("m5", 0)],
        "r": [("m5", 0)],
    }
    with JmsWire.connect(server.address, client_id="app") as app, JmsWire.connect(server.address) as glob:
        app_session, glob_session = app.session(), glob.session()
        resumed = {
            "sd": app_session.consumer(topic, SHARED_DURABLE, name="sd"),
            "gd": glob_session.consumer(topic, SHARED_DURABLE, name="gd"),
            "r": app_session.consumer(topic, DURABLE, name="r", selector="n = 5"),
            "d": app_session.consumer(topic, DURABLE, name="d", selector="n >= 1", no_local=True),
        }
        for name, sub in resumed.items():
            got = [sub.receive().accept() for _ in range(len(expected[name]))]
            assert [(m.body, m.delivery_count) for m in got] == expected[name], name
        with pytest.raises(JmsError) as unsubscribed:
            app.unsubscribe("u")
        assert unsubscribed.value.condition == NOT_FOUND
        app_session.producer(topic, TOPIC).send("own-2", properties={"n": 8})
        with JmsWire.connect(server.address, client_id="pub-crash") as pub_again:
            pub_again.session().producer(topic, TOPIC).send("m6", properties={"n": 6})
            pub_again.session().producer(topic, TOPIC).send("m0b", properties={"n": 0})
        assert {name: leftover(sub) for name, sub in resumed.items()} == {
            "sd": ["own-2", "m6", "m0b"],
            "gd": ["own-2", "m6", "m0b"],
            "r": [],
            "d": ["m6"],  # selector and no-local still applied
        }
        assert leftover(glob_session.consumer(topic, SHARED, name="vol")) == []  # volatile: gone, nothing kept
        with pytest.raises(RefusedLocally):
            app.unsubscribe("d")  # still active here (the client's own guard)
        for sub in resumed.values():
            sub.detach()
        for name in ("d", "sd", "r"):
            app.unsubscribe(name)
        glob.unsubscribe("gd")
