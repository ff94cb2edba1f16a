"""--log-format json: one JSON object per line, with the significant events' fields (connection opened and closed
with container-id, principal and remote address; subscription created; authentication failure without the
secret). cli.logs, docs/operations.md "Logging"."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.amqp import SharedDurable, connect, send_all, sender
from tests.support.cli import run_subgate
from tests.support.polling import eventually
from tests.support.rawamqp import SASL_AUTH, RawClient


def records(server) -> list[dict]:
    lines = [line for line in server.log().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line parses: nothing else is written


def events(server, name: str) -> list[dict]:
    return [r for r in records(server) if r.get("event") == name]


def test_json_lines_carry_the_events_and_their_fields(make_server, sqlite_url, tmp_path: Path):
    for args in (
        ("db", "upgrade", "--store", sqlite_url),
        ("users", "add", "alice", "--password", "s3cret-pw", "--store", sqlite_url),
        ("roles", "assign", "admin", "alice", "--store", sqlite_url),
    ):
        assert run_subgate(*args, cwd=tmp_path).returncode == 0
    server = make_server(sqlite_url, "--log-format", "json")
    conn = connect(url=server.url, user="alice", password="s3cret-pw", container_id="log-probe")
    conn.create_receiver("logs/topic", name="audit|global", credit=1, options=[SharedDurable()])
    send_all(sender(conn, "logs/topic", "topic"), ["x"])
    conn.close()
    with RawClient(server.port) as raw:
        assert raw.sasl("PLAIN", b"\x00alice\x00wrong-pw") == SASL_AUTH
    eventually(lambda: events(server, "auth-failed") and events(server, "connection-closed"), what="the log lines")
    opened = [r for r in events(server, "connection-opened") if r["container_id"] == "log-probe"]
    assert len(opened) == 1
    assert opened[0]["principal"] == "alice" and opened[0]["peer"].startswith("127.0.0.1")
    assert {"time", "level", "logger", "message"} <= set(opened[0])
    closed = [r for r in events(server, "connection-closed") if r["container_id"] == "log-probe"]
    assert len(closed) == 1 and closed[0]["principal"] == "alice"
    assert [r["topic"] for r in events(server, "subscription-created")] == ["logs/topic"]
    failed = events(server, "auth-failed")
    assert failed[0]["principal"] == "alice"
    assert (failed[0]["failures_address"], failed[0]["failures_principal"], failed[0]["delay"]) == (1, 1, 0.0)
    assert "wrong-pw" not in server.log() and "s3cret-pw" not in server.log()
