"""Retention passes over the journal, driven from the reactor thread (``mapping.retention`` states the rule).

Owns the timing: every ``--retention-interval`` seconds a pass starts at the bottom of the journal and asks the
journal writer for one bounded step at a time (``JournalPort.submit_read``: a window of sequences); each
answer starts the next step until the pass has reached the last row old enough. The reactor never waits: it
only submits a step and takes the answer. Delivery does not stall: a step is a short statement between two
batches of the writer, and consumers read what is in memory or in pages meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from subgate.engine.nodes import now_ms
from subgate.engine.ports import JournalPort
from subgate.engine.records import RetentionAnswer, RetentionRun
from subgate.mapping.retention import parse_duration_ms

log = logging.getLogger("subgate.retention")

STEP_WINDOW = 20_000  # journal sequences one step looks at


class Retention:
    """The retention passes (see the module docstring). ``stale_below``: rows with durable = false up to this
    sequence are an earlier run's non-persistent messages."""

    def __init__(
        self,
        retention: str,
        interval: float,
        journal: JournalPort,
        schedule: Callable[[float, Callable[[], None]], None],
        stale_below: int,
    ) -> None:
        self.retention_ms = parse_duration_ms(retention)
        self.interval = interval
        self._journal = journal
        self._schedule = schedule
        self._stale_below = stale_below
        self._cutoff_ms = 0
        self.stopping = False
        self.deleted = 0  # rows deleted since the start
        self.passes = 0

    def start(self) -> None:
        self._schedule(self.interval, self._begin)

    def stop(self) -> None:
        self.stopping = True

    def _begin(self) -> None:
        if self.stopping:
            return
        self._cutoff_ms = now_ms() - self.retention_ms
        self._step(0, None)

    def _step(self, after: int, upto: int | None) -> None:
        """One step above ``after``; ``upto`` (None for the first step of a pass) is what the first step found."""
        run = RetentionRun(self._cutoff_ms, after, STEP_WINDOW, self._stale_below, upto)
        self._journal.submit_read(run, self._answered)

    def _answered(self, outcome: RetentionAnswer | BaseException | None) -> None:
        if not isinstance(outcome, RetentionAnswer):
            log.warning("a retention step failed: %s (the next pass tries again)", outcome)
            self._next_pass()
            return
        self.deleted += outcome.deleted
        if outcome.reached < outcome.upto and not self.stopping:
            self._schedule(0.0, lambda: self._step(outcome.reached, outcome.upto))
            return
        self._next_pass()

    def _next_pass(self) -> None:
        self.passes += 1
        if not self.stopping:
            self._schedule(self.interval, self._begin)
