"""Benchmark of the Spark pipeline (`subgate pipeline ...`, docs/pipeline.md) on a synthetic journal.

For each store (SQLite file, throwaway PostgreSQL cluster): load ROWS journal rows (20 topics, 2 queues, 50
numbered publishers with a gap every 10,000 seqs, 1 KiB `size`, 100-byte payloads) plus 40 durable subscriptions
and 2 queues with positions and accepts, then time in one SparkSession (local[2], the CLI's settings): audit
and retention read by JDBC; the full Parquet export; lag by JDBC and from the Parquet export, --lag-repeats times
each, alternating; audit and retention from the Parquet export (--jobs: which of audit and retention to time);
then TAIL more rows and the export's incremental step. Every job's answer from Parquet is checked equal to its
answer by JDBC. Writes the figures between the pipeline markers of docs/performance.md (unless --no-doc).

    /work/main/.venv/bin/python bench/pipeline_bench.py --rows 1000000 [--stores sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import run as R  # noqa: E402  (bench/run.py: PgCluster, with_section)

from subgate.storage.db import upgrade  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BEGIN, END = "<!-- pipeline:begin -->", "<!-- pipeline:end -->"
TOPICS = [f"bench/t{i:02d}" for i in range(20)]
QUEUES = ["bench-q0", "bench-q1"]
PUBLISHERS = 50
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def journal_rows(first: int, count: int) -> Iterator[tuple[Any, ...]]:
    """Rows of `messages` (id, address, node_kind, publisher_id, publisher_seq, bookmark, ts, durable, priority,
    size, payload); a row every 50 ms from START, so 1M rows span about 14 hours (two days)."""
    payload = b"x" * 100
    for i in range(first, first + count):
        publisher = i % PUBLISHERS
        seq = i // PUBLISHERS + (i // (PUBLISHERS * 10_000))  # a gap of one seq every 10,000
        address = QUEUES[i % 2] if i % 25 == 0 else TOPICS[i % len(TOPICS)]
        kind = "queue" if address in QUEUES else "topic"
        ts = START + dt.timedelta(milliseconds=50 * i)
        yield (i, address, kind, f"pub-{publisher}", seq, f"pub-{publisher}|{seq}|", ts, True, 4, 1024, payload)


def positions(rows: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[int, int]]]:
    """Cursors (2 durable subscriptions per topic, 1 per queue) at 80 % or 95 % of the journal, a few accepts
    above each mark; subscriptions rows."""
    cursors, subs, acks = [], [], []
    for n, address in enumerate(TOPICS + QUEUES):
        for k, share in enumerate((0.8, 0.95) if address in TOPICS else (0.9,)):
            cid = len(cursors) + 1
            low = int(rows * share)
            kind = "queue" if address in QUEUES else "subscription"
            owner = address if kind == "queue" else f"app{k}.s{n}"
            cursors.append((cid, kind, owner, address, low, START))
            acks += [(cid, low + j * 7) for j in range(1, 200)]
            if kind == "subscription":
                subs.append((cid, "durable", True, f"app{k}", f"s{n}", address, cid, START))
    return cursors, subs, acks


def load_sqlite(path: Path, rows: int, first: int = 1, with_positions: bool = True) -> None:
    db = sqlite3.connect(path)
    text = ((*r[:6], r[6].strftime("%Y-%m-%d %H:%M:%S.%f"), *r[7:]) for r in journal_rows(first, rows))
    db.executemany(
        "INSERT INTO messages (id, address, node_kind, publisher_id, publisher_seq, bookmark, ts, durable, priority,"
        " size, payload) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        text,
    )
    if with_positions:
        cursors, subs, acks = positions(rows)
        stamp = START.strftime("%Y-%m-%d %H:%M:%S.%f")
        db.executemany("INSERT INTO ack_cursors VALUES (?,?,?,?,?,?)", [(*c[:5], stamp) for c in cursors])
        db.executemany(
            "INSERT INTO subscriptions (id, kind, durable, client_id, name, topic, cursor_id, created_at, no_local,"
            " consumers) VALUES (?,?,?,?,?,?,?,?,0,0)",
            [(*s[:7], stamp) for s in subs],
        )
        db.executemany("INSERT INTO acks VALUES (?,?)", acks)
        db.executemany("INSERT INTO publishers VALUES (?,?,?)", [(f"pub-{p}", 0, stamp) for p in range(PUBLISHERS)])
    db.commit()
    db.close()


def load_postgres(url: str, rows: int, first: int = 1, with_positions: bool = True) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn, conn.cursor() as cur:
        columns = "id, address, node_kind, publisher_id, publisher_seq, bookmark, ts, durable, priority, size, payload"
        with cur.copy(f"COPY messages ({columns}) FROM STDIN") as copy:
            for row in journal_rows(first, rows):
                copy.write_row(row)
        if with_positions:
            cursors, subs, acks = positions(rows)
            cur.executemany("INSERT INTO ack_cursors VALUES (%s,%s,%s,%s,%s,%s)", cursors)
            cur.executemany(
                "INSERT INTO subscriptions (id, kind, durable, client_id, name, topic, cursor_id, created_at, no_local,"
                " consumers) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,false,0)",
                subs,
            )
            cur.executemany("INSERT INTO acks VALUES (%s,%s)", acks)
            cur.executemany(
                "INSERT INTO publishers VALUES (%s,%s,%s)", [(f"pub-{p}", 0, START) for p in range(PUBLISHERS)]
            )


def timed(label: str, fn: Callable[[], Any], out: dict[str, float]) -> Any:
    R.log(f"  {label} ...")
    started = time.perf_counter()
    value = fn()
    out[label] = time.perf_counter() - started
    R.log(f"  {label}: {out[label]:.1f} s")
    return value


def run_store(spark: Any, kind: str, opts: argparse.Namespace, work: Path) -> dict[str, Any]:
    from subgate.pipeline.export import export_journal
    from subgate.pipeline.jobs import run_audit, run_lag, run_retention
    from subgate.pipeline.readers import jdbc_store

    pg = None
    if kind == "sqlite":
        url = f"sqlite:///{work / 'bench.db'}"
    else:
        pg = R.PgCluster()
        url = pg.start()
    try:
        upgrade(url)
        times: dict[str, float] = {}
        load = load_sqlite if kind == "sqlite" else load_postgres
        target: Any = work / "bench.db" if kind == "sqlite" else url
        timed("load", lambda: load(target, opts.rows), times)
        store, now = jdbc_store(url), START + dt.timedelta(days=3)
        parquet = work / f"export-{kind}"
        jobs = set(opts.jobs.split(","))
        if "audit" in jobs:
            audit_jdbc = timed("audit (JDBC)", lambda: run_audit(spark, store, opts.partitions), times)
        if "retention" in jobs:
            retention_jdbc = timed(
                "retention (JDBC)", lambda: run_retention(spark, store, now, 86_400_000, opts.partitions), times
            )
        timed("export (all rows)", lambda: export_journal(spark, store, parquet, opts.partitions), times)
        dataset = str(parquet / "journal")
        lag_runs: dict[str, list[float]] = {"JDBC": [], "Parquet": []}
        answers = {}
        for k in range(opts.lag_repeats):  # J P, P J, J P ...: each path as often first as second
            for path in ("JDBC", "Parquet") if k % 2 == 0 else ("Parquet", "JDBC"):
                source = {"parquet": dataset} if path == "Parquet" else {"partitions": opts.partitions}
                run: dict[str, float] = {}
                answers[path] = timed(f"lag ({path})", lambda s=source: run_lag(spark, store, now, **s), run)
                lag_runs[path].append(run[f"lag ({path})"])
        for path, runs in lag_runs.items():
            times[f"lag ({path})"] = statistics.median(runs)
        assert answers["Parquet"] == answers["JDBC"], "lag from Parquet gave another answer"
        if "audit" in jobs:
            audit_pq = timed("audit (Parquet)", lambda: run_audit(spark, store, parquet=dataset), times)
            assert audit_pq == audit_jdbc, "audit from Parquet gave another answer"
        if "retention" in jobs:
            retention_pq = timed(
                "retention (Parquet)", lambda: run_retention(spark, store, now, 86_400_000, parquet=dataset), times
            )
            assert retention_pq.rows == retention_jdbc.rows, "retention from Parquet gave another answer"
        timed("load tail", lambda: load(target, opts.tail, opts.rows + 1, False), times)
        step = timed("export (tail)", lambda: export_journal(spark, store, parquet, opts.partitions), times)
        assert step.rows == opts.tail
        return {
            "store": kind,
            "times": times,
            "lag_runs": lag_runs,
            "url": url if kind == "sqlite" else "PostgreSQL " + pg.version,
        }
    finally:
        if pg is not None:
            pg.stop()


def section(results: list[dict[str, Any]], opts: argparse.Namespace, wall: float) -> str:
    labels = list(results[0]["times"])
    head = "| step | " + " | ".join(r["store"] for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(f"{r['times'][label]:.1f} s" for r in results) + " |")
    ratios = [f"{r['store']}: {r['times']['lag (JDBC)'] / r['times']['lag (Parquet)']:.1f}×" for r in results]
    runs = "; ".join(
        f"{r['store']}: JDBC {', '.join(f'{t:.1f}' for t in r['lag_runs']['JDBC'])} s, Parquet "
        f"{', '.join(f'{t:.1f}' for t in r['lag_runs']['Parquet'])} s"
        for r in results
    )
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return (
        f"{BEGIN}\n<!-- generated by bench/pipeline_bench.py; rewritten on each run -->\n\n"
        f"### Pipeline: latest run {when}\n\n"
        f"Command: `python bench/pipeline_bench.py --rows {opts.rows} --tail {opts.tail} --stores {opts.stores}"
        f" --jobs {opts.jobs} --lag-repeats {opts.lag_repeats}`"
        f" (wall {wall / 60:.1f} min; {os.cpu_count()} cores, {platform.machine()}, load average at the end "
        f"{os.getloadavg()[0]:.1f}). One SparkSession, `local[2]`, JDBC reads in {opts.partitions} ranges. Each job"
        " is timed once, in order, from a warm session (the first one pays the JIT warm-up), except lag: after the"
        f" export, {opts.lag_repeats} runs by each path alternating which goes first (J P, P J, ...), the median in"
        " the table; every Parquet answer was checked equal to the JDBC one.\n\n"
        + "\n".join(lines)
        + f"\n\nlag from Parquet against lag by JDBC (medians): {', '.join(ratios)} faster. Each run: {runs}.\n\n{END}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--tail", type=int, help="rows added before the incremental export (default rows/10)")
    p.add_argument("--stores", default="sqlite,postgresql")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--jobs", default="lag,audit,retention", help="jobs timed (lag always; export always runs)")
    p.add_argument("--lag-repeats", type=int, default=2, help="lag runs by each path, alternating (default 2)")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    opts = p.parse_args()
    opts.tail = opts.tail or max(1, opts.rows // 10)
    from subgate.pipeline.session import SessionSettings, start_session

    work = Path(tempfile.mkdtemp(prefix="subgate-pipeline-bench-"))
    started = time.perf_counter()
    spark = start_session(SessionSettings(master="local[2]", shuffle_partitions=4, scratch=work / "spark"))
    try:
        spark.range(1000).groupBy().sum().collect()  # the JVM's first job, not counted
        results = [run_store(spark, kind, opts, work) for kind in opts.stores.split(",")]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = section(results, opts, time.perf_counter() - started)
    print(text)
    if not opts.no_doc:
        DOC.write_text(R.with_section(DOC.read_text(), BEGIN, END, text, "## Pipeline (Spark) benchmark"))


if __name__ == "__main__":
    main()
