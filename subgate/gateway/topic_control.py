"""The topic tree's control links: remove-with-session registrations and missing-topic handlers.

Owns, on the reactor thread, the two control contracts of design.md §3 (seeds 000 and 001):

* ``$subgate/remove-with-session/<branch>``: a client's *sending* link to this target is a registration
  (``RemovalLink``). The rules are ``topics.RemovalRegistry``'s; this module feeds it link and connection ends,
  runs the reconnection-grace timers of lost connections and asks the broker to remove the branches it returns.
* ``$subgate/missing-topic/<branch>``: a client's *receiving* link from this source registers a handler
  (``HandlerLink``). A subscribe or fetch whose selector selects no topic is held (``HeldAttach``) while the
  handlers ``topics.MissingTopicHandlers`` chooses decide: each gets one notification message and answers by
  settling it (``accepted`` = proceed, ``rejected`` = cancel). When the last one has answered, or its link is
  gone, or the timeout passes, the attach resumes; any cancel refuses it with ``amqp:not-found``.

It removes no topic and opens no consumer itself: the broker hands in ``remove_branch`` and each held attach
carries its own ``resume``/``cancel`` callbacks. Time comes from ``clock`` (monotonic seconds) and timers from
``schedule``, so the rules stay testable.

Registrations are also kept in the store (``RemovalJournal``: a row per open registration, written through the
journal writer), so that a server crash does not leave a session's branch behind for ever: at start-up each
stored registration is treated as held by a connection lost at that moment (``restore``), so its branch is
removed after the reconnection timeout unless a client with the same container-id re-attaches the same link
name first. A row goes when its registration ends: deregistered, its connection closed, its grace over.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Protocol

from proton import Delivery, Link
from proton import Message as ProtonMessage

from subgate.gateway.links import ConnectionState, LinkState, reject
from subgate.mapping.errors import INVALID_FIELD, NOT_ALLOWED, NOT_FOUND, Refused
from subgate.mapping.store_values import check_registration
from subgate.storage.removals import RemovalRecord
from subgate.topics import MissingTopicHandlers, Registration, RemovalRegistry, Selector, TopicsError, validate_path

log = logging.getLogger("subgate.topic_control")

REMOVAL_PREFIX = "$subgate/remove-with-session/"
HANDLER_PREFIX = "$subgate/missing-topic/"

SUBSCRIBE = "subscribe"
FETCH = "fetch"


def control_branch(address: str, prefix: str, expected: str) -> str:
    """The branch path a ``$subgate/`` address names after ``prefix``.

    Raises:
        Refused: amqp:not-found when the address does not start with ``prefix`` (no such control node, or one
            for the other link direction: ``expected`` says which); amqp:invalid-field when the rest is not a
            valid topic path.
    """
    if not address.startswith(prefix):
        raise Refused(NOT_FOUND, f"no control node at {address!r} for this link ({expected}; see docs/topics.md)")
    branch = address[len(prefix) :]
    try:
        return validate_path(branch)
    except TopicsError as exc:
        raise Refused(INVALID_FIELD, f"{prefix}<branch>: {exc}") from None


def removal_branch(address: str) -> str:
    """The branch a remove-with-session target names (see ``control_branch`` for the refusals)."""
    return control_branch(address, REMOVAL_PREFIX, "remove-with-session registrations are sending links")


def handler_path(address: str) -> str:
    """The branch a missing-topic handler source names; ``$subgate/missing-topic`` (or ``.../``) is the root
    (see ``control_branch`` for the refusals)."""
    if address in (HANDLER_PREFIX, HANDLER_PREFIX.rstrip("/")):
        return ""
    return control_branch(address, HANDLER_PREFIX, "missing-topic handlers are receiving links")


class RemovalLink(LinkState):
    """A remove-with-session registration: the client's open sending link to ``$subgate/remove-with-session/..``.
    It carries no messages; its end deregisters."""

    __slots__ = ("registration", "control")

    def __init__(
        self, link: Link, conn: ConnectionState, registration: Registration[Owner], control: TopicControl
    ) -> None:
        super().__init__(link, conn)
        self.registration = registration
        self.control = control

    def on_delivery(self, delivery: Delivery) -> None:
        if delivery.readable and not delivery.partial:
            self.link.recv(delivery.pending)
            self.link.advance()
            reject(delivery, NOT_ALLOWED, "a remove-with-session registration link carries no messages")

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.control.removal_ended(self)


class Notice:
    """One notification sent (or waiting to be sent) to one handler on behalf of one held attach; ``handler`` is
    None for a notification propagated to a primary over a fan-out link (``path`` then names the link)."""

    __slots__ = ("held", "handler", "path", "answered")

    def __init__(self, held: HeldAttach, handler: HandlerLink | None, path: str) -> None:
        self.held = held
        self.handler = handler
        self.path = path
        self.answered = False


def _same_request(a: Registration[Owner], b: Registration[Owner]) -> bool:
    """Whether ``b`` re-attaches ``a`` (the take-over of rule 5: same branch, container-id and link name)."""
    return a.container_id is not None and (a.branch, a.container_id, a.name) == (b.branch, b.container_id, b.name)


class HandlerLink(LinkState):
    """A missing-topic handler: the client's receiving link from ``$subgate/missing-topic/<path>``."""

    __slots__ = ("path", "control", "waiting", "unsettled", "_tag")

    def __init__(self, link: Link, conn: ConnectionState, path: str, control: TopicControl) -> None:
        super().__init__(link, conn)
        self.path = path
        self.control = control
        self.waiting: deque[Notice] = deque()  # notifications waiting for credit
        self.unsettled: dict[str, Notice] = {}
        self._tag = 0

    def send(self, notice: Notice, body: bytes) -> None:
        self._tag += 1
        tag = f"n{self._tag}"
        self.link.delivery(tag)
        self.link.send(body)
        self.link.advance()
        self.unsettled[tag] = notice

    def on_delivery(self, delivery: Delivery) -> None:
        self.control.handler_settled(self, delivery)

    def on_flow(self) -> None:
        self.control.handler_flow(self)

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.control.handler_ended(self)


class HeldAttach(LinkState):
    """A subscribe or fetch attach waiting for the handlers it notified."""

    __slots__ = ("selector", "request", "control", "outstanding", "cancelled_by", "done", "session", "origin")

    def __init__(self, link: Link, conn: ConnectionState, selector: str, request: str, control: TopicControl) -> None:
        super().__init__(link, conn)
        self.control = control
        self.selector = selector
        self.request = request
        self.session = conn.container_id  # the subscriber's container-id (a propagated one: the first server's)
        self.origin = control.server_name  # the server the subscribe or fetch reached first
        self.outstanding: list[Notice] = []
        self.cancelled_by: str | None = None  # the handler path that answered cancel
        self.done = False  # closed: the client detached before an answer

    def on_end(self, *, abrupt: bool, closed: bool) -> None:
        self.control.held_ended(self)


class Upstream(Protocol):
    """A fan-out link a notification is propagated over (``gateway.fanout_mirror``; answers with ``answer``)."""

    label: str

    def ask(self, notice: Notice) -> None: ...


class RemovalJournal(Protocol):
    """Where registrations are recorded (the journal writer)."""

    def submit_removal_registration(
        self, row_id: int, branch: str, container_id: str | None, link_name: str
    ) -> None: ...

    def submit_drop_removal_registration(self, row_id: int) -> None: ...


class PreviousRun:
    """Stands for a connection of an earlier run of the server whose registration was read from the store."""

    __slots__ = ("container_id",)

    def __init__(self, container_id: str | None) -> None:
        self.container_id = container_id or ""


Owner = ConnectionState | PreviousRun  # who holds a remove-with-session registration


class TopicControl:
    """Remove-with-session registrations and missing-topic handlers of one server (module docstring)."""

    def __init__(
        self,
        server_name: str,
        reconnect_timeout: float,
        handler_timeout: float,
        schedule: Callable[[float, Callable[[], None]], None],
        remove_branch: Callable[[str], object],
        clock: Callable[[], float] = time.monotonic,
        journal: RemovalJournal | None = None,
    ) -> None:
        self.server_name = server_name
        self.reconnect_timeout = reconnect_timeout
        self.handler_timeout = handler_timeout
        self._schedule = schedule
        self._remove_branch = remove_branch
        self._clock = clock
        self.removals: RemovalRegistry[Owner] = RemovalRegistry()
        self.handlers: MissingTopicHandlers[HandlerLink] = MissingTopicHandlers()
        self._resumes: dict[int, tuple[Callable[[], None], Callable[[str], None]]] = {}
        self.journal = journal
        self._rows: dict[Registration[Owner], int] = {}  # registration the registry holds -> its row in the store
        self._next_row = 0
        self.outcomes: Counter[str] = Counter()  # missing-topic notifications: proceed, cancel, timeout (/metrics)

    def restore(self, records: list[RemovalRecord], next_row: int) -> None:
        """Registrations stored by an earlier run (storage.removals.RemovalRecord): each waits the reconnection
        timeout as if its connection had just been lost."""
        self._next_row = max(self._next_row, next_row)
        by_container: dict[str | None, PreviousRun] = {}
        owners: list[PreviousRun] = []
        for record in records:
            owner = by_container.get(record.container_id) if record.container_id else None
            if owner is None:
                owner = PreviousRun(record.container_id)
                owners.append(owner)
                if record.container_id:
                    by_container[record.container_id] = owner
            try:
                registration = self.removals.register(record.branch, owner, record.container_id, record.link_name)
            except TopicsError as exc:
                log.warning("dropping stored remove-with-session registration %r: %s", record.branch, exc)
                self._forget(record.id)
                continue
            self._rows[registration] = record.id
            log.info("restored remove-with-session registration on %r of %r", record.branch, record.container_id)
        for owner in owners:
            self.connection_ended(owner, abrupt=True)

    def _held(self, registration: Registration[Owner]) -> bool:
        return registration in self.removals.registrations(registration.branch)

    def _persist(self, registration: Registration[Owner]) -> None:
        if registration in self._rows:
            return  # the same registration again: one row
        taken_over = next((old for old in self._rows if _same_request(old, registration) and not self._held(old)), None)
        if taken_over is not None:  # the registry let this one replace a lost one: its row now stands for it
            self._rows[registration] = self._rows.pop(taken_over)
            return
        self._next_row += 1
        self._rows[registration] = self._next_row
        if self.journal is not None:
            self.journal.submit_removal_registration(
                self._next_row, registration.branch, registration.container_id, registration.name or ""
            )

    def _drop_released_rows(self) -> None:
        """Forget the rows of registrations the registry no longer holds (deregistered, connection closed,
        grace over)."""
        for registration in [r for r in self._rows if not self._held(r)]:
            self._forget(self._rows.pop(registration))

    def _forget(self, row: int) -> None:
        if self.journal is not None:
            self.journal.submit_drop_removal_registration(row)

    # -- remove-with-session -------------------------------------------------------------------------------
    def register_removal(self, link: Link, conn: ConnectionState, branch: str) -> RemovalLink:
        """Register ``branch`` for removal when ``conn`` ends.

        Raises:
            Refused: amqp:precondition-failed when a registration sits strictly above or below ``branch``;
                amqp:invalid-field for a container-id or link name the store cannot keep (``mapping.store_values``).
        """
        check_registration(conn.container_id, link.name or "")
        try:
            registration = self.removals.register(branch, conn, conn.container_id or None, link.name)
        except TopicsError as exc:
            raise Refused(exc.condition, exc.description) from None
        self._persist(registration)
        log.info("remove-with-session registered on %r by %r", branch, conn.container_id)
        return RemovalLink(link, conn, registration, self)

    def removal_ended(self, removal: RemovalLink) -> None:
        """The registration link ended while its connection lives on: deregister, remove nothing."""
        if self.removals.deregister(removal.registration):
            self._drop_released_rows()
            log.info("remove-with-session deregistered on %r", removal.registration.branch)

    def connection_ended(self, conn: Owner, *, abrupt: bool) -> None:
        """A connection closed (``abrupt=False``) or was lost: remove its branches now or after the grace."""
        closure = self.removals.connection_closed(conn, self._clock(), abrupt, self.reconnect_timeout)
        self._drop_released_rows()
        for branch in closure.remove:
            self._removing(branch, "its last registered connection closed")
        if closure.pending is not None:
            delay = closure.pending.deadline - self._clock()
            log.info(
                "connection %r lost: removal of %s waits %.1f s for a reconnect",
                conn.container_id,
                ", ".join(repr(b) for b in closure.pending.branches),
                delay,
            )
            self._schedule(delay, self._grace_ended)

    def _grace_ended(self) -> None:
        now = self._clock()
        due = self.removals.due(now)
        self._drop_released_rows()
        for branch in due:
            self._removing(branch, "the reconnection timeout of its last registered connection passed")
        following = self.removals.next_deadline()
        if following is not None:  # a timer may fire early (the reactor's clock is not ours): look again then
            self._schedule(max(following - now, 0.05), self._grace_ended)

    def _removing(self, branch: str, why: str) -> None:
        log.info("removing topic branch %r: %s", branch, why, extra={"event": "topic-removed", "topic": branch})
        self._remove_branch(branch)

    # -- missing-topic handlers ----------------------------------------------------------------------------
    def register_handler(self, link: Link, conn: ConnectionState, path: str) -> HandlerLink:
        """Register a handler on ``path``.

        Raises:
            Refused: amqp:invalid-field when the link would receive notifications pre-settled (the answer is
                the settlement).
        """
        if link.remote_snd_settle_mode == Link.SND_SETTLED:
            raise Refused(INVALID_FIELD, "a missing-topic handler answers by settling: attach with unsettled sends")
        handler = HandlerLink(link, conn, path, self)
        self.handlers.register(path, handler)
        log.info("missing-topic handler registered on %r by %r", path, conn.container_id)
        return handler

    def handler_ended(self, handler: HandlerLink) -> None:
        """A handler's link ended: deregister it; what it has not answered counts as proceed."""
        self.handlers.deregister(handler.path, handler)
        pending = list(handler.unsettled.values()) + list(handler.waiting)
        handler.unsettled.clear()
        handler.waiting.clear()
        for notice in pending:
            self.answer(notice, proceed=True, why="handler gone")

    def handler_flow(self, handler: HandlerLink) -> None:
        """Credit arrived: send the notifications that were waiting for it."""
        while handler.waiting and handler.link.credit > 0:
            notice = handler.waiting.popleft()
            if not notice.answered:
                handler.send(notice, self._notification(notice))

    def handler_settled(self, handler: HandlerLink, delivery: Delivery) -> None:
        """The handler settled a notification: ``accepted`` proceeds, ``rejected`` cancels; other outcomes
        (released, modified) say the handler did not decide, which counts as proceed."""
        remote = delivery.remote_state
        if not remote and not delivery.settled:
            return
        notice = handler.unsettled.pop(delivery.tag, None)
        delivery.settle()
        if notice is not None:
            cancel = remote == Delivery.REJECTED
            self.answer(notice, proceed=not cancel, why="rejected" if cancel else "answered")

    def hold(
        self,
        link: Link,
        conn: ConnectionState,
        selector: Selector,
        request: str,
        resume: Callable[[], None],
        cancel: Callable[[str], None],
        *,
        local: bool = True,
        upstream: tuple[Upstream, ...] = (),
        propagated: tuple[str, str] | None = None,
    ) -> HeldAttach | None:
        """Notify the handlers for ``selector`` (``local``: it selected no topic here) and the primaries of the
        ``upstream`` fan-out links, and hold the attach until they answer. ``propagated`` is (session, server)
        of a notification a secondary propagated here.

        Returns None when no handler is registered for it and no link is asked: the attach goes ahead at once.
        """
        chosen = self.handlers.choose(selector) if local else []
        if not chosen and not upstream:
            return None
        held = HeldAttach(link, conn, selector.expression, request, self)
        if propagated is not None:
            held.session, held.origin = propagated
        self._resumes[id(held)] = (resume, cancel)
        for link_up in upstream:
            notice = Notice(held, None, link_up.label)
            held.outstanding.append(notice)
            link_up.ask(notice)
        for notification in chosen:
            notice = Notice(held, notification.handler, notification.path)
            held.outstanding.append(notice)
            log.info(
                "missing topic: %s %r by %r notifies the handler on %r",
                request,
                held.selector,
                conn.container_id,
                notification.path,
                extra={"event": "missing-topic-notification", "selector": held.selector,
                       "container_id": conn.container_id, "handler": notification.path},
            )  # fmt: skip
            handler = notification.handler
            if handler.link.credit > 0 and not handler.waiting:
                handler.send(notice, self._notification(notice))
            else:
                handler.waiting.append(notice)
        self._schedule(self.handler_timeout, lambda: self._timed_out(held))
        return held

    def held_ended(self, held: HeldAttach) -> None:
        """The client gave up on a held attach (detached it): the answers no longer matter."""
        held.closed = True
        self._finish(held)

    def _timed_out(self, held: HeldAttach) -> None:
        if held.done:
            return
        silent = [notice.path for notice in held.outstanding if not notice.answered]
        self.outcomes["timeout"] += len(silent)
        log.info(
            "missing-topic handlers on %s silent for %.1f s: proceeding",
            silent,
            self.handler_timeout,
            extra={"event": "missing-topic-outcome", "outcome": "timeout", "handlers": silent},
        )
        for notice in held.outstanding:
            notice.answered = True
        self._settle_held(held)

    def answer(self, notice: Notice, *, proceed: bool, why: str) -> None:
        """A handler (or, over a fan-out link, a primary) answered a notification."""
        if notice.answered:
            return
        notice.answered = True
        self.outcomes["proceed" if proceed else "cancel"] += 1
        held = notice.held
        outcome = "proceed" if proceed else "cancel"
        log.info(
            "missing-topic handler on %r: %s (%s)",
            notice.path,
            outcome,
            why,
            extra={"event": "missing-topic-outcome", "outcome": outcome, "handler": notice.path},
        )
        if not proceed and held.cancelled_by is None:
            held.cancelled_by = notice.path
        if all(n.answered for n in held.outstanding):
            self._settle_held(held)

    def _settle_held(self, held: HeldAttach) -> None:
        if held.done:
            return
        callbacks = self._finish(held)
        if callbacks is None or held.closed:
            return
        resume, cancel = callbacks
        if held.cancelled_by is not None:
            cancel(held.cancelled_by)
        else:
            resume()

    def _finish(self, held: HeldAttach) -> tuple[Callable[[], None], Callable[[str], None]] | None:
        held.done = True
        for notice in held.outstanding:
            notice.answered = True
        return self._resumes.pop(id(held), None)

    def _notification(self, notice: Notice) -> bytes:
        held = notice.held
        message = ProtonMessage(
            id=str(uuid.uuid4()),
            subject="missing-topic",
            properties={
                "selector": held.selector,
                "session": held.session,
                "request": held.request,
                "server": held.origin,
                "path": notice.path,
            },
        )
        return bytes(message.encode())
