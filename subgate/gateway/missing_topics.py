"""Whether a subscribe or fetch notifies missing-topic handlers, here and on primaries (seed 000).

Owns the decision of who hears of a subscribe or fetch, on the reactor thread (docs/topics.md, docs/fanout.md):

* **local handlers** when the selector selects no topic on this server (and the subscriber has SELECT_TOPIC on
  its path prefix);
* **each primary** (``gateway.fanout_mirror``'s ``upstream``: seed 000's conditions 1 to 3 on this side: a
  session to the primary, the selector intersects the fan-out link's on path prefixes, no topic replicated
  over that link matches both).

Both kinds are asked through ``TopicControl.hold``, which waits for every answer; any cancel refuses the attach.
A notification propagated *to* this server (``propagated``: a ``PropagationLink`` transfer) is decided by the
same rules as a local attach, with seed 000's conditions 4 and 5: nothing to notify when a topic here matches
the selector, and the fan-out principal needs SELECT_TOPIC on the selector's path prefix (else the transfer is
rejected with ``amqp:unauthorized-access`` and the secondary proceeds). The answer is the transfer's
settlement: accepted = proceed, rejected with ``amqp:not-found`` = cancel. A primary that is itself a
secondary passes the notification on up (tiers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from proton import Delivery, Link
from proton import Message as ProtonMessage

from subgate.engine.repeats import ATTACH_REFUSED
from subgate.engine.topic_space import fetch_selector
from subgate.gateway.authority import Authority
from subgate.gateway.fanout_feed import PropagationLink
from subgate.gateway.links import ConnectionState, accept, reject
from subgate.gateway.router import Router
from subgate.gateway.termini import refuse_attach
from subgate.gateway.topic_control import FETCH, SUBSCRIBE, TopicControl, Upstream
from subgate.mapping.errors import DECODE_ERROR, NOT_FOUND, Refused
from subgate.mapping.permissions import Permission
from subgate.topics import Selector

log = logging.getLogger("subgate.missing_topics")


class Primaries(Protocol):
    """The fan-out links of this server as the notification flow sees them (``gateway.fanout_mirror``)."""

    @property
    def configured(self) -> bool: ...

    def upstream(self, selector: Selector) -> tuple[Upstream, ...]: ...


class MissingTopics:
    """Holds attaches (and propagated notifications) for the handlers here and on primaries (module docstring)."""

    def __init__(self, router: Router, authority: Authority, control: TopicControl, primaries: Primaries) -> None:
        self.router = router
        self.authority = authority
        self.control = control
        self.primaries = primaries

    @property
    def has_primaries(self) -> bool:
        """Whether this server has fan-out links at all (without them only local handlers are ever asked)."""
        return self.primaries.configured

    # -- a subscribe or fetch on this server -----------------------------------------------------------------
    def hold_attach(
        self,
        link: Link,
        state: ConnectionState,
        selector: Selector,
        missing: bool,
        fetch: bool,
        resume: Callable[[], None],
        release: Callable[[], None],
    ) -> bool:
        """Notify who should hear of this subscribe or fetch (``missing``: it selects no topic here) and hold the
        attach until they answer: then ``resume``, or ``release`` and refuse it. Returns False when nobody is
        asked: the attach goes ahead now.

        Raises:
            Refused: amqp:unauthorized-access when the subscriber lacks SELECT_TOPIC on the selector's prefix.
        """
        upstream = self.primaries.upstream(selector)
        if not missing and not upstream:
            return False
        self.authority.check(state, Permission.SELECT_TOPIC, selector.prefix)
        request = FETCH if fetch else SUBSCRIBE

        def cancel(path: str) -> None:
            release()
            description = f"no topic matches {selector.expression!r}: the missing-topic handler on {path!r} cancelled"
            log.info(
                "refused %s %r from %s: %s", request, link.name, state.container_id, description,
                extra=ATTACH_REFUSED,
            )  # fmt: skip
            refuse_attach(link, NOT_FOUND, description)

        held = self.control.hold(link, state, selector, request, resume, cancel, local=missing, upstream=upstream)
        if held is None:
            return False
        state.adopt(held)
        return True

    # -- a notification a secondary propagated here ----------------------------------------------------------
    def propagated(self, link: PropagationLink, delivery: Delivery, raw: bytes) -> None:
        """Decide one propagated notification and answer it by settling ``delivery``."""
        state = link.conn
        try:
            message = ProtonMessage()
            message.decode(raw)
            props: dict[str, object] = message.properties or {}
            expression, request = str(props["selector"]), str(props.get("request", SUBSCRIBE))
            session, origin = str(props.get("session", "")), str(props.get("server", state.container_id))
            selector = fetch_selector(expression)
        except Exception as exc:  # noqa: BLE001 - whatever the peer sent (no selector, a bad one), answered here
            reject(delivery, DECODE_ERROR, f"not a propagated missing-topic notification: {exc}")
            return
        what = f"{request} {expression!r} by {session!r} via {state.container_id!r}"
        try:
            self.authority.check(state, Permission.SELECT_TOPIC, selector.prefix)
        except Refused as refusal:
            log.warning("fan-out: refused the propagated %s: %s", what, refusal.description)
            reject(delivery, refusal.condition, refusal.description)
            return
        if self.router.topics.selects_any(selector):
            log.info("fan-out: propagated %s: topics match here, nothing to notify", what)
            accept(delivery)
            return
        held = self.control.hold(
            link.link,
            state,
            selector,
            request,
            resume=lambda: self._answer(link, delivery, None),
            cancel=lambda path: self._answer(link, delivery, path),
            upstream=self.primaries.upstream(selector),
            propagated=(session, origin),
        )
        if held is None:
            log.info("fan-out: propagated %s: no handler registered for it", what)
            accept(delivery)

    def _answer(self, link: PropagationLink, delivery: Delivery, cancelled_by: str | None) -> None:
        if link.closed or delivery.settled:
            return  # the secondary is gone: it proceeded when its session was lost
        if cancelled_by is None:
            accept(delivery)
        else:
            reject(delivery, NOT_FOUND, f"the missing-topic handler on {cancelled_by!r} cancelled")
