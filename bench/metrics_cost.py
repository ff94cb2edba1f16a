#!/usr/bin/env python3
"""What serving /metrics costs S2: subgate on SQLite without ``--http`` (A) against ``--http`` with ``/metrics``
scraped every second (B), in one run, rounds interleaved (A B, then B A, ...) so a shared machine's noise falls on
both alike. Standard library only; uses bench/run.py's broker, loadgen and measurement code:

    python3 bench/metrics_cost.py --rounds 5 --count 200000 [--doc]

Each round starts a fresh server on a fresh store per arm, runs an unmeasured warm-up (``--warmup`` durable
messages sent and drained), then S2: ``loadgen send --durable`` of N messages to ``bench.q`` (each ``accepted``
counted), then ``loadgen recv`` of the N. In arm B a thread GETs ``/metrics`` once a second through both halves and
counts the scrapes (each must answer 200 and parse as text). Prints per arm the median send and drain msgs/s and
broker CPU µs per message (bench/run.py's measure: the broker's utime+stime over the run), and B/A per round;
``--doc`` appends the table and the exact command to docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import run  # noqa: E402 - bench/run.py, next to this file

DOC = BENCH.parent / "docs" / "performance.md"


class Scraper(threading.Thread):
    """GET ``url`` every ``interval`` seconds until stopped; counts the scrapes and the failures."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        super().__init__(name="scraper", daemon=True)
        self.url, self.interval = url, interval
        self.stopped = threading.Event()
        self.scrapes = self.failures = 0
        self.bytes = 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    body = response.read()
                ok = response.status == 200 and b"subgate_messages_in_total" in body
                self.scrapes += 1
                self.failures += 0 if ok else 1
                self.bytes = len(body)
            except OSError:
                self.failures += 1


def one_arm(exe: str, scraped: bool, opts: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="subgate-metrics-cost-") as tmp:
        workdir = Path(tmp)
        extra: list[str] = []
        if scraped:
            http_port = run.free_port()
            extra = ["--http", f"127.0.0.1:{http_port}"]
        broker = run.Subgate(workdir, exe, "sqlite:///{tmpdir}/bench.db", extra)
        broker.start()
        scraper = Scraper(f"http://127.0.0.1:{http_port}/metrics") if scraped else None
        try:
            q = broker.queue_args()
            common = ["--size", "1024", "--window", "1000"]
            if opts.warmup:
                run.durable_run(broker, q, q, [*common, "--count", str(opts.warmup)], opts.timeout, "")
            if scraper is not None:
                scraper.start()
            result = run.durable_run(broker, q, q, [*common, "--count", str(opts.count)], opts.timeout, "")
        finally:
            if scraper is not None:
                scraper.stopped.set()
                scraper.join(timeout=10)
            broker.stop()
        if scraper is not None:
            result["scrapes"], result["scrape_failures"], result["scrape_bytes"] = (
                scraper.scrapes,
                scraper.failures,
                scraper.bytes,
            )
        return result


def figure(result: dict, half: str, key: str) -> float | None:
    value = result.get(half, {})
    return value.get(key) if value.get("ok") else None


FIGURES = [
    ("S2 send msgs/s (SQLite)", "send", "msgs_per_sec", 0),
    ("S2 drain msgs/s (SQLite)", "drain", "msgs_per_sec", 0),
    ("S2 send: broker CPU µs/msg", "send", "broker_cpu_us_per_msg", 1),
    ("S2 drain: broker CPU µs/msg", "drain", "broker_cpu_us_per_msg", 1),
]


def table(runs: dict[str, list[dict]]) -> list[list[str]]:
    rows = []
    for label, half, key, digits in FIGURES:
        a = [figure(r, half, key) for r in runs["A"]]
        b = [figure(r, half, key) for r in runs["B"]]
        pairs = [(x, y) for x, y in zip(a, b, strict=True) if x and y]
        ratios = [y / x for x, y in pairs]
        rows.append(
            [
                label,
                f"{statistics.median(x for x, _ in pairs):,.{digits}f}" if pairs else "—",
                f"{statistics.median(y for _, y in pairs):,.{digits}f}" if pairs else "—",
                f"{statistics.median(ratios):.3f}" if ratios else "—",
                ", ".join(f"{r:.3f}" for r in ratios),
            ]
        )
    return rows


def markdown(rows: list[list[str]], command: str, runs: dict[str, list[dict]], opts: argparse.Namespace) -> str:
    head = ["figure", "A: no --http", "B: /metrics every 1 s", "B/A median", "B/A per round"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    scrapes = [r.get("scrapes", 0) for r in runs["B"]]
    failures = sum(r.get("scrape_failures", 0) for r in runs["B"])
    size = max((r.get("scrape_bytes", 0) for r in runs["B"]), default=0)
    when = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return (
        f"#### Cost of /metrics on S2: {when}\n\nCommand (from the repository root):\n\n```\n{command}\n```\n\n"
        f"{opts.rounds} rounds, interleaved (A B, B A, …), {opts.count:,} messages per S2, fresh server and SQLite "
        f"store per arm. Scrapes per B round: {scrapes} (failed: {failures}; last body {size:,} bytes).\n\n"
        + "\n".join(lines)
        + "\n"
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subgate", default=str(BENCH.parent / ".venv" / "bin" / "subgate"), help="subgate executable")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--count", type=int, default=200_000, help="messages per S2 (default 200000)")
    p.add_argument("--warmup", type=int, default=5000, help="durable messages sent and drained first, unmeasured")
    p.add_argument("--timeout", type=float, default=600.0, help="deadline per loadgen run, seconds")
    p.add_argument("--doc", action="store_true", help="append the table to docs/performance.md")
    opts = p.parse_args(argv)
    run.build_loadgen()
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    started = time.monotonic()
    for round_no in range(1, opts.rounds + 1):
        order = ("A", "B") if round_no % 2 else ("B", "A")
        for arm in order:
            print(f"round {round_no}/{opts.rounds}: {arm}", flush=True)
            runs[arm].append(one_arm(opts.subgate, arm == "B", opts))
    rows = table(runs)
    command = "python3 bench/metrics_cost.py " + " ".join(shlex.quote(x) for x in argv)
    text = markdown(rows, command, runs, opts)
    print(text)
    print(f"({time.monotonic() - started:.0f} s)")
    if opts.doc:
        DOC.write_text(DOC.read_text().rstrip("\n") + "\n\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
