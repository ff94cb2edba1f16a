"""The log handler's filter that holds back repeated per-connection refusals (``engine.repeats`` decides).

Owns the adapter between the rule and ``logging``: a record is governed when its call site names its kind
(``extra=refused_as(kind)``, the key ``engine.repeats.REFUSAL``); every other record passes untouched. A summary
is written as an INFO record of the logger ``subgate.refusals`` (with ``event``, ``refusal_kind`` and
``left_out`` for the JSON format): when the next line of its kind arrives, or, when none does, from a timer
thread set for the end of the window, and at exit for the windows still open. The filter may be called from any
thread: its state is locked.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from subgate.engine.repeats import REFUSAL, RepeatLimit, Summary

_TIMER_SLACK = 0.05  # seconds after a window's end before its summary is written

summaries_log = logging.getLogger("subgate.refusals")


class RepeatFilter(logging.Filter):
    """A ``logging.Filter`` for the server's log handler (see the module docstring)."""

    def __init__(self, limit: RepeatLimit, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        kind = getattr(record, REFUSAL, None)
        if not isinstance(kind, str):
            return True
        with self._lock:
            admitted, summary = self._limit.admit(kind, self._clock())
            self._arm()
        if summary is not None:
            _write(summary)
        return admitted

    def flush(self, everything: bool = False) -> None:
        """Write the summaries of the windows that are over (``everything``: of every window, as at exit)."""
        with self._lock:
            self._timer = None
            summaries = self._limit.due(float("inf") if everything else self._clock())
            if not everything:
                self._arm()
        for summary in summaries:
            _write(summary)

    def close(self) -> None:
        """Stop the timer and write every pending summary."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.flush(everything=True)

    def _arm(self) -> None:
        """(Locked.) A timer for the next pending summary, unless one is set."""
        due = self._limit.next_due()
        if self._timer is not None or due is None:
            return
        self._timer = threading.Timer(max(0.0, due - self._clock()) + _TIMER_SLACK, self.flush)
        self._timer.name = "subgate-log-summaries"
        self._timer.daemon = True
        self._timer.start()


def _write(summary: Summary) -> None:
    summaries_log.info(
        summary.text(),
        extra={"event": "refusals-summarized", "refusal_kind": summary.kind, "left_out": summary.left_out},
    )
