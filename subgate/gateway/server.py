"""Assembling and running the server: store check, recovery, container, journal writer, signals.

Owns the process lifecycle of ``subgate serve``: refuse an out-of-date schema (unless asked to migrate), claim
the store's lease (``gateway.ownership``: refused while another live server owns the store), open the HTTP
endpoint of ``--http`` (``metrics.http``: ``/readyz`` answers 503 until recovery is over), load
the catalog and the first page of every durable queue's backlog (the rest is paged in from the journal as
consumers take it: ``gateway.paging``), start the journal writer and the container, open the listeners (the
plain one, and the TLS one of ``--tls-listen``: ``gateway.tls``), log their addresses (``/readyz`` turns 200),
and on SIGTERM/SIGINT stop accepting, flush the journal, close connections, release the lease and return 0.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import resource
import signal
import ssl
from collections.abc import Callable
from typing import Any

from proton.reactor import ApplicationEvent, Container, EventInjector

from subgate.engine.admission import ConnectionLimits
from subgate.engine.login_throttle import LoginThrottle, ThrottleRule
from subgate.engine.nodes import Topic
from subgate.engine.selection import compile_selector
from subgate.engine.topic_space import selector_address
from subgate.engine.transport_policy import TransportRules, is_loopback
from subgate.gateway.auth import Authenticator
from subgate.gateway.broker import Broker
from subgate.gateway.console_access import ConsoleAccess
from subgate.gateway.console_feed import ConsoleFeed, ManagementFactory, console_actions, console_view
from subgate.gateway.fanout_client import FanoutClient
from subgate.gateway.fanout_mirror import Mailbox
from subgate.gateway.frame_gate import FrameHooks
from subgate.gateway.io import ServerIO
from subgate.gateway.loop import EventLoop
from subgate.gateway.metrics_feed import MetricsFeed
from subgate.gateway.ownership import StoreOwnership
from subgate.gateway.paging import row_filter
from subgate.gateway.policy import PolicyLoader
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings
from subgate.gateway.subscriptions import Subscriptions, selected
from subgate.gateway.tls import server_context
from subgate.metrics.collector import WriterFigures
from subgate.metrics.http import MetricsEndpoint
from subgate.metrics.http_server import HttpLimits
from subgate.metrics.startup import StartupSteps
from subgate.storage.catalog import load_catalog
from subgate.storage.db import check_schema, make_engine, session_factory
from subgate.storage.journal import BatchResult, JournalWriter
from subgate.storage.journal_process import JournalProcess
from subgate.storage.removals import list_removal_registrations, max_removal_registration_id
from subgate.storage.store_metrics import FigureReader
from subgate.storage.subscriptions import list_subscriptions, reset_runtime

log = logging.getLogger("subgate.server")


class ListenFailed(OSError):
    """A listener could not be opened; ``option`` and ``address`` name the one asked for (``--http``,
    ``127.0.0.1:8672``), so the error names that port, not another listener's."""

    def __init__(self, option: str, address: str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.option = option
        self.address = address


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
            matcher = compile_selector(record.selector)
            no_local_id = record.client_id if record.no_local else None  # drops its own ClientID's messages
            accepts = row_filter(no_local_id, matcher)
            selector = selector_address(record.topic)  # a durable subscription on a topic selector
            if selector is not None:
                sub = subscriptions.restore(record, selector, matcher)
                accepts = selected(selector, None, accepts)
            else:
                topic = router.node(record.topic)
                if not isinstance(topic, Topic):
                    topic = router.restore_topic(record.topic)
                sub = subscriptions.restore(record, topic, matcher)
            prefix = selector is not None
            count += sum(router.pager.recover(session, sub.queue, sub_cursor, upto, accepts, prefix=prefix))
    return count


class Server:
    """One running subgate (see the module docstring). ``run()`` blocks until stopped."""

    def __init__(
        self, settings: Settings, management: ManagementFactory | None = None, steps: StartupSteps | None = None
    ) -> None:
        self.settings = settings
        self.on_listening: Callable[[Server], None] | None = None  # told once the listeners are open (--ephemeral)
        self.steps = steps or StartupSteps(log)
        self.failure: str | None = None  # why the server stopped on its own (run() then returns 1)
        self.management = management  # the console's actions go through $management with it (gateway.console_feed)
        self.engine = make_engine(settings.store_url)
        self.sessions = session_factory(self.engine)
        # First of all: refuse a store another live server owns, before recovery rewrites its rows.
        self.ownership = StoreOwnership(self.sessions, settings.name, settings.listen_host, settings.listen_port)
        try:
            with self.steps.step("store lease"):
                self.ownership.claim()
        except BaseException:
            self.engine.dispose()
            raise
        self.http: MetricsEndpoint | None = None
        try:
            if settings.http:
                with self.steps.step("HTTP endpoint"):
                    self.http = _open_http(settings)
            self._assemble(settings)
        except BaseException:
            self.discard()
            raise

    def _assemble(self, settings: Settings) -> None:
        step = self.steps.step
        with step("catalog"), self.sessions() as session:
            catalog = load_catalog(session)
        self.container = Container()
        self.container.container_id = settings.name
        self.injector = EventInjector()
        with step("journal writer launch"):
            self.writer = self._journal_writer(settings)
        self.router = Router(settings, self.writer, catalog)
        self.subscriptions = Subscriptions(self.router, self.writer, self.router.pager, catalog.max_subscription_id)
        with step("recovery"):
            recovered = recover(self.router, self.subscriptions, self.sessions)
        if recovered:
            log.info("recovered %d unacknowledged messages from the journal", recovered)
        with step("broker set-up"):
            self._assemble_broker(settings)

    def _assemble_broker(self, settings: Settings) -> None:
        self.broker = Broker(settings, self.router, self.container, self.subscriptions, journal=self.writer)
        with self.sessions() as session:
            self.broker.restore_removals(list_removal_registrations(session), max_removal_registration_id(session))
        for node in self.router.all_nodes():
            self.broker.watch_node(node)
        for sub in self.subscriptions.named():
            self.broker.watch_schedule(sub.queue)
        self.policy_loader = PolicyLoader(self.sessions, self.injector)
        self.auth = Authenticator(
            self.sessions, self.injector, settings.allow_anonymous, self.policy_loader.publish_now
        )
        self.broker.use_policy(self.policy_loader.load_now(), self.policy_loader.refresh)
        self.io = _server_io(self.container, settings, self.auth, self.broker.lifecycle)
        if isinstance(self.writer, JournalProcess):
            self.io.before_wait = self.writer.flush  # a burst's writes go to the writer process in one frame
        else:
            self.writer.producer_idle = self.io.is_waiting  # the group commit stops gathering when the reactor waits
        # A flat handler and our own I/O handler: no MessagingHandler stack, no GlobalOverrides indirection.
        # Both are duck-typed handlers (on_* methods), not subclasses of proton's Handler.
        self.container.handler = self.broker  # type: ignore[assignment]
        self.container.global_handler = self.io  # type: ignore[assignment]
        self.container.selectable(self.injector)
        self.broker.when_stopped(self._stopped)
        self.fanout: FanoutClient | None = None
        if settings.fanout:  # a secondary: its client side runs in a thread of its own (docs/fanout.md)
            mailbox = Mailbox(self.injector)
            self.fanout = FanoutClient(settings.name, settings.fanout, mailbox.put)
            self.broker.fanout.connect(self.fanout, mailbox)
        self.metrics: MetricsFeed | None = None
        self.figures: FigureReader | None = None
        if self.http is not None:
            self.metrics = self._metrics_feed(self.http)
        self.address: tuple[str, int] | None = None
        self.tls_address: tuple[str, int] | None = None
        self._tls_context: ssl.SSLContext | None = None
        if settings.tls_listen:
            self._tls_context = server_context(
                settings.tls_cert, settings.tls_key, settings.tls_ca, settings.tls_verify_client
            )
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def _journal_writer(self, settings: Settings) -> JournalWriter | JournalProcess:
        """The writer process (``--journal-process``, the default), or the writer thread: asked for, or for a
        store only this process can open (in-memory SQLite)."""
        url = self.engine.url
        in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
        if settings.journal_process and not in_memory:
            writer = JournalProcess(settings.store_url, self._journal_done, on_lost=self._journal_lost)
            writer.launch()  # its start-up overlaps the recovery; run() waits until it is ready
            return writer
        return JournalWriter(self.engine, self._journal_done)

    def _journal_lost(self, reason: str) -> None:
        # The writer process's result thread: nothing can be journaled any more; stop (exit code 1).
        self.failure = reason
        self.request_stop()

    def _metrics_feed(self, http: MetricsEndpoint) -> MetricsFeed:
        """The reactor's snapshots, and the endpoint pointed at them and at the writer's figures."""
        broker, writer, housekeeping = self.broker, self.writer, self.broker.housekeeping
        # The store's figures on an engine of their own: never on the writer, whose commits would wait for them.
        figures = self.figures = FigureReader(make_engine(self.settings.store_url), self.router.pager.non_durable_after)
        console = ConsoleFeed(
            lambda: console_view(
                broker.server_admin,
                broker.pipeline.topic_admin,
                broker.connections.open,
                self.subscriptions.named(),
                figures.latest,
            )
        )
        feed = MetricsFeed(
            connections=lambda: len(broker.connections.open),
            links=broker.connections.links,
            nodes=self.router.all_nodes,
            duplicates=lambda: sum(broker.pipeline.marks.dropped.values()),
            lost=lambda: broker.pipeline.lost,
            missing_topic_outcomes=broker.control.outcomes,
            auth_failures=self.io.auth_failures,
            journal=writer,
            store_figures=lambda: figures.latest,
            schedule=housekeeping.schedule,
            stopping=lambda: housekeeping.stopping,
            top_n=self.settings.metrics_top_nodes,
            on_tick=console.tick,
            fanout=broker.fanout.status,
            memory=self.router.memory_limit.gauge.figures,
        )
        http.snapshot = lambda: feed.latest
        http.console.view = console.fresh
        rule = ThrottleRule(
            self.settings.login_free_failures, self.settings.login_delay, self.settings.login_delay_max,
            self.settings.login_failure_window,
        )  # fmt: skip
        http.console.read_access = ConsoleAccess(self.auth, lambda: broker.authority.policy, rule).verdict
        http.writer = lambda: WriterFigures(writer.commit_seconds.view(), writer.batch_sizes.view())
        http.health = lambda: writer.health
        return feed

    def _describe(self, host: str, port: int) -> None:
        """What ``$management`` type ``server`` reports about the process (``gateway.server_admin``)."""
        facts = self.broker.server_admin.facts
        facts.name = self.settings.name
        facts.store = self.engine.url.render_as_string(hide_password=True)
        facts.listen = f"{host}:{port}"
        if self.http is not None:
            facts.http = "{}:{}".format(*self.http.address)
            if self.management is not None:
                self.http.console.act = console_actions(
                    self.management, {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host), port
                )

    def _journal_done(self, result: BatchResult) -> None:
        # Writer thread: hand the result to the reactor thread.
        self.injector.trigger(ApplicationEvent("journal_committed", subject=result))

    def _stopped(self) -> None:
        if self.fanout is not None:
            self.fanout.stop()  # before the injector it delivers through is closed
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
        with self.steps.step("listen"):
            settings = self.settings
            try:
                self.address = self.io.listen(settings.listen_host, settings.listen_port)
            except OSError as exc:
                raise ListenFailed("--listen", f"{settings.listen_host}:{settings.listen_port}", exc) from exc
            if settings.tls_listen:
                host, _, port = settings.tls_listen.rpartition(":")
                try:
                    self.tls_address = self.io.listen(host.strip("[]") or "127.0.0.1", int(port), self._tls_context)
                except OSError as exc:
                    raise ListenFailed("--tls-listen", settings.tls_listen, exc) from exc
            self.ownership.set_address(*self.address)
        return self.address

    def discard(self) -> None:
        """Give the store back when the server stops before it ran (it could not listen, say)."""
        if self.http is not None:
            self.http.close()
        figures: FigureReader | None = getattr(self, "figures", None)  # absent when assembling failed early
        if figures is not None:
            figures.close()
        writer = getattr(self, "writer", None)  # absent when assembling failed before it
        if isinstance(writer, JournalProcess):
            writer.close(timeout=10)  # nothing was sent to it: it only ends
        self.ownership.close()
        self.engine.dispose()

    def run(self) -> int:
        if self.address is None:
            self.listen()
        self.io.watch_wakeup(self._wake_r, lambda: self.broker.begin_shutdown(self.io, flush=self.failure is None))
        with self.steps.step("journal writer ready (waited)"):
            self.writer.start()
        if isinstance(self.writer, JournalProcess) and self.writer.child_seconds is not None:
            self.steps.record("journal writer process (its own start, overlapped)", self.writer.child_seconds)
        self.ownership.start()
        self.broker.start_housekeeping()
        if self.fanout is not None:
            self.fanout.start()
        if self.metrics is not None:
            self.metrics.start()
        if self.figures is not None:
            self.figures.start()
        host, port = self.address  # type: ignore[misc]
        self._describe(host, port)
        if self.http is not None:
            self.http.ready = True  # recovery is over and the listener is open
        _explain_plain_text(self.settings)
        log.info("%s", self.steps.summary())
        if self.tls_address is not None:  # logged first: "listening on" is the line that says the server is up
            log.info("subgate %r accepting TLS on %s:%d", self.settings.name, *self.tls_address)
        log.info(
            "subgate %r listening on %s:%d (store %s)",
            self.settings.name,
            host,
            port,
            self.engine.url.render_as_string(hide_password=True),
        )
        if self.on_listening is not None:
            self.on_listening(self)
        try:
            EventLoop(self.container, self.broker, self.io).run()
        finally:
            if self.fanout is not None:
                self.fanout.stop()
            self.writer.close()
            if self.figures is not None:
                self.figures.close()
            self.auth.close()
            self.policy_loader.close()
            self.ownership.close()
            if self.http is not None:
                self.http.close()
            self.engine.dispose()
            log.info("subgate stopped (%d journal batches, %d rows)", self.writer.batches, self.writer.rows)
        return 1 if self.failure else 0


def _server_io(container: Container, settings: Settings, auth: Authenticator, hooks: FrameHooks) -> ServerIO:
    """The container's I/O handler with the settings' limits, transport rules, login throttle and frame checks."""
    return ServerIO(
        container,
        frame_hooks=hooks,
        authenticate=auth.submit,
        withdraw=auth.withdraw,
        configure_transport=_configure_transport(settings),
        limits=ConnectionLimits(
            max_connections=_connections_the_descriptors_allow(settings.max_connections),
            max_per_address=settings.max_connections_per_address,
            handshake_timeout=settings.handshake_timeout,
            frame_timeout=settings.frame_timeout,
        ),
        rules=TransportRules(settings.require_tls, settings.allow_plain_without_tls, settings.sasl_scram),
        throttle=LoginThrottle(
            ThrottleRule(
                settings.login_free_failures, settings.login_delay, settings.login_delay_max,
                settings.login_failure_window,
            )
        ),
    )  # fmt: skip


def _explain_plain_text(settings: Settings) -> None:
    """Say at start what the plain listener refuses to other hosts (engine.transport_policy)."""
    if is_loopback(settings.listen_host):
        return
    if settings.require_tls:
        where = f"the TLS listener {settings.tls_listen}" if settings.tls_listen else "no TLS listener (--tls-listen)"
        log.info("require-tls: plain-text connections from other hosts are refused; they have %s", where)
    elif not settings.allow_plain_without_tls:
        log.info("SASL PLAIN is offered on the plain listener to loopback clients only (allow-plain-without-tls)")


def _open_http(settings: Settings) -> MetricsEndpoint | None:
    """The endpoint of ``--http``, listening and serving (None when it is off)."""
    if not settings.http:
        return None
    host, _, port = settings.http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        limits = HttpLimits(
            threads=settings.http_threads,
            max_connections=settings.http_max_connections,
            idle_timeout=settings.http_idle_timeout,
            request_timeout=settings.http_request_timeout,
        )
        endpoint = MetricsEndpoint(host, int(port), settings.metrics_top_nodes, limits)
    except OSError as exc:
        raise ListenFailed("--http", settings.http, exc) from exc
    endpoint.start()
    return endpoint


# Descriptors kept for everything but connections: the store, the listener, the epoll, pipes, log files.
_RESERVED_DESCRIPTORS = 64


def _connections_the_descriptors_allow(wanted: int) -> int:
    """Raise the soft limit on open files to the hard one and return how many connections fit under it: a limit
    that the process cannot reach would end in failing accepts, not in a clear refusal."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + _RESERVED_DESCRIPTORS)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
    if soft == resource.RLIM_INFINITY or wanted + _RESERVED_DESCRIPTORS <= soft:
        return wanted
    fitting = max(1, soft - _RESERVED_DESCRIPTORS)
    log.warning(
        "max-connections %d lowered to %d: the process may open only %d files (ulimit -n)", wanted, fitting, soft
    )
    return fitting


def serve(
    settings: Settings,
    *,
    migrate: bool = False,
    management: ManagementFactory | None = None,
    on_listening: Callable[[Server], None] | None = None,
    schema_checked: bool = False,
) -> int:
    """Run a server until stopped; ``on_listening(server)`` once its listeners are open. ``schema_checked``: the
    caller has just created the schema itself (``storage.ephemeral``), so the Alembic check is skipped."""
    # The hot path calls proton-c directly (gateway.loop, gateway.links): should it ever crash, the log gets
    # every thread's Python stack.
    faulthandler.enable()
    # ``kill -USR1 PID`` writes every thread's stack to the log (a start-up that stalls: docs/operations.md).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    steps = StartupSteps(log)
    if not schema_checked:
        check_schema(settings.store_url, migrate=migrate, timed=steps.step)
    server = Server(settings, management, steps)
    server.on_listening = on_listening
    try:
        server.listen()
    except BaseException:
        server.discard()
        raise
    signal.signal(signal.SIGTERM, server.request_stop)
    signal.signal(signal.SIGINT, server.request_stop)
    return server.run()
