"""One position rule for every journal consumer (docs/bookmarks.md, "Positions"), on SQLite and PostgreSQL.

A durable queue and a shared durable (global) subscription: messages accepted out of order, then ``kill -9``,
then a new consumer gets exactly the messages that were not accepted, in journal order, and then the rest.
(The non-shared durable subscription's case is in ``test_replay``.)
"""

from __future__ import annotations

import time

import pytest
from proton import Message
from proton.utils import BlockingConnection, BlockingReceiver

from tests.support.amqp import Capabilities, SharedDurable, connect, nothing_arrives, receive_bodies, sender

ACCEPTED = (0, 2, 3, 6, 8)


def consume_out_of_order(conn: BlockingConnection, rcv: BlockingReceiver) -> None:
    """Take ten, accept those at ``ACCEPTED``, leave the others unsettled, make sure the accepts have left."""
    rcv.flow(10)
    for _ in range(10):
        rcv.receive(timeout=15)
    deliveries = list(rcv.fetcher.unsettled)
    for index in ACCEPTED:
        deliveries[index].update(deliveries[index].ACCEPTED)
        deliveries[index].settle()
    sender(conn, "positions.flush", "queue").send(Message(body="round trip"))
    time.sleep(1.5)  # an accept is persisted within one second (docs/bookmarks.md)


def expected_after_crash() -> list[str]:
    return [f"m{i}" for i in range(10) if i not in ACCEPTED] + [f"m{i}" for i in range(10, 30)]


@pytest.mark.parametrize("kind", ["queue", "shared-durable-subscription"])
def test_out_of_order_accepts_then_kill_redeliver_exactly_the_rest(make_server, store_url, kind):
    server = make_server(store_url)
    conn = connect(server.url)
    address = "positions.q" if kind == "queue" else "positions/topic"

    def attach(connection: BlockingConnection, credit: int) -> BlockingReceiver:
        if kind == "queue":
            return connection.create_receiver(address, credit=credit, options=[Capabilities("queue")])
        return connection.create_receiver(address, name="sub|global", credit=credit, options=[SharedDurable()])

    rcv = attach(conn, 0)
    snd = sender(conn, address, "queue" if kind == "queue" else "topic")
    for i in range(30):
        snd.send(Message(body=f"m{i}", durable=True))
    consume_out_of_order(conn, rcv)
    server.kill()
    server.start()
    conn = connect(server.url)
    try:
        again = attach(conn, 100)
        rest = expected_after_crash()
        assert receive_bodies(again, len(rest)) == rest
        assert nothing_arrives(again)
    finally:
        conn.close()
