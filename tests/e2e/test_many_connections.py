"""2,000 concurrent connections, each with a session and a consumer link, held with bounded memory (issue 19,
item 3): a real ``subgate serve`` keeps them all, serves an ordinary client opened before them and a brand-new
one while they are held, and its resident memory grows by a bounded amount per connection. The figure measured
with the same code is in docs/security.md (``bench/connections_rss.py``).
"""

from __future__ import annotations

import time

from tests.support.many_connections import fresh_client_served, held_connections
from tests.support.server import SubgateProcess
from tests.support.server import rss_kib as server_rss_kib
from tests.support.survival import Bystander, assert_still_serving

CONNECTIONS = 2000
# Measured: about 30 KiB of resident memory per held connection (docs/security.md). The bound is four times
# that: generous for allocator noise, yet a per-connection buffer of the frame size (1 MiB) would break it.
KIB_PER_CONNECTION = 128


def test_two_thousand_connections_are_held_with_bounded_memory_and_clients_are_still_served(tmp_path):
    server = SubgateProcess(f"sqlite:///{tmp_path / 'subgate.db'}", tmp_path).start()
    try:
        assert server.proc is not None
        with Bystander(server, "held/bystander") as bystander:  # opened first: its descriptor stays below 1,024
            bystander.exchange()
            time.sleep(0.3)
            before = server_rss_kib(server.proc.pid)
            with held_connections(server.port, CONNECTIONS, "held/queue") as held:
                assert len(held) == CONNECTIONS
                grown = server_rss_kib(server.proc.pid) - before
                bystander.exchange()
                assert fresh_client_served(server.port), server.log()[-2000:]
            assert grown < KIB_PER_CONNECTION * CONNECTIONS, f"{grown / CONNECTIONS:.1f} KiB per connection"
            bystander.exchange()
        assert_still_serving(server)
        assert "Traceback" not in server.log()
    finally:
        server.stop(timeout=30)
