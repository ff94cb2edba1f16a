"""Permissions enforced by the broker over real sockets (design.md §3, docs/permissions.md).

One server on a store with users: ``alice`` holds the built-in ``admin`` role; ``bob`` may select and read
``prices`` except ``prices/secret``, publish to ``prices/fx`` and has nothing else; ``carol`` has no grant.
Every denial must be ``amqp:unauthorized-access``; grants changed in the store apply within the refresh interval.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton.utils import LinkDetached

from subgate.cli.management import ManagementClient
from subgate.mapping.permissions import PRINCIPAL, ROLE
from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.passwords import hash_password
from subgate.storage.permissions import add_role, assign_role, grant, revoke
from subgate.storage.principals import add_principal
from tests.e2e.test_topic_selectors import fetched
from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender
from tests.support.control import ControlClient
from tests.support.jms import DURABLE, TOPIC, JmsError, JmsWire
from tests.support.server import SubgateProcess

UNAUTHORIZED = "amqp:unauthorized-access"
PASSWORD = "pw-123"


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SubgateProcess]:
    workdir = tmp_path_factory.mktemp("permissions")
    url = f"sqlite:///{workdir / 'subgate.db'}"
    upgrade(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        for name in ("alice", "bob", "carol"):
            add_principal(session, name, hash_password(PASSWORD))
        assign_role(session, "admin", "alice")
        for permission in ("SELECT_TOPIC", "READ_TOPIC"):
            grant(session, PRINCIPAL, "bob", permission, "prices")
        grant(session, PRINCIPAL, "bob", "READ_TOPIC", "prices/secret", allow=False)
        grant(session, PRINCIPAL, "bob", "UPDATE_TOPIC", "prices/fx")
    engine.dispose()
    server = SubgateProcess(url, workdir, "--policy-refresh", "0.3").start()
    admin = connect(server.url, user="alice", password=PASSWORD)
    for path in ("prices/fx", "prices/eq", "prices/secret"):
        send_all(sender(admin, path, "topic"), [f"{path}-v0"])
    admin.close()
    try:
        yield server
    finally:
        server.stop(timeout=10)


def as_user(server: SubgateProcess, user: str):
    return connect(server.url, user=user, password=PASSWORD)


def change(server: SubgateProcess, action) -> None:
    engine = make_engine(server.store_url)
    with session_factory(engine).begin() as session:
        action(session)
    engine.dispose()


def refused(attempt) -> str:
    with pytest.raises(Exception) as denied:
        attempt()
    return str(denied.value)


def test_an_administrator_may_do_everything(secured):
    conn = as_user(secured, "alice")
    sub = receiver(conn, "?prices/.*", "topic", credit=10)
    send_all(sender(conn, "prices/fx", "topic"), ["a"])
    assert receive_bodies(sub, 1) == ["a"]
    send_all(sender(conn, "orders", "queue"), ["o"])
    assert receive_bodies(receiver(conn, "orders", "queue"), 1) == ["o"]
    conn.close()
    with ControlClient(secured.url, user="alice", password=PASSWORD) as control:
        assert control.register_removal("scratch/alice").refusal is None
        assert control.register_handler("scratch").refusal is None


def test_select_read_and_update_on_granted_paths(secured):
    conn = as_user(secured, "bob")
    sub = receiver(conn, "prices/fx", "topic", credit=10)
    send_all(sender(conn, "prices/fx", "topic"), ["b1"])
    assert receive_bodies(sub, 1) == ["b1"]
    conn.close()


@pytest.mark.parametrize(
    ("what", "attempt"),
    [
        ("READ_TOPIC", lambda c: receiver(c, "prices/secret", "topic", credit=1)),
        ("SELECT_TOPIC", lambda c: receiver(c, "news", "topic", credit=1)),
        ("READ_TOPIC", lambda c: receiver(c, "orders", "queue", credit=1)),  # queues are guarded by path too
        ("UPDATE_TOPIC", lambda c: sender(c, "prices/eq", "topic")),
        ("MODIFY_TOPIC", lambda c: sender(c, "prices/fx/NEW", "topic")),  # publishing would create it
        ("SELECT_TOPIC", lambda c: receiver(c, "?other/.*", "topic", credit=1)),
        ("CONTROL_SERVER", lambda c: sender(c, "$management")),
    ],
)
def test_denials_name_the_permission(secured, what, attempt):
    conn = as_user(secured, "bob")
    text = refused(lambda: attempt(conn))
    assert UNAUTHORIZED in text and what in text and "'bob'" in text
    conn.close()


def test_a_selector_subscription_and_a_fetch_skip_topics_the_principal_may_not_read(secured):
    conn = as_user(secured, "bob")
    sub = receiver(conn, "?prices/.*", "topic", credit=10)
    admin = as_user(secured, "alice")
    send_all(sender(admin, "prices/secret", "topic"), ["hidden"])
    send_all(sender(admin, "prices/eq", "topic"), ["visible"])
    assert receive_bodies(sub, 1) == ["visible"]
    assert nothing_arrives(sub)
    assert "hidden" not in fetched(conn, "?prices/.*") and "visible" in fetched(conn, "?prices/.*")
    conn.close()
    admin.close()


def test_anonymous_relay_checks_each_message(secured):
    with JmsWire.connect(secured.address, user="bob", password=PASSWORD) as jms:
        relay = jms.session().producer(None)
        assert relay.send("ok", to="prices/fx", to_kind=TOPIC, sync=False).wait().accepted
        outcome = relay.send("no", to="prices/eq", to_kind=TOPIC, sync=False).wait()
        assert outcome.state == "rejected" and outcome.condition == UNAUTHORIZED
        assert "UPDATE_TOPIC" in (outcome.description or "")


def test_control_links_need_modify_and_register_handler(secured):
    with ControlClient(secured.url, user="bob", password=PASSWORD) as control:
        removal = control.register_removal("prices/fx")
        assert removal.refusal is not None and removal.refusal.condition == UNAUTHORIZED
        assert "MODIFY_TOPIC" in removal.refusal.description
        handler = control.register_handler("prices")
        assert handler.refusal is not None and handler.refusal.condition == UNAUTHORIZED
        assert "REGISTER_HANDLER" in handler.refusal.description


def test_a_principal_without_grants_may_do_nothing(secured):
    conn = as_user(secured, "carol")
    assert UNAUTHORIZED in refused(lambda: receiver(conn, "prices/fx", "topic", credit=1))
    assert UNAUTHORIZED in refused(lambda: sender(conn, "prices/fx", "topic"))
    conn.close()


def test_grant_changes_apply_to_new_attaches_without_a_restart(secured):
    conn = as_user(secured, "carol")
    assert UNAUTHORIZED in refused(lambda: receiver(conn, "prices/eq", "topic", credit=1))
    change(secured, lambda s: [grant(s, PRINCIPAL, "carol", p, "prices/eq") for p in ("SELECT_TOPIC", "READ_TOPIC")])
    deadline = time.monotonic() + 10
    while True:
        try:
            receiver(conn, "prices/eq", "topic", credit=1)
            break
        except Exception:
            conn.close()
            conn = as_user(secured, "carol")
            assert time.monotonic() < deadline, "the new grant never took effect"
            time.sleep(0.2)
    change(secured, lambda s: revoke(s, PRINCIPAL, "carol", "READ_TOPIC", "prices/eq"))
    deadline = time.monotonic() + 10
    while True:
        try:
            receiver(conn, "prices/eq", "topic", credit=1)
        except LinkDetached:
            break
        except Exception:
            conn.close()
            conn = as_user(secured, "carol")
        assert time.monotonic() < deadline, "the revoked grant still applied"
        time.sleep(0.2)
    conn.close()


def test_a_role_grant_applies_to_its_members(secured):
    change(secured, lambda s: add_role(s, "auditors"))
    change(secured, lambda s: grant(s, ROLE, "auditors", "REGISTER_HANDLER"))
    change(secured, lambda s: assign_role(s, "auditors", "carol"))
    deadline = time.monotonic() + 10
    while True:
        with ControlClient(secured.url, user="carol", password=PASSWORD) as control:
            if control.register_handler("audit").refusal is None:
                break
        assert time.monotonic() < deadline, "the role's grant never took effect"
        time.sleep(0.2)


def test_unsubscribing_needs_what_subscribing_needs(secured):
    """Closing an unsubscribe lookup deletes the subscription, whoever made it: the lookup is refused to a
    principal that may not subscribe there (SELECT_TOPIC and READ_TOPIC; SELECT_TOPIC on a selector's prefix)."""
    with JmsWire.connect(secured.address, client_id="shared-app", user="alice", password=PASSWORD) as jms:
        session = jms.session()
        for name, topic in (("fx", "prices/fx"), ("secret", "prices/secret"), ("all", "?prices/.*")):
            session.consumer(topic, DURABLE, name=name, prefetch=0).detach()
    refusals = (("carol", "fx", "SELECT_TOPIC"), ("bob", "secret", "READ_TOPIC"), ("carol", "all", "SELECT_TOPIC"))
    for user, name, denied in refusals:
        with JmsWire.connect(secured.address, client_id="shared-app", user=user, password=PASSWORD) as jms:
            with pytest.raises(JmsError) as refusal:
                jms.unsubscribe(name)
            assert refusal.value.condition == UNAUTHORIZED and denied in (refusal.value.description or "")
    with JmsWire.connect(secured.address, client_id="shared-app", user="bob", password=PASSWORD) as jms:
        jms.unsubscribe("fx")
        jms.unsubscribe("all")
        with pytest.raises(JmsError) as gone:
            jms.unsubscribe("fx")
        assert gone.value.condition == "amqp:not-found"
    with JmsWire.connect(secured.address, client_id="shared-app", user="alice", password=PASSWORD) as jms:
        jms.unsubscribe("secret")  # still there: the refused lookups removed nothing


def test_resubscribing_elsewhere_needs_the_rights_on_the_subscription_it_replaces(secured):
    """Attaching under an idle durable subscription's name with another topic replaces (deletes) it: that needs
    what unsubscribing it needs, on its topic, besides the rights on the new one."""
    with JmsWire.connect(secured.address, client_id="replaced-app", user="alice", password=PASSWORD) as jms:
        jms.session().consumer("prices/secret", DURABLE, name="s", prefetch=0).detach()
    with JmsWire.connect(secured.address, client_id="replaced-app", user="bob", password=PASSWORD) as jms:
        attempt = jms.session().consumer("prices/fx", DURABLE, name="s", prefetch=0, check=False)
        assert attempt.refusal is not None and attempt.refusal.condition == UNAUTHORIZED
        assert "READ_TOPIC" in (attempt.refusal.description or "") and "prices/secret" in attempt.refusal.description
    with ManagementClient("127.0.0.1", secured.port, user="alice", password=PASSWORD) as management:
        assert management.read_subscription("s", client_id="replaced-app")["topic"] == "prices/secret"
    with JmsWire.connect(secured.address, client_id="replaced-app", user="alice", password=PASSWORD) as jms:
        jms.session().consumer("prices/fx", DURABLE, name="s", prefetch=0).detach()  # alice may: replaced
    with ManagementClient("127.0.0.1", secured.port, user="alice", password=PASSWORD) as management:
        assert management.read_subscription("s", client_id="replaced-app")["topic"] == "prices/fx"
