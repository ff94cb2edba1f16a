"""``subgate subscriptions list|show`` and ``subgate unsubscribe``, offline and against a running server.

Offline: nothing listens at ``--server``, so the commands say so on stderr and work on the store, whose rows
(subscriptions, a cursor with acks and delivery failures, journal messages) the tests insert directly. They run
on SQLite and PostgreSQL (``store_url``), mostly in-process through click's ``CliRunner``; one runs the
installed console script. A fake ``engine.selection`` stands in for the selector engine where the backlog
of a subscription with a selector is counted.

Online: a real server (``make_server``) holds subscriptions that python-proton clients create the way Qpid JMS
does (mapping doc §2.2: link name = subscription name, container-id = ClientID, source durable=2, expiry
never, distribution-mode copy, capability topic; ``name|global`` plus ``shared``/``global`` for a global
one), and the commands reach it through its ``$management`` node (``cli.management``).
"""

from __future__ import annotations

import json
import socket
import sys
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result
from proton import Data, Described, Message, symbol, ulong
from proton.reactor import Copy, DurableSubscription, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver
from sqlalchemy import func, insert, select

from subgate.cli.main import main
from subgate.storage.db import make_engine, upgrade
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Subscription
from tests.support.amqp import Capabilities, connect, sender
from tests.support.cli import run_subgate
from tests.support.polling import eventually
from tests.support.store_rows import cursor_row, message_row, subscription_row

CREATED_ISO = "2026-01-02T03:04:05.123Z"
UNREACHABLE = "server not reachable at"
SELECTOR_CODE = 0x0000468C00000004


def free_port() -> int:
    """A loopback port with nothing listening (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


# -- offline: the store ------------------------------------------------------------------------------------------
def seed(url: str) -> None:
    """sub1 (app1, durable, selector, cursor 1 at low-water 1, ack 3, failure on 4), sub2 (app1, orders),
    sub1 (app2, orders, 2 consumers left by a crashed server), gsub (global shared, cursor 2), vol (volatile);
    journal: 1..6 on prices (odd ids red), 7 on orders."""
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(AckCursor),
                [cursor_row(1, "app1.sub1", low_water=1), cursor_row(2, "gsub")],
            )
            conn.execute(
                insert(JournalMessage),
                [message_row(i, "prices", b"red" if i % 2 else b"blue") for i in range(1, 7)]
                + [message_row(7, "orders")],
            )
            conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 3}, {"cursor_id": 2, "message_id": 3}])
            conn.execute(insert(DeliveryFailure), [{"cursor_id": 1, "message_id": 4, "failures": 2}])
            conn.execute(
                insert(Subscription),
                [
                    subscription_row(1, "sub1", "app1", selector="colour = 'red'", no_local=True, cursor_id=1),
                    subscription_row(2, "sub2", "app1", topic="orders"),
                    subscription_row(3, "sub1", "app2", topic="orders", consumers=2),
                    subscription_row(4, "gsub", None, cursor_id=2),
                    subscription_row(5, "vol", None, kind="shared-volatile", durable=False),
                ],
            )
    finally:
        engine.dispose()


def rows(url: str, model: type, *where: Any) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.scalar(select(func.count()).select_from(model).where(*where)) or 0
    finally:
        engine.dispose()


@pytest.fixture
def red_selector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in selector engine: ``colour = 'red'`` accepts payloads containing b"red"."""

    def compile_selector(text: str) -> Callable[[bytes], bool] | None:
        assert text == "colour = 'red'"
        return lambda payload: b"red" in payload

    monkeypatch.setitem(
        sys.modules, "subgate.engine.selection", types.SimpleNamespace(compile_selector=compile_selector)
    )


@pytest.fixture
def offline(store_url: str) -> list[str]:
    """A seeded store and the flags that point the commands at it, with a --server where nothing listens."""
    seed(store_url)
    return ["--store", store_url, "--server", f"127.0.0.1:{free_port()}"]


EXPECTED_JSON = [
    {
        "id": 4,
        "kind": "shared-durable",
        "durable": True,
        "client_id": None,
        "name": "gsub",
        "topic": "prices",
        "selector": None,
        "no_local": False,
        "consumers": 0,
        "backlog": 5,  # 1, 2, 4, 5, 6 (3 is acked)
        "created": CREATED_ISO,
    },
    {
        "id": 5,
        "kind": "shared-volatile",
        "durable": False,
        "client_id": None,
        "name": "vol",
        "topic": "prices",
        "selector": None,
        "no_local": False,
        "consumers": 0,
        "backlog": 0,  # no cursor
        "created": CREATED_ISO,
    },
    {
        "id": 1,
        "kind": "durable",
        "durable": True,
        "client_id": "app1",
        "name": "sub1",
        "topic": "prices",
        "selector": "colour = 'red'",
        "no_local": True,
        "consumers": 0,
        "backlog": 1,  # above low-water 1, not acked, red: 5 only
        "created": CREATED_ISO,
    },
    {
        "id": 2,
        "kind": "durable",
        "durable": True,
        "client_id": "app1",
        "name": "sub2",
        "topic": "orders",
        "selector": None,
        "no_local": False,
        "consumers": 0,
        "backlog": 0,
        "created": CREATED_ISO,
    },
    {
        "id": 3,
        "kind": "durable",
        "durable": True,
        "client_id": "app2",
        "name": "sub1",
        "topic": "orders",
        "selector": None,
        "no_local": False,
        "consumers": 2,
        "backlog": 0,
        "created": CREATED_ISO,
    },
]


def test_offline_list_json_reads_the_store_and_says_so(offline, red_selector, store_url):
    result = invoke("subscriptions", "list", "--json", *offline)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == EXPECTED_JSON
    server = offline[offline.index("--server") + 1]
    assert result.stderr.startswith(f"{UNREACHABLE} {server}; using the store ")
    assert len(result.stderr.splitlines()) == 1


def test_offline_list_table(offline, red_selector):
    result = invoke("subscriptions", "list", *offline)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[0].split() == [
        "KIND",
        "CLIENT-ID",
        "NAME",
        "TOPIC",
        "SELECTOR",
        "NO-LOCAL",
        "CONSUMERS",
        "BACKLOG",
        "CREATED",
    ]
    assert set(lines[1].strip()) == {"─"}
    created = "2026-01-02 03:04:05"
    assert [line.split() for line in lines[2:]] == [
        ["shared-durable", "(global)", "gsub", "prices", "-", "no", "0", "5", *created.split()],
        ["shared-volatile", "(global)", "vol", "prices", "-", "no", "0", "0", *created.split()],
        ["durable", "app1", "sub1", "prices", "colour", "=", "'red'", "yes", "0", "1", *created.split()],
        ["durable", "app1", "sub2", "orders", "-", "no", "0", "0", *created.split()],
        ["durable", "app2", "sub1", "orders", "-", "no", "2", "0", *created.split()],
    ]
    assert all(line == line.rstrip() for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["--client-id", "app1"], [("app1", "sub1"), ("app1", "sub2")]),
        (["--global"], [(None, "gsub"), (None, "vol")]),
        (["--topic", "orders"], [("app1", "sub2"), ("app2", "sub1")]),
        (["--topic", "orders", "--client-id", "app2"], [("app2", "sub1")]),
        (["--topic", "nowhere"], []),
    ],
    ids=["client-id", "global", "topic", "topic+client-id", "no-match"],
)
def test_offline_list_filters(offline, red_selector, filters, expected):
    result = invoke("subscriptions", "list", "--json", *filters, *offline)
    assert result.exit_code == 0, result.output
    assert [(item["client_id"], item["name"]) for item in json.loads(result.stdout)] == expected


def test_offline_list_empty_and_conflicting_filters(offline):
    empty = invoke("subscriptions", "list", "--client-id", "nobody", *offline)
    assert (empty.exit_code, empty.stdout) == (0, "no subscriptions\n")
    both = invoke("subscriptions", "list", "--client-id", "app1", "--global", *offline)
    assert both.exit_code == 2
    assert "give either --client-id or --global, not both" in both.stderr


def test_offline_backlog_is_unknown_when_the_selector_cannot_be_compiled(offline, monkeypatch):
    def compile_selector(text: str) -> Callable[[bytes], bool] | None:
        raise ValueError(f"cannot parse {text!r}")

    monkeypatch.setitem(
        sys.modules, "subgate.engine.selection", types.SimpleNamespace(compile_selector=compile_selector)
    )
    result = invoke("subscriptions", "list", "--json", "--client-id", "app1", *offline)
    assert result.exit_code == 0, result.output
    assert [item["backlog"] for item in json.loads(result.stdout)] == [None, 0]
    assert "cannot evaluate the selector of subscription 'sub1' of client-id 'app1'" in result.stderr
    table = invoke("subscriptions", "list", "--client-id", "app1", *offline)
    assert table.stdout.splitlines()[2].split()[-3] == "?"


def test_offline_backlog_applies_the_selector_engine_to_stored_messages(store_url):
    """No stand-in here: engine.selection evaluates the selector against the journaled AMQP encoding."""
    upgrade(store_url)
    encoded = [Message(body=i, durable=True, properties={"colour": c}).encode() for i, c in enumerate("rbrrb")]
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(AckCursor),
                [cursor_row(1, "a.s", address="t")],
            )
            conn.execute(insert(JournalMessage), [message_row(i + 1, "t", raw) for i, raw in enumerate(encoded)])
            conn.execute(insert(Ack), [{"cursor_id": 1, "message_id": 1}])
            conn.execute(
                insert(Subscription), [subscription_row(1, "s", "a", topic="t", selector="colour = 'r'", cursor_id=1)]
            )
    finally:
        engine.dispose()
    result = invoke(
        "subscriptions",
        "show",
        "s",
        "--client-id",
        "a",
        "--json",
        "--store",
        store_url,
        "--server",
        f"127.0.0.1:{free_port()}",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backlog"] == 2  # messages 3 and 4; 1 is red but acked


def test_offline_show(offline, red_selector):
    shown = invoke("subscriptions", "show", "sub1", "--client-id", "app1", "--json", *offline)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == EXPECTED_JSON[2]

    text = invoke("subscriptions", "show", "gsub", "--global", *offline)
    assert text.exit_code == 0, text.output
    fields = dict(line.split(":", 1) for line in text.stdout.splitlines())
    assert {key: value.strip() for key, value in fields.items()} == {
        "id": "4",
        "kind": "shared-durable",
        "durable": "yes",
        "client-id": "(global)",
        "name": "gsub",
        "topic": "prices",
        "selector": "-",
        "no-local": "no",
        "consumers": "0",
        "backlog": "5",
        "created": CREATED_ISO,
    }
    assert UNREACHABLE in text.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["sub1", "--global"], 1, "no global subscription 'sub1'"),
        (["gsub", "--client-id", "app1"], 1, "no subscription 'gsub' of client-id 'app1'"),
        (["missing", "--client-id", "app1"], 1, "no subscription 'missing' of client-id 'app1'"),
        (["sub1"], 2, "give --client-id ID, or --global"),
        (["sub1", "--client-id", "app1", "--global"], 2, "not both"),
    ],
)
def test_offline_show_errors(offline, args, code, message):
    result = invoke("subscriptions", "show", *args, *offline)
    assert result.exit_code == code
    assert message in result.stderr
    assert result.stdout == ""


def test_offline_unsubscribe_removes_the_subscription_and_its_cursor(offline, red_selector, store_url):
    removed = invoke("unsubscribe", "sub1", "--client-id", "app1", *offline)
    assert removed.exit_code == 0, removed.output
    assert removed.stdout == "removed subscription 'sub1' of client-id 'app1'\n"
    assert UNREACHABLE in removed.stderr

    assert rows(store_url, Subscription, Subscription.id == 1) == 0
    assert rows(store_url, AckCursor, AckCursor.id == 1) == 0
    assert rows(store_url, Ack, Ack.cursor_id == 1) == 0
    assert rows(store_url, DeliveryFailure, DeliveryFailure.cursor_id == 1) == 0
    # Only that subscription: the others, the global one's cursor and the journal stay.
    assert rows(store_url, Subscription) == 4
    assert rows(store_url, AckCursor) == 1 and rows(store_url, Ack) == 1
    assert rows(store_url, JournalMessage) == 7
    listed = invoke("subscriptions", "list", "--json", *offline)
    assert [(i["client_id"], i["name"]) for i in json.loads(listed.stdout)] == [
        (None, "gsub"),
        (None, "vol"),
        ("app1", "sub2"),
        ("app2", "sub1"),
    ]

    again = invoke("unsubscribe", "sub1", "--client-id", "app1", *offline)
    assert again.exit_code == 1
    assert "no subscription 'sub1' of client-id 'app1'" in again.stderr

    global_ = invoke("unsubscribe", "gsub", "--global", *offline)
    assert (global_.exit_code, global_.stdout) == (0, "removed global subscription 'gsub'\n")
    assert rows(store_url, AckCursor) == 0 and rows(store_url, Ack) == 0


def test_offline_unsubscribe_refuses_stored_consumers_and_volatile_subscriptions(offline, store_url):
    busy = invoke("unsubscribe", "sub1", "--client-id", "app2", *offline)
    assert busy.exit_code == 1
    assert "subscription 'sub1' of client-id 'app2' has 2 active consumer(s)" in busy.stderr
    assert "the server stopped without cleaning up" in busy.stderr
    assert rows(store_url, Subscription, Subscription.id == 3) == 1

    volatile = invoke("unsubscribe", "vol", "--global", *offline)
    assert volatile.exit_code == 1
    assert "global subscription 'vol' is not durable" in volatile.stderr
    assert rows(store_url, Subscription, Subscription.id == 5) == 1

    missing = invoke("unsubscribe", "sub9", "--global", *offline)
    assert missing.exit_code == 1 and "no global subscription 'sub9'" in missing.stderr
    assert invoke("unsubscribe", "sub1", *offline).exit_code == 2


def test_offline_refuses_an_out_of_date_store(store_url):
    flags = ["--store", store_url, "--server", f"127.0.0.1:{free_port()}"]
    for args in (
        ["subscriptions", "list"],
        ["subscriptions", "show", "s", "--global"],
        ["unsubscribe", "s", "--global"],
    ):
        result = invoke(*args, *flags)
        assert result.exit_code == 1
        # an empty store is the wrong place, not a store to upgrade (issue 33): a second store would be made
        assert "(the database holds no subgate tables)" in result.stderr or "(the file does not exist)" in result.stderr
        assert "no server owns a store there" in result.stderr and "db upgrade" not in result.stderr
    upgrade(store_url, "0004")  # a store that exists but is behind the code: that one is to upgrade
    behind = invoke("subscriptions", "list", *flags)
    assert behind.exit_code == 1
    assert "the store is at schema revision 0004" in behind.stderr and "run 'subgate db upgrade'" in behind.stderr


def test_offline_console_script_takes_server_and_store_from_the_environment(store_url, tmp_path):
    seed(store_url)
    port = free_port()
    env = {"SUBGATE_LISTEN": f"127.0.0.1:{port}", "SUBGATE_STORE": store_url}
    listed = run_subgate("subscriptions", "list", "--json", "--topic", "orders", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [item["name"] for item in json.loads(listed.stdout)] == ["sub2", "sub1"]
    assert f"{UNREACHABLE} 127.0.0.1:{port}; using the store " in listed.stderr

    removed = run_subgate("unsubscribe", "sub2", "--client-id", "app1", cwd=tmp_path, env=env)
    assert (removed.returncode, removed.stdout) == (0, "removed subscription 'sub2' of client-id 'app1'\n")
    refused = run_subgate("unsubscribe", "sub1", "--client-id", "app2", cwd=tmp_path, env=env)
    assert refused.returncode == 1
    assert "active consumer(s)" in refused.stderr


def test_offline_default_server_address_and_bad_addresses(tmp_path):
    bad = run_subgate("subscriptions", "list", "--server", "nowhere", cwd=tmp_path)
    assert bad.returncode == 2 and "expected HOST:PORT, got 'nowhere'" in bad.stderr
    zero = run_subgate("subscriptions", "list", "--server", "127.0.0.1:0", cwd=tmp_path)
    assert zero.returncode == 2 and "port 0 names no server" in zero.stderr
    config = tmp_path / "subgate.toml"
    port = free_port()
    config.write_text(f'listen = "0.0.0.0:{port}"\n')
    upgraded = run_subgate("db", "upgrade", cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    from_config = run_subgate("subscriptions", "list", "--config", str(config), cwd=tmp_path)
    assert from_config.returncode == 0, from_config.stderr
    assert f"{UNREACHABLE} 127.0.0.1:{port}; using the store sqlite:///{tmp_path / 'subgate.db'}" in from_config.stderr
    assert from_config.stdout == "no subscriptions\n"


# -- online: a running server ------------------------------------------------------------------------------------
class JmsSelector(LinkOption):
    """The source filter Qpid JMS sends for a selector (mapping doc §2.4)."""

    def __init__(self, selector: str) -> None:
        self.selector = selector

    def apply(self, link: Any) -> None:
        data: Data = link.source.filter
        data.put_dict({symbol("jms-selector"): Described(ulong(SELECTOR_CODE), self.selector)})


def durable_subscriber(
    conn: BlockingConnection, name: str, topic: str = "prices", *caps: str, selector: str | None = None
) -> BlockingReceiver:
    """A durable subscriber as Qpid JMS attaches it (§2.2); no credit, so every message stays in its backlog."""
    options: list[LinkOption] = [DurableSubscription(), Copy(), Capabilities("topic", *caps)]
    if selector is not None:
        options.append(JmsSelector(selector))
    return conn.create_receiver(topic, name=name, options=options)


def detach(conn: BlockingConnection, rcv: BlockingReceiver, timeout: float = 10.0) -> None:
    """What a JMS durable consumer's close() sends: detach(closed=false), §2.6 (not close). A blocking
    connection only does I/O while it waits, so wait until the frame has left."""
    rcv.link.detach()
    conn.wait(lambda: conn.conn.transport is None or conn.conn.transport.pending() <= 0, timeout=timeout)


def publish(conn: BlockingConnection, topic: str, *colours: str) -> None:
    snd = sender(conn, topic, "topic")
    for number, colour in enumerate(colours):
        snd.send(Message(body=f"{colour}-{number}", durable=True, properties={"colour": colour}))
    snd.close()


def online(server: Any, *args: str, env: dict[str, str] | None = None) -> Result:
    """A command against the running server, with a --store that must not be used."""
    return invoke(*args, "--server", server.address, "--store", "sqlite:///must-not-be-used.db", env=env)


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    assert UNREACHABLE not in result.stderr
    return json.loads(result.stdout)


def created_recently(item: dict[str, Any]) -> bool:
    created = datetime.fromisoformat(item["created"])
    return created.tzinfo is not None and abs(datetime.now(UTC) - created) < timedelta(minutes=5)


def without_created(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in ("id", "created")}


def test_online_list_and_show(make_server):
    server = make_server()
    app1 = connect(server.url, container_id="app1")
    other = connect(server.url)
    durable_subscriber(app1, "sub1", selector="colour = 'red'")
    durable_subscriber(other, "gsub|global", "prices", "shared", "global")
    publish(other, "prices", "red", "blue", "red")

    listed = as_json(online(server, "subscriptions", "list", "--json"))
    assert all(created_recently(item) for item in listed)
    assert [without_created(item) for item in listed] == [
        {
            "kind": "shared-durable",
            "durable": True,
            "client_id": None,
            "name": "gsub",
            "topic": "prices",
            "selector": None,
            "no_local": False,
            "consumers": 1,
            "backlog": 3,
        },
        {
            "kind": "durable",
            "durable": True,
            "client_id": "app1",
            "name": "sub1",
            "topic": "prices",
            "selector": "colour = 'red'",
            "no_local": False,
            "consumers": 1,
            "backlog": 2,
        },
    ]
    assert [i["name"] for i in as_json(online(server, "subscriptions", "list", "--json", "--client-id", "app1"))] == [
        "sub1"
    ]
    assert [i["name"] for i in as_json(online(server, "subscriptions", "list", "--json", "--global"))] == ["gsub"]
    assert as_json(online(server, "subscriptions", "list", "--json", "--topic", "elsewhere")) == []

    table = online(server, "subscriptions", "list")
    assert table.exit_code == 0, table.output
    assert "(global)" in table.stdout and "colour = 'red'" in table.stdout

    shown = as_json(online(server, "subscriptions", "show", "sub1", "--client-id", "app1", "--json"))
    assert shown == listed[1]
    assert as_json(online(server, "subscriptions", "show", "gsub", "--global", "--json")) == listed[0]
    missing = online(server, "subscriptions", "show", "sub1", "--global")
    assert missing.exit_code == 1
    assert "no global subscription 'sub1'" in missing.stderr
    app1.close()
    other.close()


def test_online_unsubscribe_is_refused_while_attached_and_removes_after_detach(make_server):
    server = make_server()
    app1 = connect(server.url, container_id="app1")
    rcv = durable_subscriber(app1, "sub1")
    publish(app1, "prices", "red", "blue")

    refused = online(server, "unsubscribe", "sub1", "--client-id", "app1")
    assert refused.exit_code == 1
    assert "subscription 'sub1' of client-id 'app1'" in refused.stderr
    assert "cannot unsubscribe subscription 'sub1' of client-id 'app1'" in refused.stderr
    assert "close its consumers first" in refused.stderr
    assert as_json(online(server, "subscriptions", "show", "sub1", "--client-id", "app1", "--json"))["backlog"] == 2

    detach(app1, rcv)
    eventually(
        lambda: (
            as_json(online(server, "subscriptions", "show", "sub1", "--client-id", "app1", "--json"))["consumers"] == 0
        ),
        what="consumers == 0 after detach",
    )
    removed = online(server, "unsubscribe", "sub1", "--client-id", "app1")
    assert (removed.exit_code, removed.stdout) == (0, "removed subscription 'sub1' of client-id 'app1'\n")
    assert UNREACHABLE not in removed.stderr
    gone = online(server, "subscriptions", "show", "sub1", "--client-id", "app1")
    assert gone.exit_code == 1 and "no subscription 'sub1' of client-id 'app1'" in gone.stderr
    assert as_json(online(server, "subscriptions", "list", "--json")) == []

    # Its messages went with it: subscribing again under that name starts empty (§3.2).
    app1b = connect(server.url, container_id="app1b")
    durable_subscriber(app1b, "sub1")
    again = as_json(online(server, "subscriptions", "show", "sub1", "--client-id", "app1b", "--json"))
    assert (again["consumers"], again["backlog"]) == (1, 0)
    app1b.close()
    app1.close()


def test_online_unsubscribe_not_found(make_server):
    server = make_server()
    for args, message in (
        (["nope", "--client-id", "app1"], "no subscription 'nope' of client-id 'app1'"),
        (["nope", "--global"], "no global subscription 'nope'"),
    ):
        result = online(server, "unsubscribe", *args)
        assert result.exit_code == 1, result.output
        assert message in result.stderr


def test_online_global_subscription_survives_connection_close_and_can_then_be_removed(make_server):
    server = make_server()
    first = connect(server.url)
    second = connect(server.url)
    durable_subscriber(first, "gsub|global", "prices", "shared", "global")
    durable_subscriber(second, "gsub|global", "prices", "shared", "global")  # same name on another connection
    show = ("subscriptions", "show", "gsub", "--global", "--json")
    assert as_json(online(server, *show))["consumers"] == 2

    first.close()  # connection close = detach (not close) of its links: the subscription stays (§1.7)
    eventually(lambda: as_json(online(server, *show))["consumers"] == 1, what="one consumer left")
    refused = online(server, "unsubscribe", "gsub", "--global")
    assert refused.exit_code == 1
    assert "cannot unsubscribe global subscription 'gsub'" in refused.stderr

    second.close()
    eventually(lambda: as_json(online(server, *show))["consumers"] == 0, what="no consumer left")
    removed = online(server, "unsubscribe", "gsub", "--global")
    assert (removed.exit_code, removed.stdout) == (0, "removed global subscription 'gsub'\n")


def test_online_shared_volatile_subscription_is_listed_while_it_has_consumers(make_server):
    server = make_server()
    app1 = connect(server.url, container_id="app1")
    rcv = app1.create_receiver("prices", name="vsub|volatile1", options=[Capabilities("topic", "shared")])
    listed = as_json(online(server, "subscriptions", "list", "--json", "--client-id", "app1"))
    assert [(i["kind"], i["durable"], i["name"], i["consumers"]) for i in listed] == [
        ("shared-volatile", False, "vsub", 1)
    ]
    rcv.close()  # detach(closed=true): the last consumer of a volatile subscription takes it away (§2.6)
    eventually(
        lambda: as_json(online(server, "subscriptions", "list", "--json", "--client-id", "app1")) == [],
        what="volatile subscription gone",
    )
    app1.close()


def test_online_then_offline_after_the_server_stops(make_server, store_url):
    server = make_server(store_url)
    app1 = connect(server.url, container_id="app1")
    durable_subscriber(app1, "sub1")
    publish(app1, "prices", "red")
    assert as_json(online(server, "subscriptions", "list", "--json"))[0]["consumers"] == 1
    app1.close()
    assert server.stop() == 0

    offline_list = invoke("subscriptions", "list", "--json", "--server", server.address, "--store", store_url)
    assert offline_list.exit_code == 0, offline_list.output
    assert f"{UNREACHABLE} {server.address}; using the store" in offline_list.stderr
    items = json.loads(offline_list.stdout)
    assert [(i["client_id"], i["name"], i["consumers"], i["backlog"]) for i in items] == [("app1", "sub1", 0, 1)]
    removed = invoke("unsubscribe", "sub1", "--client-id", "app1", "--server", server.address, "--store", store_url)
    assert removed.exit_code == 0, removed.output


def test_online_with_credentials(make_server, sqlite_url, tmp_path):
    assert run_subgate("db", "upgrade", "--store", sqlite_url, cwd=tmp_path).returncode == 0
    added = run_subgate("users", "add", "admin", "--store", sqlite_url, cwd=tmp_path, stdin="s3cret\n")
    assert added.returncode == 0, added.stderr
    # Management needs CONTROL_SERVER once a user exists (docs/permissions.md): the built-in admin role has it.
    assigned = run_subgate("roles", "assign", "admin", "admin", "--store", sqlite_url, cwd=tmp_path)
    assert assigned.returncode == 0, assigned.stderr
    server = make_server(sqlite_url)

    anonymous = online(server, "subscriptions", "list")
    assert anonymous.exit_code == 1
    assert f"cannot use the server at {server.address}" in anonymous.stderr

    env = {"SUBGATE_USER": "admin", "SUBGATE_PASSWORD": "s3cret"}
    assert as_json(online(server, "subscriptions", "list", "--json", env=env)) == []
    flags = as_json(online(server, "subscriptions", "list", "--json", "--user", "admin", "--password", "s3cret"))
    assert flags == []
    # SUBGATE_LISTEN (what 'serve' listens on) is the default --server.
    listed = run_subgate("subscriptions", "list", "--json", cwd=tmp_path, env={**env, "SUBGATE_LISTEN": server.address})
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [] and UNREACHABLE not in listed.stderr
