"""cli.status and cli.connections without a server: the health verdict and the exit codes it leads to, and the
durations they print."""

from __future__ import annotations

import pytest

from subgate.cli.connections import duration
from subgate.cli.status import MEMORY_BLOCKED, NOT_RUNNING, UNHEALTHY, health_of


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({"store_health": None}, None),  # no commit yet: nothing is known to be wrong
        ({"store_health": {"ok": True, "error": None, "last_ok_age": 0.2}}, None),
        ({"store_health": {"ok": False, "error": "disk full"}}, "the store refused a write: disk full"),
        ({"store_health": None, "memory": {"held": 1, "reserved": 0, "mark": 2, "low": 1, "blocked": False}}, None),
        (
            {
                "store_health": None,
                "memory": {"held": 63 << 20, "reserved": 0, "mark": 64 << 20, "low": 51 << 20, "blocked": True},
            },
            "memory-blocked: 63.0 MiB held of the 64.0 MiB high-water mark; every publisher gets no credit until it "
            "drops to 51.0 MiB",
        ),
    ],
)
def test_health(server, problem):
    assert health_of(server) == problem


def test_exit_codes_are_apart():
    assert len({0, 1, 2, NOT_RUNNING, UNHEALTHY, MEMORY_BLOCKED}) == 6


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.9, "59s"), (61, "1m 1s"), (3600, "1h 0m"), (3 * 86400 + 4 * 3600 + 5, "3d 4h")],
)
def test_duration(seconds, text):
    assert duration(seconds) == text
