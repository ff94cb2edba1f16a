"""Timing the server's start-up: one log line per step with its duration, and a summary once it listens.

Owns the ``start-up:`` lines of the log (docs/operations.md, "Start-up steps"). Each step ends with

    start-up: <step> took <seconds> s

and the server's "listening on" line is preceded by

    start-up: listening <seconds> s after the process started (<step> <s> s, ...)

The first step, ``python and imports``, is the time from the process's start (the kernel's record of it) to the
first line of ``serve``, logged with the first step that succeeds; the writer process's own start-up (``journal
writer process``) is the figure it reports in its hand-shake. A step that raises logs nothing (the error says
what failed, and a bad setting stays one line on stderr). A start-up that stalls shows in the log as the last
step that ended, and the tests' start-up wait (tests/support/server.py) quotes these lines when a server does
not listen in time.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STEP_FORMAT = "start-up: %s took %.2f s"


def process_age() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat against CLOCK_BOOTTIME), None elsewhere."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rpartition(")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks since boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class StartupSteps:
    """The steps of one start-up, each logged as it ends (see the module docstring)."""

    def __init__(self, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._clock = clock
        self._began = clock()
        self._age_at_begin = process_age()
        self.steps: list[tuple[str, float]] = []
        self._imports_logged = self._age_at_begin is None

    def record(self, name: str, seconds: float) -> None:
        """A step that ended (or one measured elsewhere: the writer process's own start-up)."""
        if not self._imports_logged:
            self._imports_logged = True
            self.record("python and imports", self._age_at_begin or 0.0)
        self.steps.append((name, seconds))
        self._log.info(STEP_FORMAT, name, seconds)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step ``name``, logged when it ends (not when it raises)."""
        begun = self._clock()
        yield
        self.record(name, self._clock() - begun)

    def total(self) -> float:
        return (self._age_at_begin or 0.0) + self._clock() - self._began

    def summary(self) -> str:
        parts = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in self.steps)
        return f"start-up: listening {self.total():.2f} s after the process started ({parts})"
