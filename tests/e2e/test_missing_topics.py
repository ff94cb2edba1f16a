"""Missing-topic handlers over real sockets: seed 000's local part (design.md §3).

A handler is a receiving link from ``$subgate/missing-topic/<path>`` (the root: ``$subgate/missing-topic``). A
subscribe or fetch whose selector selects no topic is held until every notified handler settles its
notification: accepted = proceed, rejected = cancel (``amqp:not-found``), gone or silent past the timeout =
proceed. One test thread plays subscriber and handlers in turn: the subscriber's attach is sent without waiting
(``ControlClient.attach``) and its answer awaited after the handler has answered.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from subgate.cli.management import ManagementClient
from tests.support.amqp import connect, send_all, sender
from tests.support.control import ControlClient
from tests.support.server import SubgateProcess, module_server

HANDLER_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    extra = ("--missing-topic-timeout", str(HANDLER_TIMEOUT), "--name", "primary-1")
    with module_server(request, tmp_path_factory, "missing", extra=extra) as server:
        yield server


def create(server: SubgateProcess, *paths: str) -> None:
    with ManagementClient("127.0.0.1", server.port) as client:
        for path in paths:
            client.create_topic(path)


def publish(server: SubgateProcess, path: str, *bodies: str) -> None:
    conn = connect(server.url)
    send_all(sender(conn, path, "topic"), list(bodies))
    conn.close()


def bodies(consumer, count: int) -> list[str]:
    return [consumer.receive(timeout=10).accept().body for _ in range(count)]


def test_seed_000_the_handler_on_A_creates_A_D_and_the_subscriber_gets_messages(broker, uid):
    """Steps 1, 4, 6 on one server: topics A, A/B, A/C; a subscription to the missing A/D notifies the handler on
    A (the most specific path), not the one on the root; the handler creates A/D, then proceeds."""
    a = f"A{uid}"
    create(broker, a, f"{a}/B", f"{a}/C")
    root_control = ControlClient(broker.url)
    root_handler = root_control.register_handler("")
    control = ControlClient(broker.url, f"control-{uid}")
    handler = control.register_handler(a)
    assert handler.refusal is None and root_handler.refusal is None
    subscriber = ControlClient(broker.url, f"user-{uid}")
    subscription = subscriber.attach(f"{a}/D")

    notification = handler.receive(timeout=10)
    assert notification.properties == {
        "selector": f">{a}/D",
        "session": f"user-{uid}",
        "request": "subscribe",
        "server": "primary-1",
        "path": a,
    }
    assert not subscriber.answered(subscription)  # held while the handler decides
    create(broker, f"{a}/D")
    notification.accept()
    control.wait(0.1)
    assert subscriber.await_attach(subscription) is None
    publish(broker, f"{a}/D", "d1", "d2")
    assert bodies(subscription, 2) == ["d1", "d2"]
    assert root_handler.poll(0.3) is None  # the root handler was not asked
    for client in (subscriber, control, root_control):
        client.close()


def test_a_cancel_refuses_the_subscription_with_not_found(broker, uid):
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        handler = control.register_handler(f"c{uid}")
        subscription = subscriber.attach(f"c{uid}/missing")
        handler.receive(timeout=10).reject()
        control.wait(0.1)
        refusal = subscriber.await_attach(subscription)
        assert refusal is not None and refusal.condition == "amqp:not-found"
        assert f"c{uid}" in refusal.description


def test_a_silent_handler_means_proceed_after_the_timeout(broker, uid):
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        handler = control.register_handler(f"s{uid}")
        subscription = subscriber.attach(f"s{uid}/x")
        assert handler.receive(timeout=10).properties["request"] == "subscribe"
        assert not subscriber.answered(subscription)
        assert subscriber.await_attach(subscription, timeout=HANDLER_TIMEOUT + 10) is None
        publish(broker, f"s{uid}/x", "late")  # the subscription went ahead: the topic was auto-created
        assert bodies(subscription, 1) == ["late"]


def test_a_handler_that_goes_away_means_proceed(broker, uid):
    control = ControlClient(broker.url)
    subscriber = ControlClient(broker.url)
    handler = control.register_handler(f"g{uid}")
    subscription = subscriber.attach(f"g{uid}/x")
    handler.receive(timeout=10)
    control.abort()  # gone without answering
    assert subscriber.await_attach(subscription, timeout=5) is None
    subscriber.close()


def test_a_handler_without_credit_is_notified_once_it_gives_some(broker, uid):
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        handler = control.register_handler(f"w{uid}", credit=0)
        subscription = subscriber.attach(f"w{uid}/x")
        assert handler.poll(0.3) is None
        handler.flow(1)
        handler.receive(timeout=10).accept()
        control.wait(0.1)
        assert subscriber.await_attach(subscription) is None


def test_fetch_of_a_missing_topic_sees_what_the_handler_published(broker, uid):
    path = f"f{uid}/quote"
    with ControlClient(broker.url) as control, ControlClient(broker.url) as fetcher:
        handler = control.register_handler(f"f{uid}")
        fetch = fetcher.attach(path, ("topic", "fetch"))
        notification = handler.receive(timeout=10)
        assert notification.properties["request"] == "fetch"
        publish(broker, path, "v1")  # the handler creates the topic by publishing its value
        notification.accept()
        control.wait(0.1)
        assert fetcher.await_attach(fetch) is None
        assert bodies(fetch, 1) == ["v1"]
        fetcher.wire.pump(lambda: fetch.remote_closed is not None, 5, "the fetch link's close")


def test_no_notification_when_a_topic_matches(broker, uid):
    create(broker, f"e{uid}/x")
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        handler = control.register_handler(f"e{uid}")
        assert subscriber.await_attach(subscriber.attach(f"e{uid}/x")) is None
        assert subscriber.await_attach(subscriber.attach(f"?e{uid}/.*")) is None
        assert handler.poll(0.3) is None
        subscription = subscriber.attach(f"?e{uid}/y.*")  # selects nothing: notified
        assert handler.receive(timeout=10).properties["selector"] == f"?e{uid}/y.*"
        assert not subscriber.answered(subscription)


def test_one_handler_per_path_in_turn_and_every_notified_path_must_agree(broker, uid):
    top = f"t{uid}"
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        first = control.register_handler(top)
        second = control.register_handler(top)
        below = control.register_handler(f"{top}/deep")
        # A path subscription: one of the two handlers on top, in turn.
        for index, (expected, other) in enumerate(((first, second), (second, first), (first, second))):
            subscription = subscriber.attach(f"{top}/x{index}")  # each one missing (proceeding creates it)
            expected.receive(timeout=10).accept()
            assert other.poll(0.2) is None and below.poll(0.1) is None
            control.wait(0.1)
            assert subscriber.await_attach(subscription) is None
        # A selector reaching below: the covering path and the more specific one are both asked; one cancel wins.
        subscription = subscriber.attach(f"?{top}/d.*//")
        notified = [h for h in (first, second) if (n := h.poll(1.0)) is not None and n.accept()]
        assert len(notified) == 1
        below.receive(timeout=10).reject()
        control.wait(0.1)
        refusal = subscriber.await_attach(subscription)
        assert refusal is not None and refusal.condition == "amqp:not-found"


def test_a_subscriber_that_gives_up_while_held(broker, uid):
    with ControlClient(broker.url) as control, ControlClient(broker.url) as subscriber:
        handler = control.register_handler(f"q{uid}")
        subscription = subscriber.attach(f"q{uid}/x")
        notification = handler.receive(timeout=10)
        subscription.link.close()
        subscriber.wait(0.3)
        notification.accept()  # a late answer for a request nobody waits for
        control.wait(0.3)
        create(broker, f"q{uid}/y")
        assert subscriber.await_attach(subscriber.attach(f"q{uid}/y")) is None
        assert handler.poll(0.2) is None
    assert broker.alive()


@pytest.mark.parametrize(
    ("path", "presettled", "condition"),
    [
        ("a//b", False, "amqp:invalid-field"),
        ("ok", True, "amqp:invalid-field"),  # the answer is the settlement: pre-settled sends make no sense
    ],
)
def test_bad_handler_registrations(broker, path, presettled, condition):
    with ControlClient(broker.url) as control:
        handler = control.register_handler(path, presettled=presettled)
        assert handler.refusal is not None and handler.refusal.condition == condition


def test_handlers_are_listed_by_management(broker, uid):
    with ControlClient(broker.url) as control:
        control.register_handler(f"m{uid}")
        control.register_handler(f"m{uid}")
        with ManagementClient("127.0.0.1", broker.port) as client:
            handlers = {h["path"]: h["handlers"] for h in client.query_topics()["handlers"]}
        assert handlers[f"m{uid}"] == 2
