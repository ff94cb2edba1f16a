"""The client SDK's publishers against a real server (seed 004): send policies, failures, linger, re-sends.

Each test has its own server (SQLite), killed and restarted on the same port where the test needs an outage.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from subgate.client import EPOCH, Client, ClientError, PublishError
from tests.support.server import SubgateProcess

ROOT = Path(__file__).resolve().parents[2]


def restart_later(server: SubgateProcess, delay: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), server.start()), daemon=True)
    thread.start()
    return thread


def replayed(url: str, topic: str, expected: int, timeout: float = 15.0) -> list:
    """Every message of ``topic`` from EPOCH: the bodies, after checking nothing more arrives."""
    client = Client(url)
    try:
        sub = client.subscribe(topic, bookmark=EPOCH)
        bodies = []
        deadline = time.monotonic() + timeout
        while len(bodies) < expected and time.monotonic() < deadline:
            message = sub.receive(timeout=1.0)
            if message is not None:
                bodies.append(message.body)
                sub.discard(message)
        extra = sub.receive(timeout=0.5)
        assert extra is None, f"unexpected {extra}"
        return bodies
    finally:
        client.close()


def test_inline_messages_arrive_with_their_publisher_id_seq_and_bookmark(server):
    client = Client(server.url)
    try:
        sub = client.subscribe("client/basic", bookmark=EPOCH)
        pub = client.publisher("client/basic", send_policy="inline", publisher_id="feed-1")
        assert [pub.send(f"m{i}", {"i": i}) for i in range(3)] == [1, 2, 3]
        got = [sub.receive(timeout=10) for _ in range(3)]
        assert [(m.body, m.properties, m.publisher_id, m.seq, m.bookmark) for m in got if m] == [
            (f"m{i}", {"i": i}, "feed-1", i + 1, f"feed-1|{i + 1}|") for i in range(3)
        ]
        pub.close()
    finally:
        client.close()


def test_inline_send_raises_after_the_retry_duration_while_the_server_is_down(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/inline-down", send_policy="inline", retry_duration=1.5)
        pub.send("before")
        server.kill()
        started = time.monotonic()
        with pytest.raises(PublishError) as raised:
            pub.send("during")
        took = time.monotonic() - started
        assert 1.4 <= took < 6, took
        assert raised.value.lost_seqs == (2,) and raised.value.count == 1
        assert "retry duration" in str(raised.value)
    finally:
        client.close()


def test_inline_send_succeeds_when_the_server_comes_back_within_the_retry_duration(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/inline-back", send_policy="inline", retry_duration=20.0, publisher_id="ib")
        pub.send("before")
        server.kill()
        restarting = restart_later(server, 1.0)
        assert pub.send("during") == 2  # blocks across the reconnect, then confirmed
        restarting.join(30)
        assert client.connections >= 2
    finally:
        client.close()
    assert replayed(server.url, "client/inline-back", 2) == ["before", "during"]


def test_non_inline_flush_reports_the_background_failure_with_the_loss_count(server):
    losses: list[PublishError] = []
    client = Client(server.url)
    try:
        pub = client.publisher("client/non-inline", send_policy="non_inline", retry_duration=1.0, on_loss=losses.append)
        pub.send("confirmed")
        pub.flush(10)
        server.kill()
        started = time.monotonic()
        seqs = pub.send_many(["a", "b", "c", "d"])
        assert time.monotonic() - started < 0.5  # non-inline: returns at once
        with pytest.raises(PublishError) as raised:
            pub.flush(20)
        assert raised.value.count == 4 and raised.value.lost_seqs == tuple(seqs) == (2, 3, 4, 5)
        assert "4 message(s) may have been lost" in str(raised.value)
        assert losses and {s for e in losses for s in e.lost_seqs} == {2, 3, 4, 5}
        pub.flush(1)  # reported once: nothing left to report
    finally:
        client.close()


def test_non_inline_failure_surfaces_from_a_later_send(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/non-inline-send", send_policy="non_inline", retry_duration=0.5)
        server.kill()
        pub.send("lost")
        time.sleep(1.5)
        with pytest.raises(PublishError, match="1 message"):
            pub.send("next")
    finally:
        client.close()


def test_non_inline_send_blocks_at_max_batch_count(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/batch", send_policy="non_inline", max_batch_count=3, retry_duration=1.0)
        server.kill()
        pub.send_many(["a", "b", "c"])
        started = time.monotonic()
        with pytest.raises(PublishError):
            pub.send("d")  # waits for room; the three fail after the retry duration, and that is reported
        assert time.monotonic() - started >= 0.8
    finally:
        client.close()


def test_close_with_linger_delivers_in_flight_messages_when_the_server_comes_back(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/linger", send_policy="non_inline", retry_duration=30.0, publisher_id="lg")
        pub.send("first")
        pub.flush(10)
        server.kill()
        pub.send_many(["second", "third"])
        restarting = restart_later(server, 1.0)
        pub.close(linger=20.0)  # returns once they are confirmed
        restarting.join(30)
    finally:
        client.close()
    assert replayed(server.url, "client/linger", 3) == ["first", "second", "third"]


def test_close_gives_up_silently_after_the_linger_period(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/linger-out", send_policy="non_inline", retry_duration=30.0)
        server.kill()
        pub.send("never")
        started = time.monotonic()
        pub.close(linger=1.0)  # no exception
        assert 0.9 <= time.monotonic() - started < 5
        with pytest.raises(ClientError):
            pub.send("after close")
    finally:
        client.close()


def test_a_rejected_message_is_a_publish_error_and_not_retried(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client/rejected", send_policy="inline", publisher_id="x" * 600)  # over 512
        started = time.monotonic()
        with pytest.raises(PublishError, match="amqp:invalid-field"):
            pub.send("refused")
        assert time.monotonic() - started < 5  # not retried until the retry duration
    finally:
        client.close()


def test_a_refused_publisher_link_fails_what_is_in_flight_and_later_sends_at_once(server):
    client = Client(server.url)
    try:
        pub = client.publisher("client//bad", send_policy="inline", retry_duration=30.0)
        started = time.monotonic()
        with pytest.raises(PublishError, match="link refused: amqp:invalid-field"):
            pub.send("in flight")
        with pytest.raises(ClientError, match="refused the publisher"):
            pub.send("later")
        assert time.monotonic() - started < 5
    finally:
        client.close()


def test_a_publisher_id_file_keeps_the_id_and_continues_the_numbering_after_a_restart(server, tmp_path):
    id_file = tmp_path / "publisher.id"
    client = Client(server.url)
    try:
        first = client.publisher("client/idfile", publisher_id_file=id_file, send_policy="inline")
        assert first.send("one") == 1
        first.close()
        # A new process (here: a new publisher) of the same file: same id, and numbering goes on past what the
        # last one may have used, so its new message is not dropped as a duplicate.
        second = client.publisher("client/idfile", publisher_id_file=id_file, send_policy="inline")
        assert second.publisher_id == first.publisher_id == id_file.read_text().split("\n")[0]
        assert second.send("two") > 1
        # Re-sending from a known seq is still possible: the server drops what it has.
        again = client.publisher("client/idfile", publisher_id_file=id_file, send_policy="inline", first_seq=1)
        again.send("one, re-sent")
    finally:
        client.close()
    assert replayed(server.url, "client/idfile", 2) == ["one", "two"]


def run_app(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.client_apps", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_publisher_killed_and_restarted_with_the_same_id_is_seen_exactly_once(make_server, store, request):
    server = make_server(request.getfixturevalue("postgres_url") if store == "postgres" else None)
    count = 400
    app = run_app("publish", server.url, "client/restart", "restarter", str(count))
    time.sleep(1.2)  # mid-way: python starts, connects and sends some
    app.kill()
    app.wait(10)
    again = run_app("publish", server.url, "client/restart", "restarter", str(count))
    out, err = again.communicate(timeout=90)
    assert again.returncode == 0 and b"done" in out, err.decode()[-2000:]
    assert replayed(server.url, "client/restart", count, timeout=30) == list(range(1, count + 1))


def test_against_a_store_send_noconfirm_branch_sends_return_at_once_and_arrive(make_server):
    server = make_server(None, "--publisher-modes", "noconfirm=store_send_noconfirm")
    client = Client(server.url)
    try:
        pub = client.publisher("noconfirm/feed", send_policy="inline", publisher_id="nc")
        for n in range(1, 21):
            pub.send(n)
        pub.close()
    finally:
        client.close()
    assert replayed(server.url, "noconfirm/feed", 20) == list(range(1, 21))
