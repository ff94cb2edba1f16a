"""``python -m tests.chaos --kills N --store URL [--seed S] [--report FILE]``: the crash harness on demand.

``--store`` takes ``sqlite:///path``, a PostgreSQL URL, or ``postgres`` (a throwaway cluster started with
``tests.support.postgres``). Exit code 0 when no promise was broken, 1 otherwise; the report (JSON) goes to
stdout and, with ``--report``, to a file.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from tests.chaos.run import Report, run


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, required=True, help="how many SIGKILLs (and restarts)")
    parser.add_argument("--store", required=True, help="sqlite:///PATH, a postgresql URL, or 'postgres'")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a random one, printed)")
    parser.add_argument("--report", type=Path, default=None, help="also write the JSON report here")
    parser.add_argument("--window", type=float, default=1.0, help="seconds an accept may take to be persisted")
    return parser.parse_args(argv)


def _run(args: argparse.Namespace, workdir: Path) -> Report:
    if args.store != "postgres":
        return run(args.store, workdir, args.kills, args.seed, args.window)
    from tests.support.postgres import PostgresCluster

    with PostgresCluster() as cluster:
        url = cluster.create_database("chaos")
        return run(url, workdir, args.kills, args.seed, args.window)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.seed is None:
        args.seed = random.randrange(2**31)
    print(f"seed {args.seed}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="chaos-") as scratch:
        report = _run(args, Path(scratch))
    text = report.to_json()
    print(text)
    if args.report is not None:
        args.report.write_text(text + "\n")
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
