"""What one connection may hold, at and past each limit, over real sockets (issue 19, item 3).

Sessions per connection (a begin past ``--max-sessions-per-connection`` is answered, then ended with
``amqp:resource-limit-exceeded``), links per session (an attach past ``--max-links-per-session`` is answered, then
detached with it), unsettled deliveries per consumer link (at ``--max-unsettled-per-link`` the link gets nothing
more until the consumer settles; its queue's other consumers are served meanwhile), topics a connection created
(``--max-topics-per-connection``: attach, anonymous relay and management CREATE) and the selector length
(``--max-selector-length``). Each case checks that the connection's other work and other clients go on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from proton import Delivery, Described, Endpoint, Message, Session, ubyte, uint, ulong
from proton.reactor import Selector
from proton.utils import LinkDetached, SendException

from subgate.cli.management import ManagementClient, ManagementError
from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender
from tests.support.control import topic_paths
from tests.support.rawamqp import AMQP_HEADER, OPEN, Frame, RawClient, frame, performative
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import Bystander, assert_still_serving

RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
SESSIONS, LINKS, UNSETTLED, TOPICS, SELECTOR, WINDOW = 3, 4, 5, 3, 64, 10
LIMITS = (
    "--max-sessions-per-connection", str(SESSIONS),
    "--max-links-per-session", str(LINKS),
    "--max-unsettled-per-link", str(UNSETTLED),
    "--max-topics-per-connection", str(TOPICS),
    "--max-selector-length", str(SELECTOR),
    "--credit-window", str(WINDOW),
)  # fmt: skip


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "endpoint-limits", extra=LIMITS) as server:
        yield server


def opened_raw(server: SubgateProcess) -> RawClient:
    """A connection driven by a proton client transport over a raw socket, its open answered."""
    raw = RawClient(server.port)
    raw.sasl_anonymous()
    connection = raw.start_amqp(f"limits-{uuid.uuid4().hex[:6]}")
    raw.pump(lambda: bool(connection.state & Endpoint.REMOTE_ACTIVE), "the server's open")
    return raw


def begin(raw: RawClient) -> Session:
    assert raw.connection is not None
    session = raw.connection.session()
    session.open()
    raw.pump(lambda: not session.state & Endpoint.REMOTE_UNINIT, "the server's begin")
    return session


def error_of(endpoint: Session) -> tuple[str, str]:
    condition = endpoint.remote_condition
    assert condition is not None
    return condition.name, condition.description


def test_sessions_at_the_limit_are_served_and_one_past_it_is_ended_with_the_reason(broker, uid):
    with Bystander(broker) as bystander, opened_raw(broker) as raw:
        sessions = [begin(raw) for _ in range(SESSIONS)]
        assert all(s.state & Endpoint.REMOTE_ACTIVE for s in sessions)
        past = begin(raw)
        raw.pump(lambda: bool(past.state & Endpoint.REMOTE_CLOSED), "the server's end")
        condition, description = error_of(past)
        assert condition == RESOURCE_LIMIT
        assert f"max-sessions-per-connection {SESSIONS}" in description
        past.close()
        # The connection's own sessions still work: one attaches a consumer.
        link = sessions[0].receiver(f"rcv-{uid}")
        link.source.address = f"q-{uid}"
        link.open()
        raw.pump(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE), "the consumer's attach")
        assert link.remote_condition is None
        # Ending a session frees its place.
        sessions[1].close()
        raw.pump(lambda: bool(sessions[1].state & Endpoint.REMOTE_CLOSED), "the end of a session")
        again = begin(raw)
        raw.pump(lambda: bool(again.state & Endpoint.REMOTE_ACTIVE), "a new session")
        assert again.remote_condition is None and not again.state & Endpoint.REMOTE_CLOSED
        assert raw.connection is not None and not raw.connection.state & Endpoint.REMOTE_CLOSED
        assert_still_serving(broker, bystander)


def test_links_at_the_limit_attach_and_one_past_it_is_detached_with_the_reason(broker, uid):
    with Bystander(broker) as bystander, opened_raw(broker) as raw:
        session = begin(raw)
        links = []
        for index in range(LINKS + 1):
            link = session.receiver(f"rcv-{uid}-{index}")
            link.source.address = f"q-{uid}"
            link.open()
            links.append(link)
        past = links[-1]
        raw.pump(lambda: bool(past.state & Endpoint.REMOTE_CLOSED), "the refused attach's detach")
        assert all(link.state & Endpoint.REMOTE_ACTIVE for link in links[:-1])
        condition, description = error_of(past)
        assert condition == RESOURCE_LIMIT
        assert f"max-links-per-session {LINKS}" in description
        past.close()
        # Another session of the same connection has its own count; a detach frees a place on the first.
        other = begin(raw).receiver(f"rcv-{uid}-other")
        other.source.address = f"q-{uid}"
        other.open()
        links[0].close()
        raw.pump(lambda: bool(other.state & Endpoint.REMOTE_ACTIVE), "the other session's attach")
        raw.pump(lambda: bool(links[0].state & Endpoint.REMOTE_CLOSED), "the detach of a link")
        again = session.receiver(f"rcv-{uid}-again")
        again.source.address = f"q-{uid}"
        again.open()
        raw.pump(lambda: bool(again.state & Endpoint.REMOTE_ACTIVE), "an attach after a detach")
        assert again.remote_condition is None
        assert_still_serving(broker, bystander)


def test_a_consumer_that_never_settles_is_sent_no_more_than_the_unsettled_limit(broker, uid):
    address = f"unsettled-{uid}"
    conn = connect(broker.url)
    try:
        send_all(sender(conn, address, "queue"), [f"m{i}" for i in range(3 * UNSETTLED)])
        hoarder = receiver(conn, address, "queue", credit=10 * UNSETTLED)
        held = [hoarder.receive(timeout=10).body for _ in range(UNSETTLED)]
        assert held == [f"m{i}" for i in range(UNSETTLED)]
        assert nothing_arrives(hoarder, wait=0.5), "a delivery past max-unsettled-per-link was sent"
        # The queue's other consumers are served meanwhile.
        other = receiver(connect(broker.url), address, "queue", credit=UNSETTLED)
        assert receive_bodies(other, UNSETTLED) == [f"m{i}" for i in range(UNSETTLED, 2 * UNSETTLED)]
        other.connection.close()
        # Settling one makes room for one more.
        hoarder.accept()
        assert hoarder.receive(timeout=10).body == f"m{2 * UNSETTLED}"
        assert nothing_arrives(hoarder, wait=0.3)
        for _ in range(UNSETTLED):
            hoarder.accept()
        rest = [hoarder.receive(timeout=10).body for _ in range(UNSETTLED - 1)]
        assert rest == [f"m{i}" for i in range(2 * UNSETTLED + 1, 3 * UNSETTLED)]
    finally:
        conn.close()
    assert_still_serving(broker)


def test_topics_a_connection_creates_are_bounded_by_attach_relay_and_management(broker, uid):
    conn = connect(broker.url)
    try:
        for index in range(TOPICS):
            sender(conn, f"t-{uid}/{index}", "topic").close()  # (closed: the links of a session are bounded too)
        with pytest.raises(LinkDetached) as refused:
            sender(conn, f"t-{uid}/{TOPICS}", "topic")
        assert refused.value.link.remote_condition.name == RESOURCE_LIMIT
        assert f"max-topics-per-connection {TOPICS}" in refused.value.link.remote_condition.description
        # An existing topic is no creation: still fine on this connection.
        existing = sender(conn, f"t-{uid}/0", "topic")
        existing.send(Message(body="still"))
        existing.close()
        # Another connection has its own count; removing one of the first's topics frees a place.
        with ManagementClient("127.0.0.1", broker.port) as admin:
            for index in range(TOPICS):
                assert admin.create_topic(f"m-{uid}/{index}")
            with pytest.raises(ManagementError) as answered:
                admin.create_topic(f"m-{uid}/{TOPICS}")
            assert answered.value.status == 403
            assert RESOURCE_LIMIT in str(answered.value) and "max-topics-per-connection" in str(answered.value)
            assert admin.remove_topics(f"t-{uid}/1") == [f"t-{uid}/1"]
        sender(conn, f"t-{uid}/{TOPICS + 1}", "topic").close()
        # Through the anonymous relay: a message to one more new topic is rejected with the reason.
        relay = conn.create_sender(None, name=f"relay-{uid}")
        with pytest.raises(SendException) as rejected:
            relay.send(Message(address=f"topic://t-{uid}/{TOPICS + 2}", body="x"))
        assert rejected.value.state == Delivery.REJECTED
        relay.send(Message(address=f"topic://t-{uid}/0", body="to an existing topic"))
        assert topic_paths(broker, f"t-{uid}//") == [f"t-{uid}/0", f"t-{uid}/2", f"t-{uid}/{TOPICS + 1}"]
    finally:
        conn.close()
    assert_still_serving(broker)


def test_selector_length_at_the_limit_attaches_and_past_it_is_refused(broker, uid):
    conn = connect(broker.url)
    try:
        at_limit = "a = '" + "x" * (SELECTOR - 6) + "'"
        assert len(at_limit) == SELECTOR
        receiver(conn, f"sel-{uid}", "queue", options=[Selector(at_limit)])
        with pytest.raises(LinkDetached) as refused:
            receiver(conn, f"sel-{uid}", "queue", options=[Selector(at_limit + " ")])
        condition = refused.value.link.remote_condition
        assert condition.name == "amqp:invalid-field"
        assert f"at most {SELECTOR}: max-selector-length" in condition.description
    finally:
        conn.close()
    assert_still_serving(broker)


def publisher_sends(server: SubgateProcess, address: str, count: int, wait: float) -> list[Frame]:
    """A raw publisher that sends ``count`` durable transfers at once, whatever credit it was granted; returns
    the frames the server answered with (read until its detach, or for ``wait`` seconds)."""
    with RawClient(server.port) as raw:
        raw.sasl_anonymous()
        target = Described(ulong(0x29), [address])
        attach = performative(0x12, ["pub", uint(0), False, ubyte(0), ubyte(0), Described(ulong(0x28), []), target])
        begin = performative(0x11, [None, uint(0), uint(1000), uint(1000)])
        raw.send(AMQP_HEADER + frame(performative(OPEN, ["over-credit"])) + frame(begin) + frame(attach))
        assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER
        answer = [raw.read_frame() for _ in range(4)]  # open, begin, attach, flow
        assert answer[-1].descriptor == 0x13 and int(answer[-1].fields[6]) == WINDOW, answer[-1]
        body = Message(body="x", durable=True).encode()
        transfers = [
            performative(0x14, [uint(0), uint(i), str(i).encode(), uint(0), False]) + body for i in range(count)
        ]
        raw.send(b"".join(frame(transfer) for transfer in transfers))
        frames: list[Frame] = []
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not any(f.descriptor == 0x16 for f in frames):
            raw.timeout = max(0.1, deadline - time.monotonic())
            try:
                frames.append(raw.read_frame())
            except (TimeoutError, EOFError):
                break
        return frames


def test_a_publisher_sending_past_the_credit_it_was_granted_is_detached(broker, uid):
    within = publisher_sends(broker, f"credit-{uid}", WINDOW, wait=1.5)
    assert not any(f.descriptor == 0x16 for f in within), within
    past = publisher_sends(broker, f"credit-{uid}", 3 * WINDOW, wait=10)
    detach = [f for f in past if f.descriptor == 0x16]
    assert detach, past
    condition, description = detach[0].error() or ("", "")
    assert condition == "amqp:link:transfer-limit-exceeded"
    assert "credit-window" in description
    assert_still_serving(broker)
