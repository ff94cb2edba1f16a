"""The client SDK's connection: SASL PLAIN credentials, and the server list tried round robin."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from subgate.client import EPOCH, Client, PublishError
from tests.support.cli import run_subgate


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def add_alice(tmp_path: Path, store_url: str) -> None:
    for args in (
        ("db", "upgrade"),
        ("users", "add", "alice", "--password", "s3cret"),
        ("roles", "assign", "admin", "alice"),
    ):
        result = run_subgate(*args, "--store", store_url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr


def test_user_and_password_authenticate_with_sasl_plain(make_server, tmp_path):
    store_url = f"sqlite:///{tmp_path / 'auth.db'}"
    add_alice(tmp_path, store_url)
    server = make_server(store_url)
    client = Client(server.url, user="alice", password="s3cret")
    try:
        pub = client.publisher("auth/t", send_policy="inline")
        pub.send("hello")
        sub = client.subscribe("auth/t", bookmark=EPOCH)
        message = sub.receive(timeout=10)
        assert message is not None and message.body == "hello"
    finally:
        client.close()
    wrong = Client(server.url, user="alice", password="wrong")
    try:
        with pytest.raises(PublishError):
            wrong.publisher("auth/t", send_policy="inline", retry_duration=1.0).send("refused")
        assert not wrong.connected
    finally:
        wrong.close()


def test_a_dead_first_server_is_skipped_for_the_next_one(server):
    client = Client([f"amqp://127.0.0.1:{unused_port()}", server.url])
    try:
        assert client.wait_connected(10)
        client.publisher("rr/t", send_policy="inline").send("through the second")
    finally:
        client.close()


def test_queue_publishers_and_consumers(server):
    client = Client(server.url)
    try:
        pub = client.publisher("jobs/q", send_policy="inline", queue=True, publisher_id="jobs")
        pub.send_many(["j1", "j2"])
        sub = client.subscribe("jobs/q", queue=True)
        got = [sub.receive(timeout=10) for _ in range(2)]
        assert [m.body for m in got if m] == ["j1", "j2"]
        for message in got:
            assert message is not None
            sub.discard(message)
    finally:
        client.close()
