"""Attaches: which link kind a peer's attach makes, on which node, and the answer.

Owns the attach of every link kind (publisher, coordinator, $management, remove-with-session registration,
missing-topic handler, queue consumer, topic subscription consumer, selector consumer, fetch, browser of a queue
or of a subscription's queue, unsubscribe lookup), the authorisation each asks for (``gateway.authority``), the
temporary nodes a dynamic terminus creates, and the attaches held while missing-topic handlers decide
(``gateway.topic_control``). ``Refused`` and ``TopicsError`` are turned into the refused attach in one place,
``attach``. Each link state made here joins its connection through ``ConnectionState.adopt``.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from proton import Link

from subgate.engine.fanout import PROPAGATION_ADDRESS, REPLICATE, REPLICATE_BATCH, check_local_change
from subgate.engine.nodes import Queue, Topic
from subgate.engine.repeats import ATTACH_REFUSED
from subgate.engine.selection import compile_selector
from subgate.engine.topic_space import TopicsError, fetch_selector, selector_address
from subgate.gateway import management
from subgate.gateway.authority import Authority
from subgate.gateway.consumers import (
    BrowserConsumer,
    Closer,
    FetchConsumer,
    QueueConsumer,
    SelectorConsumer,
    SubscriptionConsumer,
    on_bytes,
    take_early_credit,
)
from subgate.gateway.fanout_feed import ReplicationFeeds, open_propagation
from subgate.gateway.housekeeping import Housekeeping
from subgate.gateway.links import ConnectionState, LinkState, Lookup, Outbound
from subgate.gateway.missing_topics import MissingTopics
from subgate.gateway.peer_fields import peer_text
from subgate.gateway.publish import Publishing
from subgate.gateway.replay import Placed, Replays
from subgate.gateway.router import Router
from subgate.gateway.settings import Settings
from subgate.gateway.subscriptions import Subscriptions, subscription_filter
from subgate.gateway.termini import (
    TerminusRequest,
    accept_attach,
    accept_consumer,
    answer_lookup,
    read_terminus,
    refuse_attach,
)
from subgate.gateway.topic_control import TopicControl, handler_path, removal_branch
from subgate.mapping.addresses import (
    QUEUE,
    TEMPORARY_PREFIX,
    TOPIC,
    dynamic_kind,
    kind_from_capabilities,
    split_fqqn,
    temporary_address,
)
from subgate.mapping.bookmarks import ReplayRequest, Start
from subgate.mapping.errors import DECODE_ERROR, INTERNAL_ERROR, INVALID_FIELD, NOT_FOUND, NOT_IMPLEMENTED, Refused
from subgate.mapping.filters import FilterRequest, read_filters
from subgate.mapping.names import CONTROL_PREFIX, bounded, check_link_name, check_selector, check_terminus, split_prefix
from subgate.mapping.permissions import Permission
from subgate.mapping.selectors import SelectorError
from subgate.mapping.subscriptions import (
    Action,
    Details,
    SubscribeRequest,
    decide_lookup,
    decide_subscribe,
    key_for,
    lookup_key,
    lookup_source_capabilities,
)
from subgate.mapping.wildcards import check_address
from subgate.topics import Selector, is_valid_path

log = logging.getLogger("subgate.broker")

LIVE = "live"  # source capability: messages before their commit (AMPS's live option, design.md §2)

Node = Queue | Topic


def _compile(selector: str | None) -> Callable[[bytes], bool] | None:
    try:
        return compile_selector(selector)
    except SelectorError as exc:
        shown = bounded(selector or "", 80)  # the reason must fit the description, whatever the selector's length
        raise Refused(INVALID_FIELD, f"invalid JMS selector {shown!r}: {exc}") from None


class Attacher:
    """The attach handler (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        authority: Authority,
        subscriptions: Subscriptions,
        control: TopicControl,
        pipeline: Publishing,
        housekeeping: Housekeeping,
        closer: Closer,
        replays: Replays,
        feeds: ReplicationFeeds,
        missing_topics: MissingTopics,
    ) -> None:
        self.feeds = feeds
        self.missing_topics = missing_topics
        self.settings = settings
        self.replays = replays
        self.router = router
        self.authority = authority
        self.subscriptions = subscriptions
        self.control = control
        self.pipeline = pipeline
        self.housekeeping = housekeeping
        self.closer = closer
        self.transacting = pipeline.transacting

    def attach(self, link: Link, state: ConnectionState, *, consult_handlers: bool = True) -> None:
        """The peer attached ``link``: open our side as the link kind it asks for, or refuse it."""
        try:
            # A name that is not text is refused like any other attach: proton echoes the name it holds as
            # bytes, so the refusal needs no decoded copy of it.
            check_link_name(peer_text("attach name", lambda: link.name) or "")
            if link.is_receiver:
                self._open_publisher(link, state)
            else:
                self._open_consumer(link, state, consult_handlers=consult_handlers)
        except Refused as refusal:
            log.info("refused attach from %s: %s", state.container_id, refusal.description, extra=ATTACH_REFUSED)
            refuse_attach(link, refusal.condition, refusal.description)
        except TopicsError as exc:
            description = f"invalid topic selector: {exc}"
            log.info("refused attach from %s: %s", state.container_id, description, extra=ATTACH_REFUSED)
            refuse_attach(link, INVALID_FIELD, description)
        except UnicodeDecodeError:  # a field of the attach that is not text, read where nobody expected it
            log.info("refused attach from %s: a field is not valid text", state.container_id, extra=ATTACH_REFUSED)
            refuse_attach(link, DECODE_ERROR, "a field of the attach is not valid text")
        except Exception:
            log.exception("attach %r failed", link.name)
            refuse_attach(link, INTERNAL_ERROR, "internal error while attaching")

    # -- our receivers ---------------------------------------------------------------------------------------
    def _open_publisher(self, link: Link, state: ConnectionState) -> None:
        target = self._unprefixed(peer_text("attach target", lambda: read_terminus(link.remote_target)))
        check_terminus(target.address, len(target.capabilities))
        if target.coordinator:
            coordinator = self.pipeline.open_coordinator(link, state)
            state.adopt(coordinator)
            accept_attach(link)
            self.pipeline.start_coordinator(coordinator)
            return
        address = target.address or ""
        if address == PROPAGATION_ADDRESS:  # a secondary's propagated missing-topic notifications (docs/fanout.md)
            open_propagation(link, state, self.missing_topics)
            return
        if address.startswith(CONTROL_PREFIX):
            self._open_removal(link, state, address)
            return
        node = None
        service = address == management.ADDRESS
        if service:
            self.authority.check(state, Permission.CONTROL_SERVER)
        if target.dynamic:
            node = self._create_temporary(target, state)
        elif target.present and address and not service:
            node = self._node(state, address, target.capabilities, Permission.UPDATE_TOPIC)
        inbound = self.pipeline.open_publisher(link, state, node, service=service)
        if target.dynamic and node is not None:
            inbound.owns = node.name
        state.adopt(inbound)
        link.max_message_size = self.settings.max_message_size
        accept_attach(link, node.name if target.dynamic and node is not None else None)
        inbound.top_up()  # the whole window

    def _node(self, state: ConnectionState, address: str, capabilities: frozenset[str], permission: Permission) -> Node:
        """The node an attach names (created when the rules allow), once the connection may use it so."""
        decision = self.router.decide(address, kind_from_capabilities(capabilities))
        if permission is Permission.READ_TOPIC and decision.kind == TOPIC and not address.startswith(TEMPORARY_PREFIX):
            self.authority.check(state, Permission.SELECT_TOPIC, address)
        self.authority.check_node(state, permission, decision)
        node = self.router.node_for(decision, state.topics)
        if permission is Permission.UPDATE_TOPIC:
            check_local_change(node, "published to")
        self.housekeeping.watch_node(node)
        return node

    def _open_removal(self, link: Link, state: ConnectionState, address: str) -> None:
        """A remove-with-session registration (design §3): the open link is the registration; no credit."""
        branch = removal_branch(address)
        self.authority.check(state, Permission.MODIFY_TOPIC, branch)
        state.adopt(self.control.register_removal(link, state, branch))
        accept_attach(link)

    # -- our senders -----------------------------------------------------------------------------------------
    def _open_handler(self, link: Link, state: ConnectionState, address: str) -> None:
        """A missing-topic handler registration (design §3): notifications are sent on this link."""
        path = handler_path(address)
        self.authority.check(state, Permission.REGISTER_HANDLER)
        state.adopt(self.control.register_handler(link, state, path))
        accept_attach(link)

    def _open_consumer(self, link: Link, state: ConnectionState, *, consult_handlers: bool) -> None:
        source = self._unprefixed(peer_text("attach source", lambda: read_terminus(link.remote_source)))
        if not source.present:
            self._open_lookup(link, state)
            return
        check_terminus(source.address, len(source.capabilities))
        address = source.address or ""
        if address.startswith(CONTROL_PREFIX):
            self._open_handler(link, state, address)
            return
        if REPLICATE in source.capabilities:  # a secondary's fan-out link (gateway.fanout_feed)
            replicated = fetch_selector(address)
            self.authority.check(state, Permission.SELECT_TOPIC, replicated.prefix)
            batched = REPLICATE_BATCH in source.capabilities  # the secondary reads batch transfers
            self.feeds.open(link, state, replicated, self.authority.readable(state), batched)
            return
        filters = read_filters(source.filters)
        check_selector(filters.selector, self.settings.max_selector_length)
        fqqn = None if source.dynamic else split_fqqn(address)
        if fqqn is not None:
            self._open_subscription_browser(link, state, source, fqqn, filters)
            return
        if not source.dynamic and address and kind_from_capabilities(source.capabilities) != QUEUE:
            fetch = "fetch" in source.capabilities
            wildcards, delimiter = self.settings.artemis_wildcards, self.settings.wildcard_delimiter
            address = check_address(address, translate=wildcards, delimiter=delimiter)  # news.# (mapping.wildcards)
            # An invalid selector raises TopicsError: ``attach`` refuses it as invalid-field.
            selector = fetch_selector(address) if fetch else selector_address(address)
            if consult_handlers and self._hold_if_missing(link, state, source, selector, fetch):
                return
            if fetch:
                self._open_fetch(link, state, selector)
                return
            if selector is not None:
                self._open_selector_consumer(link, state, source, selector, filters)
                return
        if source.dynamic:
            node = self._create_temporary(source, state)
        elif not address:
            raise Refused(INVALID_FIELD, "a source address is required")
        else:
            node = self._node(state, address, source.capabilities, Permission.READ_TOPIC)
        self._open_node_consumer(link, state, source, node, filters)

    def _open_node_consumer(
        self, link: Link, state: ConnectionState, source: TerminusRequest, node: Node, filters: FilterRequest
    ) -> None:
        """A consumer of a topic (its subscription), of a queue, or a browser of a queue."""
        matcher = _compile(filters.selector)
        outbound: Outbound
        replay_echo = None
        if isinstance(node, Topic):
            subscribed = self._subscribe(link, state, source, node, filters, matcher)
            if subscribed is None:
                return  # held while the journal places its replay (gateway.replay)
            outbound, replayed = subscribed
            no_local = filters.no_local
            if replayed:
                replay_echo = filters.replay_echo
        else:
            if source.distribution_mode == 1:  # copy on a queue means browse (mapping §2.2)
                outbound = BrowserConsumer(link, state, node, on_bytes(matcher), self.closer, self.transacting)
            else:
                outbound = QueueConsumer(link, state, node, self.transacting)
                outbound.filter = on_bytes(matcher)
                node.add_consumer(outbound)
            no_local = False  # no-local applies to topics only
        if source.dynamic:
            outbound.owns = node.name
        state.adopt(outbound)
        accept_consumer(link, node.name if source.dynamic else None, filters.selector, no_local, replay_echo)
        take_early_credit(outbound)

    def _open_subscription_browser(
        self, link: Link, state: ConnectionState, source: TerminusRequest, fqqn: tuple[str, str], filters: FilterRequest
    ) -> None:
        """A browser of a topic subscription's queue, named as Artemis names it (``<topic>::<ClientID>.<name>``,
        ``<topic>::<name>:global``, ...): what a JMS ``QueueBrowser`` on that queue sees there. Only browsing:
        a subscription is consumed by attaching to its topic with its name."""
        topic, name = fqqn
        if source.distribution_mode != 1:
            raise Refused(NOT_IMPLEMENTED, "a subscription's queue can only be browsed (distribution-mode copy)")
        self.authority.check(state, Permission.SELECT_TOPIC, topic)
        self.authority.check(state, Permission.READ_TOPIC, topic)
        sub = self.subscriptions.by_queue_name(topic, name)
        if sub is None:
            raise Refused(NOT_FOUND, f"topic {topic!r} has no subscription queue {name!r}")
        matcher = _compile(filters.selector)
        state.adopt(BrowserConsumer(link, state, sub.queue, on_bytes(matcher), self.closer, self.transacting))
        accept_consumer(link, None, filters.selector, False)

    def _subscribe(
        self,
        link: Link,
        state: ConnectionState,
        source: TerminusRequest,
        topic: Topic | Selector,
        filters: FilterRequest,
        matcher: Callable[[bytes], bool] | None,
    ) -> tuple[Outbound, bool] | None:
        """A topic consumer: create, resume or replace its subscription (mapping.subscriptions decides). A new
        subscription with a bookmark filter starts where the journal places it (None: the attach is held until
        it has answered). Returns the consumer and whether a replay was applied."""
        subs = self.subscriptions
        name = topic.name if isinstance(topic, Topic) else topic.expression
        details = Details(name, filters.selector, filters.no_local)
        request = SubscribeRequest(link.name, state.container_id, source.durable >= 1, source.capabilities, details)
        earlier = self.replays.take(link)  # the answer of an earlier pass, if this attach was held
        current = subs.get(key_for(request))
        decision = decide_subscribe(request, current.existing() if current is not None else None)
        placed = None
        if decision.action is Action.ATTACH and current is not None:
            sub = current  # a durable subscription resumes from its stored position: the bookmark is not applied
        else:
            if decision.action is Action.REPLACE and current is not None:
                self.authority.check_unsubscribe(state, current)  # replacing deletes it
            if filters.replay is not None:
                placed = self._placed(link, state, filters.replay, name if isinstance(topic, Topic) else "", earlier)
                if placed is None:
                    return None
            if decision.action is Action.REPLACE and current is not None:
                log.info("replacing %r: topic, selector or no-local changed", current.key)
                subs.delete(current)
            live = LIVE in source.capabilities
            readable = self.authority.readable(state)
            sub = subs.create(
                decision.kind, decision.key, details, topic, state.container_id, matcher, link.name, placed, live,
                readable,
            )  # fmt: skip
            self.housekeeping.watch_schedule(sub.queue)
        outbound = SubscriptionConsumer(link, state, sub, subs, self.transacting)
        subs.add_consumer(sub, outbound)
        sub.queue.add_consumer(outbound)
        return outbound, placed is not None

    def _placed(
        self,
        link: Link,
        state: ConnectionState,
        request: ReplayRequest,
        address: str,
        earlier: Placed | Refused | None,
    ) -> Placed | None:
        """Where a new subscription's replay starts: NOW at once; otherwise the journal's answer from an
        earlier pass of this attach, or None after asking for it (the attach is held meanwhile).

        Raises:
            Refused: the journal's refusal (an unknown or expired bookmark).
        """
        if isinstance(earlier, Refused):
            raise earlier
        if earlier is not None:
            return earlier
        if request.start is Start.NOW:
            return self.replays.now()
        self.replays.hold(link, state, request, address, resume=lambda: self._resume_held(link, state))
        return None

    def _open_selector_consumer(
        self, link: Link, state: ConnectionState, source: TerminusRequest, selector: Selector, filters: FilterRequest
    ) -> None:
        """A consumer whose address is a topic selector: every matching topic it may read, also those created
        later."""
        self.authority.check(state, Permission.SELECT_TOPIC, selector.prefix)
        matcher = _compile(filters.selector)
        if source.durable >= 1 or "shared" in source.capabilities:  # a named subscription on the selector
            subscribed = self._subscribe(link, state, source, selector, filters, matcher)
            if subscribed is not None:  # else held while the journal places its replay
                outbound, replayed = subscribed
                state.adopt(outbound)
                echo = filters.replay_echo if replayed else None
                accept_consumer(link, None, filters.selector, filters.no_local, echo)
                take_early_credit(outbound)
            return
        placed = None
        if filters.replay is not None:
            placed = self._placed(link, state, filters.replay, "", self.replays.take(link))
            if placed is None:
                return  # held while the journal places its replay (gateway.replay)
        no_local_id = state.container_id if filters.no_local else None
        router = self.router
        queue = Queue(f"{selector.expression}#{state.container_id}/{link.name}", durable=False)
        queue.limit_memory(router.memory_limit)
        router.rules.govern(queue, selector.expression)
        self.housekeeping.watch_schedule(queue)
        start = router.last_seq
        readable = self.authority.readable(state)
        accepts = subscription_filter(start, no_local_id, matcher)
        outbound = SelectorConsumer(link, state, queue, router.topics, self.transacting)
        outbound.selector_sub = router.topics.subscribe(selector, queue, accepts, readable)
        if placed is not None:
            self.subscriptions.replay_selector(queue, selector, readable, no_local_id, matcher, placed, start)
        queue.add_consumer(outbound)
        state.adopt(outbound)
        echo = filters.replay_echo if placed is not None else None
        accept_consumer(link, None, filters.selector, filters.no_local, echo)
        take_early_credit(outbound)

    def _open_fetch(self, link: Link, state: ConnectionState, selector: Selector | None) -> None:
        """Capability ``fetch``: the current value of each matching topic once, then the link is closed."""
        assert selector is not None  # fetch_selector always gives one
        self.authority.check(state, Permission.SELECT_TOPIC, selector.prefix)
        readable = self.authority.readable(state)
        values = deque(
            t.current for t in self.router.topics.select(selector) if t.current is not None and readable(t.name)
        )
        queue = Queue(f"fetch#{state.container_id}/{link.name}", durable=False)
        fetcher = FetchConsumer(link, state, queue, values, self.closer, self.transacting)
        state.adopt(fetcher)
        accept_consumer(link, None, None, False)
        take_early_credit(fetcher)

    def _open_lookup(self, link: Link, state: ConnectionState) -> None:
        """An unsubscribe lookup (null source): answer with the subscription's source, or not-found (§3.2)."""
        key = lookup_key(link.name, state.container_id)
        sub = self.subscriptions.get(key)
        decide_lookup(key, sub.existing() if sub is not None else None)
        assert sub is not None
        self.authority.check_unsubscribe(state, sub)  # closing the lookup deletes it
        state.adopt(Lookup(link, state, key, self.subscriptions))
        details = sub.details
        capabilities = lookup_source_capabilities(key, sub.kind)
        answer_lookup(link, details.topic, capabilities, details.selector, details.no_local)

    def _create_temporary(self, terminus: TerminusRequest, owner: ConnectionState) -> Node:
        """A dynamic node (temporary queue or topic, mapping §5.3); it lives as long as the link that made it,
        and only ``owner`` may receive from it."""
        kind = dynamic_kind(terminus.capabilities)
        node = self.router.create(temporary_address(kind, uuid.uuid4().hex), kind, durable=False)
        self.authority.own_temporary(node.name, owner)
        self.housekeeping.watch_node(node)
        return node

    def _unprefixed(self, terminus: TerminusRequest) -> TerminusRequest:
        """The terminus with its address's routing prefix (``topic://``, ``queue://``: mapping.names) turned into
        the capability of the node type it names; what the client sent is still what the attach echoes."""
        if not terminus.address:
            return terminus
        settings = self.settings
        address, kind = split_prefix(terminus.address, settings.anycast_prefixes, settings.multicast_prefixes)
        if kind is None:
            return terminus
        return replace(terminus, address=address, capabilities=terminus.capabilities | {kind})

    # -- attaches held for the missing-topic handlers --------------------------------------------------------
    def _hold_if_missing(
        self, link: Link, state: ConnectionState, source: TerminusRequest, selector: Selector | None, fetch: bool
    ) -> bool:
        """A subscribe or fetch that selects no topic here, or that a primary should hear of: hold the attach
        until the handlers answer (``gateway.missing_topics``). Returns False when the attach goes ahead now."""
        address = source.address or ""
        if selector is None:  # a plain topic path
            if address.startswith("$") or not is_valid_path(address):
                return False  # "$..." names server nodes (temporary, management, control), never topic paths
            kind = kind_from_capabilities(source.capabilities)
            if (kind or self.router.topics.default_kind(address, self.settings.default_node_type)) != TOPIC:
                return False
            existing = self.router.node(address)
            if isinstance(existing, Queue) or (existing is not None and not self.missing_topics.has_primaries):
                return False
            missing = existing is None
            selector = fetch_selector(">" + address)
        else:
            missing = not self.router.topics.selects_any(selector)
        return self.missing_topics.hold_attach(
            link,
            state,
            selector,
            missing,
            fetch,
            resume=lambda: self._resume_held(link, state),
            release=lambda: self._release_held(link, state),
        )

    def _release_held(self, link: Link, state: ConnectionState) -> None:
        held: LinkState | None = getattr(link, "_sg", None)
        if held is not None:
            held.closed = True  # the link gets a new state now (gateway.loop caches states by link)
            state.forget(held)
        link._sg = None  # type: ignore[attr-defined]  # our attribute on proton's wrapper

    def _resume_held(self, link: Link, state: ConnectionState) -> None:
        self._release_held(link, state)
        if not state.closed:
            self.attach(link, state, consult_handlers=False)
