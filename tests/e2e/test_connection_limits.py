"""Handshake and frame deadlines and connection limits, over real sockets (issue 11, defect 3).

A connection must finish SASL and send its ``open`` within ``--handshake-timeout``; once a frame has begun it
must arrive whole within ``--frame-timeout``; connections over ``--max-connections`` or
``--max-connections-per-address`` are refused with a reason (SASL clients get sasl-outcome sys-temp, clients
without SASL ``open`` then ``close(amqp:resource-limit-exceeded)``), and the limits free up as connections end.
The per-address cases connect from other loopback addresses (``127.0.0.2``...), which Linux routes to the
server's 127.0.0.1 listener like any other.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from proton import ConnectionException, Endpoint, symbol

from tests.support.amqp import connect
from tests.support.rawamqp import (
    AMQP_HEADER,
    CLOSE,
    OPEN,
    SASL_FRAME,
    SASL_HEADER,
    SASL_MECHANISMS,
    RawClient,
    frame,
    parse_frames,
    performative,
)
from tests.support.server import SubgateProcess, module_server
from tests.support.survival import Bystander, assert_still_serving

SASL_SYS_TEMP = 4
LIMITS = (
    "--handshake-timeout",
    "1",
    "--frame-timeout",
    "1",
    "--max-connections",
    "12",
    "--max-connections-per-address",
    "4",
)


@pytest.fixture(scope="module")
def shared_server(request, tmp_path_factory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "limits", extra=LIMITS) as server:
        yield server


class Source(RawClient):
    """A raw client whose socket comes from a given loopback address."""

    def __init__(self, port: int, source: str = "127.0.0.1", *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
        self.received = b""
        self.connection = None
        self.transport = None


def closed_by_server(raw: RawClient, within: float) -> bytes:
    """Everything the server writes until it closes the socket, which it must do within ``within`` seconds."""
    raw.timeout = within
    return raw.read_to_eof()


@pytest.mark.parametrize(
    "sent",
    [b"", b"AMQP", SASL_HEADER, AMQP_HEADER, SASL_HEADER + frame(b"", frame_type=SASL_FRAME)],
    ids=["nothing", "half-a-header", "sasl-header", "amqp-header-no-open", "sasl-heartbeat"],
)
def test_a_handshake_that_never_finishes_is_cut_off(broker, sent):
    with Bystander(broker) as bystander:
        with RawClient(broker.port) as raw:
            raw.send(sent)
            closed_by_server(raw, within=15)
        assert_still_serving(broker, bystander)
    assert "handshake not finished within 1s" in broker.log()


def test_a_frame_sent_one_byte_at_a_time_is_cut_off(broker):
    with RawClient(broker.port) as raw:
        raw.sasl_anonymous()
        raw.send(AMQP_HEADER + frame(performative(OPEN, ["slow-client"])))
        assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER
        assert raw.read_frame().descriptor == OPEN
        begin = frame(performative(0x11, [None, 0, 100, 100]))
        deadline = time.monotonic() + 15
        for byte in begin[:-1]:  # never the last byte: the frame stays incomplete
            try:
                raw.send(bytes([byte]))
            except OSError:
                break
            time.sleep(0.2)
            if time.monotonic() > deadline:
                pytest.fail("the server kept a frame open for 15 s (frame timeout 1 s)")
        frames, _ = parse_frames(closed_by_server(raw, within=15))
    assert frames and frames[-1].descriptor == CLOSE and frames[-1].error() is not None, frames
    assert "frame not completed within 1s" in broker.log()


def test_connections_over_the_per_address_limit_are_refused_with_a_reason(broker):
    with ExitStack() as stack:
        for _ in range(4):
            opened(stack.enter_context(Source(broker.port, "127.0.0.2")))
        with Source(broker.port, "127.0.0.2") as refused:
            assert sasl_code(refused) == SASL_SYS_TEMP
            assert closed_by_server(refused, within=10) == b""
        with Source(broker.port, "127.0.0.2") as refused:
            condition, description = refused_without_sasl(refused)
            assert condition == "amqp:resource-limit-exceeded"
            assert "127.0.0.2" in description
        with Source(broker.port, "127.0.0.3") as other:  # another address is not affected
            other.sasl_anonymous()
        assert_still_serving(broker)
    # The slots come back when the connections end.
    wait_until_admitted(broker, "127.0.0.2")


def test_connections_over_the_total_limit_are_refused_and_served_again_later(broker):
    with ExitStack() as stack:
        for index in range(12):
            opened(stack.enter_context(Source(broker.port, f"127.0.1.{index % 3 + 1}")))
        with Source(broker.port, "127.0.2.1") as refused:
            assert sasl_code(refused) == SASL_SYS_TEMP
        with Source(broker.port, "127.0.2.2") as refused:
            condition, description = refused_without_sasl(refused)
            assert condition == "amqp:resource-limit-exceeded"
            assert "connection limit reached" in description
        with pytest.raises(ConnectionException):
            connect(broker.url).close()
    wait_until_admitted(broker, "127.0.0.1")
    assert_still_serving(broker)


def opened(raw: RawClient) -> None:
    """SASL ANONYMOUS and an open answered: a connection that counts against the limits (and past its handshake)."""
    raw.sasl_anonymous()
    connection = raw.start_amqp()
    raw.pump(lambda: bool(connection.state & Endpoint.REMOTE_ACTIVE), "the server's open")


def sasl_code(raw: RawClient) -> int:
    raw.send(SASL_HEADER + frame(performative(0x41, [symbol("ANONYMOUS"), b"", None]), frame_type=SASL_FRAME))
    assert raw.read_exactly(len(SASL_HEADER)) == SASL_HEADER
    assert raw.read_frame().descriptor == SASL_MECHANISMS
    return int(raw.read_frame().fields[0])


def refused_without_sasl(raw: RawClient) -> tuple[str, str]:
    raw.send(AMQP_HEADER + frame(performative(OPEN, ["over-the-limit"])))
    assert raw.read_exactly(len(AMQP_HEADER)) == AMQP_HEADER
    frames, _ = parse_frames(closed_by_server(raw, within=10))
    assert [f.descriptor for f in frames] == [OPEN, CLOSE], frames
    error = frames[-1].error()
    assert error is not None
    return error


def wait_until_admitted(server: SubgateProcess, source: str) -> None:
    """Closed connections free their slots (the server sees the close at once; allow it a bounded moment)."""
    deadline = time.monotonic() + 10
    while True:
        with Source(server.port, source) as raw:
            if sasl_code(raw) == 0:
                return
        if time.monotonic() > deadline:
            pytest.fail(f"connections from {source} are still refused after their slots were freed")
        time.sleep(0.1)


def test_max_connections_is_lowered_to_what_the_open_file_limit_allows(tmp_path):
    """With 200 descriptors a limit of 10,000 cannot be reached: the server says so and refuses with a reason
    instead of failing accept() (and spinning on the listener) when the descriptors run out."""
    server = SubgateProcess(f"sqlite:///{tmp_path / 'subgate.db'}", tmp_path, open_files=200).start()
    try:
        assert "max-connections 10000 lowered to 136" in server.log()
        with ExitStack() as stack:
            for index in range(136):
                stack.enter_context(Source(server.port, f"127.0.3.{index % 100 + 1}")).sasl_anonymous()
            with Source(server.port, "127.0.4.1") as refused:
                assert sasl_code(refused) == SASL_SYS_TEMP
        assert_still_serving(server)
    finally:
        server.stop(timeout=10)
