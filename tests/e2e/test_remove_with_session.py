"""Remove-with-session over real sockets: each step and rule of seed 001 (design.md §3).

A registration is a sending link to ``$subgate/remove-with-session/<branch>``; its connection is the Diffusion
session. Topics are created by publishing (auto-create) and observed through ``$management`` (type ``topic``).
Every test works under its own unique top-level segment on one shared server whose reconnection timeout is
short (``RECONNECT`` seconds).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton import Message
from proton.utils import LinkDetached

from tests.e2e.conftest import STORES
from tests.support.amqp import connect, receive_bodies, receiver, send_all, sender
from tests.support.control import ControlClient, removals, topic_paths
from tests.support.jms import _LinkEnd
from tests.support.polling import until
from tests.support.server import SubgateProcess, module_server

RECONNECT = 3.0


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    extra = ("--reconnect-timeout", str(RECONNECT))
    with module_server(request, tmp_path_factory, "removal", extra=extra) as server:
        yield server


def create(server: SubgateProcess, *paths: str) -> None:
    conn = connect(server.url)
    for path in paths:
        send_all(sender(conn, path, "topic"), [path])
    conn.close()


def test_seed_001_two_sessions_on_one_branch(broker, uid):
    """Steps 1, 4, 5: foo/bar covers foo/bar/baz and foo/bar/fred/qux; the branch goes with the last session."""
    root = f"s{uid}"
    create(broker, f"{root}/foo/bar/baz", f"{root}/foo/bar/fred/qux", f"{root}/foo/other")
    first = ControlClient(broker.url)
    second = ControlClient(broker.url)
    assert first.register_removal(f"{root}/foo/bar").refusal is None
    assert second.register_removal(f"{root}/foo/bar").refusal is None  # same path, another session: allowed
    assert removals(broker)[f"{root}/foo/bar"] == 2
    first.close()
    assert topic_paths(broker, f">{root}//") == [f"{root}/foo/bar/baz", f"{root}/foo/bar/fred/qux", f"{root}/foo/other"]
    second.close()
    assert until(lambda: topic_paths(broker, f">{root}//") == [f"{root}/foo/other"])
    assert f"{root}/foo/bar" not in removals(broker)


@pytest.mark.parametrize("other", ["foo/bar", "foo/bar/fred/qux", "foo"])
def test_a_registration_above_or_below_is_refused(broker, uid, other):
    """Step 1: nothing above or below an existing registration, from another session or the same one."""
    root = f"c{uid}"
    with ControlClient(broker.url) as holder, ControlClient(broker.url) as rival:
        assert holder.register_removal(f"{root}/foo/bar/fred").refusal is None
        refusal = rival.register_removal(f"{root}/{other}").refusal
        assert refusal is not None and refusal.condition == "amqp:precondition-failed"
        assert f"{root}/foo/bar/fred" in refusal.description
        same_session = holder.register_removal(f"{root}/{other}").refusal
        assert same_session is not None and same_session.condition == "amqp:precondition-failed"
        assert rival.register_removal(f"{root}/foo/bar/fred").refusal is None  # the same path is fine
        assert rival.register_removal(f"{root}/foo/baz").refusal is None  # a sibling is fine


def test_deregister_then_close_removes_nothing(broker, uid):
    """Step 3: closing the Registration withdraws the request."""
    root = f"d{uid}"
    create(broker, f"{root}/a/x")
    client = ControlClient(broker.url)
    registration = client.register_removal(f"{root}/a")
    assert registration.refusal is None
    assert registration.close() is None
    assert f"{root}/a" not in removals(broker)
    client.close()
    time.sleep(0.3)
    assert topic_paths(broker, f">{root}//") == [f"{root}/a/x"]


def test_a_refused_registration_holds_nothing(broker, uid):
    root = f"r{uid}"
    create(broker, f"{root}/a/b/c")
    with ControlClient(broker.url) as holder:
        assert holder.register_removal(f"{root}/a/b").refusal is None
        refused = ControlClient(broker.url)
        assert refused.register_removal(f"{root}/a").refusal is not None
        refused.close()
        assert topic_paths(broker, f">{root}//") == [f"{root}/a/b/c"]
        holder.close()
    assert until(lambda: topic_paths(broker, f">{root}//") == [])


def test_abrupt_loss_removes_after_the_reconnection_timeout_not_before(broker, uid):
    """Step 5, note: a disconnected session's request waits for the reconnection timeout."""
    root = f"a{uid}"
    create(broker, f"{root}/b/c")
    client = ControlClient(broker.url, f"crash-{uid}")
    assert client.register_removal(f"{root}/b").refusal is None
    client.abort()  # no close frame
    assert until(lambda: f"connection 'crash-{uid}' lost" in broker.log(), timeout=5)
    assert topic_paths(broker, f">{root}//") == [f"{root}/b/c"]  # inside the grace: still there
    assert removals(broker).get(f"{root}/b") == 1
    assert until(lambda: topic_paths(broker, f">{root}//") == [], timeout=RECONNECT + 10)
    assert f"removing topic branch '{root}/b'" in broker.log()


def test_a_reconnect_within_the_timeout_keeps_the_registration(broker, uid):
    root = f"k{uid}"
    create(broker, f"{root}/b/c")
    client = ControlClient(broker.url, f"flaky-{uid}")
    assert client.register_removal(f"{root}/b", name="keep-me").refusal is None
    client.abort()
    assert until(lambda: f"connection 'flaky-{uid}' lost" in broker.log(), timeout=5)
    again = ControlClient(broker.url, f"flaky-{uid}")
    assert again.register_removal(f"{root}/b", name="keep-me").refusal is None  # takes the registration over
    again.wait(RECONNECT + 1.0)  # past the old connection's deadline
    assert topic_paths(broker, f">{root}//") == [f"{root}/b/c"]
    assert removals(broker)[f"{root}/b"] == 1
    again.close()
    assert until(lambda: topic_paths(broker, f">{root}//") == [])


def test_another_open_session_outlives_a_lost_one(broker, uid):
    root = f"o{uid}"
    create(broker, f"{root}/b/c")
    lost = ControlClient(broker.url, f"lost-{uid}")
    steady = ControlClient(broker.url)
    assert lost.register_removal(f"{root}/b").refusal is None
    assert steady.register_removal(f"{root}/b").refusal is None
    lost.abort()
    steady.wait(RECONNECT + 1.0)
    assert topic_paths(broker, f">{root}//") == [f"{root}/b/c"]
    steady.close()
    assert until(lambda: topic_paths(broker, f">{root}//") == [])


def test_removal_closes_plain_subscribers_and_keeps_selector_subscriptions(broker, uid):
    """A removed topic closes the subscriptions that named it; a selector subscription stays and sees the topic
    again when it is created anew."""
    root = f"p{uid}"
    create(broker, f"{root}/b/c")
    conn = connect(broker.url)
    plain = receiver(conn, f"{root}/b/c", "topic", credit=10)
    by_selector = receiver(conn, f"?{root}/b/.*", "topic", credit=10)
    publisher = sender(conn, f"{root}/b/c", "topic")
    control = ControlClient(broker.url)
    assert control.register_removal(f"{root}/b").refusal is None
    control.close()
    assert until(lambda: topic_paths(broker, f">{root}//") == [])
    with pytest.raises(LinkDetached) as closed:
        plain.receive(timeout=5)
    assert "resource-deleted" in str(closed.value)
    with pytest.raises(LinkDetached):  # the publisher's link to the removed topic is closed as well
        publisher.send(Message(body="late"), timeout=5)
    send_all(sender(conn, f"{root}/b/c", "topic"), ["again"])  # auto-created anew
    assert receive_bodies(by_selector, 1) == ["again"]
    conn.close()


@pytest.mark.parametrize(
    ("address", "condition"),
    [
        ("$subgate/remove-with-session/a//b", "amqp:invalid-field"),
        ("$subgate/remove-with-session/", "amqp:invalid-field"),
        ("$subgate/nothing-here/a", "amqp:not-found"),
    ],
)
def test_bad_registration_addresses(broker, address, condition):
    with ControlClient(broker.url) as client:
        link = client.session.session.sender("bad-registration")
        link.target.address = address
        end = _LinkEnd(client.wire, link)
        link.open()
        end._await_attach(None, check=False)
        assert end.refusal is not None and end.refusal.condition == condition


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_removal_is_recorded_and_survives_a_restart(make_server, store_url):
    server = make_server(store_url)
    create(server, "keep/x", "gone/x", "gone/y/z")
    with ControlClient(server.url) as control:
        assert control.register_removal("gone").refusal is None
    assert until(lambda: topic_paths(server, ">gone//") == [])
    server.stop(timeout=10)
    server.start()
    assert topic_paths(server, "?.*//") == ["keep/x"]


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_server_crash_does_not_leave_the_branch_behind(make_server, store_url):
    """The registration is in the store: after a kill -9 and a restart its branch waits the reconnection timeout
    (the session is certainly gone) and is then removed, unless its client re-attaches in time."""
    server = make_server(store_url, "--reconnect-timeout", str(RECONNECT))
    create(server, "tied/x", "back/x", "free/x")
    tied = ControlClient(server.url, "tied-client")
    back = ControlClient(server.url, "back-client")
    assert tied.register_removal("tied", name="reg").refusal is None
    assert back.register_removal("back", name="reg").refusal is None
    time.sleep(0.5)  # the registrations reach the store (journal writer)
    server.kill()
    tied.abort()
    back.abort()
    server.start()
    assert topic_paths(server, "?.*//") == ["back/x", "free/x", "tied/x"]  # inside the timeout: all there
    returning = ControlClient(server.url, "back-client")
    assert returning.register_removal("back", name="reg").refusal is None
    assert until(lambda: topic_paths(server, "?.*//") == ["back/x", "free/x"], timeout=RECONNECT + 10)
    returning.close()
    assert until(lambda: topic_paths(server, "?.*//") == ["free/x"])
    assert removals(server) == {}
