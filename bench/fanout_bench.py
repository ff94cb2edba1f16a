#!/usr/bin/env python3
"""Fan-out benchmark (issue 15, "Performance"; docs/fanout.md): what one tier of replication costs, in one run.

This module owns the fan-out figures of docs/performance.md (the part between ``<!-- fanout-bench:begin -->``
and ``<!-- fanout-bench:end -->``, under "Fan-out (issue 15)"). Every server is a real ``subgate serve``
process on 127.0.0.1 with a SQLite store in a temp dir, started and stopped by PID as bench/run.py does:

- a primary; a secondary started with ``--fanout 'amqp://127.0.0.1:PORT=bench//'``; a single server ("solo");
1. throughput: ``--rounds`` rounds in the order A,B,B,A,...: A = ``loadgen send`` of ``--count`` 1 KiB
   messages to ``bench/fan`` at the primary with 10 ``loadgen recv`` (one process and connection each) on the
   replicated ``bench/fan`` at the secondary; B = the same 11 loadgen processes all at the solo server.
   Deliveries/s = deliveries received / wall time from the start of the send to the exit of the last receiver;
2. latency: one message in flight (proton's blocking client): sent (and accepted) at the primary, received at
   the secondary, vs sent and received at the solo server; p50/p99 of each and the difference (one tier);
3. snapshot: ``--topics`` topics ``snap/t<i>`` with 1 KiB values created at the primary through an
   anonymous-relay sender (event-driven, up to 1000 unsettled), then a second secondary started with
   ``--fanout ...=snap//``: seconds from its start until ``subgate fanout status --json`` shows the link
   ``live`` with every topic replicated, and the VmRSS of both servers (/proc/PID/status).

Every loop is bounded in count and in time. Run from the repository root with the project's venv:

    .venv/bin/python bench/fanout_bench.py [--count 20000] [--rounds 4] [--topics 100000] [--no-doc]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from proton import Message, symbol, ubyte
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as R  # noqa: E402  (bench/run.py: loadgen build, the subgate broker, /proc helpers, with_section)

BEGIN, END = "<!-- fanout-bench:begin -->", "<!-- fanout-bench:end -->"
HEADING = "## Fan-out (issue 15)"
EXE = str(Path(sys.executable).parent / "subgate")
STORE = "sqlite:///{tmpdir}/%s.db"
TOPIC = "bench/fan"
RECEIVERS = 10
TARGET = 0.8
BODY = b"x" * 1024
log = R.log


class TopicCap(LinkOption):
    """The `topic` capability on a link's target (sender) or source (receiver), as loadgen's ``--cap topic``."""

    def apply(self, link: Any) -> None:
        terminus = link.target if link.is_sender else link.source
        terminus.capabilities.put_array(False, 21)  # PN_SYMBOL
        terminus.capabilities.enter()
        terminus.capabilities.put_symbol(symbol("topic"))
        terminus.capabilities.exit()


def server(workdir: Path, name: str, extra: list[str]) -> R.Subgate:
    sub = workdir / name
    sub.mkdir()
    broker = R.Subgate(sub, EXE, STORE % name, extra, log_name=f"{name}.log")
    broker.start()
    log(f"{name}: pid {broker.pid}, port {broker.port} {' '.join(extra)}")
    return broker


def fanout_status(broker: R.Subgate) -> dict[str, Any]:
    """The first link of ``subgate fanout status --json`` at ``broker`` ({} when it cannot be read)."""
    cmd = [EXE, "fanout", "status", "--server", f"127.0.0.1:{broker.port}", "--json", "--timeout", "5"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    try:
        data = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {}
    links = data.get("links", data) if isinstance(data, dict) else data
    return links[0] if links else {}


def wait_live(broker: R.Subgate, topics: int, limit: float) -> tuple[float, dict[str, Any]]:
    """Seconds (from now) until the link is live with ``topics`` replicas; polls the CLI, bounded by ``limit``."""
    started = time.monotonic()
    status: dict[str, Any] = {}
    while time.monotonic() - started < limit:
        status = fanout_status(broker)
        if status.get("state") == "live" and status.get("replicated_topics", 0) >= topics:
            return time.monotonic() - started, status
        time.sleep(0.1)
    raise RuntimeError(f"link not live with {topics} topics within {limit:.0f} s: {status}")


def publish(broker: R.Subgate, address: str, body: bytes) -> None:
    conn = BlockingConnection(f"127.0.0.1:{broker.port}", timeout=30)
    try:
        conn.create_sender(address, options=TopicCap()).send(Message(body=body))
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------- throughput


def throughput(sender: R.Subgate, receiver: R.Subgate, count: int, timeout: float) -> dict[str, Any]:
    """1 loadgen send at ``sender``, 10 loadgen recv at ``receiver`` on TOPIC: deliveries/s (wall)."""
    base = [str(R.LOADGEN), "recv", "--port", str(receiver.port), "--sasl", "anonymous"]
    args = ["--address", TOPIC, "--cap", "topic", "--count", str(count), "--timeout", str(int(timeout))]
    receivers = [subprocess.Popen([*base, *args], stdout=subprocess.PIPE, text=True) for _ in range(RECEIVERS)]
    try:
        time.sleep(1.5)  # the receivers attach (a topic subscriber gets what is published after its attach)
        cpu0 = {b.pid: R.cpu_seconds(b.tree()) for b in {sender, receiver}}
        started = time.monotonic()
        sent = R.loadgen(sender, "send", args, timeout)
        outs = [json.loads(p.communicate(timeout=timeout + 30)[0].splitlines()[-1]) for p in receivers]
        wall = time.monotonic() - started
    finally:
        for p in receivers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    got = sum(o.get("received", 0) for o in outs)
    cpu = {pid: R.cpu_seconds(R.proc_tree(pid)) - c for pid, c in cpu0.items()}
    return {
        "ok": bool(sent.get("ok")) and all(o.get("ok") for o in outs),
        "deliveries": got,
        "expected": count * RECEIVERS,
        "wall_s": wall,
        "rate": got / wall if wall > 0 else 0.0,
        "send_rate": sent.get("msgs_per_sec"),
        "server_cpu_s": {label(pid, sender, receiver): v for pid, v in cpu.items()},
    }


def label(pid: int, sender: R.Subgate, receiver: R.Subgate) -> str:
    if sender is receiver:
        return "server"
    return "primary" if pid == sender.pid else "secondary"


def throughput_rounds(tier: tuple[R.Subgate, R.Subgate], solo: R.Subgate, opts: argparse.Namespace) -> dict:
    pattern = ["A", "B", "B", "A"]
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    order = [pattern[i % 4] for i in range(opts.rounds * 2)]
    deadline = time.monotonic() + opts.time_limit
    for kind in order:
        if time.monotonic() > deadline:
            log("throughput: --time-limit reached, fewer rounds")
            break
        pair = tier if kind == "A" else (solo, solo)
        res = throughput(pair[0], pair[1], opts.count, opts.timeout)
        log(f"  {kind}: {res['rate']:,.0f} deliveries/s ({res['deliveries']:,}/{res['expected']:,}) ok={res['ok']}")
        runs[kind].append(res)
    pairs = list(zip(runs["A"], runs["B"], strict=False))
    ratios = [a["rate"] / b["rate"] for a, b in pairs if b["rate"]]
    return {"order": order[: len(runs["A"]) + len(runs["B"])], "runs": runs, "ratios": ratios}


# ---------------------------------------------------------------------------------------------- latency


def latency(sender: R.Subgate, receiver: R.Subgate, address: str, count: int, limit: float) -> dict[str, Any]:
    """One message in flight: blocking send (accepted) at ``sender``, blocking receive at ``receiver``."""
    rc = BlockingConnection(f"127.0.0.1:{receiver.port}", timeout=30)
    sc = BlockingConnection(f"127.0.0.1:{sender.port}", timeout=30)
    samples: list[float] = []
    try:
        rx = rc.create_receiver(address, credit=10, options=TopicCap())
        tx = sc.create_sender(address, options=TopicCap())
        time.sleep(0.5)
        deadline = time.monotonic() + limit
        for i in range(count + count // 10):  # the first tenth is warm-up
            if time.monotonic() > deadline:
                break
            began = time.perf_counter()
            tx.send(Message(body=BODY))
            rx.receive(timeout=10)
            elapsed = time.perf_counter() - began
            rx.accept()
            if i >= count // 10:
                samples.append(elapsed * 1e6)
    finally:
        sc.close()
        rc.close()
    samples.sort()
    return {
        "samples": len(samples),
        "p50_us": pct(samples, 50),
        "p99_us": pct(samples, 99),
    }


def pct(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


# ---------------------------------------------------------------------------------------------- snapshot


class BulkTopics(MessagingHandler):
    """Publishes one 1 KiB message to each of ``count`` topics through an anonymous-relay sender."""

    def __init__(self, port: int, count: int, limit: float) -> None:
        super().__init__(auto_accept=False)
        self.port, self.count, self.limit = port, count, limit
        self.sent = self.accepted = 0

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(f"127.0.0.1:{self.port}")
        event.container.create_sender(conn, None)
        event.container.schedule(self.limit, self)

    def on_timer_task(self, event: Any) -> None:  # the time bound
        event.container.stop()

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        while sender.credit > 0 and self.sent < self.count and self.sent - self.accepted < 1000:
            msg = Message(body=BODY, address=f"snap/t{self.sent:06d}")
            msg.annotations = {symbol("x-opt-jms-dest"): ubyte(1)}
            sender.send(msg)
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        if self.accepted == self.count:
            event.connection.close()
            event.container.stop()
        elif self.sent < self.count:
            self.on_sendable(event)

    def on_rejected(self, event: Any) -> None:
        raise RuntimeError(f"topic creation rejected: {event.delivery.remote_state}")


def snapshot(workdir: Path, primary: R.Subgate, opts: argparse.Namespace) -> dict[str, Any]:
    log(f"snapshot: creating {opts.topics:,} topics of 1 KiB at the primary")
    started = time.monotonic()
    bulk = BulkTopics(primary.port, opts.topics, opts.time_limit)
    Container(bulk).run()
    create_s = time.monotonic() - started
    if bulk.accepted < opts.topics:
        raise RuntimeError(f"only {bulk.accepted:,} of {opts.topics:,} topics created within --time-limit")
    log(f"  created in {create_s:.1f} s; starting the secondary")
    rss_before = R.status_kb(primary.pid, "VmRSS")
    started = time.monotonic()
    second = server(workdir, "snapshot-secondary", ["--fanout", f"amqp://127.0.0.1:{primary.port}=snap//"])
    try:
        listening_s = time.monotonic() - started
        live_s, status = wait_live(second, opts.topics, opts.time_limit)
        return {
            "topics": opts.topics,
            "create_s": create_s,
            "create_rate": opts.topics / create_s,
            "listening_s": listening_s,
            "live_s": listening_s + live_s,
            "status": status,
            "primary_rss_before_mib": rss_before / 1024,
            "primary_rss_mib": R.status_kb(primary.pid, "VmRSS") / 1024,
            "secondary_rss_mib": R.status_kb(second.pid, "VmRSS") / 1024,
            "secondary_hwm_mib": R.status_kb(second.pid, "VmHWM") / 1024,
        }
    finally:
        second.stop()


# ---------------------------------------------------------------------------------------------- report


def render(rep: dict[str, Any]) -> list[str]:
    tp, lat, snap = rep["throughput"], rep["latency"], rep.get("snapshot")
    o = rep["options"]
    lines = [
        f"Machine: {rep['machine']}; load before the run: `{rep['uptime_before']}`, after: `{rep['uptime_after']}`.",
        "",
        f"#### Throughput: 1 publisher, {RECEIVERS} subscribers, {o['count']:,} × 1 KiB messages (non-durable)",
        "",
        "A = publisher at the primary, subscribers at the secondary; B = all at one server. Deliveries/s = "
        "deliveries received / wall time from the start of the send to the exit of the last receiver.",
        "",
        "| round | config | deliveries/s | deliveries | publisher msgs/s | server CPU s |",
        "|---|---|---|---|---|---|",
    ]
    counters = {"A": 0, "B": 0}
    for i, kind in enumerate(tp["order"]):
        r = tp["runs"][kind][counters[kind]]
        counters[kind] += 1
        cpu = " / ".join(f"{k} {v:.1f}" for k, v in sorted(r["server_cpu_s"].items()))
        lines.append(
            f"| {i + 1} | {kind} | {r['rate']:,.0f} | {r['deliveries']:,}/{r['expected']:,} | "
            f"{r['send_rate'] or 0:,.0f} | {cpu} |"
        )
    ratios = tp["ratios"]
    med = statistics.median(ratios) if ratios else float("nan")
    verdict = "met" if med >= TARGET else "**missed**"
    lines += [
        "",
        f"Ratio A/B per pair of rounds: {', '.join(f'{x:.2f}' for x in ratios)}; median **{med:.2f}×** "
        f"(target ≥ {TARGET}×: {verdict}).",
        "",
        f"#### Latency: one message in flight, {lat['tier']['samples']:,} round trips (send accepted + receive)",
        "",
        "| path | p50 µs | p99 µs |",
        "|---|---|---|",
        f"| primary → secondary | {lat['tier']['p50_us']:,.0f} | {lat['tier']['p99_us']:,.0f} |",
        f"| one server | {lat['solo']['p50_us']:,.0f} | {lat['solo']['p99_us']:,.0f} |",
        f"| added by one tier | {lat['tier']['p50_us'] - lat['solo']['p50_us']:,.0f} | "
        f"{lat['tier']['p99_us'] - lat['solo']['p99_us']:,.0f} |",
        "",
    ]
    if snap:
        lines += [
            f"#### Snapshot: {snap['topics']:,} topics with 1 KiB values",
            "",
            f"- created at the primary in {snap['create_s']:.1f} s ({snap['create_rate']:,.0f} topics/s, "
            "anonymous relay, ≤1000 unsettled);",
            f"- secondary started → listening {snap['listening_s']:.1f} s → link `live` with "
            f"{snap['status'].get('replicated_topics', 0):,} replicated topics **{snap['live_s']:.1f} s** "
            "after its start (polled with `subgate fanout status --json`, ~0.5 s resolution);",
            f"- VmRSS: primary {snap['primary_rss_before_mib']:.0f} MiB before the snapshot, "
            f"{snap['primary_rss_mib']:.0f} MiB after; secondary {snap['secondary_rss_mib']:.0f} MiB "
            f"(peak {snap['secondary_hwm_mib']:.0f} MiB).",
            "",
        ]
    return lines


def update_doc(body: list[str], command: str) -> None:
    section = [
        BEGIN,
        "<!-- generated by bench/fanout_bench.py; everything between the fanout-bench markers is rewritten "
        "on each run -->",
        "",
        f"### Latest run: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        *body,
        END,
    ]
    text = R.with_section(R.DOC.read_text(), BEGIN, END, "\n".join(section), HEADING)
    R.DOC.write_text(text)


def wrapped(line: str) -> str:
    """Prose and bullets folded at 116 columns as the rest of docs/performance.md; tables as they are."""
    if line.startswith("|") or len(line) <= 116:
        return line
    indent = "  " if line.startswith("- ") else ""
    return textwrap.fill(line, 116, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()


def measure(opts: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    brokers: list[R.Subgate] = []
    try:
        # Every message must reach the receivers: no conflation at the primary however far the secondary falls behind
        # (docs/fanout.md, "A secondary that is behind"; the default limit is 100,000 operations).
        # The snapshot phase creates opts.topics topics over one connection: above the default per-connection limit.
        primary = server(
            workdir,
            "primary",
            ["--fanout-queue-limit", str(max(10 * opts.count, 1_000_000)),
             "--max-topics-per-connection", str(max(opts.topics + 10, 10_000))],
        )  # fmt: skip
        brokers.append(primary)
        publish(primary, TOPIC, b"seed")
        secondary = server(workdir, "secondary", ["--fanout", f"amqp://127.0.0.1:{primary.port}=bench//"])
        brokers.append(secondary)
        solo = server(workdir, "solo", [])
        brokers.append(solo)
        publish(solo, TOPIC, b"seed")
        wait_live(secondary, 1, 60)
        log("throughput rounds")
        tp = throughput_rounds((primary, secondary), solo, opts)
        log("latency")
        lat = {
            "tier": latency(primary, secondary, TOPIC, opts.latency_count, opts.time_limit),
            "solo": latency(solo, solo, TOPIC, opts.latency_count, opts.time_limit),
        }
        log(f"  tier {lat['tier']}, solo {lat['solo']}")
        solo.stop()
        secondary.stop()
        snap = snapshot(workdir, primary, opts) if opts.topics else None
        return {"throughput": tp, "latency": lat, "snapshot": snap}
    finally:
        for b in reversed(brokers):
            b.stop()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=20_000, help="messages per throughput run (20000)")
    p.add_argument("--rounds", type=int, default=2, help="pairs of throughput runs, order A,B,B,A (2)")
    p.add_argument("--latency-count", type=int, default=2_000, help="measured round trips per path (2000)")
    p.add_argument("--topics", type=int, default=100_000, help="topics of the snapshot, 0 to skip (100000)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per loadgen run (120)")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds per phase before it stops (300)")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    opts = p.parse_args(argv)
    R.build_loadgen()
    m = R.machine_note()
    report: dict[str, Any] = {
        "options": vars(opts),
        "machine": f"{m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}",
        "uptime_before": uptime(),
    }
    workdir = Path(tempfile.mkdtemp(prefix="fanout-bench-"))
    report.update(measure(opts, workdir))
    report["uptime_after"] = uptime()
    (workdir / "report.json").write_text(json.dumps(report, indent=2, default=str))
    body = [wrapped(x) for x in render(report)]
    print("\n".join(body))
    log(f"raw figures: {workdir / 'report.json'}")
    if not opts.no_doc:
        command = " ".join([".venv/bin/python", "bench/fanout_bench.py", *map(shlex.quote, argv)])
        update_doc(body, command)
        log(f"updated {R.DOC}")
    ok = all(r["ok"] for runs in report["throughput"]["runs"].values() for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
