"""The bounded atheris run of ``make test``: each target (``TARGETS``) for a few seconds in its own process.

A run fails when libFuzzer ends on a finding (an exception ``test_one`` lets escape, an input over the per-input
timeout, memory over the RSS limit) or does not end normally; the message holds libFuzzer's last lines, which
name the input file written under the artifacts directory. The seed is fixed, so a failing run repeats
(``python -m tests.fuzz.atheris_targets TARGET --seed 20261125 --runs 1000000 --seconds 7``); how many inputs
fit in the time varies with the machine, which decides nothing. Long runs: ``tests/fuzz/README.md``.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.atheris_targets import TARGETS

ROOT = Path(__file__).resolve().parents[3]
SECONDS = int(os.environ.get("SUBGATE_ATHERIS_SECONDS", "7"))
SEED = 20261125


@pytest.mark.parametrize("target", TARGETS)
def test_a_bounded_run_finds_nothing(target: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tests.fuzz.atheris_targets", target, "--seed", str(SEED), "--runs", "1000000"]
    command += ["--seconds", str(SECONDS), "--timeout", "20", "--artifacts", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=SECONDS + 120, check=False)
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
    assert result.returncode == 0, f"atheris {target} ended with status {result.returncode}:\n{tail}"
    assert "Done " in result.stderr and "stat::number_of_executed_units" in result.stderr, tail
    executed = int(result.stderr.split("stat::number_of_executed_units:")[1].split()[0])
    seeds = importlib.import_module(f"tests.fuzz.atheris_targets.{target}_target").seeds()
    assert executed > len(seeds), tail  # it went past the seeds: it fuzzed
    assert not list(tmp_path.rglob("crash-*")) and not list(tmp_path.rglob("timeout-*")), tail
