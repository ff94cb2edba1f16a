"""Attach-time checks over real sockets (issue 11, defects 2, 5, 6, 11 and 12).

- A temporary queue belongs to the connection that created it: others may send to it (reply-to), never consume
  from it or browse it.
- Replies never echo unbounded client input: over-long names and selectors are refused early with
  ``amqp:invalid-field`` and a short description, so a client with a small max-frame-size gets a clean link
  refusal and keeps its connection.
- A new topic's name must be a topic path without control characters that does not start like a selector.
- No queue or topic is made at ``$management`` or under ``$subgate/`` (the server's own addresses).
- ``topic://`` and ``queue://`` name the node type, as Artemis' prefixes do.
- A permission refusal names a queue as a queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import ConnectionException, Delivery, Message, symbol
from proton.utils import BlockingConnection, LinkDetached

from subgate.cli.management import ManagementClient, ManagementError
from tests.support.amqp import BrowseCopy, connect, nothing_arrives, receive_bodies, receiver, sender
from tests.support.cli import run_subgate
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import assert_still_serving


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "attach-checks") as server:
        yield server


def refused(attach) -> tuple[str, str]:  # noqa: ANN001 - a zero-argument callable that attaches
    with pytest.raises(LinkDetached) as caught:
        attach()
    remote = caught.value.link.remote_condition
    return remote.name, remote.description


def outcome(conn: BlockingConnection, relay, message: Message) -> tuple[object, str | None]:  # noqa: ANN001
    delivery = relay.link.send(message)
    conn.wait(lambda: bool(delivery.remote_state) or delivery.settled, timeout=10, msg="no outcome")
    condition = delivery.remote.condition
    return delivery.remote_state, condition.name if condition is not None else None


# -- temporary queues belong to their connection ------------------------------------------------------------------
def test_only_the_creating_connection_may_consume_from_or_browse_a_temporary_queue(broker):
    owner, stranger = connect(broker.url), connect(broker.url)
    try:
        replies = owner.create_receiver(None, dynamic=True, credit=10)
        address = replies.link.remote_source.address
        assert address.startswith("$temp.queue.")
        condition, description = refused(lambda: receiver(stranger, address))
        assert condition == "amqp:unauthorized-access" and "another connection" in description
        condition, _ = refused(lambda: receiver(stranger, address, options=[BrowseCopy()]))
        assert condition == "amqp:unauthorized-access"
        # Sending stays open to everyone: that is what reply-to is for.
        sender(stranger, address).send(Message(body="the reply"))
        assert receive_bodies(replies, 1) == ["the reply"]
        relay = sender(stranger, None)
        state, _ = outcome(stranger, relay, Message(address=address, body="relayed reply"))
        assert state == Delivery.ACCEPTED
        assert receive_bodies(replies, 1) == ["relayed reply"]
    finally:
        owner.close()
        stranger.close()


def test_a_temporary_topic_cannot_be_subscribed_to_or_removed_by_another_connection(broker):
    owner, stranger = connect(broker.url), connect(broker.url)
    try:
        own = owner.create_receiver(None, dynamic=True, credit=10, options=[_TemporaryTopic()])
        address = own.link.remote_source.address
        assert address.startswith("$temp.topic.")
        condition, _ = refused(lambda: receiver(stranger, address, "topic"))
        assert condition == "amqp:unauthorized-access"
        sender(stranger, address, "topic").send(Message(body="tick"))
        assert receive_bodies(own, 1) == ["tick"]
    finally:
        owner.close()
        stranger.close()


def test_a_temporary_topic_is_out_of_reach_of_topic_selectors(broker):
    """A Diffusion selector subscription (``?.*``) from another connection does not reach a temporary topic."""
    owner, stranger = connect(broker.url), connect(broker.url)
    try:
        spy = receiver(stranger, "?.*", "topic", credit=10)
        own = owner.create_receiver(None, dynamic=True, credit=10, options=[_TemporaryTopic()])
        address = own.link.remote_source.address
        sender(owner, address, "topic").send(Message(body="private"))
        assert receive_bodies(own, 1) == ["private"]
        sender(owner, "visible", "topic").send(Message(body="public"))
        assert receive_bodies(spy, 1) == ["public"]  # the spy works, and got only the plain topic
        assert nothing_arrives(spy)
    finally:
        owner.close()
        stranger.close()


class _TemporaryTopic(BrowseCopy):
    def apply(self, link) -> None:  # noqa: ANN001
        data = link.source.capabilities
        data.put_array(False, data.SYMBOL)
        data.enter()
        data.put_symbol(symbol("temporary-topic"))
        data.exit()


# -- replies stay small ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("what", "attach"),
    [
        ("selector", lambda conn: conn.create_receiver("q-long", name="sel", options=[_Selector("a = 1 OR " * 5000)])),
        ("in-list", lambda conn: conn.create_receiver("q-long", name="in", options=[_Selector(_in_list(100_000))])),
        ("consumer-address", lambda conn: conn.create_receiver("q" * 100_000, name="long-src")),
        ("producer-address", lambda conn: conn.create_sender("q" * 100_000, name="long-tgt")),
    ],
)
def test_over_long_input_is_refused_cleanly_and_the_connection_stays_usable(broker, what, attach):
    conn = connect(broker.url, max_frame_size=4096)
    try:
        condition, description = refused(lambda: attach(conn))
        assert condition == "amqp:invalid-field", description
        assert "at most" in description and len(description) < 600
        # The same connection goes on: the refusal fitted in one 4 KiB frame.
        sender(conn, "q-long").send(Message(body="still here"))
        assert receive_bodies(receiver(conn, "q-long"), 1) == ["still here"]
    finally:
        conn.close()


def test_an_over_long_link_name_closes_the_connection_with_the_reason(broker):
    """A detach must repeat the link's name, so an over-long one cannot be answered in a frame the client takes:
    the connection is closed with the reason instead (a close frame fits), and the server goes on."""
    conn = connect(broker.url)
    try:
        with pytest.raises(ConnectionException) as caught:
            conn.create_sender("q-long", name="n" * 100_000)
        assert "amqp:invalid-field" in str(caught.value) and "link name of 100000 characters" in str(caught.value)
    finally:
        conn.close()
    assert_still_serving(broker)


def test_a_refusal_quoting_a_long_invalid_selector_is_cut_short(broker):
    conn = connect(broker.url, max_frame_size=4096)
    try:
        bad = "a = " + "'x' AND a = " * 600 + "("  # 7 kB, under the limit, and not a valid selector
        condition, description = refused(lambda: conn.create_receiver("q-sel", name="bad", options=[_Selector(bad)]))
        assert condition == "amqp:invalid-field"
        assert len(description) <= 600 and "…" in description  # the selector is quoted cut short,
        assert "unexpected end of selector" in description  # so the reason fits after it
        sender(conn, "q-sel").send(Message(body="fine"))
        assert receive_bodies(receiver(conn, "q-sel"), 1) == ["fine"]
    finally:
        conn.close()


class _Selector(BrowseCopy):
    def __init__(self, expression: str) -> None:
        self.expression = expression

    def apply(self, link) -> None:  # noqa: ANN001
        from proton.reactor import Selector

        Selector(self.expression).apply(link)


def _in_list(count: int) -> str:
    return "color IN (" + ", ".join(f"'c{i}'" for i in range(count)) + ")"


# -- topic names ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["news\x01flash", "tab\there", "bell\x07", "?a/.*//", "a//b", "/lead", "#set"])
def test_a_topic_that_could_never_deliver_is_refused_at_attach(broker, name):
    conn = connect(broker.url)
    try:
        condition, description = refused(lambda: sender(conn, name, "topic"))
        assert condition == "amqp:invalid-field", description
        relay = sender(conn, None)
        message = Message(address=name, body="x", annotations={symbol("x-opt-jms-dest"): _byte(1)})
        state, condition = outcome(conn, relay, message)
        assert (state, condition) == (Delivery.REJECTED, "amqp:invalid-field")
    finally:
        conn.close()
    assert_still_serving(broker)


def test_a_queue_name_with_a_control_character_is_refused(broker):
    conn = connect(broker.url)
    try:
        condition, description = refused(lambda: sender(conn, "orders\x1b[2J", "queue"))
        assert condition == "amqp:invalid-field" and "U+001B" in description
    finally:
        conn.close()


@pytest.mark.parametrize("address", ["$management", "$subgate/elsewhere"])
def test_no_node_is_made_at_the_servers_own_addresses(broker, address):
    """A relayed message to $management used to be accepted into a new queue of that name (never answered), and a
    consumer of it read what others meant for the management node; $subgate/… likewise."""
    conn = connect(broker.url)
    try:
        relay = sender(conn, None)
        state, condition = outcome(conn, relay, Message(address=address, body="x"))
        assert (state, condition) == (Delivery.REJECTED, "amqp:invalid-field")
        condition, description = refused(lambda: receiver(conn, address, "queue", credit=1))
        assert condition in ("amqp:invalid-field", "amqp:not-found"), description
    finally:
        conn.close()
    with ManagementClient("127.0.0.1", broker.port) as management:
        assert not [q for q in management.query_queues() if q["name"] == address]
        with pytest.raises(ManagementError) as created:
            management.create_topic(address)
        assert created.value.status == 400


def _byte(value: int) -> object:
    from proton import byte

    return byte(value)


# -- address prefixes -------------------------------------------------------------------------------------------
def test_topic_prefix_makes_a_topic_every_subscriber_gets_everything(broker, uid):
    conn = connect(broker.url)
    try:
        first, second = receiver(conn, f"topic://news-{uid}"), receiver(conn, f"topic://news-{uid}")
        assert first.link.remote_source.address == f"topic://news-{uid}"  # the echo keeps what was sent
        publisher = sender(conn, f"topic://news-{uid}")
        for body in ("one", "two", "three"):
            publisher.send(Message(body=body))
        assert receive_bodies(first, 3) == ["one", "two", "three"]
        assert receive_bodies(second, 3) == ["one", "two", "three"]
        # The node is the topic named without the prefix.
        plain = receiver(conn, f"news-{uid}", "topic")
        publisher.send(Message(body="four"))
        assert receive_bodies(plain, 1) == ["four"]
    finally:
        conn.close()


def test_queue_prefix_makes_a_queue_and_a_clash_with_the_capability_is_refused(broker, uid):
    conn = connect(broker.url)
    try:
        consumers = [receiver(conn, f"queue://jobs-{uid}"), receiver(conn, f"queue://jobs-{uid}")]
        publisher = sender(conn, f"queue://jobs-{uid}")
        for index in range(4):
            publisher.send(Message(body=index))
        got = receive_bodies(consumers[0], 2) + receive_bodies(consumers[1], 2)
        assert sorted(got) == [0, 1, 2, 3]  # shared, not copied
        assert nothing_arrives(consumers[0])
        condition, _ = refused(lambda: sender(conn, f"topic://jobs2-{uid}", "queue"))
        assert condition == "amqp:invalid-field"
    finally:
        conn.close()


# -- a queue is named as a queue ------------------------------------------------------------------------------------
def test_a_user_without_grants_is_told_which_queue_and_how_to_grant(make_server, sqlite_url, tmp_path: Path):
    for args in (("db", "upgrade"), ("users", "add", "bob", "--password", "pw")):
        result = run_subgate(*args, "--store", sqlite_url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    server = make_server(sqlite_url)
    conn = connect(server.url, user="bob", password="pw")
    try:
        condition, description = refused(lambda: sender(conn, "q1"))
        assert condition == "amqp:unauthorized-access"
        assert "may not create queue 'q1'" in description
        assert "subgate grants add MODIFY_TOPIC --user bob --path q1" in description
        assert "topic path" not in description
    finally:
        conn.close()
