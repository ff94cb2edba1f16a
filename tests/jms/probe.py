"""Compiling and running the Java probe of tests/jms/java (the real Apache Qpid JMS 2.10 client).

``probe_classes()`` compiles the sources once (per source content: the classes are cached in the system's
temporary folder, so pytest-xdist workers and later runs share them) with ``javac`` against the client's jars:
``$SUBGATE_JMS_CLIENT_LIB``, by default ``<repo>/../shared/jms-client/lib``. A missing ``javac`` or jar FAILS the
test with what to install; it is never a skip. ``run_probe(url, scenarios)`` runs ``JmsProbe`` once for several
scenarios (one JVM: about a second of start-up saved per scenario) and returns each scenario's result; a scenario
that raised fails the test with the Java stack trace.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "java"
JAVA_TIMEOUT = 240  # s: the longest one probe run may take (each of its waits is bounded too)


def client_lib() -> Path:
    return Path(os.environ.get("SUBGATE_JMS_CLIENT_LIB") or REPO.parent / "shared" / "jms-client" / "lib")


def _missing() -> str | None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "javac/java not found: the real JMS client tests need a JDK 17 (Debian: openjdk-17-jdk-headless)"
    lib = client_lib()
    if not list(lib.glob("qpid-jms-client-*.jar")) or not list(lib.glob("jakarta.jms-api-*.jar")):
        return (
            f"the Qpid JMS client jars are not in {lib} (set SUBGATE_JMS_CLIENT_LIB to the folder holding "
            "qpid-jms-client-2.10.0.jar, proton-j, jakarta.jms-api and their Netty and SLF4J jars)"
        )
    return None


def classpath(classes: Path) -> str:
    return f"{client_lib()}/*{os.pathsep}{classes}"


def probe_classes() -> Path:
    """The compiled probe (compiled now if this content was never compiled here)."""
    missing = _missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"subgate-jms-probe-{os.getuid()}-{digest}"
    if (target / "JmsProbe.class").exists():
        return target
    scratch = Path(tempfile.mkdtemp(prefix="subgate-jms-probe-"))
    result = subprocess.run(
        ["javac", "-encoding", "UTF-8", "-d", str(scratch), "-cp", f"{client_lib()}/*", *map(str, sources)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.fail(f"javac failed on tests/jms/java:\n{result.stdout}{result.stderr}", pytrace=False)
    try:
        scratch.rename(target)  # atomic: a worker that compiled at the same time keeps its own copy
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def run_java(main: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    classes = probe_classes()
    return subprocess.run(
        ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath(classes), main, *args],
        capture_output=True, text=True, timeout=JAVA_TIMEOUT, env={**os.environ, **(env or {})},
    )  # fmt: skip


class ProbeRun:
    """One run of JmsProbe over several scenarios; ``result(name)`` is one scenario's result, or fails the test
    with that scenario's Java stack trace (or the run's output when the scenario never reported)."""

    def __init__(self, scenarios: list[str], done: subprocess.CompletedProcess[str]) -> None:
        self.scenarios = scenarios
        self.done = done
        self.results: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if "error" in entry:
                    self.errors[entry["scenario"]] = f"{entry['error']}\n{entry.get('trace', '')}"
                else:
                    self.results[entry["scenario"]] = entry["result"]

    def result(self, scenario: str) -> Any:
        if scenario in self.results:
            return self.results[scenario]
        if scenario in self.errors:
            pytest.fail(f"JmsProbe scenario {scenario} raised {self.errors[scenario]}", pytrace=False)
        pytest.fail(
            f"JmsProbe {' '.join(self.scenarios)} (exit {self.done.returncode}) reported nothing for {scenario}:\n"
            f"stdout:\n{self.done.stdout[-4000:]}\nstderr:\n{self.done.stderr[-4000:]}",
            pytrace=False,
        )


def run_probe(
    url: str, scenarios: list[str], *, prefix: str | None = None, env: dict[str, str] | None = None
) -> ProbeRun:
    """Run the scenarios in one JVM against ``url`` (destinations named ``PREFIX-...``, a fresh prefix when none)."""
    prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
    return ProbeRun(scenarios, run_java("JmsProbe", url, prefix, *scenarios, env=env))
