"""Plain records that cross the boundary between the gateway and the store.

The reactor thread builds these and the journal writer thread consumes them (and the other way round for
recovery). They are slotted dataclasses: cheap to build, no ORM state, safe to hand between threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class NewMessage:
    """A message to append to the journal (``id`` is assigned by the server, strictly increasing)."""

    id: int
    address: str
    node_kind: str
    publisher_id: str
    publisher_seq: int
    bookmark: str
    ts_ms: int
    expires_ms: int | None
    deliver_ms: int | None
    durable: bool
    priority: int
    payload: bytes
    # The publisher set x-opt-publisher-id/seq: the writer raises its high-water mark in the same transaction.
    tracked: bool = False

    def __reduce__(self) -> tuple[type[NewMessage], tuple[object, ...]]:
        # Pickled by the field values (the journal process's pipe): about half the default's cost.
        return NewMessage, (
            self.id,
            self.address,
            self.node_kind,
            self.publisher_id,
            self.publisher_seq,
            self.bookmark,
            self.ts_ms,
            self.expires_ms,
            self.deliver_ms,
            self.durable,
            self.priority,
            self.payload,
            self.tracked,
        )


@dataclass(frozen=True, slots=True)
class NodeRecord:
    id: int
    name: str
    kind: str
    durable: bool
    auto_created: bool


@dataclass(frozen=True, slots=True)
class CursorRecord:
    id: int
    owner_kind: str
    owner: str
    address: str
    low_water: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A journaled message a cursor has not discarded yet, as recovery reads it back."""

    id: int
    payload: bytes
    failures: int
    expires_ms: int | None = None
    deliver_ms: int | None = None
    publisher_id: str | None = None  # "<container-id>/<link name>" of the publishing link
    address: str | None = field(default=None, compare=False)  # the node it was published to

    def __reduce__(self) -> tuple[type[StoredMessage], tuple[object, ...]]:
        return StoredMessage, (
            self.id,
            self.payload,
            self.failures,
            self.expires_ms,
            self.deliver_ms,
            self.publisher_id,
            self.address,
        )


@dataclass(frozen=True, slots=True)
class PageRead:
    """A read of one page of a durable queue's backlog: its journal rows above ``after`` up to ``upto`` that
    ``cursor_id`` has not acked, at most ``limit`` of them, in order (the journal writer runs it). Rows with
    ``durable = false`` count only above ``non_durable_after`` (the earlier runs' non-persistent messages did not
    survive their restart)."""

    cursor_id: int
    address: str
    after: int
    upto: int
    limit: int
    non_durable_after: int = 0
    prefix: bool = False  # ``address`` is a topic path prefix: the rows of every topic at or under it ("" = all)


@dataclass(frozen=True, slots=True)
class ReplayRead:
    """What the journal must say before a replay starts (mapping.bookmarks): the journal sequence of each
    bookmark in ``bookmarks`` (publisher id, seq), the last sequence journaled at or before ``at_ms`` (a
    timestamp start, when set), and how many rows of ``address`` lie above the start (an estimate for depth)."""

    address: str
    bookmarks: tuple[tuple[str, int], ...] = ()
    at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ReplayAnswer:
    """The journal's answer to a ``ReplayRead``: ``found`` maps each bookmark the journal holds to its sequence;
    ``after`` is the timestamp's start (0 without one); ``oldest`` the lowest sequence retained (0: empty);
    ``rows`` the rows of the address above the earliest start."""

    found: dict[tuple[str, int], int]
    after: int
    oldest: int
    rows: int


@dataclass(frozen=True, slots=True)
class RetentionRun:
    """One bounded step of a retention pass (mapping.retention): delete the deletable rows journaled at or before
    ``cutoff_ms`` among the sequences above ``after`` and at most ``window`` above it; non-persistent rows at or
    below ``stale_below`` (an earlier run's) are deletable whoever has not accepted them. ``upto``, the last
    sequence old enough, is found by the pass's first step (None) and handed to the next ones."""

    cutoff_ms: int
    after: int
    window: int
    stale_below: int
    upto: int | None = None


@dataclass(frozen=True, slots=True)
class RetentionAnswer:
    """What one step did: rows deleted, the sequence it got to, and the last sequence old enough (the pass ends
    when ``reached`` is there)."""

    deleted: int
    reached: int
    upto: int


@dataclass(frozen=True, slots=True)
class Catalog:
    """Everything the server needs at start-up besides the backlogs themselves."""

    nodes: list[NodeRecord]
    cursors: list[CursorRecord]
    max_message_id: int
    max_node_id: int
    max_cursor_id: int
    max_subscription_id: int = 0
    publishers: dict[str, int] = field(default_factory=dict)  # publisher id -> high-water mark (duplicates)


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    """A named topic subscription as stored (``client_id`` None = global; see ``storage.models.Subscription``)."""

    id: int
    kind: str
    durable: bool
    client_id: str | None
    name: str
    topic: str
    selector: str | None
    no_local: bool
    consumers: int
    cursor_id: int | None
    created_ms: int


# -- operator reads of the store (``subgate bookmarks show``, ``subgate journal stats``) ---------------------------
@dataclass(frozen=True, slots=True)
class BookmarkRead:
    """A read of the bookmark of subscription ``name`` of ``client_id`` (None = global): its cursor's place in the
    journal and the backlog above it. Rows with ``durable = false`` count in the backlog only above
    ``non_durable_after`` (a running server's journal end at its start, as its page reads do); None counts none of
    them (offline: a server started now would drop them)."""

    name: str
    client_id: str | None
    non_durable_after: int | None = None


@dataclass(frozen=True, slots=True)
class JournalStatsRead:
    """A read of the journal's figures, whole and per topic branch (no arguments)."""


@dataclass(frozen=True, slots=True)
class MetricsRead:
    """The metrics endpoint's write probe, run by the journal writer every second (``storage.store_metrics``): the
    store accepts a write. The store's figures are read apart from the writer (``store_metrics.FigureReader``)."""


@dataclass(frozen=True, slots=True)
class SubscriptionBacklog:
    """One durable subscription's backlog in the store, and the journal time (ms) of its oldest row (or None)."""

    client_id: str | None
    name: str
    topic: str
    backlog: int
    oldest_ms: int | None


@dataclass(frozen=True, slots=True)
class StoreFigures:
    """The store's figures for ``/metrics`` (``store_metrics.read_figures``); a ``MetricsRead`` answers with an
    empty one."""

    journal_rows: int | None = None
    subscriptions: tuple[SubscriptionBacklog, ...] = ()


StoreRead = BookmarkRead | JournalStatsRead | ReplayRead | RetentionRun | MetricsRead
"""What the journal writer reads (or, for a retention step, deletes) on request, answered in submission order
(``JournalPort.submit_read``)."""


@dataclass(frozen=True, slots=True)
class JournalPosition:
    """Where a journal cursor stands: everything at or below ``low_water`` is discarded, and above it the
    ``accepted_above`` rows of ``acks`` (the highest of them ``highest_accepted``); ``backlog`` is what is left."""

    low_water: int
    accepted_above: int
    highest_accepted: int | None
    backlog: int


@dataclass(frozen=True, slots=True)
class Bookmark:
    """A subscription with its journal position; ``position`` is None when it has no journal cursor (a
    non-durable, shared-volatile subscription keeps its messages in memory only)."""

    subscription: SubscriptionRecord
    position: JournalPosition | None


@dataclass(frozen=True, slots=True)
class JournalEnd:
    """One end of a run of journal rows: the row's journal sequence and its ``ts`` (ms since the epoch)."""

    id: int
    ts_ms: int


@dataclass(frozen=True, slots=True)
class JournalFigures:
    """How many journal rows, their bytes (``messages.size``), the oldest and the newest (None when no rows)."""

    rows: int
    bytes: int
    oldest: JournalEnd | None
    newest: JournalEnd | None


@dataclass(frozen=True, slots=True)
class BranchFigures:
    """The figures of one topic branch (a topic address's first path segment) or one queue (its whole name)."""

    branch: str
    kind: str
    figures: JournalFigures


@dataclass(frozen=True, slots=True)
class JournalStats:
    """The whole journal's figures and each branch's, sorted by branch then kind."""

    total: JournalFigures
    branches: tuple[BranchFigures, ...]
