"""Bad input over real sockets: each case gets a clear AMQP error or a closed connection, and afterwards nothing
stored is lost and the server still serves an already-open connection and a new one (``tests.support.survival``).

Where exact bytes matter the test drives the socket itself (``tests.support.rawamqp``); the facts asserted about
proton-c were checked against python-qpid-proton 0.40.0: a frame whose header claims more than the negotiated
max-frame-size gets ``close(amqp:connection:framing-error, "malformed frame")`` and the socket is closed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proton import ConnectionException, Delivery, Message, byte, symbol
from proton.utils import BlockingConnection, BlockingSender, LinkDetached

from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, sender
from tests.support.cli import run_subgate
from tests.support.rawamqp import AMQP_HEADER, CLOSE, FRAME_HEADER, SASL_HEADER, RawClient, parse_frames
from tests.support.survival import (
    Bystander,
    assert_clean_log,
    assert_still_serving,
    cpu_seconds,
    open_sockets,
    preload,
    wait_for_sockets,
)

REPO = Path(__file__).resolve().parents[2]


def send_and_wait(conn: BlockingConnection, snd: BlockingSender, message: Message) -> Delivery:
    """Send on ``snd`` and wait for the remote outcome; the delivery is left unsettled so its remote state and
    condition can still be read. A detach that follows the outcome is left for the caller to check."""
    delivery = snd.link.send(message)
    try:
        conn.wait(lambda: bool(delivery.remote_state) or delivery.settled, timeout=10, msg="no outcome")
    except LinkDetached:
        pass  # the detach came right after the outcome (frames are processed in order)
    return delivery


def rejected_with(delivery: Delivery) -> str | None:
    if delivery.remote_state != Delivery.REJECTED:
        return None
    condition = delivery.remote.condition
    return condition.name if condition is not None else ""


# -- before AMQP: headers and frames ------------------------------------------------------------------------------
def test_garbage_instead_of_a_protocol_header_gets_the_sasl_header_and_a_close(server):
    backlog = ("kept", preload(server, "kept", 5))
    with Bystander(server) as bystander:
        with RawClient(server.port) as raw:
            raw.send(b"GET / HTTP/1.1\r\nHost: subgate\r\n\r\n")
            assert raw.read_to_eof() == SASL_HEADER
        assert_still_serving(server, bystander, backlog)


@pytest.mark.parametrize("ending", ["half-close", "close"])
def test_a_connection_ending_inside_a_frame_is_dropped(server, ending):
    backlog = ("kept", preload(server, "kept", 5))
    with Bystander(server) as bystander:
        baseline = open_sockets(server.proc.pid)
        with RawClient(server.port) as raw:  # leaving the block closes the socket
            raw.sasl_anonymous()
            raw.start_amqp()
            out = raw.output()  # AMQP header + open frame
            assert out.startswith(AMQP_HEADER) and len(out) > len(AMQP_HEADER) + FRAME_HEADER.size
            raw.send(out[: len(AMQP_HEADER) + (len(out) - len(AMQP_HEADER)) // 2])
            if ending == "half-close":
                raw.sock.shutdown(socket.SHUT_WR)
                # The server answered the header with its own, then must close its side too (it used to keep the
                # socket in CLOSE-WAIT and spin on the EOF, as proton waits forever for the rest of the frame).
                assert raw.read_to_eof() == AMQP_HEADER
        assert wait_for_sockets(server.proc.pid, baseline) == baseline
        before = cpu_seconds(server.proc.pid)
        time.sleep(1.0)
        assert cpu_seconds(server.proc.pid) - before < 0.5, "the server is busy with no work to do"
        assert_still_serving(server, bystander, backlog)


def test_a_frame_over_max_frame_size_closes_with_framing_error(make_server):
    server = make_server(None, "--max-frame-size", "4096")
    backlog = ("kept", preload(server, "kept", 5))
    with Bystander(server) as bystander:
        with RawClient(server.port) as raw:
            raw.sasl_anonymous()
            conn = raw.start_amqp()
            raw.pump(lambda: conn.remote_container is not None, "the server's open")
            assert raw.transport.remote_max_frame_size == 4096
            raw.send(FRAME_HEADER.pack(4097, 2, 0, 0) + b"\x00" * 64)  # one byte over, body never sent
            frames, rest = parse_frames(raw.read_to_eof())
        assert not rest
        assert [f.descriptor for f in frames] == [CLOSE]
        assert frames[0].error() == ("amqp:connection:framing-error", "malformed frame")
        assert_still_serving(server, bystander, backlog)


# -- links and deliveries ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("frame_size", ["1048576", "512"], ids=["one-frame", "many-frames"])
def test_an_oversized_message_is_rejected_and_its_link_detached(make_server, frame_size):
    # In many frames the limit is hit while the delivery is still partial (the rest keeps arriving).
    server = make_server(None, "--max-message-size", "2048", "--max-frame-size", frame_size)
    backlog = ("kept", preload(server, "kept", 5))
    with Bystander(server) as bystander:
        conn = connect(server.url)
        snd = sender(conn, "sized", "queue")
        assert snd.link.remote_max_message_size == 2048
        delivery = send_and_wait(conn, snd, Message(body="x" * 10240, durable=True))
        assert rejected_with(delivery) == "amqp:link:message-size-exceeded"
        assert snd.link.state & snd.link.REMOTE_CLOSED
        assert snd.link.remote_condition.name == "amqp:link:message-size-exceeded"
        small = sender(conn, "sized", "queue")
        small.send(Message(body="y" * 1024, durable=True))
        rcv = receiver(conn, "sized", "queue")
        assert receive_bodies(rcv, 1) == ["y" * 1024]
        assert nothing_arrives(rcv)  # the oversized one was not stored
        conn.close()
        assert_still_serving(server, bystander, backlog)


def test_unknown_addresses_are_not_found_without_auto_create(make_server):
    server = make_server(None)
    backlog = ("kept", preload(server, "kept", 5))
    for address in ("bystander", "fresh"):  # the queues the survival checks use must exist already
        preload(server, address, 0)
    assert server.stop() == 0
    server.start("--no-auto-create")
    with Bystander(server, "bystander") as bystander:
        conn = connect(server.url)
        with pytest.raises(LinkDetached) as refused_receiver:
            conn.create_receiver("nowhere", name="rcv-nowhere")
        assert refused_receiver.value.condition == "amqp:not-found"
        with pytest.raises(LinkDetached) as refused_sender:
            conn.create_sender("nowhere", name="snd-nowhere")
        assert refused_sender.value.condition == "amqp:not-found"
        relay = sender(conn, None)
        assert rejected_with(send_and_wait(conn, relay, Message(address="nowhere", body="x"))) == "amqp:not-found"
        conn.close()
        assert_still_serving(server, bystander, backlog, fresh_address="fresh")


def test_attaching_to_a_node_of_the_other_type_is_a_failed_precondition(server):
    backlog = ("q", preload(server, "q", 3))
    with Bystander(server) as bystander:
        conn = connect(server.url)
        with pytest.raises(LinkDetached) as as_topic:
            sender(conn, "q", "topic")
        assert as_topic.value.condition == "amqp:precondition-failed"
        with pytest.raises(LinkDetached) as as_topic_consumer:
            receiver(conn, "q", "topic")
        assert as_topic_consumer.value.condition == "amqp:precondition-failed"
        conn.close()
        assert_still_serving(server, bystander, backlog)


def test_relayed_message_to_a_node_of_the_other_type_is_rejected(server):
    backlog = ("q", preload(server, "q", 3))
    with Bystander(server) as bystander:
        conn = connect(server.url)
        relay = sender(conn, None)
        as_topic = Message(address="q", body="wrong type", annotations={symbol("x-opt-jms-dest"): byte(1)})
        assert rejected_with(send_and_wait(conn, relay, as_topic)) == "amqp:precondition-failed"
        as_queue = Message(address="q", body="right type", annotations={symbol("x-opt-jms-dest"): byte(0)})
        delivery = send_and_wait(conn, relay, as_queue)
        assert delivery.remote_state == Delivery.ACCEPTED
        delivery.settle()
        conn.close()
        assert_still_serving(server, bystander, ("q", [*backlog[1], "right type"]))


def test_a_malformed_message_is_rejected_with_decode_error_and_the_link_stays_usable(server):
    backlog = ("kept", preload(server, "kept", 5))
    with Bystander(server) as bystander:
        conn = connect(server.url)
        snd = sender(conn, "malformed", "queue")
        delivery = snd.link.delivery("bad-1")
        snd.link.stream(b"\xff\x00garbage")
        snd.link.advance()
        conn.wait(lambda: bool(delivery.remote_state), timeout=10, msg="no outcome for the malformed message")
        assert rejected_with(delivery) == "amqp:decode-error"
        delivery.settle()
        assert snd.link.state & snd.link.REMOTE_ACTIVE
        snd.send(Message(body="well-formed"))
        rcv = receiver(conn, "malformed", "queue")
        assert receive_bodies(rcv, 1) == ["well-formed"]
        assert nothing_arrives(rcv)
        conn.close()
        assert_still_serving(server, bystander, backlog)


# -- clients that go away ----------------------------------------------------------------------------------------
def test_a_client_killed_mid_transfer_leaves_nothing_half_stored(make_server, store_url):
    server = make_server(store_url, "--max-frame-size", "4096")
    backlog = ("vanish", preload(server, "vanish", 3))
    with Bystander(server) as bystander:
        watcher = connect(server.url)
        early = receiver(watcher, "vanish-watch", "queue", credit=10)
        command = [sys.executable, "-m", "tests.support.vanishing_sender", str(server.port), "vanish-watch"]
        with subprocess.Popen(
            [*command, str(300 * 1024)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as child:
            try:
                line = child.stdout.readline().decode()  # printed once half of the transfer frames are out
                assert line.startswith("partway"), child.stderr.read().decode() if child.poll() is not None else line
                sent, total = map(int, line.split()[1:])
                assert 64 * 1024 < sent < total  # many 4 KiB frames written, the message not complete
            finally:
                child.kill()  # SIGKILL, by PID
                child.wait(10)
        assert nothing_arrives(early, 1.0)  # no partial message reaches a consumer that was waiting for it
        watcher.close()
        assert_still_serving(server, bystander, backlog)
    assert server.stop() == 0
    server.start()  # nothing half-written was journaled either
    conn = connect(server.url)
    assert nothing_arrives(receiver(conn, "vanish-watch", "queue"), 1.0)
    conn.close()
    assert_clean_log(server)


def test_a_wrong_password_fails_while_other_connections_keep_working(make_server, sqlite_url, tmp_path):
    assert run_subgate("db", "upgrade", "--store", sqlite_url, cwd=tmp_path).returncode == 0
    added = run_subgate("users", "add", "alice", "--password", "s3cret", "--store", sqlite_url, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assigned = run_subgate("roles", "assign", "admin", "alice", "--store", sqlite_url, cwd=tmp_path)
    assert assigned.returncode == 0, assigned.stderr  # once a user exists, only grants count
    server = make_server(sqlite_url)
    alice = {"user": "alice", "password": "s3cret"}
    backlog = ("kept", preload(server, "kept", 5, **alice))
    with Bystander(server, **alice) as bystander:
        with pytest.raises(ConnectionException, match="amqp:unauthorized-access"):
            connect(server.url, user="alice", password="wrong")
        assert_still_serving(server, bystander, backlog, **alice)
