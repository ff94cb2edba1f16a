"""End-to-end check of tests/interop/rhea_client.js and tests/support/rhea.py.

The subgate server is not needed: a throwaway in-memory broker written with python-qpid-proton
(tests/infra/mini_broker.py) runs in a subprocess on a free 127.0.0.1 port, and the Node.js rhea
client is driven against it through ``run_rhea``. A second tiny server written with rhea itself
checks the SASL PLAIN path, which proton's bundled SASL cannot serve.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.rhea import (
    INTEROP_DIR,
    RheaError,
    messages_of,
    node_executable,
    outcomes_of,
    rhea_available,
    run_rhea,
    summary_of,
)

pytestmark = pytest.mark.interop

REPO_ROOT = Path(__file__).resolve().parents[2]


def _start_server(argv: list[str], cwd: Path, what: str) -> tuple[subprocess.Popen[str], int]:
    """Start a server process that prints {"port": N} as its first stdout line."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = proc.stdout.readline()
            if line:
                info = json.loads(line)
                if "port" in info:
                    return proc, int(info["port"])
            break
        if proc.poll() is not None:
            break
    _stop(proc)
    stderr = proc.stderr.read() if proc.stderr else ""
    raise RuntimeError(f"{what} did not start: {stderr}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture(scope="module")
def broker_url() -> Iterator[str]:
    proc, port = _start_server([sys.executable, "-m", "tests.infra.mini_broker"], REPO_ROOT, "mini broker")
    try:
        yield f"amqp://127.0.0.1:{port}"
    finally:
        _stop(proc)


def _addr(prefix: str = "q") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_rhea_is_available() -> None:
    assert node_executable() is not None
    assert rhea_available(), "run scripts/install-test-deps"


def test_send_then_receive_roundtrip(broker_url: str) -> None:
    address = _addr()
    sent = run_rhea(
        "send",
        "--url",
        broker_url,
        "--address",
        address,
        "--capability",
        "queue",
        "--count",
        3,
        "--durable",
        "--ttl",
        60000,
        "--body",
        "hello {i}",
        "--property",
        "colour=red",
        "--property",
        "n=7",
        "--annotation",
        'x-opt-test="yes"',
    )
    assert [o["outcome"] for o in outcomes_of(sent)] == ["accepted"] * 3
    assert summary_of(sent) == {"sent": 3, "accepted": 3, "rejected": 0, "released": 0, "modified": 0, "presettled": 0}

    got = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--count", 3))
    assert [m["body"] for m in got] == ["hello 0", "hello 1", "hello 2"]
    for m in got:
        assert m["body_type"] == "value"
        assert m["durable"] is True
        assert m["ttl"] == 60000
        assert m["delivery_count"] == 0
        assert m["application_properties"] == {"colour": "red", "n": 7}
        assert m["message_annotations"] == {"x-opt-test": "yes"}
        assert m["to"] is None


def test_rejected_outcome_carries_the_error_condition(broker_url: str) -> None:
    lines = run_rhea("send", "--url", broker_url, "--address", _addr("reject"), "--count", 2)
    outcomes = outcomes_of(lines)
    assert [o["outcome"] for o in outcomes] == ["rejected", "rejected"]
    assert outcomes[0]["error"]["condition"] == "amqp:not-allowed"
    assert summary_of(lines)["rejected"] == 2


def test_anonymous_relay_routes_by_to(broker_url: str) -> None:
    address = _addr()
    lines = run_rhea("send", "--url", broker_url, "--anonymous", "--to", address, "--count", 2, "--body", "relayed")
    assert summary_of(lines)["accepted"] == 2
    got = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--count", 2))
    assert [m["to"] for m in got] == [address, address]
    assert [m["body"] for m in got] == ["relayed", "relayed"]


def test_presettled_send(broker_url: str) -> None:
    address = _addr()
    lines = run_rhea("send", "--url", broker_url, "--address", address, "--count", 4, "--settled")
    assert summary_of(lines)["presettled"] == 4
    assert len(messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--count", 4))) == 4


def test_receiver_outcomes_and_delivery_count(broker_url: str) -> None:
    address = _addr()
    run_rhea("send", "--url", broker_url, "--address", address, "--count", 1)
    # modified(delivery-failed) -> redelivered with delivery_count + 1
    first = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--outcome", "modify-failed"))
    assert first[0]["delivery_count"] == 0
    # released -> redelivered, count unchanged
    second = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--outcome", "release"))
    assert second[0]["delivery_count"] == 1
    # left unsettled when the link closes -> the broker counts a failed delivery
    third = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--outcome", "none"))
    assert third[0]["delivery_count"] == 1
    fourth = messages_of(
        run_rhea("receive", "--url", broker_url, "--address", address, "--outcome", "modify-undeliverable")
    )
    assert fourth[0]["delivery_count"] == 2
    fifth = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--outcome", "reject"))
    assert fifth[0]["delivery_count"] == 3
    # rejected messages are gone: a drain finds nothing
    lines = run_rhea("receive", "--url", broker_url, "--address", address, "--count", 1, "--drain-after-ms", 100)
    assert messages_of(lines) == []
    assert summary_of(lines) == {"received": 0, "drained": True}


def test_credit_smaller_than_count_is_replenished(broker_url: str) -> None:
    address = _addr()
    run_rhea("send", "--url", broker_url, "--address", address, "--count", 7)
    got = messages_of(run_rhea("receive", "--url", broker_url, "--address", address, "--count", 7, "--credit", 2))
    assert [m["body"] for m in got] == [f"message {i}" for i in range(7)]


def test_drain_reports_completion_and_count(broker_url: str) -> None:
    address = _addr()
    run_rhea("send", "--url", broker_url, "--address", address, "--count", 3)
    lines = run_rhea(
        "receive",
        "--url",
        broker_url,
        "--address",
        address,
        "--count",
        10,
        "--credit",
        10,
        "--drain-after-ms",
        300,
    )
    assert len(messages_of(lines)) == 3
    drained = [line for line in lines if line.get("event") == "drained"]
    assert drained == [{"event": "drained", "received": 3, "credit": 0}]
    assert summary_of(lines) == {"received": 3, "drained": True}


@pytest.mark.parametrize("command", ["send", "receive"])
def test_refused_attach_reports_the_condition(broker_url: str, command: str) -> None:
    with pytest.raises(RheaError) as info:
        run_rhea(command, "--url", broker_url, "--address", _addr("forbidden"), "--count", 1)
    assert info.value.condition == "amqp:unauthorized-access"
    assert info.value.stage == "attach"
    assert info.value.returncode == 1
    # check=False returns the same JSON instead of raising
    lines = run_rhea(command, "--url", broker_url, "--address", _addr("forbidden"), check=False)
    assert lines[-1]["error"]["condition"] == "amqp:unauthorized-access"


def test_sasl_check_anonymous_and_unsupported_plain(broker_url: str) -> None:
    [opened] = run_rhea("sasl-check", "--url", broker_url)
    assert opened["opened"] is True
    assert opened["mechanism"] == "ANONYMOUS"
    assert "ANONYMOUS-RELAY" in opened["offered_capabilities"]

    port = broker_url.rsplit(":", 1)[1]
    [refused] = run_rhea("sasl-check", "--url", f"amqp://user:pw@127.0.0.1:{port}")
    assert refused["opened"] is False
    assert refused["mechanism"] == "PLAIN"
    assert refused["error"]["condition"] == "amqp:unauthorized-access"


_PLAIN_SERVER_JS = r"""
const rhea = require('rhea');
const container = rhea.create_container({id: 'plain-test-server'});
container.sasl_server_mechanisms.enable_plain((user, pass) => user === 'alice' && pass === 's3cret:/@');
const listener = container.listen({host: '127.0.0.1', port: 0});
listener.on('listening', () => console.log(JSON.stringify({port: listener.address().port})));
container.on('disconnected', () => {});
"""


@pytest.fixture(scope="module")
def plain_server_port() -> Iterator[int]:
    node = node_executable()
    assert node is not None
    proc, port = _start_server([node, "-e", _PLAIN_SERVER_JS], INTEROP_DIR, "rhea PLAIN server")
    try:
        yield port
    finally:
        _stop(proc)


def test_sasl_plain_credentials_from_the_url(plain_server_port: int) -> None:
    [ok] = run_rhea("sasl-check", "--url", f"amqp://alice:s3cret%3A%2F%40@127.0.0.1:{plain_server_port}")
    assert ok["opened"] is True
    assert ok["mechanism"] == "PLAIN"
    assert ok["remote_container_id"] == "plain-test-server"

    [bad] = run_rhea("sasl-check", "--url", f"amqp://alice:wrong@127.0.0.1:{plain_server_port}")
    assert bad["opened"] is False
    assert bad["error"]["condition"] == "amqp:unauthorized-access"


def test_connection_refused_and_timeout_are_json_errors(broker_url: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    with pytest.raises(RheaError) as info:
        run_rhea("send", "--url", f"amqp://127.0.0.1:{closed_port}", "--address", "q")
    assert info.value.condition == "ECONNREFUSED"
    assert info.value.stage == "connect"

    with pytest.raises(RheaError) as info:
        run_rhea("receive", "--url", broker_url, "--address", _addr(), "--timeout", 1)
    assert info.value.condition == "timeout"
    assert info.value.error is not None and info.value.error["progress"]["received"] == 0

    with pytest.raises(RheaError) as info:
        run_rhea("receive", "--url", broker_url)  # no --address
    assert info.value.condition == "usage"
    assert info.value.returncode == 2
