"""Topics in memory: a publish-subscribe node that hands every message to its subscriptions' queues.

Owns a topic's subscriptions (with their filters and the ``live`` ones), its current value, its fan-out feeds and
the count of its durable subscriptions that page or are at their backlog limit (``engine.backlog``). The queues
are ``engine.nodes.Queue``; ``engine.nodes`` re-exports ``Topic``. Reactor thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from subgate.engine.backlog import subscription_changed
from subgate.engine.messages import Message

if TYPE_CHECKING:
    from subgate.engine.nodes import Queue


class Topic:
    """A publish-subscribe node: every subscription queue gets the message (if its filter takes it and it is not
    full: ``Queue.offer``)."""

    kind = "topic"
    blocked = False  # a topic never withholds its publishers' credit for memory (engine.memory)
    confirm_on_receipt = False  # publisher mode store_send_noconfirm (mapping.branch_modes; set by the router)

    def __init__(self, name: str, *, durable: bool = True) -> None:
        self.name = name
        self.durable = durable
        self.subscriptions: list[Queue] = []
        self.filters: dict[int, Callable[[Message], bool]] = {}
        self.durable_subscriptions = 0  # while above zero, messages are journaled whatever the journal mode
        self.journal_mode = "persistent"  # what the journal keeps for replay (mapping.branch_modes; set by the router)
        self.paging_subscriptions = 0  # durable subscription queues paging now (queue_paging keeps count)
        self.current: Message | None = None  # the last message published (a topic's current value)
        # Subscriptions with the source capability ``live``: a journaled message reaches them before its commit.
        self.live: set[int] = set()
        self.messages_in = 0  # routed here by a publisher (gateway.publish), for /metrics
        self._retired_out = 0  # deliveries of subscriptions that left (messages_out)
        # Fan-out (docs/fanout.md): the replication links that forward each message published here, and on a
        # secondary the primary this topic is a replica of (None: a local topic).
        self.feeds: list[Callable[[Topic, Message], None]] = []
        self.replica_of: str | None = None
        # Its durable subscriptions at their backlog limit (engine.backlog.subscription_changed keeps these).
        self.full_subscriptions: dict[int, Queue] = {}
        self.backlog_full = False
        self.on_unblocked: Callable[[Topic], None] | None = None

    @property
    def messages_out(self) -> int:
        """Deliveries sent to consumers by this topic's subscriptions, those that left included."""
        if not self.subscriptions:
            return self._retired_out
        return self._retired_out + sum(queue.messages_out for queue in self.subscriptions)

    def subscribe(self, queue: Queue, accepts: Callable[[Message], bool] | None = None, *, live: bool = False) -> None:
        self.subscriptions.append(queue)
        self._retired_out -= queue.messages_out  # a queue coming back: what it sent counts once
        if accepts is not None:
            self.filters[id(queue)] = accepts
        if live:
            self.live.add(id(queue))

    def queue_paging(self, started: bool) -> None:
        """A durable subscription queue's ``on_paging``: while one pages, non-persistent messages to this topic
        are journaled too (docs/architecture.md, "Paging")."""
        self.paging_subscriptions += 1 if started else -1

    def unsubscribe(self, queue: Queue) -> None:
        if queue in self.subscriptions:
            self.subscriptions.remove(queue)
            self._retired_out += queue.messages_out
        self.filters.pop(id(queue), None)
        self.live.discard(id(queue))
        if id(queue) in self.full_subscriptions:
            subscription_changed(self, queue, False)

    def publish(self, message: Message, *, committed: bool = False) -> int:
        """Route to every matching subscription (once ``committed``, not to the live ones: they had it from
        ``publish_live``); returns how many took it."""
        self.current = message
        if self.feeds:
            for feed in self.feeds:
                feed(self, message)
        taken = 0
        filters = self.filters
        live = self.live if committed else None
        for queue in self.subscriptions:
            if live and id(queue) in live:
                continue
            accepts = filters.get(id(queue)) if filters else None
            if (accepts is None or accepts(message)) and queue.offer(message):
                taken += 1
        return taken

    def publish_live(self, message: Message) -> None:
        """A journaled message on its way to the journal, to the live subscriptions only (AMPS's live option)."""
        filters = self.filters
        live = self.live
        for queue in self.subscriptions:
            if id(queue) in live:
                accepts = filters.get(id(queue)) if filters else None
                if accepts is None or accepts(message):
                    queue.offer(message)
