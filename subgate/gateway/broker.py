"""The broker's proton handler: the thin dispatcher proton's events reach.

Each ``on_*`` method hands its event to the handler that owns the job, or to the link kind itself
(``gateway.links``, ``gateway.consumers``, ``gateway.topic_control``: each answers ``on_delivery``, ``on_flow``
and ``on_end``):

* ``gateway.attach.Attacher``: link attaches, including those held for missing-topic handlers;
* ``gateway.publish.Publishing``: the publish pipeline (ingestion, relay, $management, transactions' hand-off);
* ``gateway.completions.Completions``: journal results back on the reactor (``journal_committed``);
* ``gateway.lifecycle.Lifecycle``: connection, session and link ends, node deletion, shutdown;
* ``gateway.housekeeping.Housekeeping``: timers, expiry, credit resynchronisation, watched nodes.

This is a flat handler set directly on the container (no ``MessagingHandler`` stack): one Python call per
event. ``gateway.loop`` calls ``raw_delivery_event`` and ``link_flow`` directly, without an Event: those two
stay as short as they are (they are benchmarked, docs/performance.md). Every other handler is ``guarded``: a
bug is logged and answered with ``amqp:internal-error`` on the object it concerns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cproton import PN_ACCEPTED, pn_delivery_remote_state, pn_delivery_settle
from proton import Delivery, Endpoint, Event
from proton.reactor import Container

from subgate.engine.nodes import Queue, Topic
from subgate.gateway.attach import Attacher
from subgate.gateway.authority import Authority
from subgate.gateway.completions import Completions
from subgate.gateway.fanout_feed import ReplicationFeeds
from subgate.gateway.fanout_mirror import FanoutMirror
from subgate.gateway.guard import guarded
from subgate.gateway.housekeeping import Housekeeping
from subgate.gateway.lifecycle import Connections, Lifecycle, connection_state
from subgate.gateway.links import LinkState
from subgate.gateway.missing_topics import MissingTopics
from subgate.gateway.publish import Publishing
from subgate.gateway.replay import Replays
from subgate.gateway.router import Router
from subgate.gateway.server_admin import ServerAdmin, Sources
from subgate.gateway.settings import Settings
from subgate.gateway.store_reports import StoreReports
from subgate.gateway.subscriptions import Subscriptions
from subgate.gateway.topic_admin import TopicAdmin
from subgate.gateway.topic_control import TopicControl
from subgate.mapping.outcomes import settle_outcome
from subgate.mapping.permissions import Policy
from subgate.storage.removals import RemovalRecord
from subgate.storage.submissions import Submissions

if TYPE_CHECKING:
    from subgate.gateway.io import ServerIO

log = logging.getLogger("subgate.broker")

_ACCEPTED = settle_outcome("accepted")


class Broker:
    """The container's handler (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        container: Container,
        subscriptions: Subscriptions | None = None,
        *,
        journal: Submissions,
    ) -> None:
        subscriptions = subscriptions or Subscriptions(router, journal, router.pager)
        self.connections = Connections()
        self.authority = Authority()
        self.housekeeping = Housekeeping(settings, router, container, self.connections.links, journal=journal)
        self.control = _control(settings, self, journal)
        self.lifecycle = Lifecycle(
            settings.name,
            router,
            subscriptions,
            lambda: self.control,
            self.housekeeping,
            self.connections,
            self.authority,
            journal.submit_barrier,
            settings.endpoint_limits(),
        )
        self.fanout = _mirror(settings, router, self)
        self.feeds = feeds = ReplicationFeeds(router.topics, settings.fanout_queue_limit)
        reload = self.housekeeping.refresh_policy
        topic_admin = TopicAdmin(
            router, self.control, self.lifecycle.remove_topics, reload, self.fanout.status, feeds.status
        )
        store_reports = StoreReports(journal, router.pager.non_durable_after)
        self.server_admin = _server_admin(router, self.connections, self.lifecycle, subscriptions, journal)
        self.pipeline = Publishing(
            settings,
            router,
            self.authority,
            self.housekeeping,
            self.lifecycle,
            subscriptions,
            topic_admin,
            store_reports,
            self.server_admin,
        )
        self.attacher = Attacher(
            settings,
            router,
            self.authority,
            subscriptions,
            self.control,
            self.pipeline,
            self.housekeeping,
            self.lifecycle,
            Replays(journal, lambda: router.last_seq),
            feeds,
            MissingTopics(router, self.authority, self.control, self.fanout),
        )
        self.completions = Completions(journal, self.pipeline)  # claims tokens on the reactor thread

    # -- verbs for the server --------------------------------------------------------------------------------
    def use_policy(self, policy: Policy, refresh: Callable[[], None] | None = None) -> None:
        """The permissions in force, and how to read them again from the store (``gateway.policy``)."""
        self.authority.use(policy)
        self.housekeeping.on_policy_refresh = refresh

    def restore_removals(self, records: list[RemovalRecord], next_row: int) -> None:
        """Remove-with-session registrations stored by an earlier run (``TopicControl.restore``)."""
        self.control.restore(records, next_row)

    def watch_node(self, node: Queue | Topic) -> None:
        self.housekeeping.watch_node(node)

    def watch_schedule(self, queue: Queue) -> None:
        self.housekeeping.watch_schedule(queue)

    def start_housekeeping(self) -> None:
        self.housekeeping.start()

    def when_stopped(self, callback: Callable[[], None]) -> None:
        self.lifecycle.on_stopped = callback

    def begin_shutdown(self, io: ServerIO, *, flush: bool = True) -> None:
        """Stop accepting, let queued journal writes commit and be acknowledged (unless not ``flush``), then close
        connections."""
        self.lifecycle.begin_shutdown(io, flush=flush)

    @property
    def published(self) -> int:
        return self.pipeline.published

    # -- application events ----------------------------------------------------------------------------------
    def on_policy_loaded(self, event: Event) -> None:
        """A policy freshly read from the store (gateway.policy): it decides every attach from now on."""
        self.authority.use(event.subject)

    @guarded
    def on_fanout_events(self, event: Event) -> None:
        """Replication messages, link states and answers from the fan-out client thread."""
        self.fanout.drain()

    @guarded
    def on_journal_committed(self, event: Event) -> None:
        self.completions.on_result(event.subject)

    # -- connections and sessions ----------------------------------------------------------------------------
    @guarded
    def on_connection_remote_open(self, event: Event) -> None:
        if event.connection is not None:
            self.lifecycle.connection_opened(event.connection)

    @guarded
    def on_connection_remote_close(self, event: Event) -> None:
        connection = event.connection
        if connection is None:
            return
        self.lifecycle.connection_ended(connection, abrupt=False)
        if not connection.state & Endpoint.LOCAL_CLOSED:
            connection.close()

    @guarded
    def on_transport_tail_closed(self, event: Event) -> None:
        connection = event.connection
        if connection is not None:
            self.lifecycle.connection_ended(connection, abrupt=True)

    @guarded
    def on_transport_closed(self, event: Event) -> None:
        connection = event.connection
        if connection is not None:
            self.lifecycle.connection_ended(connection, abrupt=True)

    @guarded
    def on_session_remote_open(self, event: Event) -> None:
        if event.session is not None:
            self.lifecycle.session_opened(event.session)

    @guarded
    def on_session_remote_close(self, event: Event) -> None:
        if event.session is not None:
            self.lifecycle.session_ended(event.session)

    # -- links -----------------------------------------------------------------------------------------------
    @guarded
    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link is None or link.state & Endpoint.LOCAL_CLOSED or link.session.state & Endpoint.LOCAL_CLOSED:
            return  # refused or stolen before this handler ran (gateway.frame_gate), or its session ended
        state = connection_state(link.connection)
        lifecycle = self.lifecycle
        if state is not None and lifecycle.link_name_fits(link, state) and lifecycle.link_admitted(link, state):
            self.attacher.attach(link, state)

    @guarded
    def on_link_remote_close(self, event: Event) -> None:
        if event.link is not None:
            self.lifecycle.link_ended(event.link, closed=True)

    @guarded
    def on_link_remote_detach(self, event: Event) -> None:
        if event.link is not None:
            self.lifecycle.link_ended(event.link, closed=False)

    @guarded
    def on_link_flow(self, event: Event) -> None:
        link_state = getattr(event.link, "_sg", None)
        if link_state is not None:
            self.link_flow(link_state)

    def link_flow(self, link_state: LinkState) -> None:
        """A link's credit or drain changed (``gateway.loop`` calls this directly with the link's state)."""
        if not link_state.closed:
            link_state.on_flow()

    # -- deliveries ------------------------------------------------------------------------------------------
    @guarded
    def on_delivery(self, event: Event) -> None:
        delivery = event.delivery
        if delivery is None:
            return
        link_state = getattr(delivery.link, "_sg", None)
        if link_state is not None:
            self.raw_delivery_event(link_state, delivery._impl)

    def raw_delivery_event(self, link_state: LinkState, impl: Any) -> None:
        """A delivery changed on one of our links (``gateway.loop``'s fast path, with the C delivery). A
        consumer's plain ``accepted`` is settled here, its one path, without a Delivery wrapper; everything
        else goes to the link kind's ``on_delivery``."""
        if link_state.consumer and pn_delivery_remote_state(impl) == PN_ACCEPTED:
            message = link_state.unsettled.pop(impl, None)  # type: ignore[attr-defined]  # consumer: an Outbound
            pn_delivery_settle(impl)
            if message is not None:
                link_state.queue.settle(message, _ACCEPTED, link_state)  # type: ignore[attr-defined]
            if link_state.held:  # type: ignore[attr-defined]  # at max-unsettled-per-link: room again
                link_state.resume()  # type: ignore[attr-defined]
            return
        link_state.on_delivery(Delivery.wrap(impl))


def _control(settings: Settings, broker: Broker, journal: Submissions) -> TopicControl:
    """Remove-with-session registrations and missing-topic handlers (``gateway.topic_control``)."""
    return TopicControl(
        settings.name,
        settings.reconnect_timeout,
        settings.missing_topic_timeout,
        broker.housekeeping.schedule,
        lambda branch: broker.lifecycle.remove_branch(branch),
        journal=journal,
    )


def _server_admin(
    router: Router, connections: Connections, lifecycle: Lifecycle, subscriptions: Subscriptions, journal: Submissions
) -> ServerAdmin:
    """``$management`` types ``queue``, ``connection`` and ``server``, reading what the broker holds."""
    return ServerAdmin(
        Sources(
            router,
            lambda: connections.open,
            lifecycle.close_connection,
            lambda: len(subscriptions.named()),
            lambda: journal.health,
        )
    )


def _mirror(settings: Settings, router: Router, broker: Broker) -> FanoutMirror:
    """The secondary's replicas (``gateway.fanout_mirror``): applied through the broker's pipeline and
    lifecycle; the client thread joins it at start (``FanoutMirror.connect``)."""
    return FanoutMirror(
        settings.fanout,
        router,
        broker.control,
        lambda topic, raw, publisher_id: broker.pipeline.inject(topic, raw, publisher_id),
        broker.lifecycle.remove_topics,
        broker.housekeeping.schedule,
    )
