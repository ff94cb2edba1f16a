"""The reactor's side of the metrics endpoint: a snapshot of its figures, published once a second.

Owns ``MetricsFeed``. On a one-second timer (reactor thread) it reads the figures the server already keeps
(open connections and their links, each node's ``messages_in``/``messages_out``, queue depths, the publishers'
duplicate counts and ``store_send_noconfirm`` losses, the missing-topic outcomes, the failed authentications)
into an immutable ``metrics.snapshot.Snapshot`` and swaps it into ``latest``: the HTTP threads read that
attribute and nothing else of the reactor's. Each tick also hands the journal writer a ``MetricsRead`` (never
waiting on it: ``JournalPort.submit_read``), one at a time: the writer's write probe. The store's figures (the
durable subscriptions' backlogs, the journal's row count) are read apart from the writer, on a thread and a
connection of their own (``storage.store_metrics.FigureReader``); each tick takes the latest of them
(``store_figures``: one attribute read) into the snapshot. The per-node figures are labelled here (``top_nodes``,
``top_queues``: N rows and ``other``), so a scrape handles N + 1 rows whatever the number of nodes. That pass over
the nodes costs about 1 µs a node on the reactor, so it runs every second only up to ``NODES_PER_TICK`` nodes and
every ``ceil(nodes / NODES_PER_TICK)`` seconds beyond (100k topics: every 10 s, ~0.1 s of reactor time each);
the rest of a tick is a pass over the open links (and a secondary's few fan-out links). Without ``--http`` none of
this runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from subgate.engine.nodes import Queue, Topic
from subgate.engine.ports import JournalPort
from subgate.engine.records import MetricsRead, StoreFigures
from subgate.gateway.links import CoordinatorLink, Inbound, LinkState, Outbound
from subgate.metrics.snapshot import FanoutLink, MemoryFigures, Snapshot, fold_temporary, top_nodes, top_queues

log = logging.getLogger("subgate.metrics")

INTERVAL = 1.0  # seconds between snapshots (the health check calls a snapshot older than a few of these stale)
NODES_PER_TICK = 10_000  # nodes visited per tick at most, on average (see the module docstring)


def role(state: LinkState) -> str:
    """A link's ``role`` label: publisher, consumer (browsers and fetches too), coordinator, or control (the
    removal, missing-topic handler and held links of the topic tree, lookups)."""
    if isinstance(state, Inbound):
        return "publisher"
    if isinstance(state, Outbound):
        return "consumer"
    return "coordinator" if isinstance(state, CoordinatorLink) else "control"


class MetricsFeed:
    """See the module docstring. Reactor thread only, except ``latest`` (read by any thread)."""

    def __init__(
        self,
        *,
        connections: Callable[[], int],
        links: Callable[[], Iterable[LinkState]],
        nodes: Callable[[], Iterable[Queue | Topic]],
        duplicates: Callable[[], int],
        lost: Callable[[], int],
        missing_topic_outcomes: Mapping[str, int],
        auth_failures: Mapping[str, int],
        journal: JournalPort,
        store_figures: Callable[[], tuple[StoreFigures, float] | None],
        schedule: Callable[[float, Callable[[], None]], None],
        stopping: Callable[[], bool],
        top_n: int = 50,
        on_tick: Callable[[], None] = lambda: None,
        fanout: Callable[[], list[dict[str, Any]]] = list,
        memory: Callable[[], tuple[int, int, int, bool]] | None = None,
    ) -> None:
        self._connections = connections
        self._links = links
        self._nodes = nodes
        self._duplicates = duplicates
        self._lost = lost
        self._outcomes = missing_topic_outcomes
        self._auth_failures = auth_failures
        self._journal = journal
        self._store_figures = store_figures
        self._schedule = schedule
        self._stopping = stopping
        self._top_n = top_n
        self._on_tick = on_tick  # the web console's view, while someone watches (gateway.console_feed)
        self._fanout = fanout  # a secondary's fan-out links (FanoutMirror.status)
        self._memory = memory  # the memory mark's figures (engine.memory_mark.HighWater.figures)
        self._nodes_due = 0  # ticks until the next pass over the nodes
        self._traffic: tuple[tuple[str, int, int], ...] = ()
        self._depths: tuple[tuple[str, int], ...] = ()
        self._probing = False  # a MetricsRead is with the writer
        self.latest: Snapshot | None = None

    def start(self) -> None:
        self._tick()

    def _tick(self) -> None:
        try:
            self._probe()
            self.latest = self.take()
            self._on_tick()
        except Exception:  # a bug here must not end the ticks (nor anything else on the reactor)
            log.exception("metrics snapshot failed")
        if not self._stopping():
            self._schedule(INTERVAL, self._tick)

    def _probe(self) -> None:
        if self._probing:
            return  # the previous one is still on its way (a slow or failing store): one at a time
        self._probing = True
        self._journal.submit_read(MetricsRead(), self._probed)

    def _probed(self, _outcome: object) -> None:
        """The writer's answer, on the reactor thread (a failure is in the writer's health, for /healthz)."""
        self._probing = False

    def _node_figures(self) -> int:
        """Every node's traffic and every queue's depth, labelled; returns the ticks until the next pass."""
        traffic = []
        depths = []
        nodes = list(self._nodes())
        for node in nodes:
            traffic.append((node.name, node.messages_in, node.messages_out))
            if isinstance(node, Queue):
                depths.append((node.name, node.depth))
        self._traffic = tuple(top_nodes(fold_temporary(traffic), self._top_n))
        self._depths = tuple(top_queues(fold_temporary(depths), self._top_n))
        return max(1, math.ceil(len(nodes) / NODES_PER_TICK))

    def take(self) -> Snapshot:
        """The figures now, as an immutable snapshot."""
        roles: Counter[str] = Counter()
        for state in self._links():
            roles[role(state)] += 1
        store = self._store_figures()
        self._nodes_due -= 1
        if self._nodes_due <= 0:
            self._nodes_due = self._node_figures()
        return Snapshot(
            taken_at=time.monotonic(),
            taken_wall=time.time(),
            connections=self._connections(),
            links=tuple(sorted(roles.items())),
            nodes=self._traffic,
            queue_depths=self._depths,
            duplicates_dropped=self._duplicates(),
            lost_after_confirm=self._lost(),
            missing_topic_outcomes=tuple(sorted(self._outcomes.items())),
            auth_failures=tuple(sorted(self._auth_failures.items())),
            store=None if store is None else store[0],
            store_read_wall=None if store is None else store[1],
            fanout=tuple(FanoutLink.of(row) for row in self._fanout()),
            memory=None if self._memory is None else MemoryFigures(*self._memory()),
        )
