"""Missing-topic notifications propagated through fan-out (seed 000), with real primary, secondary and tertiary
server processes on loopback.

The example flow of seed 000 step by step; each of its five conditions negated in turn (then the primary's
handler hears nothing); local and primary handlers both notified; the primary killed while a notification is in
flight (warning, proceed); two tiers. One test thread plays the control client, the end-user client and the
judge: a subscriber's attach is sent without waiting (``ControlClient.attach``) and awaited after the handlers
have answered.
"""

from __future__ import annotations

import pytest

from subgate.mapping.permissions import PRINCIPAL
from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.passwords import hash_password
from subgate.storage.permissions import assign_role, grant
from subgate.storage.principals import add_principal
from tests.support.amqp import connect, send_all, sender
from tests.support.control import ControlClient
from tests.support.fanout import HANDLER_TIMEOUT, create, fanout_flags, paths, wait_live
from tests.support.polling import eventually

SEED_PROPERTIES = {"selector": ">A/D", "session": "end-user", "request": "subscribe", "server": "secondary-1"}


def publish(server, path: str, *bodies: str, **auth) -> None:
    conn = connect(server.url, **auth)
    send_all(sender(conn, path, "topic"), list(bodies))
    conn.close()


def bodies(consumer, count: int) -> list[str]:
    return [consumer.receive(timeout=15).accept().body for _ in range(count)]


@pytest.fixture
def seed(make_server):
    """Seed 000, steps 1 to 3: the primary holds A, A/B, A/C, a control client's handler on A; the secondary
    replicates A//."""
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B", "A/C")
    control = ControlClient(primary.url, "control")
    handler = control.register_handler("A")
    assert handler.refusal is None
    secondary = make_server(None, *fanout_flags(f"{primary.url}=A//", name="secondary-1"))
    wait_live(secondary, 3)
    yield primary, secondary, control, handler
    control.close()


@pytest.mark.parametrize("capabilities", [("topic",), ()], ids=["jms-topic", "plain-amqp"])
def test_seed_000_example_flow(seed, capabilities):
    """Also from a plain AMQP receiver with no capabilities: inside a replicated branch an address is a topic."""
    primary, secondary, control, handler = seed
    subscriber = ControlClient(secondary.url, "end-user")
    subscription = subscriber.attach("A/D", capabilities)  # step 4: A/D does not exist
    notification = handler.receive(timeout=15)  # steps 5 and 6: propagated, then the handler on A notified
    assert notification.properties == {**SEED_PROPERTIES, "path": "A"}
    assert not subscriber.answered(subscription)  # held until the primary's handler answers
    create(primary, "A/D")  # the control client creates the missing topic ...
    notification.accept()  # ... and proceeds
    control.wait(0.1)
    assert subscriber.await_attach(subscription, timeout=15) is None
    eventually(lambda: "A/D" in paths(secondary), what="A/D replicated")
    publish(primary, "A/D", "d1", "d2")
    assert bodies(subscription, 2) == ["d1", "d2"]  # published at the primary, received at the secondary
    subscriber.close()


def test_a_cancel_at_the_primary_refuses_the_subscription_at_the_secondary(seed):
    _primary, secondary, control, handler = seed
    with ControlClient(secondary.url, "end-user") as subscriber:
        subscription = subscriber.attach("A/D")
        handler.receive(timeout=15).reject()
        control.wait(0.1)
        refusal = subscriber.await_attach(subscription, timeout=15)
        assert refusal is not None and refusal.condition == "amqp:not-found"


def test_a_fetch_is_propagated_as_a_fetch(seed):
    _primary, secondary, control, handler = seed
    with ControlClient(secondary.url, "end-user") as fetcher:
        fetch = fetcher.attach("A/F", ("topic", "fetch"))
        notification = handler.receive(timeout=15)
        assert notification.properties["request"] == "fetch" and notification.properties["selector"] == ">A/F"
        notification.accept()
        control.wait(0.1)
        assert fetcher.await_attach(fetch, timeout=15) is None


# -- each condition of seed 000 negated: the primary's handler hears nothing, the subscription goes ahead -------
def _not_notified(handler, secondary, address: str) -> None:
    with ControlClient(secondary.url, "end-user") as subscriber:
        subscription = subscriber.attach(address)
        assert subscriber.await_attach(subscription, timeout=15) is None  # went ahead without the primary
    assert handler.poll(1.0) is None


def test_no_session_to_the_primary_no_notification(make_server, tmp_path):
    """Condition 1: the secondary's fan-out principal cannot log in at the primary, so there is no session."""
    url = f"sqlite:///{tmp_path / 'secured.db'}"
    upgrade(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        add_principal(session, "admin", hash_password("pw"))
        assign_role(session, "admin", "admin")
    engine.dispose()
    primary = make_server(url, "--name", "primary-1")
    create(primary, "A", "A/B", user="admin", password="pw")
    with ControlClient(primary.url, "control", user="admin", password="pw") as control:
        handler = control.register_handler("A")
        link = f"amqp://admin:wrong@127.0.0.1:{primary.port}=A//"
        secondary = make_server(None, *fanout_flags(link, name="secondary-1"))
        _not_notified(handler, secondary, "A/D")
    assert "is not propagated" in secondary.log()


def test_a_selector_outside_the_fan_out_link_is_not_propagated(seed):
    """Condition 2: B/D does not intersect A// (a root handler at the primary would cover it)."""
    _primary, secondary, control, handler = seed
    root = control.register_handler("")
    _not_notified(root, secondary, "B/D")
    assert handler.poll(0.2) is None


def test_a_replicated_topic_matching_both_selectors_stops_propagation(seed):
    """Condition 3: ?A/[BD] selects the replica A/B here, so nothing is asked although A/D is missing."""
    _primary, secondary, _control, handler = seed
    _not_notified(handler, secondary, "?A/[BD]")


def test_a_topic_on_the_primary_that_matches_stops_the_notification(make_server):
    """Condition 4: the secondary replicates only A/X//; the subscription to the path A is propagated (it
    intersects, nothing replicated matches both) but the primary has the topic A, so no handler is notified."""
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/X/1")
    with ControlClient(primary.url, "control") as control:
        handler = control.register_handler("A")
        secondary = make_server(None, *fanout_flags(f"{primary.url}=A/X//", name="secondary-1"))
        wait_live(secondary, 1)
        _not_notified(handler, secondary, "A")
    eventually(lambda: "topics match here" in primary.log(), what="the primary's log line")


def test_no_handler_for_the_selector_at_the_primary_no_notification(make_server):
    """Condition 5: the primary's only handler is on Z."""
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B")
    with ControlClient(primary.url, "control") as control:
        handler = control.register_handler("Z")
        secondary = make_server(None, *fanout_flags(f"{primary.url}=A//", name="secondary-1"))
        wait_live(secondary, 2)
        _not_notified(handler, secondary, "A/D")
    eventually(lambda: "no handler registered" in primary.log(), what="the primary's log line")


# -- local and primary handlers, failures, tiers -----------------------------------------------------------------
def test_local_and_primary_handlers_are_both_notified_and_one_cancel_refuses(seed):
    _primary, secondary, control, handler = seed
    with ControlClient(secondary.url, "local-control") as local_control:
        local = local_control.register_handler("A")
        for local_answer, primary_answer, refused in (("accept", "reject", True), ("accept", "accept", False)):
            with ControlClient(secondary.url, "end-user") as subscriber:
                subscription = subscriber.attach("A/D")
                at_secondary = local.receive(timeout=15)
                at_primary = handler.receive(timeout=15)
                assert at_secondary.properties["server"] == at_primary.properties["server"] == "secondary-1"
                getattr(at_secondary, local_answer)()
                local_control.wait(0.1)
                assert not subscriber.answered(subscription)  # the primary's handler has not answered yet
                getattr(at_primary, primary_answer)()
                control.wait(0.1)
                refusal = subscriber.await_attach(subscription, timeout=15)
                assert (refusal is not None and refusal.condition == "amqp:not-found") is refused


def test_the_primary_killed_while_a_notification_is_in_flight_means_warning_and_proceed(seed):
    primary, secondary, _control, handler = seed
    with ControlClient(secondary.url, "end-user") as subscriber:
        subscription = subscriber.attach("A/D")
        handler.receive(timeout=15)  # in flight: the handler holds it
        primary.kill()
        assert subscriber.await_attach(subscription, timeout=float(HANDLER_TIMEOUT) - 10) is None
    log = secondary.log()
    assert "WARNING" in log and "lost while the missing-topic notification for '>A/D' was in flight" in log


def test_two_tiers_primary_secondary_tertiary(make_server):
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B", "A/C")
    with ControlClient(primary.url, "control") as control:
        handler = control.register_handler("A")
        secondary = make_server(None, *fanout_flags(f"{primary.url}=A//", name="secondary-1"))
        wait_live(secondary, 3)
        tertiary = make_server(None, *fanout_flags(f"{secondary.url}=A//", name="tertiary-1"))
        wait_live(tertiary, 3)
        with ControlClient(tertiary.url, "end-user") as subscriber:
            subscription = subscriber.attach("A/D")
            notification = handler.receive(timeout=15)
            assert notification.properties == {**SEED_PROPERTIES, "server": "tertiary-1", "path": "A"}
            create(primary, "A/D")
            notification.accept()
            control.wait(0.1)
            assert subscriber.await_attach(subscription, timeout=15) is None
            wait_live(tertiary, 4)
            publish(primary, "A/D", "through two tiers")
            assert bodies(subscription, 1) == ["through two tiers"]


def test_the_fan_out_principal_without_select_topic_is_refused_and_the_secondary_proceeds(make_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'secured.db'}"
    upgrade(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        add_principal(session, "admin", hash_password("pw"))
        assign_role(session, "admin", "admin")
        add_principal(session, "fan", hash_password("pw"))
        for permission in ("SELECT_TOPIC", "READ_TOPIC"):
            grant(session, PRINCIPAL, "fan", permission, "A")
        grant(session, PRINCIPAL, "fan", "SELECT_TOPIC", "A/D", allow=False)
    engine.dispose()
    primary = make_server(url, "--name", "primary-1")
    create(primary, "A", "A/B", user="admin", password="pw")
    with ControlClient(primary.url, "control", user="admin", password="pw") as control:
        handler = control.register_handler("A")
        secondary = make_server(None, *fanout_flags(f"amqp://fan:pw@127.0.0.1:{primary.port}=A//", name="secondary-1"))
        wait_live(secondary, 2)
        _not_notified(handler, secondary, "A/D")
    eventually(lambda: "refused the propagated subscribe '>A/D'" in primary.log(), what="the primary's warning")
    assert "refused the missing-topic notification for '>A/D'" in secondary.log()


def test_several_primaries_are_all_asked_and_any_cancel_refuses(make_server):
    first = make_server(None, "--name", "primary-1")
    second = make_server(None, "--name", "primary-2")
    create(first, "A", "A/B")
    create(second, "A/X/1")
    with ControlClient(first.url, "control-1") as control_1, ControlClient(second.url, "control-2") as control_2:
        handler_1, handler_2 = control_1.register_handler("A"), control_2.register_handler("A/X")
        links = (f"{first.url}=A//", f"{second.url}=A/X//")
        secondary = make_server(None, *fanout_flags(*links, name="secondary-1"))
        wait_live(secondary, 2, 1)
        for answer_2, refused in (("reject", True), ("accept", False)):
            with ControlClient(secondary.url, "end-user") as subscriber:
                subscription = subscriber.attach("A/X/2")  # intersects both links; neither replicates it
                handler_1.receive(timeout=15).accept()
                control_1.wait(0.1)
                assert not subscriber.answered(subscription)  # the second primary has not answered
                getattr(handler_2.receive(timeout=15), answer_2)()
                control_2.wait(0.1)
                refusal = subscriber.await_attach(subscription, timeout=15)
                assert (refusal is not None and refusal.condition == "amqp:not-found") is refused


def test_seed_000_with_plain_amqp_clients_that_name_no_node_type(seed):
    """No capability anywhere: inside the replicated branch A//, A/D is a topic at the secondary (the subscriber)
    and at the primary (the handler creates it by attaching a plain sender, then publishes to it)."""
    primary, secondary, control, handler = seed
    subscriber = ControlClient(secondary.url, "end-user")
    subscription = subscriber.attach("A/D", ())
    notification = handler.receive(timeout=15)
    assert notification.properties == {**SEED_PROPERTIES, "path": "A"}
    conn = connect(primary.url)
    publisher = sender(conn, "A/D")  # no capability: a topic, since a secondary replicates A//
    notification.accept()
    control.wait(0.1)
    assert subscriber.await_attach(subscription, timeout=15) is None
    eventually(lambda: "A/D" in paths(secondary), what="A/D replicated")
    send_all(publisher, ["plain"])
    assert bodies(subscription, 1) == ["plain"]
    conn.close()
    subscriber.close()
