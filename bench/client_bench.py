#!/usr/bin/env python3
"""Client SDK figures (docs/client.md, "Costs"): publish rates per send policy, and a subscriber replaying with a
LoggedBookmarkStore; plus the bookmark stores' cost per message in process.

Starts its own ``subgate serve`` (SQLite in a temp dir, port chosen by the server) unless ``--url`` is given,
and stops it by its PID. Run with the project's venv:

    .venv/bin/python bench/client_bench.py [--count 20000] [--url amqp://127.0.0.1:5672]
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from subgate.client import EPOCH, Client, LoggedBookmarkStore, MemoryBookmarkStore, RingBookmarkStore
from subgate.client.stores import BookmarkStore


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = workdir / "server.log"
    script = Path(sys.executable).with_name("subgate")
    command = [str(script), "serve", "--listen", "127.0.0.1:0", "--store", f"sqlite:///{workdir / 's.db'}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen([*command, "--migrate"], stdout=out, stderr=subprocess.STDOUT)
    for _ in range(300):  # at most 30 s
        found = re.search(r"listening on (\S+):(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, f"amqp://127.0.0.1:{found.group(2)}"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text(errors='replace')}")


def store_costs(workdir: Path, count: int) -> None:
    stores: list[tuple[str, BookmarkStore]] = [
        ("memory", MemoryBookmarkStore()),
        ("logged", LoggedBookmarkStore(workdir / "logged.log")),
        ("ring", RingBookmarkStore(workdir / "ring")),
    ]
    for name, store in stores:
        store.set_start("s", EPOCH)
        started = time.perf_counter()
        for seq in range(1, count + 1):
            store.log("s", f"feed-1|{seq}|")
            store.discard("s", f"feed-1|{seq}|")
        print(f"{name} store: {(time.perf_counter() - started) / count * 1e6:.1f} us per message (log + discard)")


def client_rates(url: str, workdir: Path, count: int) -> None:
    body = b"x" * 1024
    client = Client(url)
    try:
        client.wait_connected(10)
        pub = client.publisher("bench/client", send_policy="non_inline", publisher_id="bench-many")
        started = time.monotonic()
        pub.send_many([body] * count)
        pub.flush(300)
        print(f"non_inline send_many: {count / (time.monotonic() - started):.0f} msgs/s")
        pub = client.publisher("bench/client", send_policy="non_inline", publisher_id="bench-one")
        started = time.monotonic()
        for _ in range(count):
            pub.send(body)
        pub.flush(300)
        print(f"non_inline send: {count / (time.monotonic() - started):.0f} msgs/s")
        inline, n = client.publisher("bench/client", send_policy="inline", publisher_id="bench-inline"), count // 20
        started = time.monotonic()
        for _ in range(n):
            inline.send(body)
        took = time.monotonic() - started
        print(f"inline send: {n / took:.0f} msgs/s, {took / n * 1000:.2f} ms each")
        sub = client.subscribe("bench/client", bookmark=EPOCH, bookmark_store=LoggedBookmarkStore(workdir / "b.log"))
        total, got, started = 2 * count + n, 0, time.monotonic()
        while got < total and (message := sub.receive(10)) is not None:
            sub.discard(message)
            got += 1
        print(f"subscriber with LoggedBookmarkStore: {got / (time.monotonic() - started):.0f} msgs/s ({got})")
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="client-bench-"))
    store_costs(workdir, 50000)
    proc, url = (None, args.url) if args.url else start_server(workdir)
    try:
        client_rates(url, workdir, args.count)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
