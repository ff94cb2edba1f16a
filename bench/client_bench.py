#!/usr/bin/env python3
"""Client SDK figures (issue 14; docs/client.md "Costs", docs/performance.md "Client SDK"), in one run against one
server, next to the C load client (bench/loadgen.c) on the same address:

1. the bookmark stores' cost per message in process (``log`` + ``discard``), and the subscriber rate that caps;
2. one ``subgate serve`` (SQLite in a temp dir, started as bench/run.py starts it, default publisher mode
   ``store_confirm_send``) with one idle JMS durable subscription on the topic ``bench.client`` (``loadgen
   subscribe``), so every message is journaled and kept: S2T's load shape (bench/README.md);
3. ``--rounds`` rounds, each running in turn (A B C ..., every other round in reverse order, since the journal
   grows through the run): ``loadgen send`` (S2T's send: N durable 1 KiB messages, at most 1000 unsettled, each
   ``accepted`` counted), the SDK's ``non_inline`` ``send()`` of N, ``loadgen send --publisher-id`` (the
   annotations the SDK puts on every message: the server's cost per message is higher with them), the SDK's
   ``send_many`` of N in batches of ``--batch``, and ``--inline-count`` SDK ``inline`` sends (rate and per-send
   latency); each SDK run has its own publisher id and is timed from its first send to the end of ``flush()``,
   after one message sent and confirmed (the link is attached);
4. a subscriber replaying ``--replay-count`` of those messages from EPOCH, without a store and with a
   ``LoggedBookmarkStore``, receive + discard.

For each run it records the server's CPU per message (its process tree, from /proc) and the client's: loadgen's
``client_cpu_seconds``, and this process's CPU time for the SDK runs (both its threads). Prints a table with the
medians and the ratios; with ``--doc`` rewrites the part of docs/performance.md between ``<!-- client-bench:begin
-->`` and ``<!-- client-bench:end -->``. Run with the project's venv (it imports subgate.client); it builds
bench/build/loadgen when missing (needs gcc and libqpid-proton's headers, bench/README.md):

    .venv/bin/python bench/client_bench.py [--count 50000] [--rounds 2] [--doc]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from subgate.client import EPOCH, Client, LoggedBookmarkStore, MemoryBookmarkStore, RingBookmarkStore
from subgate.client.stores import BookmarkStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as R  # noqa: E402  (bench/run.py: loadgen build, the subgate broker, /proc measurements)

BEGIN, END = "<!-- client-bench:begin -->", "<!-- client-bench:end -->"
HEADING = "## Client SDK (issue 14)"
TOPIC = "bench.client"
SUBSCRIPTION = ["--address", TOPIC, "--cap", "topic", "--client-id", "bench-client-sdk", "--sub", "idle"]
TARGET = 0.7  # non_inline send >= 0.7x loadgen's S2(T) send
SUBSCRIBER_FLOOR = 20_000  # msgs/s a LoggedBookmarkStore must not cap a subscriber below
VARIANTS = [
    ("loadgen", "loadgen send (S2T shape)"),
    ("sdk_non_inline", "SDK `non_inline` `send()`"),
    ("loadgen_pid", "loadgen send `--publisher-id`"),
    ("sdk_send_many", "SDK `non_inline` `send_many()`"),
    ("sdk_inline", "SDK `inline` `send()`"),
]


# ---------------------------------------------------------------------------------------------- measuring


def store_costs(workdir: Path, count: int) -> dict[str, float]:
    """µs per message of ``log`` + ``discard`` for each store, in process."""
    stores: list[tuple[str, BookmarkStore]] = [
        ("memory", MemoryBookmarkStore()),
        ("logged", LoggedBookmarkStore(workdir / "logged.log")),
        ("ring", RingBookmarkStore(workdir / "ring")),
    ]
    costs = {}
    for name, store in stores:
        store.set_start("s", EPOCH)
        started = time.perf_counter()
        for seq in range(1, count + 1):
            store.log("s", f"feed-1|{seq}|")
            store.discard("s", f"feed-1|{seq}|")
        costs[name] = (time.perf_counter() - started) / count * 1e6
        store.close()
    return costs


class Run:
    """The server's CPU over one measured run (and this process's, for the SDK runs)."""

    def __init__(self, broker: R.Subgate) -> None:
        self.broker = broker

    def __enter__(self) -> Run:
        self.server0 = R.cpu_seconds(self.broker.tree())
        self.client0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server = R.cpu_seconds(self.broker.tree()) - self.server0
        self.client = time.process_time() - self.client0


def loadgen_send(broker: R.Subgate, count: int, extra: list[str], timeout: float) -> dict[str, Any]:
    args = ["--address", TOPIC, "--cap", "topic", "--durable", "--count", str(count), *extra]
    with Run(broker) as run:
        res = R.loadgen(broker, "send", args, timeout)
    if not res.get("ok"):
        raise SystemExit(f"loadgen failed: {res.get('error')}")
    return {
        "rate": res["msgs_per_sec"],
        "server_us": run.server / count * 1e6,
        "client_us": res["client_cpu_seconds"] / count * 1e6,
    }


def sdk_send(broker: R.Subgate, client: Client, count: int, how: str, batch: int) -> dict[str, Any]:
    body = b"x" * 1024
    policy = "inline" if how == "inline" else "non_inline"
    pub = client.publisher(TOPIC, send_policy=policy, publisher_id=f"sdk-{how}-{uuid.uuid4().hex[:8]}")
    pub.send(body)  # attached and confirmed before the clock starts
    pub.flush(60)
    latencies: list[float] = []
    with Run(broker) as run:
        started = time.perf_counter()
        if how == "send_many":
            for first in range(0, count, batch):
                pub.send_many([body] * min(batch, count - first))
        elif how == "inline":
            for _ in range(count):
                sent = time.perf_counter()
                pub.send(body)
                latencies.append(time.perf_counter() - sent)
        else:
            for _ in range(count):
                pub.send(body)
        pub.flush(300)
        took = time.perf_counter() - started
    pub.close()
    result = {"rate": count / took, "server_us": run.server / count * 1e6, "client_us": run.client / count * 1e6}
    if latencies:
        latencies.sort()
        result["p50_ms"] = latencies[len(latencies) // 2] * 1e3
        result["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3
    return result


def replay(url: str, count: int, store: BookmarkStore | None) -> dict[str, Any]:
    """Receive + discard ``count`` messages of the topic from EPOCH (a plain subscription)."""
    client = Client(url)
    try:
        sub = client.subscribe(TOPIC, bookmark=EPOCH, bookmark_store=store, sub_id=f"replay-{uuid.uuid4().hex[:6]}")
        first = sub.receive(60)
        if first is None:
            raise SystemExit("the replay did not start within 60 s")
        sub.discard(first)
        got, cpu0, started = 1, time.process_time(), time.perf_counter()
        while got < count and (message := sub.receive(30)) is not None:
            sub.discard(message)
            got += 1
        took = time.perf_counter() - started
        return {"rate": (got - 1) / took, "messages": got, "client_us": (time.process_time() - cpu0) / got * 1e6}
    finally:
        client.close()
        if store is not None:
            store.close()


def measure(opts: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    R.build_loadgen()
    report: dict[str, Any] = {"stores_us": store_costs(workdir, opts.store_count)}
    exe = str(Path(sys.executable).with_name("subgate"))
    broker = R.Subgate(workdir, exe, "sqlite:///{tmpdir}/bench.db", [])
    broker.start()
    report["server"] = broker.command
    tmo = max(180.0, opts.count / 250)
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key, _ in VARIANTS}
    try:
        made = R.loadgen(broker, "subscribe", SUBSCRIPTION, tmo)
        if not made.get("ok"):
            raise SystemExit(f"the idle durable subscription was not made: {made.get('error')}")
        client = Client(f"amqp://127.0.0.1:{broker.port}")
        try:
            if not client.wait_connected(30):
                raise SystemExit("the SDK client did not connect")
            warm = max(1000, opts.count // 20)
            loadgen_send(broker, warm, [], tmo)
            sdk_send(broker, client, warm, "non_inline", opts.batch)
            variants: dict[str, Callable[[], dict[str, Any]]] = {
                "loadgen": lambda: loadgen_send(broker, opts.count, [], tmo),
                "sdk_non_inline": lambda: sdk_send(broker, client, opts.count, "non_inline", opts.batch),
                "loadgen_pid": lambda: loadgen_send(
                    broker, opts.count, ["--publisher-id", f"loadgen-{uuid.uuid4().hex[:8]}"], tmo
                ),
                "sdk_send_many": lambda: sdk_send(broker, client, opts.count, "send_many", opts.batch),
                "sdk_inline": lambda: sdk_send(broker, client, opts.inline_count, "inline", opts.batch),
            }
            for round_ in range(opts.rounds):
                # The journal grows through the run, so every other round runs the variants in reverse order.
                order = [key for key, _ in VARIANTS][:: -1 if round_ % 2 else 1]
                R.log(f"round {round_ + 1} of {opts.rounds}: {', '.join(order)}")
                for key in order:
                    runs[key].append(variants[key]())
                    R.log(f"  {key}: {runs[key][-1]['rate']:.0f} msgs/s")
        finally:
            client.close()
        url = f"amqp://127.0.0.1:{broker.port}"
        report["replay_plain"] = replay(url, opts.replay_count, None)
        report["replay_logged"] = replay(url, opts.replay_count, LoggedBookmarkStore(workdir / "replay.log"))
    finally:
        broker.stop()
    report["runs"] = runs
    return report


# ---------------------------------------------------------------------------------------------- reporting


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def round_ratios(runs: dict[str, list[dict[str, Any]]], top: str, bottom: str) -> list[float]:
    return [a["rate"] / b["rate"] for a, b in zip(runs[top], runs[bottom], strict=True)]


def render(report: dict[str, Any], opts: argparse.Namespace) -> str:
    runs = report["runs"]
    lines = [
        f"{opts.rounds} rounds, N = {opts.count:,} (inline: {opts.inline_count:,}), 1 KiB bodies, topic `{TOPIC}`"
        " with one idle JMS durable",
        "subscription, SQLite store, one server for the whole run. Rates are medians over the rounds; CPU is µs per",
        "message (server: its process tree; client: loadgen's own figure, or this Python process, both threads).",
        "",
        "| variant | msgs/s | per round | server CPU µs/msg | client CPU µs/msg |",
        "|---|---|---|---|---|",
    ]
    for key, label in VARIANTS:
        rates = ", ".join(f"{r['rate']:,.0f}" for r in runs[key])
        lines.append(
            f"| {label} | {median(runs[key], 'rate'):,.0f} | {rates} | {median(runs[key], 'server_us'):.0f}"
            f" | {median(runs[key], 'client_us'):.1f} |"
        )
    inline = runs["sdk_inline"]
    ratios = {
        (top, bottom): round_ratios(runs, top, bottom)
        for top in ("sdk_non_inline", "sdk_send_many")
        for bottom in ("loadgen", "loadgen_pid")
    }

    def shown(top: str, bottom: str) -> str:
        values = ratios[(top, bottom)]
        return f"{statistics.median(values):.2f}× (rounds {', '.join(f'{v:.2f}' for v in values)})"

    ni = statistics.median(ratios[("sdk_non_inline", "loadgen")])
    met = "met" if ni >= TARGET else "NOT met"
    stores = report["stores_us"]
    plain, logged = report["replay_plain"], report["replay_logged"]
    lines += [
        "",
        f"- **Target, non_inline ≥ {TARGET}× loadgen's send in the same round: {met}**:"
        f" {shown('sdk_non_inline', 'loadgen')}; send_many {shown('sdk_send_many', 'loadgen')}.",
        f"- Against loadgen `--publisher-id` (the annotations the SDK sends): non_inline"
        f" {shown('sdk_non_inline', 'loadgen_pid')}; send_many {shown('sdk_send_many', 'loadgen_pid')}.",
        f"- `inline`: {median(inline, 'rate'):,.0f} msgs/s, latency per send p50 {median(inline, 'p50_ms'):.2f} ms,"
        f" p99 {median(inline, 'p99_ms'):.2f} ms (medians over the rounds).",
        f"- Bookmark stores, `log` + `discard` per message in process ({opts.store_count:,} messages): memory"
        f" {stores['memory']:.1f} µs, logged {stores['logged']:.1f} µs, ring {stores['ring']:.1f} µs. The logged"
        f" store alone caps a subscriber at {1e6 / stores['logged']:,.0f} msgs/s (floor: {SUBSCRIBER_FLOOR:,}).",
        f"- Subscriber replaying {plain['messages']:,} messages from EPOCH, receive + discard: no store"
        f" {plain['rate']:,.0f} msgs/s ({plain['client_us']:.0f} µs CPU/msg), `LoggedBookmarkStore`"
        f" {logged['rate']:,.0f} msgs/s ({logged['client_us']:.0f} µs CPU/msg).",
    ]
    return "\n".join(wrapped(line) for line in lines)


def wrapped(line: str) -> str:
    """A bullet folded at 116 columns, as the rest of docs/performance.md; other lines as they are."""
    if not line.startswith("- "):
        return line
    return textwrap.fill(line, 116, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def update_doc(body: str, command: str) -> None:
    section = "\n".join(
        [
            BEGIN,
            "<!-- generated by bench/client_bench.py --doc; everything between the client-bench markers is"
            " rewritten on each run -->",
            "",
            f"### Latest run: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            "",
            "Command (from the repository root):",
            "",
            "```",
            command,
            "```",
            "",
            body,
            "",
            END,
        ]
    )
    R.DOC.write_text(R.with_section(R.DOC.read_text(), BEGIN, END, section, HEADING))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50_000, help="messages per publishing run (50000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the interleaved runs (2)")
    parser.add_argument("--inline-count", type=int, default=None, help="inline sends per round (count/20)")
    parser.add_argument("--batch", type=int, default=1000, help="messages per send_many call (1000)")
    parser.add_argument("--replay-count", type=int, default=None, help="messages the subscriber replays (count)")
    parser.add_argument("--store-count", type=int, default=50_000, help="messages of the in-process store costs")
    parser.add_argument("--doc", action="store_true", help="rewrite the section of docs/performance.md")
    opts = parser.parse_args()
    opts.inline_count = opts.inline_count or max(100, opts.count // 20)
    opts.replay_count = opts.replay_count or opts.count
    workdir = Path(tempfile.mkdtemp(prefix="client-bench-"))
    report = measure(opts, workdir)
    body = render(report, opts)
    print(body)
    if opts.doc:
        argv = [a for a in sys.argv[1:]]
        update_doc(body, " ".join([".venv/bin/python", "bench/client_bench.py", *map(shlex.quote, argv)]))


if __name__ == "__main__":
    main()
