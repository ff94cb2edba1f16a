"""Histogram counts kept by one thread and read by another, without a lock.

Owns ``Buckets``: fixed upper bounds, one count per bound plus one for +Inf, and the sum of what was observed.
The owner thread calls ``observe`` (one ``bisect`` and two additions); any thread may call ``view``, which copies
the counts. A view taken while an observation is under way may hold it in its counts and not yet in its sum (or
the other way round): a histogram's count is taken from the counts, so ``_count`` and the ``+Inf`` bucket always
agree, and the sum is off by at most one observation for at most one scrape.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

# Seconds: a commit on SQLite with synchronous=FULL takes ~1-10 ms; PostgreSQL ~0.5-5 ms; a slow disk more.
COMMIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# Operations in one commit: 1 when idle, up to the writer's max_batch (4000) under load.
BATCH_SIZES = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 4000)


@dataclass(frozen=True, slots=True)
class HistogramView:
    """A copy of a histogram: ``bounds`` and the count at or below each (cumulative, ending with +Inf)."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]  # len(bounds) + 1
    total: float

    @property
    def count(self) -> int:
        return self.cumulative[-1]


class Buckets:
    """See the module docstring."""

    __slots__ = ("bounds", "_counts", "_sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self._sum = 0.0

    def observe(self, value: float) -> None:
        """The owner thread only."""
        self._counts[bisect_left(self.bounds, value)] += 1
        self._sum += value

    def view(self) -> HistogramView:
        counts = list(self._counts)
        cumulative = []
        running = 0
        for count in counts:
            running += count
            cumulative.append(running)
        return HistogramView(self.bounds, tuple(cumulative), self._sum)
