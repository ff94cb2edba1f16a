"""The client SDK's subscribers against a real server (seed 003): bookmarks, stores, discards, resubscription
after a reconnect, failover between two servers, and a subscriber killed at random points."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from subgate.client import (
    EPOCH,
    NOW,
    Client,
    ClientError,
    LoggedBookmarkStore,
    MemoryBookmarkStore,
    RingBookmarkStore,
)

ROOT = Path(__file__).resolve().parents[2]


def publish(url: str, topic: str, bodies: list, publisher_id: str = "feed", first_seq: int = 1) -> None:
    client = Client(url)
    try:
        pub = client.publisher(topic, publisher_id=publisher_id, first_seq=first_seq)
        pub.send_many(bodies)
        pub.flush(30)
        pub.close()
    finally:
        client.close()


def take(sub, count: int, timeout: float = 15.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = sub.receive(timeout=1.0)
        if message is not None:
            got.append(message)
    return got


def test_each_start_value_and_a_bookmark(server):
    publish(server.url, "sub/starts", [f"m{i}" for i in range(1, 6)])
    client = Client(server.url)
    try:
        assert [m.body for m in take(client.subscribe("sub/starts", bookmark=EPOCH), 5)] == [
            f"m{i}" for i in range(1, 6)
        ]
        assert [m.body for m in take(client.subscribe("sub/starts", bookmark="feed|3|"), 2)] == ["m4", "m5"]
        now = client.subscribe("sub/starts", bookmark=NOW)
        later = client.subscribe("sub/starts", bookmark="20000101T000000")
        assert [m.body for m in take(later, 5)] == [f"m{i}" for i in range(1, 6)]
        assert now.receive(timeout=0.5) is None
    finally:
        client.close()


def test_an_unknown_bookmark_is_refused_with_the_servers_reason(server):
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/unknown", bookmark="nobody|7|")
        with pytest.raises(ClientError, match="amqp:invalid-field"):
            sub.receive(timeout=10)
    finally:
        client.close()


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_logged_store_resumes_a_new_process_after_out_of_order_discards(make_server, store, request, tmp_path):
    server = make_server(request.getfixturevalue("postgres_url") if store == "postgres" else None)
    publish(server.url, "sub/logged", list(range(1, 11)))
    path = tmp_path / "sub.log"
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/logged", bookmark=EPOCH, bookmark_store=LoggedBookmarkStore(path))
        got = take(sub, 6)
        for message in got:
            if message.body in (1, 2, 4, 6):  # 3 and 5 are still being worked on when we stop
                sub.discard(message)
    finally:
        client.close()
    client = Client(server.url)
    try:
        store = LoggedBookmarkStore(path)
        assert store.recovery_bookmark("sub/logged") == "feed|2|,feed|4|,feed|6|"
        sub = client.subscribe("sub/logged", bookmark_store=store)  # no bookmark: resume from the store
        assert [m.body for m in take(sub, 6)] == [3, 5, 7, 8, 9, 10]
        assert sub.receive(timeout=0.5) is None
    finally:
        client.close()


def test_a_durable_subscription_keeps_its_position_for_its_client_id(server):
    publish(server.url, "sub/durable", list(range(1, 7)))
    client = Client(server.url, client_id="durable-app")
    try:
        sub = client.subscribe("sub/durable", bookmark=EPOCH, name="d1")
        for message in take(sub, 3):
            sub.discard(message)
        time.sleep(0.3)
        sub.close()
    finally:
        client.close()
    client = Client(server.url, client_id="durable-app")
    try:
        sub = client.subscribe("sub/durable", name="d1")
        assert [m.body for m in take(sub, 3)] == [4, 5, 6]
        assert sub.receive(timeout=0.5) is None
        sub.unsubscribe()  # deleted: a new one of that name starts where it is told
        time.sleep(0.3)
        again = client.subscribe("sub/durable", name="d1", bookmark=EPOCH)
        assert [m.body for m in take(again, 6)] == [1, 2, 3, 4, 5, 6]
    finally:
        client.close()


def test_after_a_server_restart_the_subscription_is_reissued_at_its_recovery_bookmark(server):
    publish(server.url, "sub/reissue", list(range(1, 6)))
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/reissue", bookmark=EPOCH, bookmark_store=MemoryBookmarkStore())
        first = take(sub, 5)
        for message in first[:3]:
            sub.discard(message)  # 4 and 5 are held by the application across the outage
        server.kill()
        server.start()
        publish(server.url, "sub/reissue", [6, 7], first_seq=6)
        rest = take(sub, 2)
        assert [m.body for m in rest] == [6, 7]  # 4 and 5 come again but the app holds them: dropped
        assert sub.receive(timeout=0.5) is None
        assert client.connections >= 2 and sub.attaches >= 2
        for message in first[3:] + rest:
            sub.discard(message)
    finally:
        client.close()


def test_failover_between_two_servers_fed_by_one_publisher_delivers_each_message_once(make_server):
    first, second = make_server(), make_server()
    bodies = list(range(1, 21))
    for server in (first, second):  # the same publisher id and seqs on both: the same bookmarks
        publish(server.url, "sub/failover", bodies[:10])
    client = Client([first.url, second.url])
    try:
        sub = client.subscribe("sub/failover", bookmark=EPOCH, bookmark_store=MemoryBookmarkStore())
        got = take(sub, 6)
        for message in got:
            sub.discard(message)
        first.kill()
        for server in (second,):
            publish(server.url, "sub/failover", bodies[10:], first_seq=11)
        got += take(sub, 14)
        for message in got[6:]:
            sub.discard(message)
        assert [m.body for m in got] == bodies
        assert sub.receive(timeout=0.5) is None
    finally:
        client.close()


def test_a_ring_store_resumes_an_in_order_subscriber(server, tmp_path):
    publish(server.url, "sub/ring", list(range(1, 9)))
    path = tmp_path / "ring"
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/ring", bookmark=EPOCH, bookmark_store=RingBookmarkStore(path))
        for message in take(sub, 5):
            sub.discard(message)
    finally:
        client.close()
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/ring", bookmark_store=RingBookmarkStore(path))
        assert [m.body for m in take(sub, 3)] == [6, 7, 8]
    finally:
        client.close()


def test_a_subscriber_killed_at_random_points_processes_every_message_exactly_once(server, tmp_path):
    count, kills = 600, 20
    publish(server.url, "sub/crashy", list(range(1, count + 1)))
    store, out = tmp_path / "store.log", tmp_path / "processed.txt"
    rng = random.Random(1403)

    def start(seed: int, epoch: bool) -> subprocess.Popen[bytes]:
        args = ["subscribe", server.url, "sub/crashy", str(store), str(out), str(seed)] + (["--epoch"] if epoch else [])
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.client_apps", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    mid_way = 0  # kills that found the work started and not finished
    for run in range(kills):
        app = start(run, epoch=run == 0)
        time.sleep(rng.uniform(0.3, 1.2))
        app.kill()
        app.wait(10)
        done = len(out.read_text().splitlines()) if out.exists() else 0
        mid_way += 0 < done < count
    final = start(kills, epoch=False)
    stdout, stderr = final.communicate(timeout=120)
    assert final.returncode == 0 and b"done" in stdout, stderr.decode()[-2000:]
    assert mid_way >= 3
    processed = Counter(int(line.split(" ")[1]) for line in out.read_text().splitlines())
    assert sorted(processed) == list(range(1, count + 1))
    assert [body for body, times in processed.items() if times != 1] == []


def test_a_durable_subscription_with_a_logged_store_filters_what_the_server_redelivers_after_a_crash(server, tmp_path):
    """Discards are settled at once but the server persists acks a moment later (docs/bookmarks.md): killed
    right after, it redelivers them, and the reopened store drops them."""
    publish(server.url, "sub/durable-crash", list(range(1, 11)))
    path = tmp_path / "durable.log"
    client = Client(server.url, client_id="crash-app")
    try:
        sub = client.subscribe("sub/durable-crash", bookmark=EPOCH, name="d", bookmark_store=LoggedBookmarkStore(path))
        for message in take(sub, 5):
            sub.discard(message)
        server.kill()
    finally:
        client.close()
    server.start()
    client = Client(server.url, client_id="crash-app")
    try:
        sub = client.subscribe("sub/durable-crash", name="d", bookmark_store=LoggedBookmarkStore(path))
        assert [m.body for m in take(sub, 5)] == [6, 7, 8, 9, 10]
        assert sub.receive(timeout=0.5) is None
    finally:
        client.close()


def test_iterating_blocks_for_messages_and_ends_when_the_subscription_is_closed(server):
    publish(server.url, "sub/iterate", [1, 2, 3])
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/iterate", bookmark=EPOCH)
        seen = []
        for message in sub:
            seen.append(message.body)
            sub.discard(message)
            if len(seen) == 3:
                sub.close()
        assert seen == [1, 2, 3]
    finally:
        client.close()


def test_a_live_subscription_receives_messages(server):
    client = Client(server.url)
    try:
        sub = client.subscribe("sub/live", live=True, bookmark_store=MemoryBookmarkStore())
        client.wait_connected(10)
        time.sleep(0.3)  # attached before publishing (NOW)
        publish(server.url, "sub/live", [1, 2, 3])
        assert [m.body for m in take(sub, 3)] == [1, 2, 3]
        assert sub.receive(timeout=0.5) is None
    finally:
        client.close()


def test_a_store_backed_subscriber_killed_before_its_first_discard_loses_nothing(server, tmp_path, uid):
    """A store with nothing recorded starts the subscription at a time just before the subscribe and records it
    first (not NOW), so what the killed process received and never discarded comes again after the restart."""
    topic, store = f"sub/first-discard-{uid}", str(tmp_path / "store.log")

    def app(mode: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.client_apps", mode, server.url, topic, store],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def read_until(proc: subprocess.Popen[str], wanted: str, lines: list[str]) -> None:
        assert proc.stdout is not None
        for _ in range(1000):  # bounded: the app prints one line per message
            line = proc.stdout.readline().strip()
            assert line, f"the app ended early: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line)
            if line == wanted:
                return
        pytest.fail(f"{wanted!r} never came: {lines}")

    held = app("hold")
    seen: list[str] = []
    read_until(held, "subscribed", seen)
    publish(server.url, topic, list(range(1, 11)), publisher_id=f"first-{uid}")
    read_until(held, "received 10", seen)
    held.kill()
    held.wait(10)
    assert seen == ["subscribed"] + [f"received {n}" for n in range(1, 11)]

    drained = app("drain")
    out, err = drained.communicate(timeout=120)
    assert drained.returncode == 0, err[-2000:]
    bodies = [int(line.split()[1]) for line in out.splitlines() if line.startswith("received ")]
    assert bodies == list(range(1, 11))
