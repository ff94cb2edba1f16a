#!/usr/bin/env python3
"""Benchmarks of issue 13 (bookmarks, duplicate detection, publisher modes) on SQLite and on PostgreSQL, one run.

For each store, one `subgate serve` (started as bench/run.py starts it; PostgreSQL in a throwaway cluster) with
the default settings plus `--publisher-modes bench.nc=store_send_noconfirm` (it concerns the queue bench.nc only):

a. duplicate-detection cost: S2 (N durable messages to the durable queue bench.q, `accepted` counted, then a
   drain) without and with `loadgen --publisher-id` (annotations x-opt-publisher-id/-seq on every message),
   interleaved A B B A A B ... over --rounds rounds (each variant as often first as second in a pair when
   --rounds is even); target: send with ≥ 0.9× without.
b. replay: --replay-count durable 1 KiB messages published to the topic bench.replay with no subscriber (the
   journal keeps them), then one receiver with `--bookmark 0` (EPOCH) drains them all; target: replay msgs/s ≥
   0.8× the S2 drain of (a), and the server's peak RSS during the replay (VmRSS sampled every 0.2 s) < 250 MB.
c. publisher modes: S2 and S4 (one message in flight) on bench.q (store_confirm_send, the default) and on
   bench.nc (store_send_noconfirm), interleaved; S4 both with header.durable (journaled: the case the modes
   differ in) and without (as bench/run.py's S4).

Prints a table, writes bench/results/bookmarks-<timestamp>.json and rewrites the part of docs/performance.md
between `<!-- bookmarks:begin -->` and `<!-- bookmarks:end -->`. Standard library only, like bench/run.py, whose
helpers it imports (loadgen build, the brokers, /proc measurements):

    python3 bench/bookmarks.py                          # full size: S2 100,000, replay 1,000,000
    python3 bench/bookmarks.py --count 20000 --replay-count 50000 --no-doc   # quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as R  # noqa: E402  (bench/run.py: the helpers shared by the benchmark runners)

BEGIN, END = "<!-- bookmarks:begin -->", "<!-- bookmarks:end -->"
HEADING = "## Bookmarks, duplicates, publisher modes (issue 13)"
PACKAGES = ["gcc", "libc6-dev", "pkg-config", "libqpid-proton11-dev", "libsasl2-modules"]
QUEUE, NOCONFIRM_QUEUE, TOPIC = "bench.q", "bench.nc", "bench.replay"
SERVE_EXTRA = ["--publisher-modes", f"{NOCONFIRM_QUEUE}=store_send_noconfirm"]
STORES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
DUP_TARGET, REPLAY_TARGET, RSS_TARGET_MB = 0.9, 0.8, 250.0


# ---------------------------------------------------------------------------------------------- measuring


def thread_cpu(pid: int) -> dict[int, float]:
    """utime+stime per thread of one process, seconds."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / R.CLK_TCK
    return out


class Timeline(R.RssSampler):
    """RssSampler that also keeps (seconds since start, summed VmRSS kB) of every sample."""

    def __init__(self, root: int) -> None:
        super().__init__(root)
        self.t0 = time.monotonic()
        self.samples: list[tuple[float, int]] = []

    def _sample(self) -> None:
        kb = sum(R.status_kb(p, "VmRSS") for p in R.proc_tree(self.root))
        self.peak_kb = max(self.peak_kb, kb)
        self.samples.append((round(time.monotonic() - self.t0, 1), kb))


def mb(kb: float) -> float:
    """kB (as /proc gives them, KiB) to MB (10^6 bytes), the unit of the RSS target."""
    return round(kb * 1024 / 1e6, 1)


def measure(broker: R.Subgate, mode: str, args: list[str], tmo: float, per: str, store_pid: int) -> dict:
    """bench/run.py's `measured` (broker CPU and peak RSS, over the server's process tree), plus the CPU of the
    reactor thread (the main thread) and of the rest of the server (its other threads and its journal writer
    process), and of the PostgreSQL cluster if any."""
    th0 = thread_cpu(broker.pid)
    st0 = R.cpu_seconds(R.proc_tree(store_pid)) if store_pid else 0.0
    t0 = time.monotonic()
    res = R.measured(broker, mode, args, tmo, per)
    res["wall_seconds"] = round(time.monotonic() - t0, 3)
    th1 = thread_cpu(broker.pid)
    reactor = th1.get(broker.pid, 0.0) - th0.get(broker.pid, 0.0)
    # Everything else of the server: its other threads and its journal writer process (a child: in the tree).
    others = max(0.0, res.get("broker_cpu_seconds", 0.0) - reactor)
    n = res.get(per) or 0
    res["reactor_cpu_seconds"] = round(reactor, 3)
    res["other_threads_cpu_seconds"] = round(others, 3)
    res["reactor_cpu_us_per_msg"] = round(reactor / n * 1e6, 1) if n else None
    res["other_threads_cpu_us_per_msg"] = round(others / n * 1e6, 1) if n else None
    if store_pid:
        store = R.cpu_seconds(R.proc_tree(store_pid)) - st0
        res["store_cpu_seconds"] = round(store, 3)
        res["store_cpu_us_per_msg"] = round(store / n * 1e6, 1) if n else None
    return res


def s2(broker: R.Subgate, address: str, n: int, common: list[str], tmo: float, store_pid: int, extra=()) -> dict:
    """bench/run.py's S2 on one queue: N durable messages sent (each `accepted` counted), then the N drained."""
    node = ["--address", address, "--cap", "queue"]
    send = measure(broker, "send", [*node, *common, "--count", str(n), "--durable", *extra], tmo, "accepted", store_pid)
    if not send.get("ok"):
        return {"send": send, "drain": {"ok": False, "error": "not run: the send half failed"}}
    drain = measure(broker, "recv", [*node, *common, "--count", str(n)], tmo, "received", store_pid)
    return {"send": send, "drain": drain}


def log_findings(path: Path) -> dict:
    """Warnings, errors and tracebacks in the server's log: how many, and the first few."""
    count, first = 0, []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"count": 0, "first": []}
    for line in lines:
        if " WARNING " in line or " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback"):
            count += 1
            if len(first) < 5:
                first.append(line[:240])
    return {"count": count, "first": first}


def run_store(store: str, opts: argparse.Namespace, workdir: Path) -> dict:
    out: dict = {"store": store, "available": False}
    broker: R.Subgate
    if store == "postgresql":
        broker = R.SubgatePG(workdir, opts.subgate, opts.serve_extra)
    else:
        broker = R.Subgate(workdir, opts.subgate, "sqlite:///{tmpdir}/bench.db", opts.serve_extra)
    R.log(f"{store}: starting subgate")
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - reported, and the other store still runs
        out["reason"] = str(e)
        R.log(f"{store}: not available ({e})")
        return out
    store_pid = broker.pg.pid if isinstance(broker, R.SubgatePG) else 0
    out.update(available=True, version=broker.version, command=broker.command, pid=broker.pid)
    n, common, tmo = opts.count, ["--size", str(opts.size), "--window", str(opts.window)], opts.scenario_timeout
    try:
        if opts.warmup:
            R.loadgen(broker, "pair", ["--address", QUEUE, "--cap", "queue", *common, "--count", str(opts.warmup)], tmo)

        # a. S2 without and with publisher ids, interleaved A B B A A B ...: on one server a later run tends to be
        # slower (its journal is larger: nothing is deleted within the retention period), so in A B A B order the
        # second variant was always the later one. Measured on one server, 3 rounds per order: with ids 0.85-1.09x
        # in A B order even with the server's duplicate detection switched off in the code, 0.94-0.98x in B A order.
        dup: dict[str, list[dict]] = {"without": [], "with": []}
        for r in range(opts.rounds):
            R.log(f"{store}: duplicates, round {r + 1}/{opts.rounds}")
            pub = ["--publisher-id", f"bench-{store}-{r + 1}"]  # a fresh id per run: no message is a duplicate
            for kind in ("without", "with") if r % 2 == 0 else ("with", "without"):
                dup[kind].append(s2(broker, QUEUE, n, common, tmo, store_pid, pub if kind == "with" else ()))
        out["duplicates"] = dup

        # c. publisher modes, interleaved: S2 and S4 on the confirm queue and on the noconfirm queue
        modes: dict[str, dict[str, list[dict]]] = {
            m: {"S2": [], "S4": [], "S4np": []} for m in ("store_confirm_send", "store_send_noconfirm")
        }
        queues = {"store_confirm_send": QUEUE, "store_send_noconfirm": NOCONFIRM_QUEUE}
        lat = ["--count", str(opts.latency_count), "--warmup", str(opts.latency_warmup)]
        for r in range(opts.rounds):
            R.log(f"{store}: publisher modes, round {r + 1}/{opts.rounds}")
            for m, q in queues.items():
                modes[m]["S2"].append(s2(broker, q, n, common, tmo, store_pid))
            for key, durable in (("S4", ["--durable"]), ("S4np", [])):
                for m, q in queues.items():
                    args = ["--address", q, "--cap", "queue", *common, *lat, *durable]
                    modes[m][key].append(measure(broker, "latency", args, tmo, "samples", store_pid))
        out["modes"] = modes

        # b. replay from EPOCH over N journaled messages of a topic nobody subscribes to
        N = opts.replay_count
        rtmo = max(600.0, N / 250)
        R.log(f"{store}: publishing {N:,} durable messages to topic {TOPIC} (no subscriber)")
        topic = ["--address", TOPIC, "--cap", "topic"]
        rep: dict = {"count": N}
        rep["publish"] = measure(
            broker, "send", [*topic, *common, "--count", str(N), "--durable"], rtmo, "accepted", store_pid
        )
        if rep["publish"].get("ok"):
            rep["rss_before_mb"] = mb(sum(R.status_kb(p, "VmRSS") for p in broker.tree()))
            R.log(f"{store}: replaying them from EPOCH (--bookmark 0)")
            with Timeline(broker.pid) as tl:
                rep["replay"] = measure(
                    broker, "recv", [*topic, *common, "--count", str(N), "--bookmark", "0"], rtmo, "received", store_pid
                )
            rep["peak_rss_mb"] = mb(tl.peak_kb)
            rep["rss_after_mb"] = mb(tl.samples[-1][1]) if tl.samples else None
            rep["vmhwm_lifetime_mb"] = mb(broker.peak_hwm_kb())
            rep["rss_timeline_mb"] = [(t, mb(kb)) for i, (t, kb) in enumerate(tl.samples) if i % 5 == 0]
        else:
            rep["replay"] = {"ok": False, "error": "not run: publishing failed"}
        out["replay"] = rep
    finally:
        R.log(f"{store}: stopping subgate (pid {broker.pid})")
        broker.stop()
        out["exit_code"] = broker.proc.returncode if broker.proc else None
        out["log_findings"] = log_findings(broker.logfile)
    return out


# ---------------------------------------------------------------------------------------------- summary


def get(res: dict | None, *path: str) -> float | None:
    for key in path[:-1]:
        res = res.get(key) if isinstance(res, dict) else None
    if not isinstance(res, dict) or not res.get("ok"):
        return None
    v = res.get(path[-1])
    return float(v) if isinstance(v, (int, float)) else None


def med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals and len(vals) == len(values) else None


def summary(s: dict) -> dict:
    """The headline figures of one store (None where a run failed)."""
    if not s.get("available"):
        return {}
    d, m, rep = s["duplicates"], s["modes"], s["replay"]
    f: dict = {}
    for kind in ("without", "with"):
        f[f"s2_send_{kind}"] = med([get(r, "send", "msgs_per_sec") for r in d[kind]])
        f[f"s2_drain_{kind}"] = med([get(r, "drain", "msgs_per_sec") for r in d[kind]])
        f[f"s2_cpu_{kind}"] = med([get(r, "send", "broker_cpu_us_per_msg") for r in d[kind]])
        f[f"s2_sends_{kind}"] = [get(r, "send", "msgs_per_sec") for r in d[kind]]
    pairs = zip(f["s2_sends_without"], f["s2_sends_with"], strict=True)
    f["dup_round_ratios"] = [b / a if a and b else None for a, b in pairs]
    a, b = f["s2_send_without"], f["s2_send_with"]
    f["dup_ratio"] = b / a if a and b else None
    f["drain_cpu"] = med([get(r, "drain", "broker_cpu_us_per_msg") for r in d["without"]])
    f["drain_reactor"] = med([get(r, "drain", "reactor_cpu_us_per_msg") for r in d["without"]])
    f["drain_others"] = med([get(r, "drain", "other_threads_cpu_us_per_msg") for r in d["without"]])
    f["drain_store"] = med([get(r, "drain", "store_cpu_us_per_msg") for r in d["without"]])
    f["drain_busy"] = med(
        [
            (get(r, "drain", "broker_cpu_seconds") or 0) / w if (w := get(r, "drain", "wall_seconds")) else None
            for r in d["without"]
        ]
    )
    pub, rp = rep.get("publish"), rep.get("replay")
    f["publish"] = get(pub, "msgs_per_sec")
    f["replay"] = get(rp, "msgs_per_sec")
    f["replay_ratio"] = f["replay"] / f["s2_drain_without"] if f["replay"] and f["s2_drain_without"] else None
    for key in ("broker_cpu_us_per_msg", "reactor_cpu_us_per_msg", "other_threads_cpu_us_per_msg"):
        f["replay_" + key] = get(rp, key)
    f["replay_store_cpu"] = get(rp, "store_cpu_us_per_msg")
    f["replay_busy"] = (get(rp, "broker_cpu_seconds") or 0) / w if (w := get(rp, "wall_seconds")) else None
    f["replay_client_cpu"] = get(rp, "client_cpu_seconds")
    f["replay_seconds"] = get(rp, "seconds")
    f["replay_wall"] = get(rp, "wall_seconds")
    f["peak_rss"] = rep.get("peak_rss_mb") if f["replay"] else None
    f["rss_before"], f["rss_after"], f["vmhwm"] = (
        rep.get("rss_before_mb"),
        rep.get("rss_after_mb"),
        rep.get("vmhwm_lifetime_mb"),
    )
    for mode, short in (("store_confirm_send", "confirm"), ("store_send_noconfirm", "noconfirm")):
        f[f"{short}_send"] = med([get(r, "send", "msgs_per_sec") for r in m[mode]["S2"]])
        f[f"{short}_drain"] = med([get(r, "drain", "msgs_per_sec") for r in m[mode]["S2"]])
        f[f"{short}_s2_rss"] = max([(r["send"].get("broker_peak_rss_mb") or 0) for r in m[mode]["S2"]], default=None)
        f[f"{short}_p50"] = med([get(r, "p50_us") for r in m[mode]["S4"]])
        f[f"{short}_p99"] = med([get(r, "p99_us") for r in m[mode]["S4"]])
        f[f"{short}_p50np"] = med([get(r, "p50_us") for r in m[mode]["S4np"]])
    return f


def div(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def n0(x: float | None) -> str:
    return R.fmt(x) if x is not None else "failed"


def n1(x: float | None) -> str:
    return R.fmt(x, 1) if x is not None else "failed"


def rx(x: float | None) -> str:
    return f"{x:.2f}×" if x is not None else "–"


def verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "NOT met")


def rows(sums: dict[str, dict], rounds: int, replay_n: int) -> list[list[str]]:
    """Figure, one column per store, target."""
    names = list(sums)

    def row(label: str, fn, target: str = "") -> list[str]:
        return [label, *[fn(sums[s]) if sums[s] else "not available" for s in names], target]

    def with_verdict(value: str, ok: bool | None) -> str:
        return f"{value} ({verdict(ok)})" if ok is not None else value

    def dup_cell(f: dict) -> str:
        r = f["dup_ratio"]
        per = ", ".join(rx(x) for x in f["dup_round_ratios"])
        return with_verdict(rx(r), None if r is None else r >= DUP_TARGET) + f"; rounds {per}"

    return [
        row(f"(a) S2 send msgs/s, no publisher id (median of {rounds})", lambda f: n0(f["s2_send_without"])),
        row(f"(a) S2 send msgs/s, `--publisher-id` (median of {rounds})", lambda f: n0(f["s2_send_with"])),
        row("(a) with / without", dup_cell, f"≥ {DUP_TARGET}×"),
        row(
            "(a) S2 broker CPU µs/msg sent, without / with",
            lambda f: f"{n1(f['s2_cpu_without'])} / {n1(f['s2_cpu_with'])}",
        ),
        row(
            "(a) S2 drain msgs/s, without / with",
            lambda f: f"{n0(f['s2_drain_without'])} / {n0(f['s2_drain_with'])}",
        ),
        row(f"(b) publish {replay_n:,} to the topic, msgs/s", lambda f: n0(f["publish"])),
        row(f"(b) replay from EPOCH, {replay_n:,} msgs, msgs/s", lambda f: n0(f["replay"])),
        row(
            "(b) replay / S2 drain (no id)",
            lambda f: with_verdict(
                rx(f["replay_ratio"]), None if f["replay_ratio"] is None else f["replay_ratio"] >= REPLAY_TARGET
            ),
            f"≥ {REPLAY_TARGET}×",
        ),
        row(
            "(b) server peak RSS during the replay, MB",
            lambda f: with_verdict(n1(f["peak_rss"]), None if f["peak_rss"] is None else f["peak_rss"] < RSS_TARGET_MB),
            f"< {RSS_TARGET_MB:.0f} MB",
        ),
        row(
            "(b) RSS before / after the replay; VmHWM (lifetime), MB",
            lambda f: f"{n1(f['rss_before'])} / {n1(f['rss_after'])}; {n1(f['vmhwm'])}",
        ),
        row(
            "(b) server CPU µs/msg, replay vs S2 drain (reactor + the rest)",
            lambda f: (
                f"{n1(f['replay_broker_cpu_us_per_msg'])} ({n1(f['replay_reactor_cpu_us_per_msg'])} + "
                f"{n1(f['replay_other_threads_cpu_us_per_msg'])}) vs {n1(f['drain_cpu'])} ({n1(f['drain_reactor'])} + "
                f"{n1(f['drain_others'])})"
            ),
        ),
        row(
            "(c) S2 send msgs/s, confirm / noconfirm (ratio)",
            lambda f: (
                f"{n0(f['confirm_send'])} / {n0(f['noconfirm_send'])} "
                f"({rx(div(f['noconfirm_send'], f['confirm_send']))})"
            ),
        ),
        row(
            "(c) S2 drain msgs/s, confirm / noconfirm",
            lambda f: f"{n0(f['confirm_drain'])} / {n0(f['noconfirm_drain'])}",
        ),
        row(
            "(c) S2 send peak RSS MiB, confirm / noconfirm",
            lambda f: f"{n1(f['confirm_s2_rss'])} / {n1(f['noconfirm_s2_rss'])}",
        ),
        row(
            "(c) S4 p50 µs, durable, confirm / noconfirm",
            lambda f: (
                f"{n1(f['confirm_p50'])} / {n1(f['noconfirm_p50'])} (p99 {n1(f['confirm_p99'])} / "
                f"{n1(f['noconfirm_p99'])})"
            ),
        ),
        row(
            "(c) S4 p50 µs, non-persistent (run.py's S4), confirm / noconfirm",
            lambda f: f"{n1(f['confirm_p50np'])} / {n1(f['noconfirm_p50np'])}",
        ),
    ]


def time_notes(sums: dict[str, dict]) -> list[str]:
    """Where the replay's time goes, from the server's CPU (per thread, from /proc) and the store's."""
    out = []
    for store, f in sums.items():
        if not f or f.get("replay") is None:
            continue
        store_part = ""
        if f.get("replay_store_cpu") is not None:
            store_part = (
                f"; the PostgreSQL cluster used {n1(f['replay_store_cpu'])} µs/msg (S2 drain: {n1(f['drain_store'])})"
            )
        out.append(
            f"- {STORES[store]}: during the replay the server was busy {100 * (f['replay_busy'] or 0):.0f} % of one "
            f"core over the wall time of the receive (S2 drain: {100 * (f['drain_busy'] or 0):.0f} %): "
            f"{n1(f['replay_reactor_cpu_us_per_msg'])} µs/msg on the reactor (main) thread and "
            f"{n1(f['replay_other_threads_cpu_us_per_msg'])} µs/msg in the rest of the server (its other threads and "
            f"the journal writer, which reads the pages){store_part}; loadgen used {n1(f['replay_client_cpu'])} s of "
            f"CPU over {n1(f['replay_wall'])} s."
        )
    return out


# ---------------------------------------------------------------------------------------------- output


def render(report: dict, table: list[list[str]], head: list[str]) -> str:
    m, o = report["machine"], report["options"]
    L = [
        *R.section_head(report, BEGIN, "bookmarks.py", "bookmarks"),
        f"Machine: {m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}; Proton-C {m['proton_c']}; "
        f"wall time {R.duration(report['wall_seconds'])}. Shared, noisy machine: compare figures within this run.",
        "",
        f"Sizes: S2 {o['count']:,} durable 1 KiB messages per run, {o['rounds']} rounds of each variant interleaved "
        "(A B, B A, A B ...: each variant as often first in a pair as second); "
        f"replay {o['replay_count']:,} messages; S4 {o['latency_count']:,} round trips after "
        f"{o['latency_warmup']:,}. Server: `subgate serve` with default settings (page-messages 2000, retention 7d) "
        f"plus `{' '.join(SERVE_EXTRA)}`, which only concerns that queue; SQLite in the run's temp dir, "
        "PostgreSQL in a throwaway cluster (fsync on, synchronous_commit on). Broker CPU = utime+stime of the "
        "subgate process and its journal writer process during the loadgen run, split into the reactor (the main "
        "thread) and the rest (the other threads and the writer process); the PostgreSQL cluster's CPU is counted "
        "apart. RSS in MB = 10^6 bytes (VmRSS of the subgate process and its writer process, sampled every 0.2 s), "
        "except where MiB is said.",
        "",
    ]
    for store, s in report["stores"].items():
        if s.get("available"):
            L.append(f"- {STORES[store]}: {s['version']} — `{s['command']}`")
        else:
            L.append(f"- {STORES[store]}: not available ({s.get('reason', '?')})")
    L.append("")
    L += R.md_table(head, table) + [""]
    notes = time_notes(report["summary"])
    if notes:
        L += ["Where the replay's time goes (CPU from /proc, per message replayed):", ""] + notes + [""]
    for store, s in report["stores"].items():
        lf = s.get("log_findings")
        if lf is not None:
            first = "; ".join(f"`{x}`" for x in lf["first"][:2])
            L.append(
                f"- {STORES[store]} server log: {lf['count']} warning/error lines"
                + (f", e.g. {first}" if first else "")
            )
    L += ["", END]
    return "\n".join(L)


def update_doc(section: str) -> None:
    R.DOC.write_text(R.with_section(R.DOC.read_text(), BEGIN, END, section, HEADING))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100_000, help="S2 messages per run (default 100000)")
    p.add_argument("--replay-count", type=int, default=1_000_000, help="messages journaled, then replayed (1000000)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of each interleaved variant (default 2, min 2)")
    p.add_argument("--latency-count", type=int, help="S4 measured round trips (default count/20, 1000..10000)")
    p.add_argument("--latency-warmup", type=int, help="S4 unmeasured round trips first (default latency-count/10)")
    p.add_argument("--warmup", type=int, help="unmeasured send+receive first (default count/20, max 5000)")
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--window", type=int, default=1000, help="unsettled window / credit (default 1000)")
    p.add_argument("--stores", default="sqlite,postgresql", help="comma list of sqlite,postgresql (both)")
    p.add_argument("--subgate", default=str(R.REPO / ".venv" / "bin" / "subgate"), help="subgate executable")
    p.add_argument("--scenario-timeout", type=float, help="deadline per S2/S4 loadgen run (default by count)")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install missing packages")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temp dirs (server logs, SQLite store)")
    p.add_argument(
        "--serve-extra",
        default="",
        help="more `subgate serve` options, one string (--serve-extra=--no-journal-process: the writer a thread)",
    )
    o = p.parse_args(argv)
    o.stores = [s.strip() for s in o.stores.split(",") if s.strip()]
    o.serve_extra = [*SERVE_EXTRA, *shlex.split(o.serve_extra)]
    for s in o.stores:
        if s not in STORES:
            p.error(f"unknown store {s}")
    if o.rounds < 2:
        p.error("--rounds must be at least 2")
    if o.latency_count is None:
        o.latency_count = min(max(o.count // 20, 1000), 10_000)
    if o.latency_warmup is None:
        o.latency_warmup = max(o.latency_count // 10, 100)
    if o.warmup is None:
        o.warmup = min(o.count // 20, 5000)
    if o.scenario_timeout is None:
        o.scenario_timeout = max(180.0, o.count / 250)
    return o


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind: stop what we started
    started = dt.datetime.now().astimezone()
    command = "python3 bench/bookmarks.py" + ("" if not argv else " " + " ".join(shlex.quote(a) for a in argv))
    if not opts.no_install:
        R.ensure_packages(PACKAGES)
    R.build_loadgen()
    tmp_root = Path(tempfile.mkdtemp(prefix="subgate-bench-bookmarks-"))
    R.log(f"temp dir {tmp_root}")
    stores: dict = {}
    try:
        for store in opts.stores:
            w = tmp_root / store
            w.mkdir()
            stores[store] = run_store(store, opts, w)
    finally:
        if not opts.keep_tmp:
            shutil.rmtree(tmp_root, ignore_errors=True)
    wall = time.monotonic() - R.T0
    sums = {s: summary(v) for s, v in stores.items()}
    head = ["figure", *[STORES[s] for s in stores], "target"]
    table = rows(sums, opts.rounds, opts.replay_count)
    keys = ("count", "replay_count", "rounds", "latency_count", "latency_warmup", "warmup", "size", "window")
    report = {
        "date": started.isoformat(timespec="seconds"),
        "command": command,
        "wall_seconds": round(wall, 1),
        "machine": R.machine_note(),
        "options": {k: getattr(opts, k) for k in (*keys, "stores", "subgate")},
        "serve_extra": opts.serve_extra,
        "stores": stores,
        "summary": sums,
    }
    R.RESULTS.mkdir(parents=True, exist_ok=True)
    out = R.RESULTS / f"bookmarks-{started.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(R.text_table(head, table))
    for line in time_notes(sums):
        print(line)
    for store, s in stores.items():
        if s.get("log_findings"):
            print(f"- {STORES[store]} server log: {s['log_findings']['count']} warning/error lines")
    print(f"\nresults: {out}")
    if not opts.no_doc:
        update_doc(render(report, table, head))
        print(f"updated: {R.DOC}")
    print(f"wall time: {R.duration(wall)}")
    return 0 if all(s.get("available") for s in stores.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
