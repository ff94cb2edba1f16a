"""The figures the reactor thread publishes for the metrics endpoint, and how many labels they may spend.

Owns ``Snapshot`` and its parts: immutable records of plain values (no proton object, no reference into the
reactor's mutable state), built by ``gateway.metrics_feed`` on the reactor thread about once a second and
swapped into place whole (one attribute assignment), so the HTTP threads read a consistent picture without a
lock. Also owns the bounding of label cardinality (``top``): a per-node series only for the ``n`` nodes with the
most traffic (or the deepest queues), and the rest summed under one ``other`` label, so a store with 100k
topics cannot blow up a scrape (the feed applies it as it builds the snapshot: a scrape handles N + 1 rows).
Temporary nodes are summed under one ``$temp`` label first (``fold_temporary``): their names are not shown.
No proton, no store, no HTTP.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from subgate.engine.records import StoreFigures

OTHER = "other"
TEMPORARY = "$temp"  # the one label of every temporary node (their names are not for strangers: docs/security.md)
TEMPORARY_PREFIX = TEMPORARY + "."


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the reactor saw at ``taken_at`` (``time.monotonic``) and ``taken_wall`` (``time.time``)."""

    taken_at: float
    taken_wall: float
    connections: int
    links: tuple[tuple[str, int], ...]  # (role, open links)
    # Labelled already (``top_nodes``, ``top_queues``): at most N + 1 rows each.
    nodes: tuple[tuple[str, int, int], ...]  # (node, messages routed to it, deliveries sent from it)
    queue_depths: tuple[tuple[str, int], ...]  # (queue, messages held), point-to-point queues only
    duplicates_dropped: int
    lost_after_confirm: int  # publisher mode store_send_noconfirm: confirmed, then not persisted
    missing_topic_outcomes: tuple[tuple[str, int], ...]  # (outcome, notifications)
    auth_failures: tuple[tuple[str, int], ...]  # (mechanism, failures)
    store: StoreFigures | None = None  # the last periodic read of the store (None before the first)
    store_read_wall: float | None = None  # when it was read (``time.time``)
    fanout: tuple[FanoutLink, ...] = ()  # a secondary's fan-out links (docs/fanout.md)
    memory: MemoryFigures | None = None  # the memory high-water mark (engine.memory_mark), None: not known yet


@dataclass(frozen=True, slots=True)
class MemoryFigures:
    """The server's memory mark as ``HighWater.figures`` reads it: bytes held, bytes reserved for the credit of
    publisher links, the mark (0: none), and whether every publisher is blocked."""

    held: int
    reserved: int
    mark: int
    blocked: bool

    def refusal(self) -> str | None:
        """Why ``/readyz`` answers 503 for memory, or None."""
        if not self.blocked:
            return None
        return f"memory high-water mark reached: publishers blocked ({self.held} bytes held of the mark of {self.mark})"


@dataclass(frozen=True, slots=True)
class FanoutLink:
    """One fan-out link as ``subgate fanout status`` shows it (``FanoutMirror.status``)."""

    primary: str
    selector: str
    state: str  # connecting, snapshot, live, lost
    replicated_topics: int
    messages_received: int
    reconnects: int
    lag_p50_ms: float | None
    lag_max_ms: float | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> FanoutLink:
        return cls(
            str(row["primary"]), str(row["selector"]), str(row["state"]), int(row["replicated_topics"]),
            int(row["messages_received"]), int(row["reconnects"]), row.get("lag_p50_ms"), row.get("lag_max_ms"),
        )  # fmt: skip


Row = tuple[Any, ...]  # (label, figure, ...): plain tuples, the cheapest record to build 100k of


def top(rows: Sequence[Row], n: int, rank: Callable[[Row], Any]) -> list[Row]:
    """The ``n`` rows that ``rank`` puts first, and when any are left, one ``(OTHER, column sums of the rest)``.
    A row really labelled ``other`` is always counted in that sum (one series per label). O(rows log n)."""
    chosen = heapq.nsmallest(n, rows, key=rank)
    kept = [row for row in chosen if row[0] != OTHER]
    if len(kept) == len(rows):
        return kept
    width = len(rows[0])
    sums = [sum(row[column] for row in rows) for column in range(1, width)]
    for row in kept:
        for column in range(1, width):
            sums[column - 1] -= row[column]
    return [*kept, (OTHER, *sums)]


def fold_temporary(rows: Sequence[Row]) -> list[Row]:
    """``rows`` with every temporary node's (``$temp.…``) folded into one row labelled ``$temp`` (column sums):
    a temporary queue's name is the address its owner's replies travel to, and anyone may send there, so
    ``/metrics``, which needs no login, names none of them."""
    kept: list[Row] = []
    folded: list[int] | None = None
    for row in rows:
        if not row[0].startswith(TEMPORARY_PREFIX):
            kept.append(row)
        elif folded is None:
            folded = list(row[1:])
        else:
            for column in range(1, len(row)):
                folded[column - 1] += row[column]
    return kept if folded is None else [*kept, (TEMPORARY, *folded)]


def top_nodes(traffic: Sequence[tuple[str, int, int]], n: int) -> list[Row]:
    """(node, in, out) of the ``n`` busiest nodes (in + out; ties by name), the rest summed under ``other``."""
    return top(traffic, n, lambda row: (-(row[1] + row[2]), row[0]))


def top_queues(depths: Sequence[tuple[str, int]], n: int) -> list[Row]:
    """(queue, depth) of the ``n`` deepest queues (ties by name), the rest summed under ``other``."""
    return top(depths, n, lambda row: (-row[1], row[0]))
