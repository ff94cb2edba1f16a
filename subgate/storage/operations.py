"""The journal writer's operations: one frozen, slotted dataclass per kind of write (or read) the writer applies.

Owns the vocabulary of the writer's queue. ``JournalWriter``'s ``submit_*`` verbs build these on the submitting
(reactor) thread and the writer thread applies them in order (``storage.applying``: one apply function per
operation type). They are plain data, no SQLAlchemy and no proton, safe to hand between threads: an operation
that reports back when it is committed carries a ticket number (``Ticketed``), never the submitter's token,
which stays in the writer's table on the submitting side (docs/threading.md).

    AppendMessage          a journal row (``NewMessage``)                 ticketed  hot: one per durable message
    Acknowledge            an ``acks`` row                                          hot: one per removal
    CommitTransaction      a JMS transaction's messages and acks at once  ticketed
    ReadPage               a page of a backlog, after what precedes it    ticketed  (answers with the rows)
    ReadReplay             where a replay starts (bookmarks, a time)      ticketed  (answers with a ReplayAnswer)
    Retain                 one bounded step of a retention pass           ticketed  (answers with a RetentionAnswer)
    ReadBookmark           a subscription's bookmark (operator READ)      ticketed  (answers with a ``Bookmark``)
    ReadJournalStats       the journal's figures (operator READ)          ticketed  (answers with ``JournalStats``)
    ReadMetrics            a write probe, for /healthz                    ticketed  (answers with ``StoreFigures()``)
    Barrier                nothing: comes back once what precedes it is   ticketed
    RecordFailures         a message's failed-delivery count on a cursor
    MoveLowWater           a cursor's low-water mark (forward only), dropping the acks and failures below it
    CreateNode, DropNode   a durable queue or topic
    CreateCursor, DropCursor
    CreateSubscription, SetSubscriptionConsumers, DropSubscription
    RegisterRemoval, DropRemoval                                          remove-with-session registrations

The per-message operations replace the tuples the queue used to carry, one object for one tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from subgate.engine.records import (
    BookmarkRead,
    JournalStatsRead,
    MetricsRead,
    NewMessage,
    PageRead,
    ReplayRead,
    RetentionRun,
    StoreRead,
    SubscriptionRecord,
)

# The two operations built once per message on the reactor thread set their slots through the slots' descriptors
# rather than the frozen dataclass's ``object.__setattr__`` per field: ≈0.18 µs less per operation, about 40 % of
# what building one costs (bench/journal_ops.py); they stay frozen to everyone else.


@dataclass(frozen=True, slots=True, init=False)
class AppendMessage:
    message: NewMessage
    ticket: int

    def __init__(self, message: NewMessage, ticket: int) -> None:
        _set_message(self, message)
        _set_message_ticket(self, ticket)

    def __reduce__(self) -> tuple[type[AppendMessage], tuple[NewMessage, int]]:
        return AppendMessage, (self.message, self.ticket)


_set_message = vars(AppendMessage)["message"].__set__
_set_message_ticket = vars(AppendMessage)["ticket"].__set__


@dataclass(frozen=True, slots=True, init=False)
class Acknowledge:
    cursor_id: int
    message_id: int

    def __init__(self, cursor_id: int, message_id: int) -> None:
        _set_ack_cursor(self, cursor_id)
        _set_ack_message(self, message_id)

    def __reduce__(self) -> tuple[type[Acknowledge], tuple[int, int]]:
        return Acknowledge, (self.cursor_id, self.message_id)


_set_ack_cursor = vars(Acknowledge)["cursor_id"].__set__
_set_ack_message = vars(Acknowledge)["message_id"].__set__


@dataclass(frozen=True, slots=True)
class CommitTransaction:
    """A committed JMS transaction: its messages and acks (``(cursor_id, message_id)``) in one database
    transaction."""

    messages: Sequence[NewMessage]
    acks: Sequence[tuple[int, int]]
    ticket: int


@dataclass(frozen=True, slots=True)
class ReadPage:
    read: PageRead
    ticket: int


@dataclass(frozen=True, slots=True)
class ReadReplay:
    read: ReplayRead
    ticket: int


@dataclass(frozen=True, slots=True)
class ReadBookmark:
    """``$management`` READ of a subscription's bookmark (``storage.journal_stats.read_bookmark``)."""

    read: BookmarkRead
    ticket: int


@dataclass(frozen=True, slots=True)
class Retain:
    read: RetentionRun
    ticket: int


@dataclass(frozen=True, slots=True)
class ReadJournalStats:
    """``$management`` READ of the journal's figures (``storage.journal_stats.journal_stats``)."""

    read: JournalStatsRead
    ticket: int


@dataclass(frozen=True, slots=True)
class ReadMetrics:
    """The metrics endpoint's write probe (``storage.store_metrics.read_metrics``)."""

    read: MetricsRead
    ticket: int


@dataclass(frozen=True, slots=True)
class Barrier:
    ticket: int


@dataclass(frozen=True, slots=True)
class RecordFailures:
    cursor_id: int
    message_id: int
    failures: int


@dataclass(frozen=True, slots=True)
class MoveLowWater:
    cursor_id: int
    low_water: int


@dataclass(frozen=True, slots=True)
class CreateNode:
    node_id: int
    name: str
    kind: str
    durable: bool
    auto_created: bool


@dataclass(frozen=True, slots=True)
class DropNode:
    name: str


@dataclass(frozen=True, slots=True)
class CreateCursor:
    cursor_id: int
    owner_kind: str
    owner: str
    address: str
    low_water: int


@dataclass(frozen=True, slots=True)
class DropCursor:
    """A cursor with its acks and failure counts."""

    cursor_id: int


@dataclass(frozen=True, slots=True)
class CreateSubscription:
    record: SubscriptionRecord


@dataclass(frozen=True, slots=True)
class SetSubscriptionConsumers:
    subscription_id: int
    consumers: int


@dataclass(frozen=True, slots=True)
class DropSubscription:
    """A subscription and, with it, its cursor (when it has one) with the cursor's acks and failure counts."""

    subscription_id: int
    cursor_id: int | None


@dataclass(frozen=True, slots=True)
class RegisterRemoval:
    row_id: int
    branch: str
    container_id: str | None
    link_name: str


@dataclass(frozen=True, slots=True)
class DropRemoval:
    row_id: int


StoreReading = ReadBookmark | ReadJournalStats | ReadReplay | Retain | ReadMetrics
"""The reads (and retention steps) of ``JournalWriter.submit_read``, one operation per kind of
``engine.records.StoreRead``: each is answered after everything submitted before it is committed."""

_READING: dict[type, type[StoreReading]] = {
    BookmarkRead: ReadBookmark,
    JournalStatsRead: ReadJournalStats,
    ReplayRead: ReadReplay,
    RetentionRun: Retain,
    MetricsRead: ReadMetrics,
}


def reading(read: StoreRead, ticket: int) -> StoreReading:
    """The operation that runs ``read``."""
    return _READING[type(read)](read, ticket)  # type: ignore[arg-type]  # each pairs with its own read type


READS: tuple[type[ReadPage | StoreReading], ...] = (
    ReadPage,
    ReadBookmark,
    ReadJournalStats,
    ReadReplay,
    Retain,
    ReadMetrics,
)
"""The operations that answer with what they read (a ``ReadAnswer``)."""

Ticketed = AppendMessage | CommitTransaction | ReadPage | StoreReading | Barrier
"""The operations whose ticket comes back in a ``BatchResult`` (in ``tokens``, or in ``failed``)."""

TICKETED: tuple[type[Ticketed], ...] = (
    AppendMessage,
    CommitTransaction,
    ReadPage,
    ReadBookmark,
    ReadJournalStats,
    ReadReplay,
    Retain,
    ReadMetrics,
    Barrier,
)

Operation = (
    Ticketed
    | Acknowledge
    | RecordFailures
    | MoveLowWater
    | CreateNode
    | DropNode
    | CreateCursor
    | DropCursor
    | CreateSubscription
    | SetSubscriptionConsumers
    | DropSubscription
    | RegisterRemoval
    | DropRemoval
)
"""Everything the writer's queue carries (besides its stop signal)."""
