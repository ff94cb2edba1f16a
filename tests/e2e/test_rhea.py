"""Interop with the Node.js AMQP client rhea against a real ``subgate serve`` process.

rhea runs through ``tests.support.rhea.run_rhea`` (``tests/interop/rhea_client.js``), one short-lived node
process per command. Nothing here is skipped: ``make test`` installs node and rhea (``scripts/install-test-deps``),
so a missing rhea fails these tests with the installer's advice.
"""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from proton import Message, byte, symbol, uint

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender
from tests.support.polling import eventually
from tests.support.rhea import RheaError, messages_of, outcomes_of, rhea_available, run_rhea, summary_of
from tests.support.server import subgate_command

pytestmark = pytest.mark.interop

SENT_PROPERTIES = {"colour": "red", "n": 7, "big": 5_000_000_000, "neg": -3, "ratio": 1.5, "flag": True, "none": None}
SENT_ANNOTATIONS = {"x-opt-test": "yes", "x-opt-count": 42, "x-opt-list": [1, "two"]}
BOOKMARK = "x-opt-bookmark"  # added by subgate to every journaled message


def kv(flag: str, values: dict[str, Any]) -> list[str]:
    import json

    return [arg for key, value in values.items() for arg in (flag, f"{key}={json.dumps(value)}")]


def send(url: str, address: str, *extra: Any, count: int = 1) -> list[dict[str, Any]]:
    return run_rhea("send", "--url", url, "--address", address, "--count", count, *extra)


def receive(url: str, address: str, *extra: Any, count: int = 1) -> list[dict[str, Any]]:
    """The messages rhea received (accepting them unless ``--outcome`` says otherwise)."""
    lines = run_rhea("receive", "--url", url, "--address", address, "--count", count, *extra)
    assert summary_of(lines)["received"] == count
    return messages_of(lines)


def bodies(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["body"] for m in messages]


def rhea_gets_nothing(url: str, address: str, *extra: Any, wait: float = 1.5) -> bool:
    lines = run_rhea(
        "receive", "--url", url, "--address", address, "--count", 1, "--timeout", wait, *extra, check=False
    )
    errors = [line["error"] for line in lines if "error" in line]
    return not messages_of(lines) and [e["condition"] for e in errors] == ["timeout"]


def accepted(lines: list[dict[str, Any]], count: int) -> None:
    assert [o["outcome"] for o in outcomes_of(lines)] == ["accepted"] * count
    assert summary_of(lines)["accepted"] == count


def connections_to(port: int) -> int:
    """Established TCP connections whose server end is 127.0.0.1:``port`` (read from /proc/net/tcp)."""
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == "01" and local == f"0100007F:{port:04X}":
                count += 1
    return count


def test_rhea_is_installed():
    assert rhea_available(), "node or rhea is missing: run scripts/install-test-deps (make test does)"


# -- queues ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("durable", [True, False])
def test_queue_send_and_receive_preserves_the_message(server, durable):
    flags = ["--durable"] if durable else []
    sent = send(
        server.url,
        "rq",
        *flags,
        "--ttl",
        60000,
        "--body",
        "hello {i}",
        "--subject",
        "greeting",
        *kv("--property", SENT_PROPERTIES),
        *kv("--annotation", SENT_ANNOTATIONS),
        count=5,
    )
    accepted(sent, 5)
    got = receive(server.url, "rq", count=5)
    assert bodies(got) == [f"hello {i}" for i in range(5)]
    for message in got:
        assert message["body_type"] == "value"
        assert message["durable"] is durable
        assert message["ttl"] == 60000
        assert message["subject"] == "greeting"
        assert message["delivery_count"] == 0
        assert message["application_properties"] == SENT_PROPERTIES
        annotations = dict(message["message_annotations"])
        bookmark = annotations.pop(BOOKMARK, None)
        assert annotations == SENT_ANNOTATIONS
        assert (bookmark is not None) is durable
    assert [m["message_id"].rsplit("-", 1)[1] for m in got] == ["0", "1", "2", "3", "4"]
    assert rhea_gets_nothing(server.url, "rq")


def test_byte_typed_annotations_reach_rhea_and_keep_their_type(server):
    """x-opt-jms-msg-type and x-opt-jms-dest are AMQP bytes (mapping doc §7): rhea reads the values, and a proton
    consumer gets them back still typed as byte, for journaled (re-encoded) and in-memory messages alike."""
    annotations = {
        symbol("x-opt-jms-msg-type"): byte(5),
        symbol("x-opt-jms-dest"): byte(0),
        symbol("x-opt-neg"): byte(-7),
    }
    properties = {"kind": "text", "n": uint(3)}
    conn = connect(server.url)
    snd = sender(conn, "typed", "queue")
    for durable in (True, False, True, False):
        snd.send(Message(body="typed", durable=durable, annotations=annotations, properties=properties))
    got = receive(server.url, "typed", count=2)
    for message, durable in zip(got, (True, False), strict=True):
        found = dict(message["message_annotations"])
        assert (found.pop(BOOKMARK, None) is not None) is durable
        assert found == {"x-opt-jms-msg-type": 5, "x-opt-jms-dest": 0, "x-opt-neg": -7}
        assert message["application_properties"] == {"kind": "text", "n": 3}
    rcv = receiver(conn, "typed", "queue")
    for _ in range(2):
        message = rcv.receive(timeout=10)
        rcv.accept()
        for key, value in annotations.items():
            assert type(message.annotations[key]) is byte
            assert message.annotations[key] == value
        assert type(message.properties["n"]) is uint
    conn.close()


def test_credit_smaller_than_the_count(server):
    accepted(send(server.url, "credit", "--body", "c{i}", count=25), 25)
    got = receive(server.url, "credit", "--credit", 3, count=25)
    assert bodies(got) == [f"c{i}" for i in range(25)]


@pytest.mark.parametrize(("queued", "credit", "answered"), [(4, 10, 4), (0, 5, 0)])
def test_drain_is_answered_with_the_remaining_messages_then_credit_zero(server, queued, credit, answered):
    if queued:
        accepted(send(server.url, "drain", "--body", "d{i}", count=queued), queued)
    lines = run_rhea(
        "receive",
        "--url",
        server.url,
        "--address",
        "drain",
        "--count",
        100,
        "--credit",
        credit,
        "--drain-after-ms",
        300,
    )
    events = [line.get("event") for line in lines if "event" in line]
    assert events == ["message"] * answered + ["drain_requested", "drained"]
    drained = next(line for line in lines if line.get("event") == "drained")
    assert (drained["received"], drained["credit"]) == (answered, 0)
    assert "immediate" not in drained  # the server's flow(drain=true, credit=0) answered it
    assert bodies(messages_of(lines)) == [f"d{i}" for i in range(answered)]
    assert summary_of(lines) == {"received": answered, "drained": True}


def test_drain_after_the_credit_is_used_leaves_the_rest_queued(server):
    accepted(send(server.url, "drain-rest", "--body", "d{i}", count=6), 6)
    lines = run_rhea(
        "receive",
        "--url",
        server.url,
        "--address",
        "drain-rest",
        "--count",
        100,
        "--credit",
        4,
        "--drain-after-ms",
        300,
    )
    assert bodies(messages_of(lines)) == ["d0", "d1", "d2", "d3"]
    assert summary_of(lines)["drained"] is True
    assert bodies(receive(server.url, "drain-rest", count=2)) == ["d4", "d5"]


@pytest.mark.parametrize(
    ("outcome", "comes_back", "delivery_count"),
    [
        ("accept", False, None),
        ("reject", False, None),
        ("release", True, 0),
        ("modify-failed", True, 1),
        ("modify-undeliverable", True, 1),  # delivery-failed and undeliverable-here: another consumer gets it
    ],
)
def test_outcome_and_the_delivery_count_a_second_consumer_sees(server, outcome, comes_back, delivery_count):
    accepted(send(server.url, "outcomes", "--body", "x", "--durable"), 1)
    first = receive(server.url, "outcomes", "--outcome", outcome)
    assert [(m["body"], m["delivery_count"]) for m in first] == [("x", 0)]
    if comes_back:
        again = receive(server.url, "outcomes")
        assert [(m["body"], m["delivery_count"]) for m in again] == [("x", delivery_count)]
    assert rhea_gets_nothing(server.url, "outcomes")


def test_a_consumer_that_declines_a_message_still_gets_the_next_ones(server):
    """A JMS client settles a message it cannot use (expired locally, undecodable) modified{failed,
    undeliverable-here}; the same consumer must go on receiving the rest of the queue."""
    accepted(send(server.url, "declined", "--body", "m{i}", count=3), 3)
    declined = receive(server.url, "declined", "--outcome", "modify-undeliverable", "--credit", 1, count=3)
    assert bodies(declined) == ["m0", "m1", "m2"]
    again = receive(server.url, "declined", count=3)
    assert [(m["body"], m["delivery_count"]) for m in again] == [("m0", 1), ("m1", 1), ("m2", 1)]


def test_failed_deliveries_add_up(server):
    accepted(send(server.url, "failing", "--body", "x"), 1)
    for expected in range(3):
        assert [m["delivery_count"] for m in receive(server.url, "failing", "--outcome", "modify-failed")] == [expected]
    assert [m["delivery_count"] for m in receive(server.url, "failing", "--outcome", "release")] == [3]
    assert [m["delivery_count"] for m in receive(server.url, "failing")] == [3]


@pytest.mark.parametrize(
    ("how", "delivery_count"),
    [
        ([], 1),  # connection closed with deliveries unsettled: the default outcome modified{delivery-failed}
        (["--detach"], 0),  # an orderly detach first: released (mapping doc §5.7)
    ],
)
def test_unsettled_messages_return_when_rhea_goes(server, how, delivery_count):
    accepted(send(server.url, "unsettled", "--body", "u{i}", count=2), 2)
    first = receive(server.url, "unsettled", "--outcome", "none", *how, count=2)
    assert bodies(first) == ["u0", "u1"]
    again = receive(server.url, "unsettled", count=2)
    assert [(m["body"], m["delivery_count"]) for m in again] == [("u0", delivery_count), ("u1", delivery_count)]


# -- topics ----------------------------------------------------------------------------------------------------


def test_topic_fans_out_to_three_rhea_consumers(server):
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(
                run_rhea,
                "receive",
                "--url",
                server.url,
                "--address",
                "news",
                "--capability",
                "topic",
                "--count",
                3,
                timeout=40,
            )
            for _ in range(3)
        ]
        eventually(lambda: connections_to(server.port) >= 3, what="three rhea consumers to connect")
        time.sleep(0.5)  # connected: give them the moment their attach takes
        accepted(send(server.url, "news", "--capability", "topic", "--body", "n{i}", count=3), 3)
        results = [future.result(timeout=40) for future in futures]
    for lines in results:
        assert bodies(messages_of(lines)) == ["n0", "n1", "n2"]
        assert summary_of(lines)["received"] == 3


def test_topic_message_without_subscribers_is_accepted_and_dropped(server):
    accepted(send(server.url, "quiet", "--capability", "topic"), 1)
    assert rhea_gets_nothing(server.url, "quiet", "--capability", "topic")


# -- expiry ----------------------------------------------------------------------------------------------------


def test_ttl_expiry(server):
    accepted(send(server.url, "ttl", "--ttl", 200, "--body", "short {i}", count=2), 2)
    accepted(send(server.url, "ttl", "--ttl", 60000, "--body", "long"), 1)
    accepted(send(server.url, "ttl", "--body", "forever"), 1)
    time.sleep(0.6)
    got = receive(server.url, "ttl", count=2)
    assert [(m["body"], m["ttl"]) for m in got] == [("long", 60000), ("forever", None)]
    assert rhea_gets_nothing(server.url, "ttl")


def test_durable_ttl_expiry(server):
    accepted(send(server.url, "ttl-d", "--durable", "--ttl", 200, "--body", "short"), 1)
    accepted(send(server.url, "ttl-d", "--durable", "--body", "kept"), 1)
    time.sleep(0.6)
    assert bodies(receive(server.url, "ttl-d")) == ["kept"]
    assert rhea_gets_nothing(server.url, "ttl-d")


# -- anonymous relay -------------------------------------------------------------------------------------------


def test_anonymous_relay_routes_by_to(server):
    lines = run_rhea("send", "--url", server.url, "--anonymous", "--to", "relayed", "--body", "r{i}", "--count", 3)
    accepted(lines, 3)
    got = receive(server.url, "relayed", count=3)
    assert [(m["body"], m["to"]) for m in got] == [("r0", "relayed"), ("r1", "relayed"), ("r2", "relayed")]


def test_anonymous_relay_creates_the_node_type_jms_dest_asks_for(server):
    lines = run_rhea(
        "send", "--url", server.url, "--anonymous", "--to", "relay-topic", "--annotation", "x-opt-jms-dest=1"
    )
    accepted(lines, 1)
    with pytest.raises(RheaError) as refused:
        run_rhea("receive", "--url", server.url, "--address", "relay-topic", "--capability", "queue")
    assert (refused.value.stage, refused.value.condition) == ("attach", "amqp:precondition-failed")


# -- SASL PLAIN ------------------------------------------------------------------------------------------------


def subgate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*subgate_command(), *args], capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL
    )


def with_user(url: str, user: str, password: str) -> str:
    host = url.removeprefix("amqp://")
    return f"amqp://{user}:{password}@{host}"


@pytest.fixture
def user_server(make_server, sqlite_url):
    """A server whose store has the user alice (added with the CLI before it started)."""
    subgate_cli("db", "upgrade", "--store", sqlite_url)
    out = subgate_cli("users", "add", "alice", "--password", "s3cret pass", "--store", sqlite_url)
    assert "added user 'alice'" in out.stdout
    subgate_cli("roles", "assign", "admin", "alice", "--store", sqlite_url)  # once a user exists, only grants count
    return make_server(sqlite_url)


def test_sasl_plain_with_the_right_password(user_server):
    url = with_user(user_server.url, "alice", "s3cret%20pass")
    (check,) = run_rhea("sasl-check", "--url", url)
    assert (check["opened"], check["mechanism"], check["remote_container_id"]) == (True, "PLAIN", "subgate")
    accepted(send(url, "secure", "--body", "s"), 1)
    assert bodies(receive(url, "secure")) == ["s"]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("alice", "s3cret"), ("mallory", "s3cret%20pass")])
def test_sasl_plain_with_a_bad_password_or_user_is_refused(user_server, user, password):
    url = with_user(user_server.url, user, password)
    (check,) = run_rhea("sasl-check", "--url", url)
    assert (check["opened"], check["mechanism"]) == (False, "PLAIN")
    assert check["error"]["condition"] == "amqp:unauthorized-access"
    with pytest.raises(RheaError) as refused:
        send(url, "secure")
    assert (refused.value.stage, refused.value.condition) == ("open", "amqp:unauthorized-access")


def test_anonymous_is_refused_once_a_user_exists(user_server):
    (check,) = run_rhea("sasl-check", "--url", user_server.url)
    assert (check["opened"], check["mechanism"]) == (False, "ANONYMOUS")


def test_user_added_on_the_running_servers_store(server):
    subgate_cli("users", "add", "bob", "--password", "hunter2", "--store", server.store_url)
    (good,) = run_rhea("sasl-check", "--url", with_user(server.url, "bob", "hunter2"))
    (bad,) = run_rhea("sasl-check", "--url", with_user(server.url, "bob", "hunter3"))
    assert (good["opened"], bad["opened"]) == (True, False)
    assert bad["error"]["condition"] == "amqp:unauthorized-access"


# -- mixed clients ---------------------------------------------------------------------------------------------


def test_rhea_sends_and_proton_receives(server):
    lines = send(
        server.url,
        "mixed-in",
        "--durable",
        "--ttl",
        60000,
        "--subject",
        "s",
        "--body",
        "from rhea {i}",
        *kv("--property", {"colour": "red", "n": 7, "neg": -3}),
        *kv("--annotation", {"x-opt-test": "yes"}),
        count=3,
    )
    accepted(lines, 3)
    conn = connect(server.url)
    rcv = receiver(conn, "mixed-in", "queue")
    for i in range(3):
        message = rcv.receive(timeout=10)
        rcv.accept()
        assert message.body == f"from rhea {i}"
        assert (message.durable, message.ttl, message.subject, message.delivery_count) == (True, 60.0, "s", 0)
        assert message.properties == {"colour": "red", "n": 7, "neg": -3}
        assert type(message.properties["n"]) is uint  # rhea encodes a positive JS number as uint
        assert message.annotations[symbol("x-opt-test")] == "yes"
        assert set(message.annotations) == {symbol("x-opt-test"), symbol(BOOKMARK)}
    assert nothing_arrives(rcv)
    conn.close()


def test_proton_sends_and_rhea_receives(server):
    conn = connect(server.url)
    send_all(
        sender(conn, "mixed-out", "queue"),
        [f"from proton {i}" for i in range(3)],
        durable=True,
        ttl=30,
        subject="p",
        properties={"colour": "blue", "n": 9},
        annotations={symbol("x-opt-jms-msg-type"): byte(5)},
    )
    conn.close()
    got = receive(server.url, "mixed-out", count=3)
    assert bodies(got) == [f"from proton {i}" for i in range(3)]
    for message in got:
        assert (message["durable"], message["ttl"], message["subject"]) == (True, 30000, "p")
        assert message["application_properties"] == {"colour": "blue", "n": 9}
        assert message["message_annotations"]["x-opt-jms-msg-type"] == 5


def test_rhea_and_proton_consumers_share_a_queue(server):
    accepted(send(server.url, "shared-q", "--body", "s{i}", count=6), 6)
    conn = connect(server.url)
    rcv = receiver(conn, "shared-q", "queue", credit=3)
    from_proton = receive_bodies(rcv, 3)
    from_rhea = bodies(receive(server.url, "shared-q", count=3))
    assert sorted(from_proton + from_rhea) == [f"s{i}" for i in range(6)]
    conn.close()


# -- restart recovery ------------------------------------------------------------------------------------------


def test_restart_recovery_with_rhea(make_server, store_url):
    server = make_server(store_url)
    accepted(send(server.url, "recover", "--durable", "--body", "keep {i}", "--property", "n=1", count=6), 6)
    accepted(send(server.url, "recover", "--body", "transient"), 1)
    assert bodies(receive(server.url, "recover", count=2)) == ["keep 0", "keep 1"]  # acknowledged: gone
    failed = receive(server.url, "recover", "--outcome", "modify-failed")  # keep 2 failed once
    assert bodies(failed) == ["keep 2"]
    assert server.stop() == 0
    server.start()
    got = receive(server.url, "recover", count=4)
    assert [(m["body"], m["delivery_count"]) for m in got] == [
        ("keep 2", 1),
        ("keep 3", 0),
        ("keep 4", 0),
        ("keep 5", 0),
    ]
    assert all(m["durable"] and m["application_properties"] == {"n": 1} for m in got)
    assert rhea_gets_nothing(server.url, "recover")  # the non-durable message did not survive


def test_restart_after_kill_keeps_durable_messages(make_server, sqlite_url):
    server = make_server(sqlite_url)
    accepted(send(server.url, "crash", "--durable", "--body", "c{i}", count=5), 5)
    server.kill()
    server.start()
    assert bodies(receive(server.url, "crash", count=5)) == [f"c{i}" for i in range(5)]
