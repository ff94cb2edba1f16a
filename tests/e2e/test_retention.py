"""Retention over real sockets (docs/bookmarks.md, "Retention"), on SQLite and PostgreSQL.

With ``--retention 2s`` the background passes delete the journal rows older than that which every queue and
durable subscription of their address has accepted, and nothing else: a durable subscription's unaccepted
messages and a queue's unconsumed ones stay, and are delivered afterwards; a replay from EPOCH starts at the
oldest row left, and a bookmark of a deleted row is refused.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa
from proton import Described, Message, Terminus, symbol
from proton.reactor import LinkOption
from proton.utils import LinkDetached

from tests.support.amqp import Capabilities, connect, nothing_arrives, receive_bodies, receiver, sender


class Replay(LinkOption):
    def __init__(self, value: str) -> None:
        self.value = value

    def apply(self, link: Any) -> None:
        link.source.filter.put_dict(
            {symbol("subgate-bookmark"): Described(symbol("subgate:bookmark:string"), self.value)}
        )
        Capabilities("topic").apply(link)


class Durable(LinkOption):
    def apply(self, link: Any) -> None:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
        Capabilities("topic").apply(link)


def rows(store_url: str) -> dict[str, int]:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            result = conn.execute(sa.text("SELECT address, count(*) FROM messages GROUP BY address"))
            return {str(address): int(count) for address, count in result}
    finally:
        engine.dispose()


def wait_for_rows(store_url: str, expected: dict[str, int], timeout: float = 30.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    current = rows(store_url)
    while time.monotonic() < deadline:
        current = rows(store_url)
        if all(current.get(address, 0) == count for address, count in expected.items()):
            break
        time.sleep(0.3)
    return current


def test_retention_deletes_old_accepted_rows_and_keeps_what_is_still_needed(make_server, store_url):
    server = make_server(store_url, "--retention", "2s", "--retention-interval", "0.3")
    conn = connect(server.url, container_id="retention-app")
    try:
        keep = conn.create_receiver("ret/d", name="keep", credit=0, options=[Durable()])
        publish = sender(conn, "ret/t", "topic")
        for i in range(30):
            publish.send(Message(body=f"t{i}", durable=True))
        first = receiver(conn, "ret/t", "topic")  # a live subscriber: its copy does not keep the row
        marks = []
        publish.send(Message(body="t30", durable=True))
        got = first.receive(timeout=10)
        first.accept()
        marks.append(str(got.annotations["x-opt-bookmark"]))
        to_durable = sender(conn, "ret/d", "topic")
        for i in range(10):
            to_durable.send(Message(body=f"d{i}", durable=True))
        keep.flow(5)
        assert receive_bodies(keep, 5) == [f"d{i}" for i in range(5)]
        keep.link.detach()
        to_queue = sender(conn, "ret.q", "queue")
        for i in range(10):
            to_queue.send(Message(body=f"q{i}", durable=True))
        consumer = receiver(conn, "ret.q", "queue", credit=4)
        assert receive_bodies(consumer, 4) == [f"q{i}" for i in range(4)]
        consumer.close()  # what it holds unsettled goes back to the queue
        sender(conn, "ret.other", "queue").send(Message(body="flush"))  # a round trip: the accepts have left
        left = wait_for_rows(store_url, {"ret/t": 0, "ret/d": 5, "ret.q": 6})
        assert (left.get("ret/t", 0), left.get("ret/d", 0), left.get("ret.q", 0)) == (0, 5, 6)
        publish.send(Message(body="fresh", durable=True))
        replay = conn.create_receiver("ret/t", name="from-epoch", options=[Replay("0")])
        assert receive_bodies(replay, 1) == ["fresh"]
        assert nothing_arrives(replay)
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver("ret/t", name="from-deleted", options=[Replay(marks[0])])
        assert refused.value.link.remote_condition.name == "amqp:invalid-field"
        again = conn.create_receiver("ret/d", name="keep", credit=10, options=[Durable()])
        assert receive_bodies(again, 5) == [f"d{i}" for i in range(5, 10)]
        assert receive_bodies(receiver(conn, "ret.q", "queue"), 6) == [f"q{i}" for i in range(4, 10)]
    finally:
        conn.close()


def test_retention_runs_while_subscribers_replay_and_consume(make_server, store_url):
    server = make_server(store_url, "--retention", "1s", "--retention-interval", "0.2", "--page-messages", "40")
    conn = connect(server.url, container_id="slow-app")
    try:
        durable = conn.create_receiver("ret/slow", name="slow", credit=0, options=[Durable()])
        publish = sender(conn, "ret/slow", "topic")
        for i in range(400):
            publish.send(Message(body=i, durable=True))
        replaying = conn.create_receiver("ret/slow", name="replayer", credit=0, options=[Replay("0")])
        replayed: list[int] = []
        consumed: list[int] = []
        for _ in range(8):  # about three seconds of slow consumers while retention passes run
            replaying.flow(50)
            replayed += receive_bodies(replaying, 50)
            durable.flow(50)
            consumed += receive_bodies(durable, 50)
            time.sleep(0.4)
        assert replayed == list(range(400)) and consumed == list(range(400))
        assert nothing_arrives(durable) and nothing_arrives(replaying)
        sender(conn, "ret.flush", "queue").send(Message(body="round trip"))
        assert wait_for_rows(store_url, {"ret/slow": 0}).get("ret/slow", 0) == 0
    finally:
        conn.close()
