"""The bounded fuzz run of issue 11: thousands of hostile connections, then the server must still be fine.

Two ``subgate serve`` processes: "anonymous" (no user, so SASL ANONYMOUS and a bare AMQP header are served) and
"plain" (user alice, PLAIN only). Real client sessions are recorded through a proxy first
(``tests.fuzz.capture``), then ``SUBGATE_FUZZ_CASES`` cases (default 5,000) from seed ``SUBGATE_FUZZ_SEED``
(default ``DEFAULT_SEED``) go out concurrently (``tests.fuzz.runner``), while ``tests.fuzz.health`` restarts a
crashed server, notes tracebacks and runs a normal client every two seconds. The run fails on any crash,
traceback, "subgate stopped", hung connection, failed normal client, or a replayed real session the server did
not serve; the message names the seed and each culprit case. ``SUBGATE_FUZZ_ONLY=3,17`` runs only those cases.
Memory (issue 19 item 2): each server's RSS is read after the first ``WARMUP_CASES`` cases and at the end; it
fails when a server that was not restarted grew by more than ``RSS_GROWTH`` times over the rest of the run.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fuzz import targeted
from tests.fuzz.capture import record_sessions
from tests.fuzz.cases import Capture, Case, generate, minimum_cases
from tests.fuzz.health import BAD_LOG_MARKS, Incident, Prober, Watch, exchange, logs, pinpoint
from tests.fuzz.runner import Outcome, Settings, run_cases
from tests.support.cli import run_subgate
from tests.support.server import SubgateProcess, rss_kib

DEFAULT_SEED = 20261124
DEFAULT_CASES = 5000
PINPOINT_SECONDS = 60.0  # replaying suspects one by one to name culprits
CREDENTIALS = {"anonymous": {}, "plain": {"user": "alice", "password": "s3cret"}}
WARMUP_CASES = 1000  # caches, pools and the allocator's arenas fill up here
RSS_GROWTH = 1.5  # generous: a leak of a few KiB per hostile connection over 4,000 more would pass it


def _rss_kib(server: SubgateProcess) -> int | None:
    """The server process's resident set, in KiB (None when it is not running)."""
    if server.proc is None or not server.alive():
        return None
    return rss_kib(server.proc.pid)


def _memory(servers: dict[str, SubgateProcess]) -> dict[str, tuple[int, int | None]]:
    return {name: (server.starts, _rss_kib(server)) for name, server in servers.items()}


def _growth(warm: dict[str, tuple[int, int | None]], end: dict[str, tuple[int, int | None]], cases: int) -> list[str]:
    """Servers whose RSS grew more than ``RSS_GROWTH`` times after the warm-up (a restarted one is not compared)."""
    found = []
    for name, (starts, before) in warm.items():
        restarted, after = end[name][0] != starts, end[name][1]
        if before and after and not restarted and after > RSS_GROWTH * before:
            found.append(f"{name} server's RSS grew from {before} KiB to {after} KiB over {cases} cases")
    return found


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@pytest.fixture
def servers(tmp_path: Path):
    started: dict[str, SubgateProcess] = {}
    plain_store = f"sqlite:///{tmp_path / 'plain.db'}"
    alice = (
        ("db", "upgrade"),
        ("users", "add", "alice", "--password", "s3cret"),
        ("roles", "assign", "admin", "alice"),
    )
    for args in alice:
        result = run_subgate(*args, "--store", plain_store, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    for name, store in (("anonymous", f"sqlite:///{tmp_path / 'anonymous.db'}"), ("plain", plain_store)):
        workdir = tmp_path / name
        workdir.mkdir()
        started[name] = SubgateProcess(store, workdir).start()
    yield started
    for server in started.values():
        try:
            if server.alive():
                server.stop(timeout=10)
        finally:
            server.kill()


def _summary(outcomes: list[Outcome]) -> str:
    answers = Counter(f"{o.answer}" + (f"({o.detail})" if o.detail else "") for o in outcomes)
    families = Counter(o.family.split("@")[0].split(":")[0] for o in outcomes)
    return f"answers: {dict(answers.most_common())}\nfamilies: {dict(families.most_common())}"


def _failures(outcomes: list[Outcome], incidents: list[Incident], probes: Prober, captures: list[Capture]) -> list[str]:
    found = [f"{i.kind} on {i.server}: culprits {i.culprits or 'not pinpointed'}, suspects "
             f"{sorted(i.suspects)[:20]}\n{i.excerpt}" for i in incidents]  # fmt: skip
    found += [f"case {o.index} ({o.family}): the server never closed the connection" for o in outcomes
              if o.answer == "hung"]  # fmt: skip
    found += [
        f"case {o.index} ({o.family}): a real client's session was not served ({o.answer} {o.detail})"
        for o in outcomes
        if o.family.startswith("replay") and not (o.opened and o.answer == "close-frame")
    ]
    found += [f"normal client failed during the run: {failure}" for failure in probes.failures]
    return found


@pytest.mark.slow  # run first (tests/conftest.py)
@pytest.mark.timeout(900)  # about 3 minutes alone; a loaded CI machine can take several times that
def test_bounded_fuzz_run_leaves_the_server_serving(servers):
    seed, count = _env_int("SUBGATE_FUZZ_SEED", DEFAULT_SEED), _env_int("SUBGATE_FUZZ_CASES", DEFAULT_CASES)
    only = {int(i) for i in os.environ.get("SUBGATE_FUZZ_ONLY", "").split(",") if i.strip()}
    captures = record_sessions({name: s.port for name, s in servers.items()}, CREDENTIALS["plain"])
    sessions = targeted.cases()
    assert DEFAULT_CASES >= minimum_cases(captures, sessions), "the default run must hold every targeted case"

    def case_of(index: int) -> Case:
        return generate(seed, index, captures, sessions)

    started = time.monotonic()
    watch = Watch(servers)
    probes = Prober(servers, CREDENTIALS)
    probes.start()
    try:
        indices = sorted(only) if only else range(count)
        ports = {n: s.port for n, s in servers.items()}
        outcomes = run_cases((case_of(i) for i in indices[:WARMUP_CASES]), ports, Settings(), watch)
        watch(set())
        warm = _memory(servers)
        outcomes += run_cases((case_of(i) for i in indices[WARMUP_CASES:]), ports, Settings(), watch)
        watch(set())
        end = _memory(servers)
    finally:
        probes.stop()
    print(f"{len(outcomes)} cases in {time.monotonic() - started:.1f}s; {len(watch.incidents)} incidents")
    budget = time.monotonic() + PINPOINT_SECONDS
    for incident in watch.incidents:
        pinpoint(incident, case_of, servers, CREDENTIALS, budget)
    failures = _failures(outcomes, watch.incidents, probes, captures)
    failures += _growth(warm, end, len(indices) - WARMUP_CASES) if len(indices) > 2 * WARMUP_CASES else []
    for name, server in servers.items():
        if not server.alive():
            failures.append(f"{name} server is not running at the end:\n{logs(server)[-3000:]}")
            continue
        try:
            exchange(server, CREDENTIALS[name])
        except Exception as exc:
            failures.append(f"{name} server refused a normal client after the run: {exc!r}")
        marks = [mark for mark in BAD_LOG_MARKS if mark in logs(server)]
        if marks and not any(i.server == name for i in watch.incidents):
            failures.append(f"{name} server log holds {marks}")
    report = (f"seed {seed} (SUBGATE_FUZZ_SEED), {len(outcomes)} cases, {watch.restarts} restarts, "
              f"{probes.ok} normal exchanges during the run; RSS KiB (after the warm-up, at the end): "
              f"{ {name: (warm[name][1], end[name][1]) for name in servers} }\n{_summary(outcomes)}")  # fmt: skip
    print(report)
    assert len(outcomes) == len(indices)
    assert probes.ok > 0, "the normal client never ran during the fuzz run"
    assert not failures, report + "\n\n" + "\n\n".join(failures)
