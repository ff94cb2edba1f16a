"""The atheris runner: ``python -m tests.fuzz.atheris_targets TARGET [--runs N] [--seconds S] ...``.

Writes the target's seeds (and any ``--corpus`` directory, which also receives the inputs libFuzzer finds
interesting) and its dictionary to a work directory, instruments the target's subgate modules, then hands over
to libFuzzer, which ends the process: exit status 0 when the run ended with no finding. A finding's input is
written under ``--artifacts`` (libFuzzer's ``crash-``/``timeout-``/``oom-`` files) and its traceback printed.
libFuzzer's last lines (``Done N runs in S second(s)``, ``stat::number_of_executed_units``) give the figures.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

import atheris

from tests.fuzz.atheris_targets import TARGETS


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.atheris_targets")
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("--runs", type=int, default=-1, help="inputs to run (-1: until --seconds or a finding)")
    parser.add_argument("--seconds", type=int, default=0, help="stop after this many seconds (0: no limit)")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take before it is a finding")
    parser.add_argument("--seed", type=int, default=0, help="libFuzzer's random seed (0: from the clock)")
    parser.add_argument("--corpus", type=Path, help="a corpus directory to read and grow (kept between runs)")
    parser.add_argument("--artifacts", type=Path, default=Path(tempfile.gettempdir()) / "subgate-atheris")
    parser.add_argument("--rss-mb", type=int, default=2048, help="libFuzzer's -rss_limit_mb")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = _arguments(argv)
    with atheris.instrument_imports(include=["subgate"]):
        target = importlib.import_module(f"tests.fuzz.atheris_targets.{args.target}_target")
    work = Path(tempfile.mkdtemp(prefix=f"subgate-atheris-{args.target}-"))
    seeds = work / "seeds"
    seeds.mkdir()
    for index, seed in enumerate(target.seeds()):
        (seeds / f"seed-{index:04d}").write_bytes(seed)
    dictionary = work / "dictionary"
    dictionary.write_text("".join(f'"{_escaped(word)}"\n' for word in target.DICTIONARY))
    artifacts = args.artifacts / args.target
    artifacts.mkdir(parents=True, exist_ok=True)
    corpora = [str(args.corpus)] if args.corpus else []
    if args.corpus:
        args.corpus.mkdir(parents=True, exist_ok=True)
    libfuzzer = [
        sys.argv[0],
        *corpora,
        str(seeds),
        f"-runs={args.runs}",
        f"-max_total_time={args.seconds}",
        f"-timeout={args.timeout}",
        f"-seed={args.seed}",
        f"-max_len={target.MAX_LEN}",
        f"-dict={dictionary}",
        f"-artifact_prefix={artifacts}/",
        f"-rss_limit_mb={args.rss_mb}",
        "-print_final_stats=1",
    ]
    print(f"atheris {args.target}: {' '.join(libfuzzer[1:])}", flush=True)
    atheris.Setup(libfuzzer, target.test_one)
    atheris.Fuzz()


def _escaped(word: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\x{b:02x}" for b in word)


if __name__ == "__main__":
    main(sys.argv[1:])
