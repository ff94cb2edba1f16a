#!/usr/bin/env python3
"""Topic-tree benchmark: matching cost per published message and memory, 100k topics and 10k selector subscriptions.

Pure Python, in one process, no broker: it drives ``topics.TopicTree`` and ``topics.SelectorIndex`` directly.

    .venv/bin/python bench/topics_bench.py                     # full size (about 20 s here), or `make bench-topics`
    .venv/bin/python bench/topics_bench.py --topics 10000 --subscriptions 1000 --messages 20000   # quick

Workload (fixed seed, ``--seed``): topics ``region/<r>/desk/<d>/instrument/<ticker>`` over 8 regions of skewed
size, 15-40 desks each, a ``status`` topic per desk and, for some instruments, ``.../leg/<k>`` below them;
subscriptions with a mix of selectors (exact paths, ``/`` and ``//`` qualifiers at region, desk and instrument
depth, split paths with regex segments, a few full-path regexes, selector sets). Every topic starts with the
segment ``region``, so whatever the index files at the root or at ``region`` is on every message's walk.

Phases, each bounded by its count and by ``--time-limit`` seconds:

1. memory: build the tree, then the index (selectors parsed by ``add``), measuring the VmRSS growth
   (/proc/self/status); then build both again under tracemalloc (bytes retained and peak), and drop those copies;
2. matching: ``--messages`` publishes round robin over the topics in a shuffled order, timed in batches of
   ``--batch`` (µs per message, median and p99 over batches), with the index's counters: entries examined
   (the candidates on the walk) and tests run (regex edges and full-path ``matches``);
3. naive baseline: ``--naive-messages`` of the same publishes, each testing all the selectors; every result is
   checked against the index's (a difference fails the run);
4. current value: ``TopicTree.set_value`` for the same publishes (the rest of a publish in the topic engine);
5. new topics: ``--new-topics`` topics created one by one (``TopicTree.add``), each followed by the look-up of
   the subscriptions that must now see it (``SelectorIndex.matching``), timed per topic;
6. subscribe: ``--subscribe-sample`` selectors of the workload evaluated against the tree (``TopicTree.select``,
   what a subscribe or fetch costs) and added to the index, timed per selector and reported per kind.

It prints the tables and rewrites the part of docs/performance.md between ``<!-- topics-bench:begin -->`` and
``<!-- topics-bench:end -->`` (``--no-doc`` does not). Standard library plus this repository's ``topics``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import random
import re
import resource
import shlex
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from subgate.topics import Selector, SelectorIndex, SelectorSet, TopicTree, parse_selector  # noqa: E402

DOC = REPO / "docs" / "performance.md"
BEGIN, END = "<!-- topics-bench:begin -->", "<!-- topics-bench:end -->"
SECTION = "## Topic tree: matching cost and memory"

REGIONS = {"emea": 30, "amer": 25, "apac": 20, "latam": 8, "mena": 6, "nordics": 5, "dach": 4, "anz": 2}
DESK_KINDS = ("fx", "rates", "credit", "equities", "commodities", "etf", "options", "futures")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MiB = 1024 * 1024
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- workload


@dataclass
class Workload:
    topics: list[str]
    desks: dict[str, list[str]]
    instruments: list[str]  # the instrument-level topics (``.../instrument/<ticker>``)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)  # (kind, expression)


def ticker(rng: random.Random) -> str:
    return "".join(rng.choices(LETTERS, k=rng.randint(3, 6)))


def instrument_path(rng: random.Random, desks: dict[str, list[str]]) -> str:
    region = rng.choices(list(REGIONS), weights=list(REGIONS.values()))[0]
    return f"region/{region}/desk/{rng.choice(desks[region])}/instrument/{ticker(rng)}"


def build_topics(rng: random.Random, count: int) -> Workload:
    """``count`` distinct topic paths: desk status topics, instruments, and legs below some instruments."""
    desks: dict[str, list[str]] = {}
    for region in REGIONS:
        desks[region] = [f"{rng.choice(DESK_KINDS)}-{n}" for n in range(rng.randint(15, 40))]
    topics: dict[str, None] = {}
    for region, names in desks.items():
        for desk in names:
            if len(topics) < count:
                topics[f"region/{region}/desk/{desk}/status"] = None
    instruments: list[str] = []
    attempts = 0
    while len(topics) < count and attempts < 50 * count:  # bounded: collisions only slow it down
        attempts += 1
        path = instrument_path(rng, desks)
        if path in topics:
            continue
        topics[path] = None
        instruments.append(path)
        if rng.random() < 0.15:
            for leg in range(1, rng.randint(2, 4) + 1):
                if len(topics) < count:
                    topics[f"{path}/leg/{leg}"] = None
    if len(topics) < count:
        raise SystemExit(f"could only generate {len(topics)} distinct topics")
    return Workload(list(topics), desks, instruments)


def pick(rng: random.Random, weighted: dict[str, int]) -> str:
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def desk_of(path: str) -> str:
    return "/".join(path.split("/")[:4])


def region_of(path: str) -> str:
    return "/".join(path.split("/")[:2])


def exact_selector(rng: random.Random, w: Workload) -> str:
    if rng.random() < 0.05:  # a subscription to a topic that does not exist (yet)
        return ">" + instrument_path(rng, w.desks)
    return ">" + rng.choice(w.topics)


def descendant_selector(rng: random.Random, w: Workload) -> str:
    instrument = rng.choice(w.instruments)
    depth = pick(rng, {"instrument": 45, "desk": 45, "region": 8, "all": 2})
    branch = {"instrument": instrument, "desk": desk_of(instrument), "region": region_of(instrument), "all": "region"}
    qualifier = "//" if rng.random() < 0.8 else "/"
    return ">" + branch[depth] + qualifier


def split_selector(rng: random.Random, w: Workload) -> str:
    instrument = rng.choice(w.instruments)
    _, region, _, desk, _, name = instrument.split("/")
    kind = desk.split("-")[0]
    letter = rng.choice(LETTERS)
    form = pick(rng, {"desk-kind": 30, "instrument-range": 35, "any-region": 5, "legs": 20, "desk-qualified": 10})
    if form == "desk-kind":  # prefix region/<r>/desk
        return f"?region/{region}/desk/{kind}-.*/instrument/{letter}.*"
    if form == "instrument-range":  # prefix region/<r>/desk/<d>/instrument
        return f"?region/{region}/desk/{desk}/instrument/[{letter}-{chr(min(ord(letter) + 2, ord('Z')))}].*"
    if form == "any-region":  # prefix region: its `.*` edge is tested for every message
        return f"?region/.*/desk/{desk}/instrument/.*"
    if form == "legs":  # prefix region/<r>/desk/<d>/instrument/<i>/leg
        return f"?region/{region}/desk/{desk}/instrument/{name}/leg/[12]"
    return f"?region/{region}/desk/{kind}-[0-9]+//"  # prefix region/<r>/desk


def full_selector(rng: random.Random, w: Workload) -> str:
    instrument = rng.choice(w.instruments)
    _, region, _, desk, _, name = instrument.split("/")
    form = pick(rng, {"instrument": 50, "region-legs": 30, "root": 10, "alternation": 10})
    if form == "instrument":  # prefix region/<r>/desk/<d>/instrument
        return f"*region/{region}/desk/{desk}/instrument/{name[0]}[A-Z]*"
    if form == "region-legs":  # prefix region/<r>
        return f"*region/{region}/.*/leg/1"
    if form == "root":  # prefix "": tested for every message
        return "*.*/status"
    other = rng.choice([r for r in REGIONS if r != region])
    return f"*region/({region}|{other})/desk/{desk}/.*"  # prefix region


def set_selector(rng: random.Random, w: Workload) -> str:
    members = [
        exact_selector(rng, w) if rng.random() < 0.5 else descendant_selector(rng, w) for _ in range(rng.randint(2, 4))
    ]
    if rng.random() < 0.2:
        members.append(split_selector(rng, w))
    return "#" + "////".join(members)


KINDS: dict[str, tuple[int, Callable[[random.Random, Workload], str]]] = {
    "path, exact (`>a/b`)": (50, exact_selector),
    "path with `/` or `//`": (22, descendant_selector),
    "split-path (`?`)": (18, split_selector),
    "full-path regex (`*`)": (2, full_selector),
    "selector set (`#`)": (8, set_selector),
}


def build_subscriptions(rng: random.Random, w: Workload, count: int) -> None:
    kinds = list(KINDS)
    weights = [KINDS[k][0] for k in kinds]
    for kind in rng.choices(kinds, weights=weights, k=count):
        w.subscriptions.append((kind, KINDS[kind][1](rng, w)))


# ---------------------------------------------------------------------------------------------- measuring


def rss_kb() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def maxrss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux


def build_tree(topics: Sequence[str]) -> TopicTree[int]:
    tree: TopicTree[int] = TopicTree()
    for path in topics:
        tree.add(path)
    return tree


def build_index(subscriptions: Sequence[tuple[str, str]]) -> SelectorIndex[int]:
    index: SelectorIndex[int] = SelectorIndex()
    for key, (_, expression) in enumerate(subscriptions):
        index.add(expression, key)
    return index


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def measure_memory(w: Workload, limit: float) -> tuple[TopicTree[int], SelectorIndex[int], dict]:
    """Build the tree and the index (kept for the later phases), measuring RSS; then again under tracemalloc."""
    re.purge()  # the workload's regexes were compiled once already: count them again as the index compiles them
    gc.collect()
    rss0 = rss_kb()
    started = time.perf_counter()
    tree = build_tree(w.topics)
    tree_seconds = time.perf_counter() - started
    gc.collect()
    rss1 = rss_kb()
    started = time.perf_counter()
    index = build_index(w.subscriptions)
    index_seconds = time.perf_counter() - started
    gc.collect()
    rss2 = rss_kb()
    mem: dict = {
        "tree_build_s": tree_seconds,
        "index_build_s": index_seconds,
        "tree_rss_mib": (rss1 - rss0) / 1024,
        "index_rss_mib": (rss2 - rss1) / 1024,
    }
    if tree_seconds + index_seconds > limit / 4:
        log("tracemalloc pass skipped: the plain build already took a quarter of --time-limit")
        return tree, index, mem
    re.purge()
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    copy_tree = build_tree(w.topics)
    gc.collect()
    after_tree, tree_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    copy_index = build_index(w.subscriptions)
    gc.collect()
    after_index, index_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mem.update(
        tree_traced_mib=(after_tree - base) / MiB,
        tree_peak_mib=(tree_peak - base) / MiB,
        index_traced_mib=(after_index - after_tree) / MiB,
        index_peak_mib=(index_peak - after_tree) / MiB,
    )
    del copy_tree, copy_index
    gc.collect()
    return tree, index, mem


@dataclass
class Batches:
    """Per-batch µs per message; ``done`` messages before the count or the deadline stopped the loop."""

    per_message_us: list[float] = field(default_factory=list)
    done: int = 0
    stopped_by_time: bool = False
    seconds: float = 0.0


def run_batches(messages: Sequence[str], batch: int, limit: float, step: Callable[[Sequence[str]], None]) -> Batches:
    out = Batches()
    deadline = time.monotonic() + limit
    for start in range(0, len(messages), batch):
        if time.monotonic() > deadline:
            out.stopped_by_time = True
            break
        chunk = messages[start : start + batch]
        began = time.perf_counter_ns()
        step(chunk)
        elapsed = time.perf_counter_ns() - began
        out.per_message_us.append(elapsed / 1000 / len(chunk))
        out.done += len(chunk)
        out.seconds += elapsed / 1e9
    return out


def summary(b: Batches) -> dict:
    if not b.per_message_us:
        return {"messages": 0}
    return {
        "messages": b.done,
        "median_us": median(b.per_message_us),
        "p99_us": percentile(b.per_message_us, 99),
        "mean_us": b.seconds * 1e6 / b.done,
        "stopped_by_time": b.stopped_by_time,
    }


def measure_matching(index: SelectorIndex[int], messages: Sequence[str], opts: argparse.Namespace) -> dict:
    warm = messages[: min(len(messages), 1000)]
    for path in warm:
        index.matching(path)
    index.examined = index.evaluated = 0
    delivered = 0

    def step(chunk: Sequence[str]) -> None:
        nonlocal delivered
        for path in chunk:
            delivered += len(index.matching(path))

    b = run_batches(messages, opts.batch, opts.time_limit, step)
    result = summary(b)
    result.update(
        examined=index.examined / max(b.done, 1),
        evaluated=index.evaluated / max(b.done, 1),
        matches=delivered / max(b.done, 1),
    )
    return result


def measure_naive(
    selectors: list[tuple[int, Selector]], index: SelectorIndex[int], messages: Sequence[str], opts: argparse.Namespace
) -> dict:
    results: list[set[int]] = []

    def step(chunk: Sequence[str]) -> None:
        for path in chunk:
            results.append({key for key, selector in selectors if selector.matches(path)})

    b = run_batches(messages, max(1, min(opts.batch, len(messages) // 100)), opts.time_limit, step)
    mismatches = [path for path, found in zip(messages, results, strict=False) if found != index.matching(path)]
    result = summary(b)
    result.update(examined=len(selectors), evaluated=len(selectors), mismatches=len(mismatches))
    if mismatches:
        log(f"MISMATCH between the index and the scan for {len(mismatches)} paths, e.g. {mismatches[0]!r}")
    return result


def measure_set_value(tree: TopicTree[int], messages: Sequence[str], opts: argparse.Namespace) -> dict:
    def step(chunk: Sequence[str]) -> None:
        for value, path in enumerate(chunk):
            tree.set_value(path, value)

    return summary(run_batches(messages, opts.batch, opts.time_limit, step))


def measure_new_topics(
    tree: TopicTree[int], index: SelectorIndex[int], w: Workload, rng: random.Random, opts: argparse.Namespace
) -> dict:
    fresh: dict[str, None] = {}
    attempts = 0
    while len(fresh) < opts.new_topics and attempts < 50 * opts.new_topics + 100:
        attempts += 1
        path = instrument_path(rng, w.desks)
        if path not in tree:
            fresh[path] = None
    add_us: list[float] = []
    find_us: list[float] = []
    subscribers = 0
    deadline = time.monotonic() + opts.time_limit
    created: list[str] = []
    for path in fresh:
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter_ns()
        added = tree.add(path)
        t1 = time.perf_counter_ns()
        subscribers += len(index.matching(path))
        t2 = time.perf_counter_ns()
        if added:
            created.append(path)
        add_us.append((t1 - t0) / 1000)
        find_us.append((t2 - t1) / 1000)
    for path in created:  # leave the tree as the workload built it
        tree.remove(path)
    total = [a + f for a, f in zip(add_us, find_us, strict=True)]
    return {
        "topics": len(add_us),
        "add": (median(add_us), percentile(add_us, 99)) if add_us else None,
        "find": (median(find_us), percentile(find_us, 99)) if find_us else None,
        "total": (median(total), percentile(total, 99)) if total else None,
        "subscribers": subscribers / max(len(add_us), 1),
    }


def measure_subscribe(
    tree: TopicTree[int], index: SelectorIndex[int], w: Workload, rng: random.Random, opts: argparse.Namespace
) -> dict:
    sample = rng.sample(w.subscriptions, min(opts.subscribe_sample, len(w.subscriptions)))
    per_kind: dict[str, list[tuple[float, int]]] = {kind: [] for kind in KINDS}
    deadline = time.monotonic() + opts.time_limit
    key = len(w.subscriptions)  # keys the workload does not use
    for kind, expression in sample:
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter_ns()
        selector = parse_selector(expression)
        selected = sum(1 for _ in tree.select(selector))
        index.add(selector, key)
        elapsed = (time.perf_counter_ns() - t0) / 1000
        index.remove(key)
        per_kind[kind].append((elapsed, selected))
    out: dict = {}
    for kind, runs in per_kind.items():
        if runs:
            times = [t for t, _ in runs]
            out[kind] = {
                "sampled": len(runs),
                "median_us": median(times),
                "p99_us": percentile(times, 99),
                "max_us": max(times),
                "topics": sum(n for _, n in runs) / len(runs),
            }
    return out


def workload_facts(w: Workload) -> dict:
    depths = Counter(path.count("/") + 1 for path in w.topics)
    prefixes: Counter[int] = Counter()
    for _, expression in w.subscriptions:
        selector = parse_selector(expression)
        members = selector.members if isinstance(selector, SelectorSet) else (selector,)
        for member in dict.fromkeys(members):
            prefixes[member.prefix.count("/") + 1 if member.prefix else 0] += 1
    return {
        "depths": dict(sorted(depths.items())),
        "kinds": {kind: n for kind in KINDS if (n := sum(1 for k, _ in w.subscriptions if k == kind))},
        "prefix_depths": dict(sorted(prefixes.items())),
        "instruments": len(w.instruments),
        "desks": sum(len(d) for d in w.desks.values()),
    }


# ---------------------------------------------------------------------------------------------- report


def machine_note() -> dict:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "kernel": platform.release(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def fmt(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render(report: dict) -> list[str]:
    o, m, f, mem = report["options"], report["machine"], report["workload"], report["memory"]
    mt, nv, sv, nt = report["matching"], report["naive"], report["set_value"], report["new_topics"]
    subs = o["subscriptions"]
    depth_text = ", ".join(f"{n:,} at depth {d}" for d, n in f["depths"].items())
    prefix_text = ", ".join(f"{n:,} at depth {d}" for d, n in f["prefix_depths"].items())
    kinds_text = ", ".join(f"{n:,} {k}" for k, n in f["kinds"].items())
    L = [
        f"### Latest run: {report['date']}",
        "",
        "Command (from the repository root; `make bench-topics` runs it at full size):",
        "",
        "```",
        report["command"],
        "```",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), Linux {m['kernel']}, {m['python']}; one process, one thread; "
        f"wall time {report['wall_seconds']:.0f} s. Shared, noisy machine: read the ratios, not the last digit.",
        "",
        f"Workload (seed {o['seed']}): {o['topics']:,} topics `region/<r>/desk/<d>/instrument/<ticker>[/leg/<k>]` "
        f"plus a `status` topic per desk ({f['desks']:,} desks, {f['instruments']:,} instruments; {depth_text}); "
        f"{subs:,} subscriptions: {kinds_text}. Selectors by prefix depth (a set counts once per member): "
        f"{prefix_text} — depth 0 is the root and depth 1 is `region`, which every topic shares. Messages: "
        f"{mt['messages']:,} publishes round robin over the topics in a shuffled order, timed in batches of "
        f"{o['batch']} (median and p99 over batches).",
        "",
        "#### Per published message",
        "",
    ]
    rows = [
        [
            "`SelectorIndex.matching`",
            f"{mt['messages']:,}",
            fmt(mt.get("median_us")),
            fmt(mt.get("p99_us")),
            fmt(mt.get("mean_us")),
            f"{mt['examined']:,.1f} ({mt['examined'] / subs:.2%})",
            f"{mt['evaluated']:,.1f} ({mt['evaluated'] / subs:.2%})",
            f"{mt['matches']:,.1f}",
        ],
        [
            "naive: every selector's `matches`",
            f"{nv['messages']:,}",
            fmt(nv.get("median_us")),
            fmt(nv.get("p99_us")),
            fmt(nv.get("mean_us")),
            f"{nv['examined']:,} (all)",
            f"{nv['evaluated']:,} `matches`",
            "same sets" if not nv["mismatches"] else f"**{nv['mismatches']} mismatches**",
        ],
        [
            "`TopicTree.set_value` (current value)",
            f"{sv['messages']:,}",
            fmt(sv.get("median_us"), 2),
            fmt(sv.get("p99_us"), 2),
            fmt(sv.get("mean_us"), 2),
            "—",
            "—",
            "—",
        ],
    ]
    head = ["what", "messages", "median µs", "p99 µs", "mean µs", "candidates examined", "tests run", "matched"]
    L += md_table(head, rows) + [""]
    if mt.get("median_us") and nv.get("median_us"):
        L.append(
            f"- naive/index: {nv['median_us'] / mt['median_us']:,.0f}× the time per message (median); the index "
            f"examines {mt['examined']:,.0f} candidates and runs {mt['evaluated']:,.0f} tests per message where the "
            f"scan runs {subs:,} `matches` calls."
        )
    L += [
        "- candidates examined: index entries on the nodes the walk reached (selectors filed at an "
        "ancestor-or-self of the path); tests run: `fullmatch` of each regex edge on the walk (shared by every "
        "split-path selector behind it) plus `matches` of each full-path selector on the walk. Path and split-path "
        "selectors are decided by where the walk ends, without a test. The naive scan runs one `matches` per "
        "selector; its result was checked against the index's on every message it ran.",
        "",
        "#### Creating a topic (and finding the subscriptions that must see it)",
        "",
    ]
    rows = [
        ["`TopicTree.add`", fmt(nt["add"][0], 2), fmt(nt["add"][1], 2)],
        ["`SelectorIndex.matching` (the subscribers)", fmt(nt["find"][0], 2), fmt(nt["find"][1], 2)],
        ["both", fmt(nt["total"][0], 2), fmt(nt["total"][1], 2)],
    ]
    L += md_table(["step", "median µs", "p99 µs"], rows) + [""]
    L += [
        f"{nt['topics']:,} new instrument topics, timed one by one; {nt['subscribers']:.1f} subscriptions reach a "
        "new topic on average.",
        "",
        "#### Subscribing: evaluating a selector against the tree (`TopicTree.select`) and indexing it",
        "",
    ]
    rows = [
        [kind, f"{r['sampled']:,}", fmt(r["median_us"]), fmt(r["p99_us"]), fmt(r["max_us"]), f"{r['topics']:,.1f}"]
        for kind, r in report["subscribe"].items()
    ]
    L += md_table(["selector kind", "sampled", "median µs", "p99 µs", "max µs", "topics selected"], rows) + [""]
    L += [
        "Parse + `select` (walk from the prefix) + `SelectorIndex.add`, per selector. A full-path regex walks every "
        "topic below its prefix, so `*.*/status` (prefix the root) visits the whole tree.",
        "",
        "#### Memory",
        "",
    ]
    rows = [
        [
            f"`TopicTree` ({o['topics']:,} topics, no values)",
            fmt(mem.get("tree_traced_mib")),
            fmt(mem.get("tree_peak_mib")),
            fmt(mem["tree_rss_mib"]),
            fmt(mem.get("tree_traced_mib", 0) * MiB / o["topics"], 0),
            fmt(mem["tree_build_s"], 2),
        ],
        [
            f"`SelectorIndex` ({subs:,} selectors, parsed)",
            fmt(mem.get("index_traced_mib")),
            fmt(mem.get("index_peak_mib")),
            fmt(mem["index_rss_mib"]),
            fmt(mem.get("index_traced_mib", 0) * MiB / subs, 0),
            fmt(mem["index_build_s"], 2),
        ],
    ]
    head = ["structure", "retained MiB (tracemalloc)", "peak MiB (tracemalloc)", "VmRSS growth MiB"]
    head += ["bytes each (retained)", "build s"]
    L += md_table(head, rows) + [""]
    L += [
        f"Retained = traced bytes still allocated after the build; peak = the most traced during it; VmRSS growth "
        f"from /proc/self/status around the plain build (no tracemalloc). Process peak RSS (ru_maxrss) at the end: "
        f"{report['maxrss_mib']:,.1f} MiB, including the workload lists and the naive baseline's selectors.",
    ]
    stopped = [name for name in ("matching", "naive", "set_value") if report[name].get("stopped_by_time")]
    if stopped:
        L += ["", f"Stopped by --time-limit before their count: {', '.join(stopped)}."]
    return L


def update_doc(lines: list[str]) -> None:
    section = "\n".join([BEGIN, "<!-- generated by bench/topics_bench.py; rewritten on each run -->", "", *lines, END])
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    b, e = text.find(BEGIN), text.find(END)
    if b != -1 and e > b:
        text = text[:b] + section + text[e + len(END) :]
    else:
        intro = (
            "What the pure topic engine (`topics/`) costs per published message, per new topic and per subscribe,\n"
            "and its memory, at 100k topics and 10k selector subscriptions. How the index works: `docs/topics.md`;\n"
            "how to run: `bench/README.md` (`make bench-topics`)."
        )
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{intro}\n\n{section}\n"
    DOC.write_text(text)


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=100_000, help="topics in the tree (100000)")
    p.add_argument("--subscriptions", type=int, default=10_000, help="selector subscriptions (10000)")
    p.add_argument("--messages", type=int, default=200_000, help="publishes matched through the index (200000)")
    p.add_argument("--naive-messages", type=int, default=2_000, help="publishes matched by the full scan (2000)")
    p.add_argument("--new-topics", type=int, default=10_000, help="topics created one by one (10000)")
    p.add_argument("--subscribe-sample", type=int, default=1_000, help="selectors evaluated against the tree (1000)")
    p.add_argument("--batch", type=int, default=100, help="messages per timed batch (100)")
    p.add_argument("--seed", type=int, default=20261121, help="random seed of the workload")
    p.add_argument("--time-limit", type=float, default=120.0, help="seconds per phase before it stops early (120)")
    p.add_argument("--json", type=Path, help="also write the raw figures to this file")
    p.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    o = p.parse_args(argv)
    for name in ("topics", "subscriptions", "messages", "naive_messages", "batch"):
        if getattr(o, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return o


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    started, t0 = dt.datetime.now().astimezone(), time.monotonic()
    exe = Path(sys.executable)
    shown = exe.relative_to(REPO) if exe.is_relative_to(REPO) else exe
    command = f"{shown} bench/topics_bench.py" + "".join(" " + shlex.quote(a) for a in argv)

    rng = random.Random(opts.seed)
    log(f"generating {opts.topics:,} topics and {opts.subscriptions:,} subscriptions (seed {opts.seed})")
    w = build_topics(rng, opts.topics)
    build_subscriptions(rng, w, opts.subscriptions)
    order = w.topics[:]
    rng.shuffle(order)
    messages = [order[i % len(order)] for i in range(opts.messages)]
    facts = workload_facts(w)

    log("memory: building the tree and the index")
    tree, index, mem = measure_memory(w, opts.time_limit)
    log(f"matching {len(messages):,} messages through the index")
    matching = measure_matching(index, messages, opts)
    log(f"naive scan of {opts.subscriptions:,} selectors for {opts.naive_messages:,} messages")
    selectors = [(key, parse_selector(expression)) for key, (_, expression) in enumerate(w.subscriptions)]
    naive = measure_naive(selectors, index, messages[: opts.naive_messages], opts)
    log("current values (set_value)")
    set_value = measure_set_value(tree, messages, opts)
    log(f"creating {opts.new_topics:,} topics")
    new_topics = measure_new_topics(tree, index, w, rng, opts)
    log(f"subscribing {opts.subscribe_sample:,} sampled selectors")
    subscribe = measure_subscribe(tree, index, w, rng, opts)

    report = {
        "date": started.isoformat(timespec="seconds"),
        "command": command,
        "options": {k: v for k, v in vars(opts).items() if k not in ("json", "no_doc")},
        "machine": machine_note(),
        "workload": facts,
        "memory": mem,
        "matching": matching,
        "naive": naive,
        "set_value": set_value,
        "new_topics": new_topics,
        "subscribe": subscribe,
        "maxrss_mib": maxrss_kb() / 1024,
        "wall_seconds": time.monotonic() - t0,
    }
    lines = render(report)
    print("\n".join(lines))
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not opts.no_doc:
        update_doc(lines)
        log(f"updated {DOC}")
    return 1 if naive["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
