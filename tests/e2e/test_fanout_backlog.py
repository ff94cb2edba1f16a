"""The primary's side of replication: a bounded queue for a secondary that stops reading, and batches.

The secondary grants credit as it applies (its ``max_in_flight``). Stopped (SIGSTOP), it grants none; the
primary keeps ``--fanout-queue-limit`` operations in order and then only the latest value per topic
(``engine.fanout_queue``, docs/fanout.md "A secondary that is behind"), however many updates the topics get.
Resumed, the secondary gets the latest value of every topic. Batches (several operations per transfer) go only
to a secondary that offers the capability ``replicate-batch``.
"""

from __future__ import annotations

import os
import signal

from proton import Message

from subgate.cli.management import ManagementClient
from subgate.engine.fanout import decode_batch
from tests.e2e.test_topic_selectors import fetched
from tests.support.amqp import connect, receiver, sender
from tests.support.fanout import create, wait_live
from tests.support.polling import eventually

TOPICS = [f"A/t{i}" for i in range(10)]
LIMIT = 50
ROUNDS = 150


def feeds(server) -> list[dict]:
    with ManagementClient("127.0.0.1", server.port) as client:
        body = client.request("QUERY", "fanout", {}).body
    return [dict(feed) for feed in body["feeds"]]


def test_a_stalled_secondary_costs_the_primary_at_most_its_limit_plus_one_value_per_topic(make_server, tmp_path):
    primary = make_server(None, "--name", "primary-1", "--fanout-queue-limit", str(LIMIT))
    create(primary, *TOPICS)
    config = tmp_path / "secondary.toml"
    config.write_text(
        f'[subgate]\nname = "secondary-1"\n\n[[fanout]]\nurl = "{primary.url}"\nselector = "A//"\nmax_in_flight = 10\n'
    )
    secondary = make_server(None, "--config", str(config))
    wait_live(secondary, len(TOPICS))
    assert secondary.proc is not None
    os.kill(secondary.proc.pid, signal.SIGSTOP)  # it reads nothing and grants no credit from now on
    try:
        conn = connect(primary.url)
        senders = {path: sender(conn, path, "topic") for path in TOPICS}
        highest = 0
        for round_ in range(ROUNDS):
            for path, snd in senders.items():
                snd.send(Message(body=f"{path}:{round_}"))
            if round_ % 30 == 29:
                (feed,) = feeds(primary)
                highest = max(highest, feed["pending"])
                assert feed["pending"] <= LIMIT + len(TOPICS), feed
        conn.close()
        (feed,) = feeds(primary)
        assert feed["secondary"] == "secondary-1" and feed["conflated"] > 0
        assert feed["pending"] <= LIMIT + len(TOPICS) and highest > LIMIT  # full, and bounded
    finally:
        os.kill(secondary.proc.pid, signal.SIGCONT)
    eventually(lambda: feeds(primary)[0]["pending"] == 0, timeout=20, what="the primary's queue drained")
    reader = connect(secondary.url)
    for path in TOPICS:
        latest = [f"{path}:{ROUNDS - 1}"]
        eventually(lambda path=path, latest=latest: fetched(reader, path) == latest, timeout=10, what=path)
    reader.close()


def _replicated(primary, *capabilities: str, count: int) -> list[Message]:
    """The first ``count`` transfers a raw replication receiver offering ``capabilities`` gets from ``primary``."""
    conn = connect(primary.url)
    rcv = receiver(conn, "A//", *capabilities, credit=50)
    got = [rcv.receive(timeout=10) for _ in range(count)]
    conn.close()
    return got


def test_batches_only_for_a_secondary_that_offers_them(make_server):
    """A peer offering only ``replicate`` gets one operation per transfer (the contract of design.md §3); one
    offering ``replicate-batch`` too gets the snapshot in one ``batch`` transfer."""
    primary = make_server(None, "--name", "primary-1")
    create(primary, *TOPICS[:3])
    single = _replicated(primary, "replicate", count=4)
    assert [m.properties["op"] for m in single] == ["add", "add", "add", "snapshot-end"]
    assert [m.properties.get("path") for m in single] == [*TOPICS[:3], None]
    (batch,) = _replicated(primary, "replicate", "replicate-batch", count=1)
    assert batch.subject == "batch" and isinstance(batch.properties["ts"], int)
    assert decode_batch(batch.body) == [("add", path, None) for path in TOPICS[:3]] + [("snapshot-end", "", None)]
