"""``--http``: ``/metrics`` scraped with a real HTTP client while a real server takes a load, ``/healthz`` while
the store goes away and comes back, ``/readyz`` (issue 17). Every scrape is parsed with ``prometheus_client``'s
own parser; the durable subscription's backlog gauge is compared with what ``subgate bookmarks show`` reads."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from proton import Message
from sqlalchemy import text

from subgate.storage.db import make_engine, upgrade
from tests.e2e.test_cli_journal import flush, live_json
from tests.e2e.test_cli_subscriptions import durable_subscriber, publish
from tests.support.amqp import connect, receiver, sender
from tests.support.cli import ServeProcess, run_subgate, subgate_env
from tests.support.polling import eventually
from tests.support.server import START_SECONDS, subgate_command, wait_for_log_line

HTTP = re.compile(r"HTTP endpoint on http://(\S+):(\d+)")
N = 300
SUB1 = {"client_id": "app1", "name": "sub1", "topic": "prices"}  # the durable subscription's labels


def http_base(server: Any) -> str:
    match = HTTP.search(server.log())
    assert match, server.log()
    return f"http://{match.group(1)}:{match.group(2)}"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` by (name, sorted labels), parsed by prometheus_client."""
    status, text = get(base + "/metrics")
    assert status == 200, text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, metric: str, **labels: str) -> float:
    return samples.get((metric, tuple(sorted(labels.items()))), 0.0)


def test_metrics_follow_a_load_and_the_backlog_gauge_matches_the_store(make_server, store_url):
    server = make_server(store_url, "--http", "127.0.0.1:0")
    base = http_base(server)
    assert get(base + "/readyz") == (200, "ready\n")
    app1 = connect(server.url, container_id="app1")
    durable_subscriber(app1, "sub1")  # no credit: everything published to prices stays in its backlog
    before = scrape(base)
    assert value(before, "subgate_messages_in_total", node="prices") == 0

    def load() -> None:  # its own connection, used on this thread only
        conn = connect(server.url)
        publish(conn, "prices", *["red"] * N)
        snd = sender(conn, "orders")
        for number in range(N):
            snd.send(Message(body=f"order-{number}", durable=True))
        conn.close()

    loader = threading.Thread(target=load, name="load")
    loader.start()
    seen: list[float] = []
    while loader.is_alive() and len(seen) < 1000:  # scrapes during the load: they parse and never go back
        seen.append(value(scrape(base), "subgate_messages_in_total", node="prices"))
    loader.join(timeout=120)
    assert not loader.is_alive()
    assert seen == sorted(seen)

    def settled() -> dict | None:
        samples = scrape(base)
        done = (
            value(samples, "subgate_messages_in_total", node="prices") == N
            and value(samples, "subgate_queue_depth", queue="orders") == N
            and value(samples, "subgate_subscription_backlog", **SUB1) == N
            and value(samples, "subgate_journal_rows") >= 2 * N  # read every 5 s, like the backlog: after the load
        )
        return samples if done else None

    samples = eventually(settled, timeout=30, what="in_total, queue depth and backlog at N")
    assert value(samples, "subgate_messages_in_total", node="orders") == N
    assert value(samples, "subgate_connections") >= 1
    assert value(samples, "subgate_links", role="consumer") == 1
    assert value(samples, "subgate_journal_rows") >= 2 * N
    assert value(samples, "subgate_journal_commit_seconds_count") > 0
    assert value(samples, "subgate_journal_batch_size_sum") >= 2 * N
    age = value(
        samples, "subgate_subscription_oldest_unaccepted_seconds", client_id="app1", name="sub1", topic="prices"
    )
    assert age >= 0
    shown = live_json(server, "bookmarks", "show", "sub1", "--client-id", "app1")
    assert shown["backlog"] == value(
        samples, "subgate_subscription_backlog", client_id="app1", name="sub1", topic="prices"
    )

    # Consumers take 10 from the queue: out_total moves by 10, the depth drops by 10.
    consumer_conn = connect(server.url)
    rcv = receiver(consumer_conn, "orders")
    for _ in range(10):
        rcv.receive(timeout=10)
        rcv.accept()
    flush(consumer_conn)
    eventually(
        lambda: (
            value(scrape(base), "subgate_messages_out_total", node="orders") >= 10
            and value(scrape(base), "subgate_queue_depth", queue="orders") == N - 10
        ),
        what="out_total at 10 and the depth at N - 10",
    )
    consumer_conn.close()
    app1.close()
    assert get(base + "/healthz") == (200, "ok\n")


def test_top_nodes_bound_the_node_labels(make_server, sqlite_url):
    server = make_server(sqlite_url, "--http", "127.0.0.1:0", "--metrics-top-nodes", "2")
    base = http_base(server)
    conn = connect(server.url)
    for count, queue in ((3, "q1"), (2, "q2"), (1, "q3"), (1, "q4")):
        snd = sender(conn, queue)
        for number in range(count):
            snd.send(Message(body=number, durable=False))
    conn.close()

    def bounded() -> dict | None:
        samples = scrape(base)
        nodes = {dict(labels)["node"] for name, labels in samples if name == "subgate_messages_in_total"}
        return samples if nodes == {"q1", "q2", "other"} else None

    samples = eventually(bounded, what="two nodes and other")
    assert value(samples, "subgate_messages_in_total", node="other") == 2
    assert value(samples, "subgate_queue_depth", queue="other") == 2


def test_healthz_turns_503_while_postgresql_is_stopped_and_back(make_server, postgres_cluster, postgres_url):
    server = make_server(postgres_url, "--http", "127.0.0.1:0")
    base = http_base(server)
    eventually(lambda: get(base + "/healthz") == (200, "ok\n"), what="healthy")
    postgres_cluster.crash()  # the store goes away under the running server
    try:
        status, reason = eventually(
            lambda: (lambda answer: answer if answer[0] == 503 else None)(get(base + "/healthz")),
            timeout=30,
            what="503 with the store down",
        )
        assert "store" in reason
        assert get(base + "/readyz")[0] == 200  # still ready: it recovered and listens; it is not healthy
    finally:
        postgres_cluster.start_server()
    eventually(lambda: get(base + "/healthz") == (200, "ok\n"), timeout=60, what="healthy again")


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs to put a SQLite store on and fill (a root test cannot make a file unwritable with chmod)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def test_healthz_turns_503_while_the_sqlite_disk_is_full_and_back(make_server, tiny_tmpfs):
    server = make_server(f"sqlite:///{tiny_tmpfs / 'subgate.db'}", "--http", "127.0.0.1:0")
    base = http_base(server)
    eventually(lambda: get(base + "/healthz") == (200, "ok\n"), what="healthy")
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb", buffering=0) as out:  # fill the disk: bounded by the tmpfs's 3 MiB
        try:
            for _ in range(10_000):
                out.write(b"\0" * 4096)
        except OSError:
            pass
    try:
        status, reason = eventually(
            lambda: (lambda answer: answer if answer[0] == 503 else None)(get(base + "/healthz")),
            what="503 with the disk full",
        )
        assert reason.startswith("the store refused a write:") and "full" in reason
    finally:
        filler.unlink()
    eventually(lambda: get(base + "/healthz") == (200, "ok\n"), timeout=30, what="healthy again")
    assert server.stop() == 0


def test_readyz_and_healthz_without_http_are_off_and_unknown_paths_404(make_server, sqlite_url):
    server = make_server(sqlite_url, "--http", "127.0.0.1:0")
    base = http_base(server)
    assert get(base + "/nothing")[0] == 404
    eventually(lambda: get(base + "/healthz") == (200, "ok\n"), what="healthy")
    plain = make_server()
    assert HTTP.search(plain.log()) is None


def test_http_comes_from_the_environment_or_the_config_file_and_a_bad_value_stops_start_up(tmp_path, sqlite_url):
    store = ["--listen", "127.0.0.1:0", "--store", sqlite_url, "--migrate"]
    with ServeProcess(*store, cwd=tmp_path, env={"SUBGATE_HTTP": "127.0.0.1:0"}) as server:
        assert get(http_base(server) + "/readyz") == (200, "ready\n")
    config = tmp_path / "subgate.toml"
    config.write_text('http = "127.0.0.1:0"\nmetrics_top_nodes = 3\n')
    with ServeProcess(*store, "--config", str(config), cwd=tmp_path) as server:
        assert get(http_base(server) + "/readyz") == (200, "ready\n")
    bad = run_subgate("serve", *store, "--http", "nowhere", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == "Error: http: expected HOST:PORT, got 'nowhere'"


def test_readyz_is_503_while_recovery_waits_and_200_once_it_listens(tmp_path, postgres_url):
    """Recovery made to wait, deterministically: the test holds PostgreSQL's ACCESS EXCLUSIVE lock on the table
    recovery reads first (``subscriptions``; claiming the lease touches only ``server_lease``)."""
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    log_path = tmp_path / "serve.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        with engine.connect() as conn:
            transaction = conn.begin()
            conn.execute(text("LOCK TABLE subscriptions IN ACCESS EXCLUSIVE MODE"))
            with open(log_path, "wb") as log:
                command = ["serve", "--listen", "127.0.0.1:0", "--store", postgres_url, "--http", "127.0.0.1:0"]
                proc = subprocess.Popen(
                    [*subgate_command(), *command], stdout=log, stderr=subprocess.STDOUT, env=subgate_env()
                )
            read_log = lambda: log_path.read_text(errors="replace")  # noqa: E731
            match = wait_for_log_line(proc, read_log, HTTP, START_SECONDS, proc.kill)
            base = f"http://{match.group(1)}:{match.group(2)}"
            assert get(base + "/readyz") == (503, "recovering: not listening yet\n")
            assert get(base + "/healthz")[0] == 503  # no snapshot yet: the reactor is not running
            assert "listening on" not in read_log()
            transaction.rollback()  # recovery goes on
        eventually(lambda: get(base + "/readyz") == (200, "ready\n"), timeout=30, what="ready after recovery")
        assert "listening on" in read_log()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        engine.dispose()
