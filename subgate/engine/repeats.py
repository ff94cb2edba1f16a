"""How often a log line of one repeated kind is written: per-connection refusals (docs/operations.md, "Repeated
refusals in the log").

Owns the rule. Each kind (``handshake-deadline``, ``auth-failure``, ``attach-refused``...) has a window of
``interval`` seconds that opens with its first line: the first ``burst`` lines of the window are written, the rest
are counted, and once the window is over one summary says how many were left out ("… and 2,996 more
handshake-deadline refusals in the last 10 s"). The next line of the kind opens a new window. A window that left
nothing out ends without a summary. Pure: the caller gives the time (``cli.log_repeats`` applies it to log
records).
"""

from __future__ import annotations

from dataclasses import dataclass

REFUSAL = "refusal"  # the ``extra`` key of a log record naming its kind of refusal
BURST = 10  # lines of one kind written per window
INTERVAL = 10.0  # seconds


def refused_as(kind: str) -> dict[str, str]:
    """The ``extra`` of a log record that is a per-connection refusal of ``kind`` (held back by this rule)."""
    return {REFUSAL: kind}


ATTACH_REFUSED = refused_as("attach-refused")  # the kind several modules log (attach, lifecycle, missing topics)


@dataclass(frozen=True, slots=True)
class Summary:
    """A window that left lines out: its kind, how many, and its length."""

    kind: str
    left_out: int
    seconds: float

    def text(self) -> str:
        return f"… and {self.left_out:,} more {self.kind} refusals in the last {self.seconds:g} s"


class _Window:
    __slots__ = ("ends", "count")

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.count = 0


class RepeatLimit:
    """The windows of every kind seen lately (see the module docstring)."""

    __slots__ = ("burst", "interval", "_windows")

    def __init__(self, burst: int = BURST, interval: float = INTERVAL) -> None:
        if burst < 0 or interval <= 0:
            raise ValueError(f"a repeat limit needs burst >= 0 and interval > 0, not {burst}, {interval}")
        self.burst = burst
        self.interval = interval
        self._windows: dict[str, _Window] = {}

    def admit(self, kind: str, now: float) -> tuple[bool, Summary | None]:
        """Whether a line of ``kind`` at ``now`` is written, and the summary of its previous window when that one
        is over and left lines out (to be written first)."""
        window = self._windows.get(kind)
        summary = None
        if window is not None and now >= window.ends:
            summary = self._summary(kind, self._windows.pop(kind))
            window = None
        if window is None:
            window = self._windows[kind] = _Window(now + self.interval)
        window.count += 1
        return window.count <= self.burst, summary

    def due(self, now: float) -> list[Summary]:
        """End every window that is over at ``now``; the summaries of those that left lines out."""
        over = [kind for kind, window in self._windows.items() if now >= window.ends]
        summaries = [self._summary(kind, self._windows.pop(kind)) for kind in over]
        return [summary for summary in summaries if summary is not None]

    def next_due(self) -> float | None:
        """When the next window that has left lines out is over (None: no summary is pending)."""
        ends = [window.ends for window in self._windows.values() if window.count > self.burst]
        return min(ends, default=None)

    def _summary(self, kind: str, window: _Window) -> Summary | None:
        left_out = window.count - self.burst
        return Summary(kind, left_out, self.interval) if left_out > 0 else None
