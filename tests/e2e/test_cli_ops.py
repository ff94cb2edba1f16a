"""``subgate queues list|show|purge``, ``subgate connections list|close`` and ``subgate status``, offline on the
store and live against a running server.

Offline: nothing listens at ``--server``, so the commands say so on stderr and work on the store, seeded with rows
directly (a durable queue ``jobs`` with its cursor, acks and a non-persistent row that a restart would not keep),
on SQLite and PostgreSQL (``store_url``). Live: a real server process with python-qpid-proton clients (a producer,
a consumer holding a delivery, a paging queue), reached through ``$management`` types ``queue``, ``connection``
and ``server`` (``gateway.server_admin``); a purge is checked again after a restart, from the store.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from click.testing import CliRunner, Result
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed
from sqlalchemy import insert, make_url, select

from subgate.cli.main import main
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import Ack, AckCursor, JournalMessage, Node
from tests.e2e.test_cli_journal import flush, live, live_json, ok_json
from tests.e2e.test_cli_subscriptions import UNREACHABLE, free_port
from tests.support.amqp import connect, receiver, sender
from tests.support.polling import eventually
from tests.support.store_rows import CREATED, cursor_row, message_row

CREATED_ISO = "2026-01-02T03:04:05.123Z"


def invoke(*args: str, input: str | None = None) -> Result:  # noqa: A002 - CliRunner's name
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


# -- offline ----------------------------------------------------------------------------------------------------
def seed_queues(url: str) -> None:
    """Queue ``jobs`` (cursor 1 at low-water 2, ack 4): journal rows 1..6 and a non-persistent 7, so its backlog is
    3, 5, 6; queue ``empty`` (cursor 2, no rows); topic ``prices`` with a row (not a queue)."""
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(Node),
                [
                    {"id": 1, "name": "jobs", "kind": "queue", "durable": True, "created_at": CREATED},
                    {"id": 2, "name": "empty", "kind": "queue", "durable": True, "created_at": CREATED},
                    {"id": 3, "name": "prices", "kind": "topic", "durable": True, "created_at": CREATED},
                ],
            )
            queue_cursor = {"owner_kind": "queue"}
            conn.execute(
                insert(AckCursor),
                [
                    {**cursor_row(1, "jobs", "jobs", low_water=2), **queue_cursor},
                    {**cursor_row(2, "empty", "empty"), **queue_cursor},
                ],
            )
            jobs = [{**message_row(i, "jobs"), "node_kind": "queue"} for i in range(1, 8)]
            jobs[-1]["durable"] = False
            conn.execute(insert(JournalMessage), [*jobs, message_row(8, "prices")])
            conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 4}])
    finally:
        engine.dispose()


@pytest.fixture
def offline(store_url: str) -> list[str]:
    seed_queues(store_url)
    return ["--store", store_url, "--server", f"127.0.0.1:{free_port()}"]


OFFLINE_LIVE_FIELDS = dict.fromkeys(
    ("available", "paged", "consumers", "messages_in", "messages_out", "expired", "rejected", "blocked")
)


def test_offline_queues_list_and_show(offline):
    listed = invoke("queues", "list", "--json", *offline)
    assert listed.stderr.startswith(UNREACHABLE)
    assert ok_json(listed) == [
        {"name": "empty", "durable": True, "depth": 0, **OFFLINE_LIVE_FIELDS, "oldest": None},
        {"name": "jobs", "durable": True, "depth": 3, **OFFLINE_LIVE_FIELDS, "oldest": CREATED_ISO},
    ]
    table = invoke("queues", "list", *offline)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["QUEUE", "DURABLE", "DEPTH", "AVAILABLE", "PAGED", "CONSUMERS", "IN", "OUT", "OLDEST"]
    assert lines[3].split() == ["jobs", "yes", "3", "-", "-", "-", "-", "-", "2026-01-02", "03:04:05"]
    shown = invoke("queues", "show", "jobs", *offline)
    assert shown.exit_code == 0, shown.output
    assert "depth:" in shown.stdout and shown.stdout.splitlines()[2].split() == ["depth:", "3"]
    for name in ("prices", "nope"):
        missing = invoke("queues", "show", name, *offline)
        assert (missing.exit_code, missing.stdout) == (1, "")
        assert f"no durable queue {name!r} in the store" in missing.stderr
        assert len(missing.stderr.strip().splitlines()) == 2  # the fallback notice and the one-line error


def test_offline_purge_moves_the_low_water_mark_in_steps(offline, store_url):
    purged = invoke("queues", "purge", "jobs", "--yes", "--step", "2", *offline)
    assert purged.exit_code == 0, purged.output
    assert purged.stdout == "purged 3 message(s) from queue 'jobs'; 0 left\n"
    assert "purging jobs" in purged.stderr and "3/3" in purged.stderr  # the progress bar, on stderr
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(select(AckCursor.low_water).where(AckCursor.id == 1)) == 6
            assert list(conn.scalars(select(Ack.message_id).where(Ack.cursor_id == 1))) == []
    finally:
        engine.dispose()
    assert ok_json(invoke("queues", "show", "jobs", "--json", *offline))["depth"] == 0
    again = invoke("queues", "purge", "jobs", "--yes", *offline)
    assert again.stdout == "purged 0 message(s) from queue 'jobs'; 0 left\n"


def test_offline_purge_asks_first(offline):
    refused = invoke("queues", "purge", "jobs", *offline, input="n\n")
    assert refused.exit_code == 1 and "Aborted" in refused.stderr
    assert ok_json(invoke("queues", "show", "jobs", "--json", *offline))["depth"] == 3
    confirmed = invoke("queues", "purge", "jobs", *offline, input="y\n")
    assert confirmed.exit_code == 0 and "purged 3" in confirmed.stdout


def test_offline_connections_and_status(offline, store_url):
    for args in (["connections", "list"], ["connections", "close", "1"]):
        result = invoke(*args, *offline)
        assert result.exit_code == 1, result.output
        notice, error = result.stderr.strip().splitlines()
        assert notice.startswith("server not reachable at 127.0.0.1:") and "using the store" not in notice
        assert error.startswith(f"Error: no server owns the store {make_url(store_url).render_as_string()} "), error
        assert "(connections exist only on a running server;" in error
    status = invoke("status", "--json", *offline)
    assert status.exit_code == 3, status.output
    body = json_of(status)
    assert (body["running"], body["queues"], body["subscriptions"], body["health"]) == (False, 2, 0, "no server runs")
    assert body["journal"]["rows"] == 8 and body["revision"]
    text = invoke("status", *offline)
    assert text.exit_code == 3
    assert text.stdout.splitlines()[0] == "subgate: no server runs for this store"
    assert "2 durable queues" in text.stdout and "8 rows" in text.stdout


def json_of(result: Result) -> Any:
    return json.loads(result.stdout)


# -- live -------------------------------------------------------------------------------------------------------
def publish(conn: BlockingConnection, address: str, count: int) -> None:
    link = sender(conn, address, "queue")
    for number in range(count):
        link.send(Message(body=f"{address}-{number}", durable=True))
    link.close()


def test_live_queues_list_show_and_purge_around_a_held_delivery(make_server):
    server = make_server()
    app = connect(server.url, container_id="app1")
    publish(app, "jobs", 7)
    publish(app, "other", 1)
    consumer = receiver(app, "jobs", "queue", credit=1)
    held = consumer.receive(timeout=10)  # delivered, not settled: a purge leaves it
    assert held.body == "jobs-0"

    listed = live_json(server, "queues", "list")
    jobs = next(item for item in listed if item["name"] == "jobs")
    assert [item["name"] for item in listed] == ["jobs", "other"]  # not the CLI's own reply queue
    assert (jobs["depth"], jobs["available"], jobs["consumers"], jobs["messages_in"], jobs["messages_out"]) == (
        7,
        6,
        1,
        7,
        1,
    )
    assert live_json(server, "queues", "show", "jobs") == jobs

    purged = live(server, "queues", "purge", "jobs", "--yes", "--step", "4")
    assert purged.exit_code == 0, purged.output
    assert purged.stdout == "purged 6 message(s) from queue 'jobs'; 1 left\n"
    assert "purging jobs" in purged.stderr and "6/6" in purged.stderr
    assert "management PURGE queue: 200 purged 4 message(s)" in server.log()  # in steps
    consumer.accept()
    flush(app)
    eventually(lambda: live_json(server, "queues", "show", "jobs")["depth"] == 0, what="the held message accepted")

    missing = live(server, "queues", "purge", "nope", "--yes")
    assert (missing.exit_code, missing.stderr.strip()) == (1, "Error: no queue 'nope'")
    topic = live(server, "queues", "show", "prices/fx")
    assert topic.exit_code == 1
    app.close()


def test_live_purge_of_a_paging_queue_survives_a_restart(make_server, store_url):
    server = make_server(store_url, "--page-messages", "10")
    app = connect(server.url)
    publish(app, "deep", 50)
    app.close()
    shown = live_json(server, "queues", "show", "deep")
    assert shown["depth"] == 50 and shown["paged"] > 0 and shown["available"] <= 10
    purged = live(server, "queues", "purge", "deep", "--yes", "--step", "3")
    assert purged.stdout == "purged 50 message(s) from queue 'deep'; 0 left\n", purged.output
    server.stop()
    server.start()
    assert live_json(server, "queues", "show", "deep")["depth"] == 0
    assert server.stop() == 0
    offline = invoke("queues", "show", "deep", "--json", "--server", server.address, "--store", store_url)
    assert ok_json(offline)["depth"] == 0


def test_live_connections_list_and_close(make_server):
    server = make_server()
    app = connect(server.url, container_id="app-to-close")
    receiver(app, "work", "queue")
    sender(app, "work", "queue")
    listed = live_json(server, "connections", "list")
    mine = [item for item in listed if item["container_id"] == "app-to-close"]
    assert len(mine) == 1 and len(listed) == 2  # this client and the CLI's own management connection
    entry = mine[0]
    assert (entry["principal"], entry["links"], entry["roles"]) == (None, 2, {"consumer": 1, "publisher": 1})
    assert entry["remote"].startswith("127.0.0.1:") and entry["opened"].endswith("Z")
    table = live(server, "connections", "list")
    assert table.exit_code == 0 and "app-to-close" in table.stdout and "(anonymous)" in table.stdout

    closed = live(server, "connections", "close", str(entry["id"]))
    assert (closed.exit_code, closed.stdout) == (0, f"closed connection #{entry['id']}\n")
    with pytest.raises(ConnectionClosed) as lost:
        app.wait(lambda: False, timeout=10)
    assert "amqp:connection:forced" in str(lost.value) and "closed by an operator" in str(lost.value)
    assert all(item["container_id"] != "app-to-close" for item in live_json(server, "connections", "list"))
    assert "connection closed: container-id 'app-to-close'" in server.log()

    again = live(server, "connections", "close", str(entry["id"]))
    assert (again.exit_code, again.stderr.strip()) == (1, f"Error: no open connection #{entry['id']}")
    assert live(server, "connections", "close", "0").exit_code == 2


def test_live_status_reports_rates_while_a_producer_sends(make_server, store_url):
    server = make_server(store_url, "--http", "127.0.0.1:0")
    app = connect(server.url)
    publish(app, "warm", 3)
    stop = threading.Event()

    def produce() -> None:
        link = sender(app, "load", "queue")
        for number in range(100_000):
            if stop.is_set():
                break
            link.send(Message(body=number, durable=True))

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        eventually(lambda: live_json(server, "queues", "show", "load")["depth"] > 0, what="the producer sending")
        status = live(server, "status", "--json", "--interval", "1")
    finally:
        stop.set()
        producer.join(30)
    assert status.exit_code == 0, status.output
    body = json_of(status)
    report = body["server"]
    assert (body["running"], body["health"], report["listen"], report["version"]) == (
        True,
        "ok",
        server.address,
        "0.1.0",
    )
    assert report["http"].startswith("127.0.0.1:") and report["store"] == make_url(store_url).render_as_string(
        hide_password=True
    )
    # the producer's connection and its two queues; not the status command's own connection and reply queue
    assert report["connections"] == 1 and report["queues"] == 2 and report["uptime"] > 0
    assert body["rates"]["messages_in"] > 0 and report["messages_in"] >= 3
    assert body["journal"]["rows"] >= 3 and report["started"].endswith("Z")
    text = live(server, "status")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0] == "subgate 0.1.0 'subgate': running, ok"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "uptime",
        "listen",
        "store",
        "connections",
        "nodes",
        "messages",
        "journal",
        "memory",
    ]
    app.close()
