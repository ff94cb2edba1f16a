"""``subgate bookmarks show`` and ``subgate journal stats``, offline on the store and live against a server.

Offline: nothing listens at ``--server``, so the commands say so on stderr and read the store, seeded directly
with rows (``test_cli_subscriptions.seed``), on SQLite and PostgreSQL (``store_url``).

Live: a real server process; python-qpid-proton clients make durable subscriptions the way Qpid JMS does, publish
persistent messages and accept some of them, and the commands reach the server through ``$management``, which
answers from its store through the journal writer. Acks reach the store as the server takes them, the low-water
mark about once a second, so the live checks poll with a bounded loop (``eventually``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import Result
from proton import Message
from proton.utils import BlockingConnection
from sqlalchemy import select

from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import JournalMessage
from tests.e2e.test_cli_subscriptions import UNREACHABLE, durable_subscriber, free_port, invoke, publish, seed
from tests.support.amqp import Capabilities, connect, sender
from tests.support.polling import eventually

CREATED_ISO = "2026-01-02T03:04:05.123Z"
END = {"ts": CREATED_ISO}


@pytest.fixture
def offline(store_url: str) -> list[str]:
    """The store of ``test_cli_subscriptions.seed``: sub1 of app1 (cursor 1 at low-water 1, ack 3; selector red),
    sub2 of app1 (no cursor), gsub (global, cursor 2, ack 3), vol (shared-volatile); journal 1..6 on prices
    (red 3 bytes at odd ids, blue 4 bytes at even ones), 7 on orders (1 byte)."""
    seed(store_url)
    return ["--store", store_url, "--server", f"127.0.0.1:{free_port()}"]


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fields(text: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in text.splitlines())}


# -- offline: bookmarks -----------------------------------------------------------------------------------------
def test_offline_bookmark_json_and_text(offline):
    shown = invoke("bookmarks", "show", "sub1", "--client-id", "app1", "--json", *offline)
    assert ok_json(shown) == {
        "name": "sub1",
        "client_id": "app1",
        "topic": "prices",
        "kind": "durable",
        "low_water": 1,
        "accepted_above": 1,
        "highest_accepted": 3,
        "backlog": 4,  # 2, 4, 5, 6: journal rows, before the selector (which leaves 5 only)
    }
    assert shown.stderr.startswith(UNREACHABLE)

    text = invoke("bookmarks", "show", "gsub", "--global", *offline)
    assert text.exit_code == 0, text.output
    assert fields(text.stdout) == {
        "name": "gsub",
        "client-id": "(global)",
        "topic": "prices",
        "kind": "shared-durable",
        "position": "0 + 1 accepted above it (the highest 3)",
        "low-water": "0",
        "accepted-above": "1",
        "backlog": "5",
    }


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope", "--client-id", "app1"], 1, "no subscription 'nope' of client-id 'app1'"),
        (["sub1", "--global"], 1, "no global subscription 'sub1'"),
        (["vol", "--global"], 1, "global subscription 'vol' is shared-volatile, not durable: it has no journal"),
        (["sub2", "--client-id", "app1"], 1, "subscription 'sub2' of client-id 'app1' has no journal cursor"),
        (["sub1"], 2, "give --client-id ID, or --global"),
        (["sub1", "--client-id", "app1", "--global"], 2, "not both"),
    ],
    ids=["unknown", "wrong-scope", "volatile", "no-cursor-row", "no-scope", "both-scopes"],
)
def test_offline_bookmark_errors(offline, args, code, message):
    result = invoke("bookmarks", "show", *args, *offline)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert result.stdout == ""


# -- offline: journal stats -------------------------------------------------------------------------------------
def test_offline_journal_stats_json_and_table(offline):
    stats = ok_json(invoke("journal", "stats", "--json", *offline))
    assert stats == {
        "rows": 7,
        "bytes": 22,
        "oldest": {"id": 1, **END},
        "newest": {"id": 7, **END},
        "branches": [
            {
                "branch": "orders",
                "kind": "topic",
                "rows": 1,
                "bytes": 1,
                "oldest": {"id": 7, **END},
                "newest": {"id": 7, **END},
            },
            {
                "branch": "prices",
                "kind": "topic",
                "rows": 6,
                "bytes": 21,
                "oldest": {"id": 1, **END},
                "newest": {"id": 6, **END},
            },
        ],
    }
    table = invoke("journal", "stats", *offline)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert fields("\n".join(lines[:4])) == {
        "rows": "7",
        "bytes": "22",
        "oldest": "#1 at 2026-01-02 03:04:05 UTC",
        "newest": "#7 at 2026-01-02 03:04:05 UTC",
    }
    assert lines[4] == ""
    assert lines[5].split() == ["BRANCH", "KIND", "ROWS", "BYTES", "OLDEST-ID", "OLDEST", "NEWEST-ID", "NEWEST"]
    assert set(lines[6].strip()) == {"─"}
    day, second = "2026-01-02", "03:04:05"
    assert [line.split() for line in lines[7:]] == [
        ["orders", "topic", "1", "1", "7", day, second, "7", day, second],
        ["prices", "topic", "6", "21", "1", day, second, "6", day, second],
    ]


def test_offline_empty_journal_and_out_of_date_store(store_url):
    flags = ["--store", store_url, "--server", f"127.0.0.1:{free_port()}"]
    for args in (["journal", "stats"], ["bookmarks", "show", "s", "--global"]):
        stale = invoke(*args, *flags)
        assert stale.exit_code == 1, stale.output
        # an empty store is the wrong place, not a store to upgrade (issue 33): a second store would be made
        assert "no server owns a store there" in stale.stderr and "db upgrade" not in stale.stderr
    upgrade(store_url)
    empty = invoke("journal", "stats", *flags)
    assert (empty.exit_code, empty.stdout) == (0, "the journal is empty\n")
    assert ok_json(invoke("journal", "stats", "--json", *flags)) == {
        "rows": 0,
        "bytes": 0,
        "oldest": None,
        "newest": None,
        "branches": [],
    }


# -- live: a running server -------------------------------------------------------------------------------------
def flush(conn: BlockingConnection) -> None:
    """A blocking connection only does I/O while it waits: wait until its frames (dispositions) have left."""
    conn.wait(lambda: conn.conn.transport is None or conn.conn.transport.pending() <= 0, timeout=10)


def live(server: Any, *args: str) -> Result:
    """A command against the running server (a --store that must not be used: nothing owns it)."""
    return invoke(*args, "--server", server.address, "--store", "sqlite:///must-not-be-used.db")


def live_json(server: Any, *args: str) -> Any:
    result = live(server, *args, "--json")
    assert UNREACHABLE not in result.stderr
    return ok_json(result)


def journal_ids(url: str, address: str) -> list[int]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = select(JournalMessage.id).where(JournalMessage.address == address).order_by(JournalMessage.id)
            return list(conn.scalars(query))
    finally:
        engine.dispose()


def test_live_bookmark_follows_the_consumers_accepts_then_matches_the_store(make_server, store_url):
    server = make_server(store_url)
    app1 = connect(server.url, container_id="app1")
    rcv = durable_subscriber(app1, "sub1")  # no credit: every message waits in its backlog
    other = connect(server.url)
    publish(other, "prices", *["red"] * 5)  # persistent, accepted once committed
    m1, m2, m3, m4, m5 = journal_ids(store_url, "prices")
    show = ("bookmarks", "show", "sub1", "--client-id", "app1")
    start = live_json(server, *show)
    assert (start["backlog"], start["accepted_above"], start["highest_accepted"]) == (5, 0, None)
    assert start["low_water"] < m1

    for _ in range(3):
        rcv.receive(timeout=10)  # one credit each: m1, m2, m3 delivered, none settled yet
    rcv.release(delivered=True)  # m1 back to the subscription (modified), not redelivered without credit
    rcv.accept()  # m2
    rcv.accept()  # m3
    flush(app1)

    def accepted_two() -> dict[str, Any] | None:
        shown = live_json(server, *show)
        return shown if (shown["accepted_above"], shown["backlog"]) == (2, 3) else None

    moved = eventually(accepted_two, what="m2 and m3 accepted above the low-water mark")
    # m1 is held, so the low-water mark cannot pass it: the position is the mark plus the accepted set.
    assert moved["low_water"] < m1 and moved["highest_accepted"] == m3
    text = live(server, *show)
    assert fields(text.stdout)["position"] == f"{moved['low_water']} + 2 accepted above it (the highest {m3})"

    rcv.receive(timeout=10)  # m1 again
    rcv.accept()
    flush(app1)
    settled = {**moved, "low_water": m3, "accepted_above": 0, "highest_accepted": None, "backlog": 2}
    eventually(
        lambda: live_json(server, *show) == settled,
        what="the low-water mark past m3 (the housekeeping pass, about once a second)",
    )
    assert (m4, m5) == tuple(journal_ids(store_url, "prices")[3:])

    app1.close()
    other.close()
    assert server.stop() == 0
    offline = invoke(*show, "--json", "--server", server.address, "--store", store_url)
    assert offline.stderr.startswith(f"{UNREACHABLE} {server.address}; using the store")
    assert ok_json(offline) == settled


def test_live_bookmark_errors(make_server):
    server = make_server()
    app1 = connect(server.url, container_id="app1")
    app1.create_receiver("prices", name="vsub|volatile1", options=[Capabilities("topic", "shared")])
    volatile = live(server, "bookmarks", "show", "vsub", "--client-id", "app1")
    assert volatile.exit_code == 1, volatile.output
    assert "subscription 'vsub' of client-id 'app1' is shared-volatile, not durable" in volatile.stderr
    for args, message in (
        (["nope", "--client-id", "app1"], "no subscription 'nope' of client-id 'app1'"),
        (["nope", "--global"], "no global subscription 'nope'"),
    ):
        missing = live(server, "bookmarks", "show", *args)
        assert missing.exit_code == 1, missing.output
        assert message in missing.stderr and UNREACHABLE not in missing.stderr
    app1.close()


def test_live_journal_stats_per_branch_then_the_same_offline(make_server, store_url):
    server = make_server(store_url)
    app1 = connect(server.url, container_id="app1")
    durable_subscriber(app1, "sub1", "prices")
    durable_subscriber(app1, "fx1", "prices/fx/EURUSD")
    publish(app1, "prices", "a", "b", "c")
    publish(app1, "prices/fx/EURUSD", "d", "e")
    jobs = sender(app1, "jobs", "queue")
    for number in range(4):
        jobs.send(Message(body=f"job-{number}", durable=True))
    publish(app1, "news", "journaled for replay, though nobody subscribes")

    stats = live_json(server, "journal", "stats")
    assert stats["rows"] == 10
    assert [(b["branch"], b["kind"], b["rows"]) for b in stats["branches"]] == [
        ("jobs", "queue", 4),
        ("news", "topic", 1),
        ("prices", "topic", 5),
    ]
    assert stats["bytes"] == sum(b["bytes"] for b in stats["branches"]) and stats["bytes"] > 10 * 10
    jobs_ids, prices_ids = journal_ids(store_url, "jobs"), journal_ids(store_url, "prices")
    fx_ids, news_ids = journal_ids(store_url, "prices/fx/EURUSD"), journal_ids(store_url, "news")
    assert [stats["oldest"]["id"], stats["newest"]["id"]] == [prices_ids[0], news_ids[-1]]
    branch = {b["branch"]: b for b in stats["branches"]}
    assert [branch["jobs"]["oldest"]["id"], branch["jobs"]["newest"]["id"]] == [jobs_ids[0], jobs_ids[-1]]
    assert [branch["prices"]["oldest"]["id"], branch["prices"]["newest"]["id"]] == [prices_ids[0], fx_ids[-1]]
    stamp = datetime.fromisoformat(stats["newest"]["ts"])
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=5)

    table = live(server, "journal", "stats")
    assert table.exit_code == 0, table.output
    assert [line.split()[:4] for line in table.stdout.splitlines()[7:]] == [
        ["jobs", "queue", "4", str(branch["jobs"]["bytes"])],
        ["news", "topic", "1", str(branch["news"]["bytes"])],
        ["prices", "topic", "5", str(branch["prices"]["bytes"])],
    ]
    app1.close()
    assert server.stop() == 0
    offline = invoke("journal", "stats", "--json", "--server", server.address, "--store", store_url)
    assert UNREACHABLE in offline.stderr
    assert ok_json(offline) == stats


def test_live_through_the_store_owner_without_server(make_server, sqlite_url):
    """No --server: the store's lease names the running server, and the commands ask it (its log shows the
    management reads), as 'subgate subscriptions' do."""
    server = make_server(sqlite_url)
    app1 = connect(server.url, container_id="app1")
    durable_subscriber(app1, "sub1")
    publish(app1, "prices", "red")
    bookmark = ok_json(invoke("bookmarks", "show", "sub1", "--client-id", "app1", "--json", "--store", sqlite_url))
    assert (bookmark["backlog"], bookmark["accepted_above"]) == (1, 0)
    assert ok_json(invoke("journal", "stats", "--json", "--store", sqlite_url))["rows"] == 1
    log = server.log()
    assert "management READ bookmark: 200 OK" in log and "management READ journal: 200 OK" in log
    app1.close()
