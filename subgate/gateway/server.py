"""Assembling and running the server: store check, recovery, container, journal writer, signals.

Owns the process lifecycle of ``subgate serve``: refuse an out-of-date schema (unless asked to migrate), load
the catalog and the first page of every durable queue's backlog (the rest is paged in from the journal as
consumers take it: ``gateway.paging``), start the journal writer and the container, log the listening
address, and on SIGTERM/SIGINT stop accepting, flush the journal, close connections and return 0.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from proton.reactor import ApplicationEvent, Container, EventInjector

from subgate.gateway.admission import ConnectionLimits
from subgate.gateway.auth import Authenticator
from subgate.gateway.broker import Broker
from subgate.gateway.io import ServerIO
from subgate.gateway.loop import EventLoop
from subgate.gateway.nodes import Topic
from subgate.gateway.paging import row_filter
from subgate.gateway.policy import PolicyLoader
from subgate.gateway.router import Router
from subgate.gateway.selection import compile_selector
from subgate.gateway.settings import Settings
from subgate.gateway.subscriptions import Subscriptions
from subgate.storage.catalog import load_catalog
from subgate.storage.db import make_engine, schema_status, session_factory, upgrade
from subgate.storage.errors import SchemaOutOfDate
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.removals import list_removal_registrations, max_removal_registration_id
from subgate.storage.subscriptions import list_subscriptions, reset_runtime

log = logging.getLogger("subgate.server")


def check_schema(url: str, *, migrate: bool) -> None:
    """Raise SchemaOutOfDate unless the store is at the head revision (or migrate it when asked)."""
    engine = make_engine(url)
    try:
        current, head = schema_status(engine)
    finally:
        engine.dispose()
    if current == head:
        return
    if migrate:
        log.info("migrating the store from %s to %s", current or "an empty database", head)
        upgrade(url)
        return
    raise SchemaOutOfDate(
        f"the store is at schema revision {current or 'none (empty database)'} but this subgate needs {head}; "
        "run 'subgate db upgrade' (or start with --migrate)"
    )


def _configure_transport(settings: Settings) -> Callable[[Any], None]:
    def configure(transport: Any) -> None:
        transport.max_frame_size = settings.max_frame_size
        transport.idle_timeout = settings.idle_timeout

    return configure


def recover(router: Router, subscriptions: Subscriptions, sessions: Any) -> int:
    """Rebuild durable queues, durable subscriptions and the first page of their unacknowledged messages from
    the journal; returns the message count (loaded and left in the journal). Volatile subscription rows (left
    by a crash) are removed."""
    count = 0
    upto = router.last_seq  # every journal row of the previous run
    with sessions() as session:
        removed = reset_runtime(session)
        session.commit()
        if removed:
            log.info("removed %d non-durable subscriptions left from the previous run", removed)
        catalog = load_catalog(session)
        cursors = {c.owner: c for c in catalog.cursors if c.owner_kind == "queue"}
        by_id = {c.id: c for c in catalog.cursors}
        for node in catalog.nodes:
            if node.kind == "topic":
                router.restore_topic(node.name)
                continue
            cursor = cursors.get(node.name)
            if cursor is None:
                continue
            queue = router.restore_queue(node.name, cursor.id)
            count += sum(router.pager.recover(session, queue, cursor, upto))
        for record in list_subscriptions(session):
            sub_cursor = by_id.get(record.cursor_id) if record.cursor_id is not None else None
            if not record.durable or sub_cursor is None:
                continue
            topic = router.nodes.get(record.topic)
            if not isinstance(topic, Topic):
                topic = router.restore_topic(record.topic)
            matcher = compile_selector(record.selector)
            sub = subscriptions.restore(record, topic, matcher)
            no_local_id = record.client_id if record.no_local else None  # drops its own ClientID's messages
            accepts = row_filter(no_local_id, matcher)
            count += sum(router.pager.recover(session, sub.queue, sub_cursor, upto, accepts))
    return count


class Server:
    """One running subgate (see the module docstring). ``run()`` blocks until stopped."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = make_engine(settings.store_url)
        self.sessions = session_factory(self.engine)
        with self.sessions() as session:
            catalog = load_catalog(session)
        self.container = Container()
        self.container.container_id = settings.name
        self.injector = EventInjector()
        self.writer = JournalWriter(self.engine, self._journal_done)
        self.router = Router(settings, self.writer, catalog)
        self.subscriptions = Subscriptions(self.router, catalog.max_subscription_id)
        recovered = recover(self.router, self.subscriptions, self.sessions)
        if recovered:
            log.info("recovered %d unacknowledged messages from the journal", recovered)
        self.broker = Broker(settings, self.router, self.container, self.subscriptions)
        with self.sessions() as session:
            self.broker.restore_removals(list_removal_registrations(session), max_removal_registration_id(session))
        for node in self.router.nodes.values():
            self.broker.watch_node(node)
        for sub in self.subscriptions.named():
            self.broker.watch_schedule(sub.queue)
        self.policy_loader = PolicyLoader(self.sessions, self.injector)
        self.auth = Authenticator(
            self.sessions, self.injector, settings.allow_anonymous, self.policy_loader.publish_now
        )
        self.broker.use_policy(self.policy_loader.load_now(), self.policy_loader.refresh)
        self.io = ServerIO(
            self.container,
            authenticate=self.auth.submit,
            configure_transport=_configure_transport(settings),
            limits=ConnectionLimits(
                max_connections=settings.max_connections,
                max_per_address=settings.max_connections_per_address,
                handshake_timeout=settings.handshake_timeout,
                frame_timeout=settings.frame_timeout,
            ),
        )
        # A flat handler and our own I/O handler: no MessagingHandler stack, no GlobalOverrides indirection.
        # Both are duck-typed handlers (on_* methods), not subclasses of proton's Handler.
        self.container.handler = self.broker  # type: ignore[assignment]
        self.container.global_handler = self.io  # type: ignore[assignment]
        self.container.selectable(self.injector)
        self.broker.when_stopped(self._stopped)
        self.address: tuple[str, int] | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def _journal_done(self, result: BatchResult) -> None:
        # Writer thread: hand the result to the reactor thread.
        self.injector.trigger(ApplicationEvent("journal_committed", subject=result))

    def _stopped(self) -> None:
        self.injector.close()
        self.container.stop()

    def request_stop(self, *_args: Any) -> None:
        """Signal-safe: only a flag and a byte on a pipe; the reactor does the rest."""
        self.io.stop_requested = True
        try:
            os.write(self._wake_w, b"!")
        except OSError:
            pass

    def listen(self) -> tuple[str, int]:
        self.address = self.io.listen(self.settings.listen_host, self.settings.listen_port)
        return self.address

    def run(self) -> int:
        if self.address is None:
            self.listen()
        self.io.watch_wakeup(self._wake_r, lambda: self.broker.begin_shutdown(self.io))
        self.writer.start()
        self.broker.start_housekeeping()
        host, port = self.address  # type: ignore[misc]
        log.info(
            "subgate %r listening on %s:%d (store %s)",
            self.settings.name,
            host,
            port,
            self.engine.url.render_as_string(hide_password=True),
        )
        try:
            EventLoop(self.container, self.broker, self.io).run()
        finally:
            self.writer.close()
            self.auth.close()
            self.policy_loader.close()
            self.engine.dispose()
            log.info("subgate stopped (%d journal batches, %d rows)", self.writer.batches, self.writer.rows)
        return 0


def serve(settings: Settings, *, migrate: bool = False) -> int:
    # The hot path calls proton-c directly (gateway.loop, gateway.links): should it ever crash, the log gets
    # every thread's Python stack.
    faulthandler.enable()
    check_schema(settings.store_url, migrate=migrate)
    server = Server(settings)
    server.listen()
    signal.signal(signal.SIGTERM, server.request_stop)
    signal.signal(signal.SIGINT, server.request_stop)
    return server.run()
