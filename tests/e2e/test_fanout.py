"""Fan-out replication between real server processes on loopback (docs/fanout.md).

A secondary started with ``--fanout URL=SELECTOR`` (or a ``[[fanout]]`` table) replicates the topics the
selector matches at the primary: a snapshot with current values, then adds, updates and removes. Replicas are
seen by local subscribers, fetches and selector subscriptions and refuse local changes (``amqp:not-allowed``);
removals at the primary (remove-with-session included) reach the secondary; a lost link keeps its replicas for
its reconnection timeout; a restarted primary's snapshot reconciles; ``subgate fanout status`` reports it all.
"""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from proton import Message
from proton.utils import LinkDetached, SendException
from sqlalchemy import text

from subgate.cli.management import ManagementClient, ManagementError
from subgate.mapping.permissions import PRINCIPAL
from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.passwords import hash_password
from subgate.storage.permissions import assign_role, grant
from subgate.storage.principals import add_principal
from tests.e2e.test_topic_selectors import fetched
from tests.support.amqp import connect, receive_bodies, receiver, send_all, sender
from tests.support.control import ControlClient, handler_counts
from tests.support.fanout import create, fanout_flags, paths, status, wait_live
from tests.support.jms import DURABLE, JmsWire
from tests.support.polling import eventually
from tests.support.pytest_postgres import unique_database_name
from tests.support.rhea import messages_of, run_rhea
from tests.support.server import stop_servers_using, subgate_command


def publish(server, path: str, *bodies: str) -> None:
    conn = connect(server.url)
    send_all(sender(conn, path, "topic"), list(bodies))
    conn.close()


def start_pair(make_server, primary_store: str | None = None, secondary_store: str | None = None):
    primary = make_server(primary_store, "--name", "primary-1")
    create(primary, "A", "A/B", "A/C", "other/x")
    publish(primary, "A/B", "b0")
    secondary = make_server(secondary_store, *fanout_flags(f"{primary.url}=A//", name="secondary-1"))
    wait_live(secondary, 3)
    return primary, secondary


@pytest.fixture
def pair(make_server):
    return start_pair(make_server)


@pytest.fixture(params=["sqlite", "postgres"])
def stored_pair(request, make_server):
    """A primary and its secondary, each on a store of its own: SQLite files, or two PostgreSQL databases."""
    if request.param == "sqlite":
        yield start_pair(make_server)
        return
    cluster = request.getfixturevalue("postgres_cluster")
    names = [unique_database_name(f"fanout_{role}") for role in ("primary", "secondary")]
    urls = [cluster.create_database(name) for name in names]
    try:
        yield start_pair(make_server, *urls)
    finally:
        for url, name in zip(urls, names, strict=True):
            stop_servers_using(url)  # before the drop
            cluster.drop_database(name)


def test_snapshot_then_updates_reach_subscribers_fetches_and_selectors_at_the_secondary(stored_pair):
    primary, secondary = stored_pair
    assert paths(secondary) == ["A", "A/B", "A/C"]  # other/x is outside the selector
    conn = connect(secondary.url)
    assert fetched(conn, "A/B") == ["b0"]  # the current value came with the snapshot
    plain = receiver(conn, "A/C", "topic")
    selector = receiver(conn, "?A/.*", "topic")
    publish(primary, "A/C", "c1", "c2")
    assert receive_bodies(plain, 2) == ["c1", "c2"]
    assert receive_bodies(selector, 2) == ["c1", "c2"]
    create(primary, "A/E")  # added at the primary: replicated, and the selector subscription takes it
    eventually(lambda: "A/E" in paths(secondary), what="A/E replicated")
    publish(primary, "A/E", "e1")
    assert receive_bodies(selector, 1) == ["e1"]
    conn.close()
    (link,) = status(secondary)
    assert link["messages_received"] >= 7 and link["reconnects"] == 0 and link["lag_max_ms"] is not None


def test_a_replicated_topic_refuses_local_publishing_creation_and_removal(pair):
    _primary, secondary = pair
    conn = connect(secondary.url)
    with pytest.raises(LinkDetached, match="amqp:not-allowed"):
        sender(conn, "A/B", "topic")
    relay = sender(conn, None)
    with pytest.raises(SendException):  # the anonymous relay too: rejected with amqp:not-allowed
        relay.send(Message(address="A/B", body="local"))
    conn.close()
    with ManagementClient("127.0.0.1", secondary.port) as client:
        with pytest.raises(ManagementError, match="not-allowed"):
            client.remove_topics("A/B")
        with pytest.raises(ManagementError, match="not-allowed"):
            client.create_topic("A/C")
    assert paths(secondary) == ["A", "A/B", "A/C"]


def test_removals_at_the_primary_reach_every_secondary_remove_with_session_included(pair, make_server):
    primary, secondary = pair
    other = make_server(None, *fanout_flags(f"{primary.url}=A/C//", name="secondary-2"))
    wait_live(other, 1)
    with ManagementClient("127.0.0.1", primary.port) as client:
        client.remove_topics("A/C")
    eventually(lambda: paths(secondary) == ["A", "A/B"], what="A/C removed at the secondary")
    eventually(lambda: paths(other) == [], what="A/C removed at the second secondary")
    create(primary, "A/C")
    wait_live(other, 1)
    control = ControlClient(primary.url, "session-owner")
    assert control.register_removal("A").refusal is None
    control.close()  # the session closes: the primary removes the branch A, and so does every secondary
    eventually(lambda: paths(secondary) == [], what="the branch removed at the secondary")
    eventually(lambda: paths(other) == [], what="the branch removed at the second secondary")
    assert paths(primary) == ["other/x"]


def test_a_lost_link_keeps_its_replicas_until_its_reconnect_timeout(make_server, tmp_path):
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B")
    config = tmp_path / "secondary.toml"
    config.write_text(
        '[subgate]\nname = "secondary-1"\n\n[[fanout]]\n'
        f'url = "{primary.url}"\nselector = "A//"\nretry_interval = 0.2\nreconnect_timeout = 5\nmax_in_flight = 10\n'
    )
    secondary = make_server(None, "--config", str(config))
    wait_live(secondary, 2)
    primary.kill()
    eventually(lambda: status(secondary)[0]["state"] == "lost", what="the link lost")
    assert paths(secondary) == ["A", "A/B"]  # kept while the primary may come back
    eventually(lambda: paths(secondary) == [], timeout=20, what="replicas removed after the timeout")
    primary.start()  # the same store and port: the snapshot brings them back
    wait_live(secondary, 2)
    assert paths(secondary) == ["A", "A/B"] and status(secondary)[0]["reconnects"] == 1


def test_a_restarted_primary_snapshot_reconciles_adds_updates_and_removes(stored_pair):
    primary, secondary = stored_pair
    conn = connect(secondary.url)
    watcher = receiver(conn, "A/B", "topic")
    primary.stop()
    eventually(lambda: status(secondary)[0]["state"] == "lost", what="the link lost")
    offline = ["--server", primary.address, "--store", primary.store_url]
    for args in (["topics", "remove", "A/C"], ["topics", "add", "A/F"]):  # changed while the primary is down
        subprocess.run([*subgate_command(), *args, *offline], check=True, capture_output=True, timeout=60)
    primary.start()
    wait_live(secondary, 3)
    assert paths(secondary) == ["A", "A/B", "A/F"]
    publish(primary, "A/B", "after the restart")
    assert receive_bodies(watcher, 1) == ["after the restart"]  # the local subscriber kept its replica
    conn.close()


def test_fanout_status_cli_table_and_json(pair):
    _primary, secondary = pair
    command = [*subgate_command(), "fanout", "status", "--server", secondary.address]
    table = subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout
    assert "live" in table and "A//" in table
    (link,) = json.loads(subprocess.run([*command, "--json"], check=True, capture_output=True, text=True).stdout)
    assert link["state"] == "live" and link["replicated_topics"] == 3 and link["selector"] == "A//"
    assert set(link) >= {"primary", "messages_received", "lag_p50_ms", "lag_max_ms", "reconnects", "last_error"}


def test_rhea_as_the_control_client_at_the_primary(make_server):
    """Seed 000's flow with rhea (Node.js) as the primary's missing-topic handler: it proceeds."""
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B", "A/C")
    secondary = make_server(None, *fanout_flags(f"{primary.url}=A//", name="secondary-1"))
    wait_live(secondary, 3)
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(
            lines=run_rhea(
                "receive",
                "--url",
                primary.url,
                "--address",
                "$subgate/missing-topic/A",
                "--outcome",
                "accept",
                timeout=40,
                check=False,
            )  # fmt: skip
        ),
        daemon=True,
    )
    thread.start()
    eventually(lambda: handler_counts(primary).get("A") == 1, what="rhea's handler registered")
    with ControlClient(secondary.url, "end-user") as subscriber:
        assert subscriber.await_attach(subscriber.attach("A/D"), timeout=20) is None
    thread.join(30)
    (notification,) = messages_of(result["lines"])
    assert notification["application_properties"] == {
        "selector": ">A/D", "session": "end-user", "request": "subscribe", "server": "secondary-1", "path": "A"
    }  # fmt: skip


def test_a_durable_subscription_at_the_secondary_journals_what_replication_brings(stored_pair):
    primary, secondary = stored_pair
    with JmsWire.connect(secondary.address, client_id="app") as jms:
        session = jms.session()
        sub = session.consumer("A/C", DURABLE, name="s")
        sub.detach()  # away: what arrives now waits in the subscription, journaled at the secondary
        conn = connect(primary.url)
        send_all(sender(conn, "A/C", "topic"), ["j1", "j2"], durable=True)
        conn.close()
        eventually(lambda: _journaled(secondary, "A/C") == 2, what="two journal rows at the secondary")
        again = session.consumer("A/C", DURABLE, name="s")
        assert [again.receive(timeout=15).accept().body for _ in range(2)] == ["j1", "j2"]
        again.detach()


def _journaled(server, address: str) -> int:
    engine = make_engine(server.store_url)
    try:
        with engine.connect() as db:
            query = text("select count(*) from messages where address = :address")
            return int(db.execute(query, {"address": address}).scalar_one())
    finally:
        engine.dispose()


def test_the_primary_checks_select_and_read_of_the_fan_out_principal(make_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'secured.db'}"
    upgrade(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        add_principal(session, "admin", hash_password("pw"))
        assign_role(session, "admin", "admin")
        add_principal(session, "fan", hash_password("pw"))
        for permission in ("SELECT_TOPIC", "READ_TOPIC"):
            grant(session, PRINCIPAL, "fan", permission, "A")
        grant(session, PRINCIPAL, "fan", "READ_TOPIC", "A/secret", allow=False)
    engine.dispose()
    primary = make_server(url, "--name", "primary-1")
    create(primary, "A/open", "A/secret", "B/x", user="admin", password="pw")
    readable = f"amqp://fan:pw@127.0.0.1:{primary.port}=A//"
    unselectable = f"amqp://fan:pw@127.0.0.1:{primary.port}=B//"
    secondary = make_server(None, *fanout_flags(readable, unselectable, name="secondary-1"))
    eventually(lambda: status(secondary)[0]["state"] == "live", what="the A// link live")
    assert paths(secondary) == ["A/open"]  # A/secret is not readable by the fan-out principal
    refused = eventually(lambda: status(secondary)[1]["last_error"], what="the B// link's refusal")
    assert "amqp:unauthorized-access" in refused and status(secondary)[1]["state"] != "live"


def test_credit_comes_back_as_the_secondary_applies_so_a_small_window_carries_everything(make_server, tmp_path):
    primary = make_server(None, "--name", "primary-1")
    create(primary, "A/stream")
    config = tmp_path / "secondary.toml"
    config.write_text(f'[[subgate.fanout]]\nurl = "{primary.url}"\nselector = "A//"\nmax_in_flight = 5\n')
    secondary = make_server(None, "--config", str(config))
    wait_live(secondary, 1)
    conn = connect(secondary.url)
    watcher = receiver(conn, "A/stream", "topic", credit=400)
    bodies = [f"m{i}" for i in range(300)]
    publish(primary, "A/stream", *bodies)
    assert receive_bodies(watcher, 300, timeout=60) == bodies  # all of them, in order, 5 at a time
    conn.close()


def test_metrics_show_each_fan_out_link(make_server):
    """/metrics at the secondary: the link's state, replicated topics, messages received and lag."""
    from tests.e2e.test_metrics import http_base, scrape, value

    primary = make_server(None, "--name", "primary-1")
    create(primary, "A", "A/B")
    secondary = make_server(None, *fanout_flags(f"{primary.url}=A//", name="secondary-1"), "--http", "127.0.0.1:0")
    wait_live(secondary, 2)
    publish(primary, "A/B", "b1", "b2")
    base = http_base(secondary)
    link = {"primary": primary.url, "selector": "A//"}

    def received() -> dict | None:
        samples = scrape(base)
        return samples if value(samples, "subgate_fanout_messages_received_total", **link) >= 2 else None

    samples = eventually(received, timeout=15)
    assert value(samples, "subgate_fanout_link_state", state="live", **link) == 1.0
    assert value(samples, "subgate_fanout_link_state", state="lost", **link) == 0.0
    assert value(samples, "subgate_fanout_replicated_topics", **link) == 2.0
    assert (("subgate_fanout_lag_seconds", tuple(sorted({**link, "quantile": "0.5"}.items())))) in samples
