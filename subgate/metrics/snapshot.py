"""The figures the reactor thread publishes for the metrics endpoint, and how many labels they may spend.

Owns ``Snapshot`` and its parts: immutable records of plain values (no proton object, no reference into the
reactor's mutable state), built by ``gateway.metrics_feed`` on the reactor thread about once a second and
swapped into place whole (one attribute assignment), so the HTTP threads read a consistent picture without a
lock. Also owns the bounding of label cardinality (``top``): a per-node series only for the ``n`` nodes with the
most traffic (or the deepest queues), and the rest summed under one ``other`` label, so a store with 100k
topics cannot blow up a scrape. No proton, no store, no HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from subgate.engine.records import StoreFigures

OTHER = "other"


@dataclass(frozen=True, slots=True)
class NodeTraffic:
    """Messages routed to a node (``messages_in``) and sent from it to consumers (``messages_out``; a topic's are
    those of its subscriptions), since the server started."""

    name: str
    kind: str
    messages_in: int
    messages_out: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the reactor saw at ``taken_at`` (``time.monotonic``) and ``taken_wall`` (``time.time``)."""

    taken_at: float
    taken_wall: float
    connections: int
    links: tuple[tuple[str, int], ...]  # (role, open links)
    nodes: tuple[NodeTraffic, ...]
    queue_depths: tuple[tuple[str, int], ...]  # (queue, messages held), point-to-point queues only
    duplicates_dropped: int
    lost_after_confirm: int  # publisher mode store_send_noconfirm: confirmed, then not persisted
    missing_topic_outcomes: tuple[tuple[str, int], ...]  # (outcome, notifications)
    auth_failures: tuple[tuple[str, int], ...]  # (mechanism, failures)
    store: StoreFigures | None = None  # the last periodic read of the store (None before the first)
    store_read_wall: float | None = None  # when it was read (``time.time``)


T = TypeVar("T")


def top(
    items: Iterable[T],
    n: int,
    weight: Callable[[T], int],
    values: Callable[[T], Sequence[int]],
    label: Callable[[T], str],
) -> list[tuple[str, tuple[int, ...]]]:
    """The ``n`` items of highest ``weight`` (ties by label, for a stable choice) as (label, values), and when
    any are left, one ``(OTHER, sums of their values)``. An item really labelled ``other`` is always counted in
    that sum (one series per label)."""
    ranked = sorted(items, key=lambda item: (-weight(item), label(item)))
    chosen = [(label(item), tuple(values(item))) for item in ranked[:n] if label(item) != OTHER]
    rest = ranked[n:] + [item for item in ranked[:n] if label(item) == OTHER]
    if rest:
        sums = [sum(column) for column in zip(*(values(item) for item in rest), strict=True)]
        chosen.append((OTHER, tuple(sums)))
    return chosen


def top_nodes(nodes: Iterable[NodeTraffic], n: int) -> list[tuple[str, tuple[int, ...]]]:
    """Per-node (in, out) for the ``n`` busiest nodes (in + out), the rest under ``other``."""
    return top(
        nodes,
        n,
        lambda node: node.messages_in + node.messages_out,
        lambda node: (node.messages_in, node.messages_out),
        lambda node: node.name,
    )


def top_queues(depths: Iterable[tuple[str, int]], n: int) -> list[tuple[str, tuple[int, ...]]]:
    """Per-queue depth for the ``n`` deepest queues, the rest summed under ``other``."""
    return top(depths, n, lambda item: item[1], lambda item: (item[1],), lambda item: item[0])
