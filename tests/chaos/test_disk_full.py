"""The SQLite file's disk full under load (issue 19, item 1): the store lives on a small tmpfs the test mounts;
while publishers send persistent messages to a queue, a filler file takes the rest of the space, then is removed.

Promised, as for a stopped PostgreSQL (tests/chaos/outage.py): a message that could not be written is ``rejected``
with ``amqp:internal-error`` and a description (or waits: back-pressure), never ``accepted`` without being stored;
nothing accepted is lost; the server keeps running and accepts again by itself once there is space; no traceback in
its log (a store failure is one line); the file passes the integrity check afterwards. Mounting needs
root (these machines run the tests as root); elsewhere the test is skipped, and says so.
"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.chaos.outage import Outcomes, publish, received_keys
from tests.chaos.store_checks import integrity_problems
from tests.support.server import SubgateProcess

DISK_SIZE = "24m"
BODY_PADDING = 2048  # bytes added to each message body, so the disk fills in a few seconds
FULL_FOR = 4.0  # seconds the disk stays full once the server has noticed


@contextmanager
def small_disk(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``mount_point`` for the duration; unmounted (lazily, if busy) after."""
    mount_point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> Path:
    """Write a file that takes every free byte of ``disk`` (until ENOSPC); return its path."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 512, 1):
            try:
                for _ in range(100_000):  # bounded: at most the disk's size in the biggest chunks
                    out.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return filler


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_sqlite_disk_full_under_load_loses_nothing_and_service_resumes(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", DISK_SIZE) as disk:
        server = SubgateProcess(f"sqlite:///{disk}/store.db", tmp_path).start()
        outcomes, stop = Outcomes(), threading.Event()
        publishers = [
            threading.Thread(target=publish, args=(server.url, f"p{i}", outcomes, stop, BODY_PADDING), daemon=True)
            for i in range(2)
        ]
        try:
            for runner in publishers:
                runner.start()
            _wait_for(lambda: outcomes.accepted_after(0) >= 200, 30)
            filler = fill(disk)
            full = time.monotonic()
            _wait_for(lambda: _stalled_or_rejected(outcomes, full), 60)
            noticed = _stalled_or_rejected(outcomes, full)
            time.sleep(FULL_FOR)
            filler.unlink()
            back = time.monotonic()
            _wait_for(lambda: outcomes.accepted_after(back) >= 200, 60)
            stop.set()
            for runner in publishers:
                runner.join(timeout=70)
            assert noticed, "the server neither rejected nor held back a publish with the disk full"
            assert server.alive(), server.log()[-3000:]
            assert outcomes.accepted_after(back) >= 200, f"service did not resume:\n{server.log()[-3000:]}"
            assert outcomes.other == []
            assert all(c == "amqp:internal-error" and d for _, c, d in outcomes.rejected), outcomes.rejected[:5]
            accepted = {key for _, key in outcomes.accepted}
            lost = accepted - received_keys(server.url)
            assert not lost, f"{len(lost)} accepted messages lost, e.g. {sorted(lost)[:5]}"
            assert "Traceback" not in server.log(), server.log()[-3000:]
            server.stop(timeout=30)
            assert integrity_problems(server.store_url) == []
        finally:
            stop.set()
            if server.alive():
                server.stop(timeout=30)


def _stalled_or_rejected(outcomes: Outcomes, since: float) -> bool:
    """A rejection after ``since``, or no publish accepted in the last 2 s (back-pressure)."""
    with outcomes.lock:
        rejected = any(t > since for t, _, _ in outcomes.rejected)
        last_accept = max((t for t, _ in outcomes.accepted), default=0.0)
    return rejected or time.monotonic() - max(last_accept, since) > 2.0


def _wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.1)
