"""The node registry and the journal bookkeeping of the running server.

Owns: which queues and topics exist (created on first use per ``mapping.addresses``), their durable cursors,
the journal sequence, and turning an incoming message into a ``nodes.Message`` plus, for durable destinations,
a journal record. It knows nothing of proton; the gateway hands in bytes and an ``Envelope``.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from subgate.engine import codec
from subgate.engine.address_rules import AddressRules
from subgate.engine.backlog import BacklogLimit
from subgate.engine.endpoint_limits import CreatedTopics, EndpointLimits
from subgate.engine.memory import HighWater, MemoryLimit
from subgate.engine.nodes import Message, Queue, Topic, now_ms
from subgate.engine.ports import JournalPort
from subgate.engine.records import Catalog, NewMessage
from subgate.engine.topic_space import TopicSpace
from subgate.gateway.paging import Pager
from subgate.gateway.settings import Settings
from subgate.mapping.addresses import QUEUE, TOPIC, NodeDecision, resolve_node
from subgate.mapping.bookmarks import format_bookmark
from subgate.mapping.branch_modes import (
    ALL,
    OFF,
    STORE_SEND_NOCONFIRM,
    journal_mode,
    parse_journal_branches,
    parse_publisher_modes,
    publisher_mode,
)
from subgate.mapping.errors import RESOURCE_LIMIT, Refused
from subgate.mapping.names import check_new_name
from subgate.mapping.wildcards import refuse_as_node
from subgate.topics import path_problem

log = logging.getLogger("subgate.router")

Node = Queue | Topic


def check_topic_quota(created: CreatedTopics[Topic], limits: EndpointLimits) -> None:
    """Raises: Refused(amqp:resource-limit-exceeded) when a connection that created ``created`` may not create one
    more topic (``--max-topics-per-connection``, engine.endpoint_limits)."""
    refusal = created.refusal(limits)
    if refusal is not None:
        raise Refused(RESOURCE_LIMIT, refusal)


class JournalCursor:
    """A durable queue's cursor: removals and failure counts go to the journal writer."""

    __slots__ = ("cursor_id", "_writer", "acks_since_low_water")

    def __init__(self, cursor_id: int, writer: JournalPort) -> None:
        self.cursor_id = cursor_id
        self._writer = writer
        self.acks_since_low_water = 0

    def discarded(self, seq: int) -> None:
        self._writer.submit_ack(self.cursor_id, seq)
        self.acks_since_low_water += 1

    def failed(self, seq: int, failures: int) -> None:
        self._writer.submit_failures(self.cursor_id, seq, failures)


class NodeModes:
    """The per-branch modes in force (``mapping.branch_modes``): what the journal keeps of a topic, and when a
    node's publishers are confirmed. Publisher modes can change while the server runs (``$management``)."""

    def __init__(self, settings: Settings) -> None:
        self.journal_branches = parse_journal_branches(settings.journal_branches)
        self.publisher_modes = parse_publisher_modes(settings.publisher_modes)

    def apply(self, node: Node) -> None:
        node.confirm_on_receipt = publisher_mode(self.publisher_modes, node.name) == STORE_SEND_NOCONFIRM
        if isinstance(node, Topic):
            node.journal_mode = journal_mode(self.journal_branches, node.name)

    def set_publisher_modes(self, branches: dict[str, str], nodes: list[Node]) -> None:
        """Publisher modes by branch, applied to ``nodes`` (every node) now and to later ones."""
        self.publisher_modes = dict(branches)
        for node in nodes:
            self.apply(node)


@dataclass(slots=True)
class Ingest:
    """A message ready to route: journal it first when ``record`` is set."""

    message: Message
    record: NewMessage | None


class Router:
    def __init__(self, settings: Settings, writer: JournalPort, catalog: Catalog) -> None:
        self.settings = settings
        self.writer = writer
        self.nodes: dict[str, Node] = {}
        self._next_seq = catalog.max_message_id
        self._next_node_id = catalog.max_node_id
        self._next_cursor_id = catalog.max_cursor_id
        self.tracked: dict[int, tuple[JournalCursor, Queue]] = {}
        self.topics = TopicSpace()  # cursor id -> the queue it records
        # Rows of earlier runs with durable = false are non-persistent messages: they do not survive a restart
        # (unless --journal-non-persistent, which journals them to keep them).
        non_durable_after = 0 if settings.journal_non_persistent else catalog.max_message_id
        self.pager = Pager(writer, settings.page_messages, non_durable_after)
        # Journal ids handed to the writer and not committed yet, oldest first (the writer commits in order).
        self._uncommitted: deque[int] = deque()
        self._committed_early: set[int] = set()
        self.modes = NodeModes(settings)
        self.publisher_marks = catalog.publishers  # high-water marks at start-up (engine.duplicates)
        backlog = BacklogLimit(settings.max_backlog_messages, settings.backlog_full_policy)
        self.memory_limit = MemoryLimit(
            settings.memory_limit_messages,
            settings.memory_limit_bytes,
            settings.memory_full_policy,
            settings.max_groups,
            backlog,
            HighWater(settings.memory_high_water, settings.max_message_size),
        )
        # Dead letters, expiry, and the backlog limit per queue name pattern.
        self.rules = AddressRules(settings.address_settings, settings.wildcard_delimiter, backlog)
        self.endpoint_limits = settings.endpoint_limits()

    # -- the journal, for the reactor's handlers ------------------------------------------------------------
    def journal_message(self, record: NewMessage, token: object) -> None:
        """Hand a message's row to the journal writer; ``token`` comes back in its ``BatchResult``."""
        self._uncommitted.append(record.id)
        self.writer.submit_message(record, token)

    def journal_transaction(self, records: list[NewMessage], acks: list[tuple[int, int]], token: object) -> None:
        self.writer.submit_transaction(records, acks, token)

    def record_low_water(self) -> None:
        """Write the low-water mark of each durable queue acknowledged since the last time (the housekeeping)."""
        for cursor, queue in self.tracked.values():
            if cursor.acks_since_low_water:
                self.writer.submit_low_water(cursor.cursor_id, self.safe_low_water(queue))
                cursor.acks_since_low_water = 0

    # -- journal commits -----------------------------------------------------------------------------------
    def submitted(self, seq: int) -> None:
        self._uncommitted.append(seq)

    def committed(self, seq: int) -> None:
        uncommitted = self._uncommitted
        if uncommitted and uncommitted[0] == seq:
            uncommitted.popleft()
            while uncommitted and uncommitted[0] in self._committed_early:
                self._committed_early.discard(uncommitted.popleft())
        else:
            self._committed_early.add(seq)

    def safe_low_water(self, queue: Queue) -> int:
        """A queue's low-water mark that never passes a message still on its way into the journal."""
        low = queue.low_water()
        if low < 0:
            low = self._next_seq
        if self._uncommitted:
            low = min(low, self._uncommitted[0] - 1)
        return low

    @property
    def last_seq(self) -> int:
        """The highest journal sequence handed out so far."""
        return self._next_seq

    def track_cursor(self, cursor: JournalCursor, queue: Queue) -> None:
        self.tracked[cursor.cursor_id] = (cursor, queue)

    def untrack_cursor(self, cursor: JournalCursor) -> None:
        self.tracked.pop(cursor.cursor_id, None)

    # -- nodes ---------------------------------------------------------------------------------------------
    def node(self, address: str) -> Node | None:
        return self.nodes.get(address)

    def all_nodes(self) -> list[Node]:
        return list(self.nodes.values())

    def decide(self, address: str, requested_kind: str | None) -> NodeDecision:
        """The node ``address`` means, checked as a new node's name when it would be created.

        Raises:
            Refused: mapping.addresses.resolve_node's refusals, and mapping.names.check_new_name's.
        """
        existing = self.nodes.get(address)
        if existing is None:
            refuse_as_node(address, self.settings.wildcard_delimiter)
        decision = resolve_node(
            address,
            requested_kind,
            existing.kind if existing is not None else None,
            default_kind=self.topics.default_kind(address, self.settings.default_node_type),
            auto_create=self.settings.auto_create and self.rules.for_name(address).auto_create_queues,
        )
        if decision.create:
            check_new_name(address, decision.kind, path_problem(address) if decision.kind == TOPIC else None)
        return decision

    def node_for(self, decision: NodeDecision, created: CreatedTopics[Topic] | None = None) -> Node:
        """The node ``decision`` names, created when it does not exist yet. ``created``: the topics the
        connection asking has created, which a new topic joins (and which bound it: ``check_topic_quota``)."""
        node = self.nodes.get(decision.address)
        if node is None:
            if created is not None and decision.kind == TOPIC:
                check_topic_quota(created, self.endpoint_limits)
            node = self.create(decision.address, decision.kind, durable=True, auto_created=True)
            if created is not None and isinstance(node, Topic):
                created.add(node)
        return node

    def create(self, name: str, kind: str, *, durable: bool, auto_created: bool = False) -> Node:
        node: Node
        if kind == QUEUE:
            cursor = None
            if durable:
                self._next_node_id += 1
                self.writer.submit_node(self._next_node_id, name, kind, durable, auto_created)
                cursor = self.new_cursor("queue", name, name)
            node = Queue(name, durable=durable, cursor=cursor)
            node.limit_memory(self.memory_limit)
            self.rules.govern(node)
            self.modes.apply(node)
            if cursor is not None:
                self.track_cursor(cursor, node)
                self.pager.attach(node, cursor.cursor_id, name)
        else:
            if durable:
                self._next_node_id += 1
                self.writer.submit_node(self._next_node_id, name, kind, durable, auto_created)
            node = Topic(name, durable=durable)
            self.modes.apply(node)
            self.topics.added(node)
        self.nodes[name] = node
        log.info("created %s%s %r", "" if durable else "temporary ", kind, name)
        return node

    def remove(self, node: Node) -> None:
        """Forget a node: out of the registry and the topic tree; a durable one's row leaves the store too
        (its journaled messages stay until retention)."""
        if self.nodes.get(node.name) is node:
            del self.nodes[node.name]
        if isinstance(node, Topic):
            self.topics.removed(node)
        if node.durable:
            self.writer.submit_drop_node(node.name)
        log.info("removed %s%s %r", "" if node.durable else "temporary ", node.kind, node.name)

    def new_cursor(self, owner_kind: str, owner: str, address: str, low_water: int | None = None) -> JournalCursor:
        """A new journal cursor; nothing before now belongs to it, unless ``low_water`` (a replay) says from where."""
        self._next_cursor_id += 1
        if low_water is None:
            low_water = self._next_seq
        self.writer.submit_cursor(self._next_cursor_id, owner_kind, owner, address, low_water)
        return JournalCursor(self._next_cursor_id, self.writer)

    def restore_queue(self, name: str, cursor_id: int) -> Queue:
        cursor = JournalCursor(cursor_id, self.writer)
        queue = Queue(name, durable=True, cursor=cursor)
        queue.limit_memory(self.memory_limit)
        self.rules.govern(queue)
        self.modes.apply(queue)
        self.track_cursor(cursor, queue)
        self.pager.attach(queue, cursor_id, name)
        self.nodes[name] = queue
        return queue

    def restore_topic(self, name: str) -> Topic:
        topic = Topic(name, durable=True)
        self.modes.apply(topic)
        self.nodes[name] = topic
        self.topics.added(topic)
        return topic

    # -- messages ------------------------------------------------------------------------------------------
    def prepare(
        self,
        raw: bytes,
        env: codec.Envelope,
        node: Node,
        origin: str | None,
        publisher_id: str,
        behind: int = 0,
        identity: tuple[str, int] | None = None,
    ) -> Ingest:
        """Build the routed message and, for a journaled destination, its journal record.

        A topic journals every persistent message unless its branch's journal mode says otherwise
        (``mapping.branch_modes``); a queue, when it is durable. A non-persistent message gets a record too (a
        row with durable = false) when it must not overtake journaled ones: while ``node`` pages (older messages
        are in the journal only), or while ``behind`` — its publisher's messages still on their way into the
        journal — is above zero. Journaled, it is routed in journal order (docs/architecture.md, "Paging").
        ``identity`` is the (publisher id, seq) the publisher numbered the message with (``engine.duplicates``);
        without it the bookmark is ``publisher_id`` and the journal sequence."""
        self._next_seq += 1
        seq = self._next_seq
        now = now_ms()
        expires = env.absolute_expiry_time or 0
        if env.ttl:
            expires = min(expires, now + env.ttl) if expires else now + env.ttl
        deliver_at = _delivery_time(env.annotations, now)
        if env.durable or self.settings.journal_non_persistent or (type(node) is Topic and node.journal_mode == ALL):
            journaled = self._journals(node)
        else:
            journaled = (behind > 0 or self.pages(node)) and self._journals(node)
        record = None
        if journaled:
            raw, record = self._record(seq, raw, env, node, identity or (publisher_id, seq), now, expires, deliver_at)
            record.tracked = identity is not None
        message = Message(
            seq,
            raw,
            header_count=env.delivery_count,
            durable=env.durable,
            priority=env.priority,
            expires=expires,
            deliver_at=deliver_at,
            origin=origin,
            journaled=journaled,
            group=env.group_id,
            group_seq=env.group_sequence,
        )
        return Ingest(message, record)

    def journal_late(self, ingest: Ingest, node: Node, publisher_id: str) -> Ingest:
        """A record for a prepared, not yet routed, non-persistent message after all (a transaction's send whose
        node started paging before the commit), with the sequence it already has."""
        message = ingest.message
        env = codec.scan(message.raw)
        raw, record = self._record(
            message.seq,
            message.raw,
            env,
            node,
            (publisher_id, message.seq),
            now_ms(),
            message.expires,
            message.deliver_at,
        )
        return Ingest(message.as_journaled(True, raw), record)

    def _record(
        self,
        seq: int,
        raw: bytes,
        env: codec.Envelope,
        node: Node,
        identity: tuple[str, int],
        now: int,
        expires: int,
        deliver_at: int,
    ) -> tuple[bytes, NewMessage]:
        """The journal record of a message (and its bytes, now with the bookmark annotation)."""
        publisher_id, publisher_seq = identity
        bookmark = format_bookmark(publisher_id, publisher_seq)
        raw = codec.with_string_annotation(raw, env, "x-opt-bookmark", bookmark)
        record = NewMessage(
            id=seq,
            address=node.name,
            node_kind=node.kind,
            publisher_id=publisher_id,
            publisher_seq=publisher_seq,
            bookmark=bookmark,
            ts_ms=now,
            expires_ms=expires or None,
            deliver_ms=deliver_at or None,
            durable=env.durable,
            priority=env.priority,
            payload=raw,
        )
        return raw, record

    def pages(self, node: Node) -> bool:
        """Some of the node's messages are in the journal only: the queue pages, or one of the topic's durable
        subscriptions does."""
        if isinstance(node, Topic):
            return node.paging_subscriptions > 0
        return node.paging

    def may_page(self, node: Node) -> bool:
        """The node keeps journaled messages and pages them when its queue (or a durable subscription's) fills."""
        return self.pager.page_messages > 0 and self._journals(node)

    def _journals(self, node: Node) -> bool:
        if isinstance(node, Topic):
            # Kept for replay (mapping.branch_modes), and always while a durable subscription needs the journal.
            return node.durable_subscriptions > 0 or (node.durable and node.journal_mode != OFF)
        return node.durable


def _delivery_time(annotations: dict[str, object], now: int) -> int:
    """x-opt-delivery-time (absolute ms) or x-opt-delivery-delay (ms from now); 0 = deliver at once."""
    if not annotations:
        return 0
    at = annotations.get("x-opt-delivery-time")
    if at is not None and isinstance(at, int) and not isinstance(at, bool) and at > now:
        return at
    delay = annotations.get("x-opt-delivery-delay")
    if delay is not None and isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
        return now + delay
    return 0
