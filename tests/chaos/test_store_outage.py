"""PostgreSQL stopped under load: rejections with amqp:internal-error (or waiting), nothing accepted lost, service
back by itself (tests/chaos/outage.py states the promise). The cluster is the test's own: stopping the session's
shared one would disturb other tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.chaos.outage import Outcomes, publish, received_keys
from tests.support.postgres import PostgresCluster
from tests.support.server import SubgateProcess

OUTAGE = 4.0  # seconds the store is down


@pytest.mark.postgres
def test_postgres_stopped_under_load_loses_nothing_and_service_resumes(tmp_path: Path) -> None:
    with PostgresCluster() as cluster:
        server = SubgateProcess(cluster.create_database("outage"), tmp_path).start()
        outcomes, stop = Outcomes(), threading.Event()
        publishers = [
            threading.Thread(target=publish, args=(server.url, f"p{i}", outcomes, stop), daemon=True) for i in range(2)
        ]
        try:
            for runner in publishers:
                runner.start()
            _wait_for(lambda: outcomes.accepted_after(0) >= 200, 30)
            _outage(cluster)
            back = time.monotonic()
            _wait_for(lambda: outcomes.accepted_after(back) >= 200, 60)
            stop.set()
            for runner in publishers:
                runner.join(timeout=70)
            assert server.alive(), server.log()[-3000:]
            assert outcomes.accepted_after(back) >= 200, "service did not resume"
            assert outcomes.other == []
            assert all(c == "amqp:internal-error" and d for _, c, d in outcomes.rejected), outcomes.rejected[:5]
            accepted = {key for _, key in outcomes.accepted}
            lost = accepted - received_keys(server.url)
            assert not lost, f"{len(lost)} accepted messages lost, e.g. {sorted(lost)[:5]}"
        finally:
            stop.set()
            if server.alive():
                server.stop(timeout=30)


def _outage(cluster: PostgresCluster) -> None:
    cluster._stop_server("fast")
    time.sleep(OUTAGE)
    cluster.start_server()


def _wait_for(condition, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.1)
