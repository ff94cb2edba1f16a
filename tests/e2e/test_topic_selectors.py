"""Topic selectors over AMQP: a consumer whose source address is a Diffusion selector, and fetch."""

from __future__ import annotations

import uuid

import pytest
from proton import Handler, Message

from tests.support.amqp import Capabilities, connect, nothing_arrives, receive_bodies, receiver, send_all, sender


def publish(conn, path: str, *bodies: str) -> None:
    send_all(sender(conn, path, "topic"), list(bodies))


def fetched(conn, address: str) -> list[str]:
    """Attach a fetch link, wait until the server closes it, and return what arrived before the close."""
    fetcher = _Collect()  # a plain link, not BlockingReceiver: that one raises as soon as the link closes
    link = conn.container.create_receiver(
        conn.conn,
        address,
        name=f"fetch-{uuid.uuid4().hex[:8]}",
        handler=fetcher,
        options=[Capabilities("topic", "fetch")],
    )
    link.flow(10)
    conn.wait(lambda: link.state & link.REMOTE_CLOSED, timeout=5)
    return sorted(fetcher.bodies)


class _Collect(Handler):
    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[str] = []

    def on_delivery(self, event) -> None:
        delivery = event.delivery
        if delivery.readable and not delivery.partial:
            message = Message()
            message.decode(delivery.link.recv(delivery.pending))
            delivery.link.advance()
            self.bodies.append(message.body)


def test_selector_subscription_gets_matching_topics_including_later_ones(server):
    conn = connect(server.url)
    publish(conn, "a/b", "early")  # creates a/b before the subscription
    sub = receiver(conn, "?a/.*", "topic", credit=50)
    publish(conn, "a/b", "ab")
    publish(conn, "a/c", "ac")  # a topic created after the subscription
    publish(conn, "x/b", "xb")  # does not match
    publish(conn, "a/b/c", "abc")  # one level too deep for ?a/.*
    assert sorted(receive_bodies(sub, 2)) == ["ab", "ac"]
    assert nothing_arrives(sub)
    conn.close()


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (">a//", ["a", "a/b", "a/b/c"]),
        (">a/", ["a/b", "a/b/c"]),
        ("*a/b.*", ["a/b", "a/b/c"]),
        ("#>a////>x/y", ["a", "x/y"]),
    ],
)
def test_qualifiers_and_sets(server, selector, expected):
    conn = connect(server.url)
    sub = receiver(conn, selector, "topic", credit=50)
    for path in ("a", "a/b", "a/b/c", "x/y", "x/z"):
        publish(conn, path, path)
    assert sorted(receive_bodies(sub, len(expected))) == expected
    assert nothing_arrives(sub)
    conn.close()


def test_a_message_matching_through_two_topics_arrives_once_per_publish(server):
    conn = connect(server.url)
    sub = receiver(conn, "#>t/1////?t/.*", "topic", credit=10)
    publish(conn, "t/1", "one")
    assert receive_bodies(sub, 1) == ["one"]
    assert nothing_arrives(sub)
    conn.close()


def test_fetch_sends_each_current_value_once_then_closes(server):
    conn = connect(server.url)
    publish(conn, "f/a", "a1", "a2")
    publish(conn, "f/b", "b1")
    publish(conn, "g/c", "c1")
    assert fetched(conn, "?f/.*") == ["a2", "b1"]
    assert fetched(conn, "?f/.*") == ["a2", "b1"]  # fetching does not consume
    conn.close()


def test_fetch_of_a_plain_topic_and_of_nothing(server):
    conn = connect(server.url)
    publish(conn, "p/q", "v1", "v2")
    assert fetched(conn, "p/q") == ["v2"]
    assert fetched(conn, ">nothing//") == []
    conn.close()


def test_invalid_selector_is_refused(server):
    conn = connect(server.url)
    with pytest.raises(Exception) as refused:
        receiver(conn, "?a/(", "topic", credit=1)
    assert "invalid-field" in str(refused.value) or "invalid topic selector" in str(refused.value)
    conn.close()


def test_plain_jms_topic_names_are_not_selectors(server):
    conn = connect(server.url)
    sub = receiver(conn, "prices", "topic", credit=5)
    send_all(sender(conn, "prices", "topic"), ["p"])
    assert receive_bodies(sub, 1) == ["p"]
    snd = sender(conn, "prices", "topic")
    snd.send(Message(body="q"))
    assert receive_bodies(sub, 1) == ["q"]
    conn.close()
