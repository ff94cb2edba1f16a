"""How the journal writer applies each operation inside a batch's database transaction.

Owns the table ``APPLY`` (operation type -> apply function) and the functions in it; ``apply_batch`` runs a
batch's operations through it, in order, on the writer thread. Message and ack rows are gathered and written
in bulk (``storage.bulk``: the hot path); every other operation first writes the rows gathered before it, so
reads see them and structural writes (node, cursor, low-water, failures) keep their place relative to them
(docs/threading.md, rule 5). What a batch returns is the tickets of its ticketed operations, in order, a read's
(a page, a bookmark, the journal's figures) as a ``ReadAnswer`` holding what it read.

An operation whose own statements fail with anything but a store outage (``store_outage``: a lost connection, a
lock, a timeout) raises ``OperationFailed`` naming it: a value the store refuses (a number out of a column's range,
text it cannot hold) fails the same way however often it is tried, so the writer drops that operation alone and
applies the rest again at once, with no back-off (``storage.journal``). An error while writing the rows gathered
before it is the batch's, not its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, exc, insert, update

from subgate.engine.records import NewMessage
from subgate.storage.bulk import insert_acks, insert_messages, utc_from_ms
from subgate.storage.catalog import read_page
from subgate.storage.high_water import MarkLedger
from subgate.storage.journal_stats import journal_stats, read_bookmark
from subgate.storage.models import (
    Ack,
    AckCursor,
    DeliveryFailure,
    Node,
    RemovalRegistration,
    Subscription,
    table_of,
)
from subgate.storage.operations import (
    Acknowledge,
    AppendMessage,
    Barrier,
    CommitTransaction,
    CreateCursor,
    CreateNode,
    CreateSubscription,
    DropCursor,
    DropNode,
    DropRemoval,
    DropSubscription,
    MoveLowWater,
    Operation,
    ReadBookmark,
    ReadJournalStats,
    ReadMetrics,
    ReadPage,
    ReadReplay,
    RecordFailures,
    RegisterRemoval,
    Retain,
    SetSubscriptionConsumers,
)
from subgate.storage.replay import resolve_replay
from subgate.storage.retention import retain
from subgate.storage.store_metrics import read_metrics

_ACKS = table_of(Ack)
_FAILURES = table_of(DeliveryFailure)
_CURSORS = table_of(AckCursor)
_NODES = table_of(Node)
_SUBSCRIPTIONS = table_of(Subscription)
_REMOVALS = table_of(RemovalRegistration)


class ReadAnswer:
    """A read's token (a ticket until claimed) with what it read (a page's rows, a ``Bookmark`` or None, the
    ``JournalStats``): called like a barrier token, it calls ``token(result)`` (or ``token(error)`` when the
    batch failed)."""

    __slots__ = ("token", "result")

    def __init__(self, token: Any, result: object) -> None:
        self.token = token
        self.result = result

    def claimed(self, token: Any) -> ReadAnswer:
        """The same answer for ``token`` (the one its ticket stands for)."""
        return ReadAnswer(token, self.result)

    def __call__(self, error: BaseException | None) -> None:
        self.token(self.result if error is None else error)


class OperationFailed(Exception):
    """The operation at ``index`` of a batch failed by itself (not a store outage): ``cause`` is its error."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.index = index
        self.cause = cause


class StoreReadFailed(Exception):
    """What a read answers when the store refused its query (a value it cannot bind): the read alone failed."""


def store_outage(error: BaseException) -> bool:
    """Whether ``error`` says the store is unreachable or busy (worth retrying after a pause), rather than that
    one query's values were refused."""
    if isinstance(error, exc.DBAPIError):
        return error.connection_invalidated or isinstance(error, exc.OperationalError | exc.InterfaceError)
    return isinstance(error, exc.DisconnectionError | exc.TimeoutError | OSError | MemoryError)


class OpenBatch:
    """One batch's transaction in progress: its connection, the message and ack rows gathered but not written
    yet, the tickets (or page answers) to report once it commits, and the publishers' marks its messages
    raise (``storage.high_water``)."""

    __slots__ = ("conn", "messages", "acks", "tickets", "ledger")

    def __init__(self, conn: Connection, ledger: MarkLedger) -> None:
        self.conn = conn
        self.messages: list[NewMessage] = []
        self.acks: list[tuple[int, int]] = []
        self.tickets: list[int | ReadAnswer] = []
        self.ledger = ledger

    def flush(self) -> None:
        """Write the message and ack rows gathered so far."""
        if self.messages:
            insert_messages(self.conn, self.messages)
            self.ledger.stage(self.messages)
            self.messages.clear()
        if self.acks:
            insert_acks(self.conn, self.acks)
            self.acks.clear()


def apply_batch(conn: Connection, batch: Sequence[Operation], ledger: MarkLedger) -> list[int | ReadAnswer]:
    """Apply ``batch`` in order inside ``conn``'s open transaction; returns its tickets (reads: answers).
    The caller tells ``ledger`` whether the transaction committed.

    Raises:
        OperationFailed: one operation's own statements failed (not a store outage); the transaction is to be
            rolled back and the batch applied again without it.
    """
    open_batch = OpenBatch(conn, ledger)
    apply = APPLY
    for index, op in enumerate(batch):
        try:
            apply[type(op)](open_batch, op)
        except Exception as error:
            # Rows still gathered: writing them (the flush before ``op``) failed, which is the batch's error.
            if open_batch.messages or open_batch.acks or store_outage(error):
                raise
            raise OperationFailed(index, error) from error
    open_batch.flush()
    ledger.write(conn)
    return open_batch.tickets


# -- gathered: the hot path -----------------------------------------------------------------------------------
def _append_message(batch: OpenBatch, op: AppendMessage) -> None:
    batch.messages.append(op.message)
    batch.tickets.append(op.ticket)


def _acknowledge(batch: OpenBatch, op: Acknowledge) -> None:
    batch.acks.append((op.cursor_id, op.message_id))


def _commit_transaction(batch: OpenBatch, op: CommitTransaction) -> None:
    batch.messages.extend(op.messages)
    batch.acks.extend(op.acks)
    batch.tickets.append(op.ticket)


def _barrier(batch: OpenBatch, op: Barrier) -> None:
    batch.tickets.append(op.ticket)


# -- after the rows gathered before them ------------------------------------------------------------------------
def _read_page(batch: OpenBatch, op: ReadPage) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, read_page(batch.conn, op.read)))


def _read_bookmark(batch: OpenBatch, op: ReadBookmark) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, read_bookmark(batch.conn, op.read)))


def _read_journal_stats(batch: OpenBatch, op: ReadJournalStats) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, journal_stats(batch.conn)))


def _read_replay(batch: OpenBatch, op: ReadReplay) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, resolve_replay(batch.conn, op.read)))


def _read_metrics(batch: OpenBatch, op: ReadMetrics) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, read_metrics(batch.conn, op.read)))


def _retain(batch: OpenBatch, op: Retain) -> None:
    batch.flush()
    batch.tickets.append(ReadAnswer(op.ticket, retain(batch.conn, op.read)))


def _create_node(batch: OpenBatch, op: CreateNode) -> None:
    batch.flush()
    batch.conn.execute(
        insert(_NODES).values(
            id=op.node_id,
            name=op.name,
            kind=op.kind,
            durable=op.durable,
            auto_created=op.auto_created,
            created_at=datetime.now(UTC),
        )
    )


def _drop_node(batch: OpenBatch, op: DropNode) -> None:
    batch.flush()
    batch.conn.execute(delete(_NODES).where(_NODES.c.name == op.name))


def _register_removal(batch: OpenBatch, op: RegisterRemoval) -> None:
    batch.flush()
    batch.conn.execute(
        insert(_REMOVALS).values(
            id=op.row_id,
            branch=op.branch,
            container_id=op.container_id,
            link_name=op.link_name,
            created_at=datetime.now(UTC),
        )
    )


def _drop_removal(batch: OpenBatch, op: DropRemoval) -> None:
    batch.flush()
    batch.conn.execute(delete(_REMOVALS).where(_REMOVALS.c.id == op.row_id))


def _create_cursor(batch: OpenBatch, op: CreateCursor) -> None:
    batch.flush()
    batch.conn.execute(
        insert(_CURSORS).values(
            id=op.cursor_id,
            owner_kind=op.owner_kind,
            owner=op.owner,
            address=op.address,
            low_water=op.low_water,
            updated_at=datetime.now(UTC),
        )
    )


def _move_low_water(batch: OpenBatch, op: MoveLowWater) -> None:
    batch.flush()
    conn, cursor_id, low_water = batch.conn, op.cursor_id, op.low_water
    conn.execute(
        update(_CURSORS)
        .where(_CURSORS.c.id == cursor_id, _CURSORS.c.low_water < low_water)
        .values(low_water=low_water, updated_at=datetime.now(UTC))
    )
    conn.execute(delete(_ACKS).where(_ACKS.c.cursor_id == cursor_id, _ACKS.c.message_id <= low_water))
    conn.execute(delete(_FAILURES).where(_FAILURES.c.cursor_id == cursor_id, _FAILURES.c.message_id <= low_water))


def _record_failures(batch: OpenBatch, op: RecordFailures) -> None:
    batch.flush()
    failures = _FAILURES.c
    batch.conn.execute(
        delete(_FAILURES).where(failures.cursor_id == op.cursor_id, failures.message_id == op.message_id)
    )
    batch.conn.execute(insert(_FAILURES).values(cursor_id=op.cursor_id, message_id=op.message_id, failures=op.failures))


def _drop_cursor(batch: OpenBatch, op: DropCursor) -> None:
    batch.flush()
    _delete_cursor(batch.conn, op.cursor_id)


def _create_subscription(batch: OpenBatch, op: CreateSubscription) -> None:
    batch.flush()
    record = op.record
    batch.conn.execute(
        insert(_SUBSCRIPTIONS).values(
            id=record.id,
            kind=record.kind,
            durable=record.durable,
            client_id=record.client_id,
            name=record.name,
            topic=record.topic,
            selector=record.selector,
            no_local=record.no_local,
            consumers=record.consumers,
            cursor_id=record.cursor_id,
            created_at=utc_from_ms(record.created_ms),
        )
    )


def _set_subscription_consumers(batch: OpenBatch, op: SetSubscriptionConsumers) -> None:
    batch.flush()
    batch.conn.execute(
        update(_SUBSCRIPTIONS).where(_SUBSCRIPTIONS.c.id == op.subscription_id).values(consumers=op.consumers)
    )


def _drop_subscription(batch: OpenBatch, op: DropSubscription) -> None:
    batch.flush()
    batch.conn.execute(delete(_SUBSCRIPTIONS).where(_SUBSCRIPTIONS.c.id == op.subscription_id))
    if op.cursor_id is not None:
        _delete_cursor(batch.conn, op.cursor_id)


def _delete_cursor(conn: Connection, cursor_id: int) -> None:
    conn.execute(delete(_ACKS).where(_ACKS.c.cursor_id == cursor_id))
    conn.execute(delete(_FAILURES).where(_FAILURES.c.cursor_id == cursor_id))
    conn.execute(delete(_CURSORS).where(_CURSORS.c.id == cursor_id))


# Each function takes its own operation type (``tests/storage/test_operations.py`` checks the pairs and that
# every ``Operation`` has one); the value type is erased here because a dict cannot pair key and value types.
APPLY: Mapping[type[Operation], Callable[[OpenBatch, Any], None]] = {
    AppendMessage: _append_message,
    Acknowledge: _acknowledge,
    CommitTransaction: _commit_transaction,
    Barrier: _barrier,
    ReadPage: _read_page,
    ReadReplay: _read_replay,
    Retain: _retain,
    ReadBookmark: _read_bookmark,
    ReadJournalStats: _read_journal_stats,
    ReadMetrics: _read_metrics,
    CreateNode: _create_node,
    DropNode: _drop_node,
    RegisterRemoval: _register_removal,
    DropRemoval: _drop_removal,
    CreateCursor: _create_cursor,
    MoveLowWater: _move_low_water,
    RecordFailures: _record_failures,
    DropCursor: _drop_cursor,
    CreateSubscription: _create_subscription,
    SetSubscriptionConsumers: _set_subscription_consumers,
    DropSubscription: _drop_subscription,
}
