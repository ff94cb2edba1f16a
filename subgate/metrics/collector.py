"""The snapshot and the writer's figures as Prometheus metric families (``prometheus_client``'s exposition).

Owns the names, help texts, types and labels of every metric ``/metrics`` serves (docs/operations.md lists
them; none carries a user name, a client address or a temporary node's name: ``/metrics`` needs no login), and
the translation of a ``Snapshot`` (``metrics.snapshot``), the journal writer's histograms (``metrics.buckets``)
and its commit health into ``prometheus_client`` families. ``SubgateCollector.collect``
runs on an HTTP thread for each scrape: it reads the latest snapshot the reactor published (one attribute read)
and never touches the reactor's state, a proton object or the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from subgate.metrics.buckets import HistogramView
from subgate.metrics.snapshot import OTHER, TEMPORARY, TEMPORARY_PREFIX, MemoryFigures, Snapshot

SUBSCRIPTION_LABELS = ["client_id", "name", "topic"]


@dataclass(frozen=True, slots=True)
class WriterFigures:
    """The journal writer's histograms, as copied for one scrape."""

    commit_seconds: HistogramView
    batch_size: HistogramView


def _histogram(name: str, documentation: str, view: HistogramView) -> HistogramMetricFamily:
    buckets = [(_le(bound), count) for bound, count in zip(view.bounds, view.cumulative, strict=False)]
    buckets.append(("+Inf", view.count))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=view.total)


def _labelled(
    family: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    documentation: str,
    label: str,
    series: Iterable[tuple[str, float]],
) -> Metric:
    """A family with one label: a sample per (label value, value) of ``series``."""
    metric = family(name, documentation, labels=[label])
    for value_label, value in series:
        metric.add_metric([value_label], value)
    return metric


def _le(bound: float) -> str:
    return repr(float(bound))


def snapshot_families(snapshot: Snapshot, top_n: int) -> Iterator[Metric]:
    """Every metric a snapshot gives; per-node series as the snapshot has them (``top_nodes``, ``top_queues``),
    per-subscription series bounded here by ``top_n`` (+ ``other``)."""
    yield GaugeMetricFamily("subgate_connections", "Open AMQP connections.", value=snapshot.connections)
    yield _labelled(GaugeMetricFamily, "subgate_links", "Open links by role.", "role", snapshot.links)
    messages_in = CounterMetricFamily(
        "subgate_messages_in", "Messages routed to a node since start (top nodes, the rest as other).", labels=["node"]
    )
    messages_out = CounterMetricFamily(
        "subgate_messages_out",
        "Messages sent to consumers from a node (a topic: its subscriptions) since start (top nodes, rest as other).",
        labels=["node"],
    )
    for node, sent_in, sent_out in snapshot.nodes:
        messages_in.add_metric([node], sent_in)
        messages_out.add_metric([node], sent_out)
    yield messages_in
    yield messages_out
    yield _labelled(
        GaugeMetricFamily,
        "subgate_queue_depth",
        "Messages a queue holds (deepest queues, the rest as other).",
        "queue",
        snapshot.queue_depths,
    )
    yield CounterMetricFamily(
        "subgate_duplicates_dropped",
        "Messages dropped as duplicates of a publisher id's earlier ones, plus store_send_noconfirm messages "
        "confirmed and then not persisted, since start.",
        value=snapshot.duplicates_dropped + snapshot.lost_after_confirm,
    )
    yield _labelled(
        CounterMetricFamily,
        "subgate_missing_topic_notifications",
        "Missing-topic notifications by outcome.",
        "outcome",
        snapshot.missing_topic_outcomes,
    )
    yield _labelled(
        CounterMetricFamily,
        "subgate_auth_failures",
        "Failed authentications by SASL mechanism.",
        "mechanism",
        snapshot.auth_failures,
    )
    yield from _store_families(snapshot, top_n)
    if snapshot.fanout:
        yield from _fanout_families(snapshot)
    if snapshot.memory is not None:
        yield from _memory_families(snapshot.memory)


def _memory_families(memory: MemoryFigures) -> Iterator[Metric]:
    """The memory high-water mark (engine.memory_mark; docs/operations.md "The memory mark")."""
    yield GaugeMetricFamily(
        "subgate_memory_held_bytes",
        "Bytes of message bodies the server holds in memory (every queue, and open transactions' sends).",
        value=memory.held,
    )
    yield GaugeMetricFamily(
        "subgate_memory_reserved_bytes",
        "Bytes reserved for the credit of publisher links (credit and messages in the journal times the largest "
        "message size).",
        value=memory.reserved,
    )
    yield GaugeMetricFamily(
        "subgate_memory_high_water_bytes", "The memory high-water mark (0: none).", value=memory.mark
    )
    yield GaugeMetricFamily(
        "subgate_memory_blocked",
        "1 while the memory high-water mark is reached and every publisher link is refused credit, else 0.",
        value=1 if memory.blocked else 0,
    )


def _fanout_families(snapshot: Snapshot) -> Iterator[Metric]:
    """A secondary's fan-out links (docs/fanout.md), labelled by primary and selector (a few links at most)."""
    labels = ["primary", "selector"]
    state = GaugeMetricFamily(
        "subgate_fanout_link_state", "1 for the state a fan-out link is in.", labels=[*labels, "state"]
    )
    topics = GaugeMetricFamily("subgate_fanout_replicated_topics", "Topics replicated by a link.", labels=labels)
    received = CounterMetricFamily("subgate_fanout_messages_received", "Messages received on a link.", labels=labels)
    reconnects = CounterMetricFamily("subgate_fanout_reconnects", "Reconnects of a link.", labels=labels)
    lag = GaugeMetricFamily(
        "subgate_fanout_lag_seconds",
        "Primary timestamp to local apply over the last minute: p50 and max.",
        labels=[*labels, "quantile"],
    )
    for link in snapshot.fanout:
        key = [link.primary, link.selector]
        for name in ("connecting", "snapshot", "live", "lost"):
            state.add_metric([*key, name], 1.0 if link.state == name else 0.0)
        topics.add_metric(key, link.replicated_topics)
        received.add_metric(key, link.messages_received)
        reconnects.add_metric(key, link.reconnects)
        for quantile, value in (("0.5", link.lag_p50_ms), ("1", link.lag_max_ms)):
            if value is not None:
                lag.add_metric([*key, quantile], value / 1000.0)
    yield from (state, topics, received, reconnects, lag)


def _store_families(snapshot: Snapshot, top_n: int) -> Iterator[Metric]:
    store = snapshot.store
    if store is None or store.journal_rows is None or snapshot.store_read_wall is None:
        return  # not read yet: no figure rather than a wrong one
    yield GaugeMetricFamily(
        "subgate_journal_rows", "Rows in the journal (at the last store read).", value=store.journal_rows
    )
    backlog = GaugeMetricFamily(
        "subgate_subscription_backlog",
        "Journal rows a durable subscription has not accepted (as 'subgate bookmarks show' counts them).",
        labels=SUBSCRIPTION_LABELS,
    )
    oldest = GaugeMetricFamily(
        "subgate_subscription_oldest_unaccepted_seconds",
        "Age of the oldest journal row a durable subscription has not accepted (0: none).",
        labels=SUBSCRIPTION_LABELS,
    )
    read_at_ms = int(snapshot.store_read_wall * 1000)

    def age(oldest_ms: int | None) -> float:
        return max(0, read_at_ms - oldest_ms) / 1000 if oldest_ms else 0.0

    subs = store.subscriptions
    ranked = heapq.nsmallest(top_n, subs, key=lambda sub: (-sub.backlog, sub.client_id or "", sub.name, sub.topic))
    for sub in ranked:
        topic = TEMPORARY if sub.topic.startswith(TEMPORARY_PREFIX) else sub.topic
        labels = [sub.client_id or "", sub.name, topic]
        backlog.add_metric(labels, sub.backlog)
        oldest.add_metric(labels, age(sub.oldest_ms))
    chosen = set(map(id, ranked))
    rest = [sub for sub in subs if id(sub) not in chosen]
    if rest:
        backlog.add_metric(["", OTHER, ""], sum(sub.backlog for sub in rest))
        oldest.add_metric(["", OTHER, ""], age(min((sub.oldest_ms for sub in rest if sub.oldest_ms), default=None)))
    yield backlog
    yield oldest


class SubgateCollector(Collector):
    """A ``prometheus_client`` collector over the latest snapshot and the writer's histograms.

    Args:
        snapshot: the latest published snapshot (None before the first).
        writer: the journal writer's histograms, copied now.
        top_n: how many nodes (and queues, and subscriptions) get a series of their own.
    """

    def __init__(
        self, snapshot: Callable[[], Snapshot | None], writer: Callable[[], WriterFigures | None], top_n: int
    ) -> None:
        self._snapshot = snapshot
        self._writer = writer
        self._top_n = top_n

    def collect(self) -> Iterator[Metric]:
        figures = self._writer()
        if figures is not None:
            yield _histogram(
                "subgate_journal_commit_seconds", "Time of one journal commit (a batch).", figures.commit_seconds
            )
            yield _histogram("subgate_journal_batch_size", "Operations in one journal commit.", figures.batch_size)
        snapshot = self._snapshot()
        if snapshot is not None:
            yield from snapshot_families(snapshot, self._top_n)
