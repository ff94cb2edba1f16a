"""The server's memory stays bounded (issue 19, item 3): the memory high-water mark stops every publisher
(``--memory-high-water``), and a consumer that stops reading its socket does not make the server buffer for it
without bound (``--max-connection-output``).

The stuck consumer is a raw socket (tests.support.rawamqp) whose client grants a huge credit and session window and
then never reads again. Its queue pages (journaled messages stay on disk), and the server stops handing its
connection transfers once the socket is that far behind, so what the server holds for it does not grow with what is
published; other clients are served meanwhile. Memory is the server's RSS (Linux /proc), compared as a ratio of
what was published, generously.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from proton import Message, Timeout
from proton.utils import BlockingConnection, BlockingSender

from tests.support.amqp import (
    all_accepted,
    connect,
    nothing_arrives,
    outcome,
    receive_bodies,
    receiver,
    send_while_credit,
    sender,
)
from tests.support.rawamqp import RawClient
from tests.support.server import rss_kib

BODY = 16 * 1024
ROUND = 1500  # messages per round: 24 MiB


def rss(pid: int) -> int:
    """Resident set size of ``pid``, in bytes."""
    return rss_kib(pid) * 1024


def stuck_consumer(port: int, address: str) -> RawClient:
    """A consumer on ``address`` with a huge credit and session window that then never reads its socket."""
    client = RawClient(port, timeout=10)
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.sasl_anonymous()
    session = client.start_amqp("stuck").session()
    session.incoming_capacity = 1 << 30
    session.open()
    link = session.receiver("stuck")
    link.source.address = link.target.address = address
    link.open()
    link.flow(1_000_000)
    client.pump(lambda: bool(link.state & link.REMOTE_ACTIVE), "the attach")
    client.send(client.output())
    return client


def publish(conn: BlockingConnection, snd: BlockingSender, count: int) -> None:
    body = "x" * BODY
    for start in range(0, count, 100):  # in batches, each confirmed before the next
        batch = [snd.link.send(Message(body=body, durable=True)) for _ in range(min(100, count - start))]
        assert all_accepted(conn, batch), start


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_a_consumer_that_stops_reading_does_not_grow_the_server_without_bound(make_server):
    server = make_server(None, "--page-messages", "50", "--max-connection-output", "1048576")
    assert server.proc is not None
    stuck = stuck_consumer(server.port, "stuck.q")
    conn = connect(server.url)
    snd = sender(conn, "stuck.q")
    publish(conn, snd, ROUND)  # the stuck consumer takes what it may; the rest pages
    middle = rss(server.proc.pid)
    publish(conn, snd, ROUND)
    grown = rss(server.proc.pid) - middle
    # Unbounded, the server held every transfer for the stuck socket: RSS grew 2.5 times what was published.
    assert grown < ROUND * BODY // 4, f"RSS grew {grown} bytes while {ROUND * BODY} bytes were published"
    assert outcome(conn, sender(conn, "other.q"), Message(body="hi", durable=True)) == "accepted"
    assert receive_bodies(receiver(conn, "other.q"), 1) == ["hi"]  # other clients are served
    stuck.sock.close()
    conn.close()


def test_above_the_high_water_mark_no_publisher_gets_credit_until_memory_drops(make_server):
    server = make_server(None, "--memory-high-water", "200000", "--max-message-size", "4096", "--credit-window", "10")
    conn = connect(server.url)
    snd = sender(conn, "hw.a")
    bodies = [f"{i:04d}" + "x" * 1020 for i in range(300)]
    first = send_while_credit(conn, snd, bodies, wait=1.0)
    assert 150 <= len(first) <= 220  # about 200,000 bytes, and what the link had credit for then
    assert all_accepted(conn, first)
    other = connect(server.url)  # another client, another queue: no credit either
    late = sender(other, "hw.b")
    with pytest.raises(Timeout):
        other.wait(lambda: late.link.credit > 0, timeout=1.0, msg="no credit")
    consumer = connect(server.url)
    rcv = receiver(consumer, "hw.a", credit=50)
    got = receive_bodies(rcv, len(first))
    assert got == bodies[: len(first)]
    assert nothing_arrives(rcv)  # (and the accepts go out meanwhile)
    other.wait(lambda: late.link.credit > 0, timeout=10, msg="credit did not come back")
    assert outcome(other, late, Message(body="b", durable=False)) == "accepted"
    rest = send_while_credit(conn, snd, bodies[len(first) :], wait=5.0)
    assert rest and all_accepted(conn, rest)
    assert receive_bodies(rcv, len(rest)) == bodies[len(first) : len(first) + len(rest)]
    assert nothing_arrives(rcv)
    assert receive_bodies(receiver(other, "hw.b"), 1) == ["b"]
    for connection in (conn, other, consumer):
        connection.close()


PUBLISHERS = 600  # connections that each publish one message and leave, after as many again to warm up


def test_connections_that_published_and_left_are_not_kept_in_memory(make_server):
    server = make_server(None)

    def publish_and_leave(count: int) -> None:
        for _ in range(count):
            conn = connect(server.url)
            sender(conn, "leavers.q").send(Message(body="x", durable=False))
            conn.close()

    publish_and_leave(PUBLISHERS // 2)
    before = rss(server.proc.pid)
    publish_and_leave(PUBLISHERS)
    per_connection = (rss(server.proc.pid) - before) / PUBLISHERS
    # Each kept ~15 KiB while the event loop cached every link that ever carried a transfer; now well under 5 KiB.
    assert per_connection < 5 * 1024, f"{per_connection / 1024:.1f} KiB kept per connection that published and left"
