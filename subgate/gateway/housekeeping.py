"""The broker's timers and periodic work, on the reactor thread.

Owns scheduling a callback on the container (every handler's timers go through ``schedule``), the periodic
pass (expiry of due messages, publisher credit resynchronisation, low-water marks of durable queues, the
policy refresh, the journal's retention passes: ``gateway.retention``), and watching nodes: a queue's
scheduled deliveries get a timer, and a queue or topic that withheld credit (memory or backlog policy ``block``)
gives its publisher links credit again when it drains, as does the server once its memory is below the low-water
mark (``engine.memory.HighWater``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from proton.reactor import Container

from subgate.engine.nodes import Queue, Topic, now_ms
from subgate.engine.ports import JournalPort
from subgate.gateway.guard import schedule
from subgate.gateway.links import LinkState
from subgate.gateway.retention import Retention
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings

log = logging.getLogger("subgate.housekeeping")


class Housekeeping:
    """Timers and the periodic pass (see the module docstring). ``links`` lists every open link's state."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        container: Container,
        links: Callable[[], Iterable[LinkState]],
        *,
        journal: JournalPort | None = None,
    ) -> None:
        self.settings = settings
        self.router = router
        self.container = container
        self.links = links
        self.stopping = False
        self.on_policy_refresh: Callable[[], None] | None = None
        self._since_policy_refresh = 0.0
        self._scheduled: dict[str, int] = {}
        # The journal's retention passes, started and stopped with the periodic pass (none without a journal).
        self.retention: Retention | None = None
        if journal is not None:
            self.retention = Retention(
                settings.retention, settings.retention_interval, journal, self.schedule, router.pager.non_durable_after
            )
        gauge = router.memory_limit.gauge
        gauge.on_blocked = self._memory_blocked
        gauge.on_unblocked = self._memory_unblocked

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        schedule(self.container, delay, callback)

    def start(self) -> None:
        self.schedule(self.settings.expiry_sweep_interval, self._tick)
        if self.retention is not None:
            self.retention.start()

    def stop(self) -> None:
        self.stopping = True
        if self.retention is not None:
            self.retention.stop()

    def refresh_policy(self) -> None:
        """Read the policy from the store again now (a management change of the permissions)."""
        if self.on_policy_refresh is not None:
            self.on_policy_refresh()

    def _tick(self) -> None:
        now = now_ms()
        for node in self.router.all_nodes():
            queues = node.subscriptions if isinstance(node, Topic) else [node]
            for queue in queues:
                queue.expire_due(now)
        for link_state in self.links():
            link_state.on_tick()
        self.router.record_low_water()
        self._since_policy_refresh += self.settings.expiry_sweep_interval
        if self._since_policy_refresh >= self.settings.policy_refresh_interval:
            self._since_policy_refresh = 0.0
            self.refresh_policy()
        if not self.stopping:
            self.schedule(self.settings.expiry_sweep_interval, self._tick)

    # -- watched nodes ---------------------------------------------------------------------------------------
    def watch_node(self, node: Queue | Topic) -> None:
        """A node in service: a queue's scheduled deliveries get timers, its unblocking gives credit back (a
        topic's too: engine.backlog)."""
        if isinstance(node, Queue):
            if node.on_schedule is None:
                self.watch_schedule(node)
            node.on_unblocked = self._unblocked
        else:
            node.on_unblocked = self._unblocked

    def watch_schedule(self, queue: Queue) -> None:
        def on_schedule(at_ms: int) -> None:
            current = self._scheduled.get(queue.name)
            if current is not None and current <= at_ms:
                return
            self._scheduled[queue.name] = at_ms
            self.schedule((at_ms - now_ms()) / 1000.0, release)

        def release() -> None:
            self._scheduled.pop(queue.name, None)
            following = queue.release_scheduled()
            if following is not None:
                on_schedule(following)

        queue.on_schedule = on_schedule
        due = queue.release_scheduled()
        if due is not None:  # messages held before the queue was watched (recovered at start-up)
            on_schedule(due)

    def _memory_blocked(self) -> None:
        """The server's memory reached its mark (engine.memory_mark): one line when blocking starts."""
        held, reserved, mark, _ = self.router.memory_limit.gauge.figures()
        log.warning(
            "memory high-water mark reached: %d bytes held (%d more reserved for credit) of the mark of %d; every "
            "publisher link gets no more credit until memory drops to %d bytes",
            held, reserved, mark, self.router.memory_limit.gauge.low,
        )  # fmt: skip

    def _memory_unblocked(self) -> None:
        """Down to the low-water mark: one line when blocking ends, and every publisher link gets credit again."""
        held, _, mark, _ = self.router.memory_limit.gauge.figures()
        log.info(
            "memory below the low-water mark: %d bytes held of the mark of %d; publishers get credit again", held, mark
        )
        self._unblocked(None)

    def _unblocked(self, node: Queue | Topic | None) -> None:
        """A node that withheld credit (policy block) drained to its low-water mark, or (None) the server's memory
        did: its (every) publisher links get credit again. Rare (once per fill and drain), so a pass over the
        links is cheap enough."""
        for link_state in self.links():
            link_state.on_unblocked(node)
