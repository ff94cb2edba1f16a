#!/usr/bin/env python3
"""Interleaved A/B of two subgate builds on the same machine in one run: before and after a change.

Runs ``bench/run.py`` (subgate on SQLite and on PostgreSQL) alternately for build A and build B, ``--rounds`` times
each (A B A B ...), so that the noise of a shared machine falls on both alike, then prints, per figure, the median
of each build and the ratio B/A with the spread of the per-round ratios. Standard library only:

    python3 bench/ab.py --a /work/wt-base/.venv/bin/subgate --b .venv/bin/subgate --rounds 3 --count 50000

``--doc`` appends the table, with the exact command, to docs/performance.md. Figures: S1 end-to-end msgs/s and
broker CPU µs/msg; S2 send and drain msgs/s on both stores; S3 deliveries/s; S4 p50 µs and broker CPU µs per
round trip.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
DOC = BENCH.parent / "docs" / "performance.md"

# (label, broker, scenario, path inside the scenario's result, higher is better)
FIGURES = [
    ("S1 msgs/s (SQLite)", "subgate", "S1", ("msgs_per_sec",), True),
    ("S1 broker CPU µs/msg", "subgate", "S1", ("broker_cpu_us_per_msg",), False),
    ("S2 send msgs/s (SQLite)", "subgate", "S2", ("send", "msgs_per_sec"), True),
    ("S2 drain msgs/s (SQLite)", "subgate", "S2", ("drain", "msgs_per_sec"), True),
    ("S2 send msgs/s (PostgreSQL)", "subgate-pg", "S2", ("send", "msgs_per_sec"), True),
    ("S2 drain msgs/s (PostgreSQL)", "subgate-pg", "S2", ("drain", "msgs_per_sec"), True),
    ("S3 deliveries/s", "subgate", "S3", ("deliveries_per_sec",), True),
    ("S4 p50 µs", "subgate", "S4", ("p50_us",), False),
    ("S4 broker CPU µs/round trip", "subgate", "S4", ("broker_cpu_us_per_msg",), False),
]


def one_run(subgate: str, count: int, timeout: float) -> dict:
    before = set(RESULTS.glob("*.json")) if RESULTS.exists() else set()
    command = [sys.executable, str(BENCH / "run.py"), "--brokers", "subgate,subgate-pg"]
    command += ["--scenarios", "S1,S2,S3,S4", "--pg-scenarios", "S2", "--count", str(count)]
    command += ["--no-doc", "--no-install", "--subgate", subgate]
    subprocess.run(command, check=True, timeout=timeout, stdout=subprocess.DEVNULL)
    written = sorted(set(RESULTS.glob("*.json")) - before)
    if not written:
        raise RuntimeError("bench/run.py wrote no results file")
    return json.loads(written[-1].read_text())


def figure(report: dict, broker: str, scenario: str, path: tuple[str, ...]) -> float | None:
    value: object = report["brokers"].get(broker, {}).get("scenarios", {}).get(scenario)
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def summarise(runs: dict[str, list[dict]]) -> list[list[str]]:
    rows = []
    for label, broker, scenario, path, higher in FIGURES:
        a = [figure(r, broker, scenario, path) for r in runs["A"]]
        b = [figure(r, broker, scenario, path) for r in runs["B"]]
        pairs = [(x, y) for x, y in zip(a, b, strict=True) if x and y]
        if not pairs:
            rows.append([label, "–", "–", "–", "–"])
            continue
        ratios = [y / x for x, y in pairs]
        better = "higher" if higher else "lower"
        rows.append(
            [
                label,
                f"{statistics.median(x for x, _ in pairs):,.1f}",
                f"{statistics.median(y for _, y in pairs):,.1f}",
                f"{statistics.median(ratios):.2f}",
                f"{min(ratios):.2f}–{max(ratios):.2f} ({better} is better)",
            ]
        )
    return rows


def markdown(rows: list[list[str]], command: str, a: str, b: str, rounds: int) -> str:
    head = ["figure", "A median", "B median", "B/A median", "B/A per round"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    when = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    intro = (
        f"### A/B run: {when}\n\nCommand (from the repository root):\n\n```\n{command}\n```\n\n"
        f"A: `{a}`; B: `{b}`; {rounds} rounds, interleaved A B A B …\n\n"
    )
    return intro + "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="subgate executable of build A (before)")
    p.add_argument("--b", required=True, help="subgate executable of build B (after)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each build (default 3)")
    p.add_argument("--count", type=int, default=50_000, help="messages for S1 and S2 (default 50000)")
    p.add_argument("--timeout", type=float, default=900.0, help="deadline per bench/run.py run, seconds")
    p.add_argument("--doc", action="store_true", help="append the table to docs/performance.md")
    opts = p.parse_args(argv)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for round_no in range(1, opts.rounds + 1):
        for build, executable in (("A", opts.a), ("B", opts.b)):
            print(f"round {round_no}/{opts.rounds}: build {build}", flush=True)
            runs[build].append(one_run(executable, opts.count, opts.timeout))
    rows = summarise(runs)
    command = "python3 bench/ab.py " + " ".join(shlex.quote(x) for x in argv)
    text = markdown(rows, command, opts.a, opts.b, opts.rounds)
    print(text)
    if opts.doc:
        DOC.write_text(DOC.read_text().rstrip("\n") + "\n\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
