"""The reactor's side of the metrics endpoint: a snapshot of its figures, published once a second.

Owns ``MetricsFeed``. On a one-second timer (reactor thread) it reads the figures the server already keeps
(open connections and their links, each node's ``messages_in``/``messages_out``, queue depths, the publishers'
duplicate counts and ``store_send_noconfirm`` losses, the missing-topic outcomes, the failed authentications)
into an immutable ``metrics.snapshot.Snapshot`` and swaps it into ``latest``: the HTTP threads read that
attribute and nothing else of the reactor's. Each tick also hands the journal writer a ``MetricsRead`` (never
waiting on it: ``JournalPort.submit_read``), one at a time: the writer's write probe, and every
``store_every`` ticks the durable subscriptions' backlogs and the journal's row count, whose answer comes back on
the reactor thread and goes into the next snapshot. A tick costs one pass over the nodes and the open links: a
few milliseconds a second for 100k nodes, and nothing at all without ``--http``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from subgate.engine.nodes import Queue, Topic
from subgate.engine.ports import JournalPort
from subgate.engine.records import MetricsRead, StoreFigures
from subgate.gateway.links import CoordinatorLink, Inbound, LinkState, Outbound
from subgate.metrics.snapshot import NodeTraffic, Snapshot

log = logging.getLogger("subgate.metrics")

INTERVAL = 1.0  # seconds between snapshots (the health check calls a snapshot older than a few of these stale)


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
        non_durable_after: int,
        schedule: Callable[[float, Callable[[], None]], None],
        stopping: Callable[[], bool],
        store_every: int = 5,
    ) -> None:
        self._connections = connections
        self._links = links
        self._nodes = nodes
        self._duplicates = duplicates
        self._lost = lost
        self._outcomes = missing_topic_outcomes
        self._auth_failures = auth_failures
        self._journal = journal
        self._non_durable_after = non_durable_after
        self._schedule = schedule
        self._stopping = stopping
        self._store_every = max(1, store_every)
        self._ticks = 0
        self._reading = False  # a MetricsRead is with the writer
        self._store: StoreFigures | None = None
        self._store_wall: float | None = None
        self.latest: Snapshot | None = None

    def start(self) -> None:
        self._tick()

    def _tick(self) -> None:
        try:
            self._read_store()
            self.latest = self.take()
        except Exception:  # a bug here must not end the ticks (nor anything else on the reactor)
            log.exception("metrics snapshot failed")
        if not self._stopping():
            self._schedule(INTERVAL, self._tick)

    def _read_store(self) -> None:
        if self._reading:
            return  # the previous one is still on its way (a slow or failing store): one at a time
        figures = self._ticks % self._store_every == 0
        self._ticks += 1
        self._reading = True
        self._journal.submit_read(MetricsRead(self._non_durable_after, figures), lambda outcome: self._read(outcome))

    def _read(self, outcome: object) -> None:
        """The writer's answer, on the reactor thread: the figures, or the error (the writer's health has it)."""
        self._reading = False
        if isinstance(outcome, StoreFigures) and outcome.journal_rows is not None:
            self._store, self._store_wall = outcome, time.time()
            if self.latest is not None:  # published at once, not at the next tick
                self.latest = replace(self.latest, store=self._store, store_read_wall=self._store_wall)

    def take(self) -> Snapshot:
        """The figures now, as an immutable snapshot."""
        roles: Counter[str] = Counter()
        for state in self._links():
            roles[role(state)] += 1
        traffic = []
        depths = []
        for node in self._nodes():
            traffic.append(NodeTraffic(node.name, node.kind, node.messages_in, node.messages_out))
            if isinstance(node, Queue):
                depths.append((node.name, node.depth))
        return Snapshot(
            taken_at=time.monotonic(),
            taken_wall=time.time(),
            connections=self._connections(),
            links=tuple(sorted(roles.items())),
            nodes=tuple(traffic),
            queue_depths=tuple(depths),
            duplicates_dropped=self._duplicates(),
            lost_after_confirm=self._lost(),
            missing_topic_outcomes=tuple(sorted(self._outcomes.items())),
            auth_failures=tuple(sorted(self._auth_failures.items())),
            store=self._store,
            store_read_wall=self._store_wall,
        )
