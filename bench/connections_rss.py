#!/usr/bin/env python3
"""Memory of idle connections (issue 19, item 3): the resident memory one held AMQP connection costs the server.

Starts a real ``subgate serve`` (SQLite store in a temp dir, 127.0.0.1, stopped by PID at the end), opens one
ordinary client connection (so one-time allocations are in the baseline) and reads the server's VmRSS; then opens
``--connections`` connections (``tests.support.many_connections``: SASL ANONYMOUS, open, a session and a consumer
link each, no credit), holds them and reads VmRSS again; checks that the client opened before and a brand-new
one still send and receive; prints the figures and the difference per connection as one JSON line (the figure
in docs/security.md, "Limits and their defaults"). Run from the repository root with the project's venv:

    .venv/bin/python bench/connections_rss.py [--connections 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.many_connections import fresh_client_served, held_connections  # noqa: E402
from tests.support.server import SubgateProcess  # noqa: E402
from tests.support.server import rss_kib as server_rss_kib  # noqa: E402
from tests.support.survival import Bystander  # noqa: E402


def measure(connections: int) -> dict[str, float]:
    """Start a server, hold ``connections`` connections, and return the RSS figures (KiB)."""
    with tempfile.TemporaryDirectory(prefix="connections-rss-") as workdir:
        server = SubgateProcess(f"sqlite:///{Path(workdir) / 'subgate.db'}", Path(workdir)).start()
        try:
            assert server.proc is not None
            pid = server.proc.pid
            with Bystander(server, "held/bystander") as bystander:  # opened first: its descriptor stays low
                bystander.exchange()
                time.sleep(0.5)
                before = server_rss_kib(pid)
                started = time.monotonic()
                with held_connections(server.port, connections, "held/queue"):
                    opened_in = time.monotonic() - started
                    time.sleep(0.5)
                    during = server_rss_kib(pid)
                    bystander.exchange()
                    if not fresh_client_served(server.port):
                        raise SystemExit("a new client was not served while the connections were held")
            return {
                "connections": connections,
                "rss_before_kib": before,
                "rss_held_kib": during,
                "kib_per_connection": round((during - before) / connections, 1),
                "open_seconds": round(opened_in, 1),
            }
        finally:
            server.stop(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(measure(args.connections)))


if __name__ == "__main__":
    main()
