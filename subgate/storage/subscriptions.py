"""Named topic subscriptions (mapping doc §2.8): list, look up, delete, count a backlog, reset at start-up.

Functions take a ``Session`` owned by the caller (never commit) and return plain ``SubscriptionRecord``s. A
subscription's messages are not rows of their own: they are the journal messages of its topic above its
cursor's low-water mark that the cursor has not acknowledged (``storage.models.AckCursor``). Deleting a
subscription therefore deletes its cursor with the cursor's acks and delivery failures, and nothing else.
This module knows nothing about selectors: a backlog count takes the match predicate from the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, delete, exists, func, select, update
from sqlalchemy.orm import Session

from subgate.engine.records import SubscriptionRecord
from subgate.storage.models import Ack, AckCursor, DeliveryFailure, JournalMessage, Subscription

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def list_subscriptions(
    session: Session, *, client_id: str | None = None, global_only: bool = False, topic: str | None = None
) -> list[SubscriptionRecord]:
    """Subscriptions, global ones first, then by client-id, name and kind.

    Args:
        client_id: only those of this client-id.
        global_only: only global ones (client-id NULL); may not be combined with ``client_id``.
        topic: only those on exactly this topic.

    Raises:
        ValueError: ``client_id`` and ``global_only`` were both given.
    """
    if client_id is not None and global_only:
        raise ValueError("client_id and global_only exclude each other")
    stmt = select(Subscription)
    if client_id is not None:
        stmt = stmt.where(Subscription.client_id == client_id)
    if global_only:
        stmt = stmt.where(Subscription.client_id.is_(None))
    if topic is not None:
        stmt = stmt.where(Subscription.topic == topic)
    # NULLs sort first on SQLite and last on PostgreSQL: order by "is global" explicitly.
    is_scoped = Subscription.client_id.is_not(None)
    stmt = stmt.order_by(is_scoped, Subscription.client_id, Subscription.name, Subscription.kind, Subscription.id)
    return [subscription_record(row) for row in session.scalars(stmt)]


def find_subscription(session: Session, name: str, *, client_id: str | None) -> SubscriptionRecord | None:
    """The subscription ``name`` of ``client_id`` (None = global), or None.

    A durable and a shared volatile subscription may carry the same name (separate namespaces, §2.8); the
    durable one is returned then.
    """
    row = session.scalar(lookup_statement(name, client_id))
    return None if row is None else subscription_record(row)


def lookup_statement(name: str, client_id: str | None) -> Select[Any]:
    """The look-up of ``find_subscription`` (the durable one first); on a ``Connection`` its rows are the
    columns, which ``subscription_record`` takes as well."""
    return (
        select(Subscription)
        .where(Subscription.name == name, _owner_is(client_id))
        .order_by(Subscription.durable.desc(), Subscription.id)
        .limit(1)
    )


def delete_subscription(session: Session, record: SubscriptionRecord) -> None:
    """Delete the subscription row and its cursor, with the cursor's acks and delivery failures."""
    stored_cursor = session.scalar(select(Subscription.cursor_id).where(Subscription.id == record.id))
    session.execute(delete(Subscription).where(Subscription.id == record.id))
    for cursor_id in {c for c in (stored_cursor, record.cursor_id) if c is not None}:
        delete_cursor(session, cursor_id)


def reset_runtime(session: Session) -> int:
    """At server start: remove non-durable subscriptions (and any cursor they had), set every consumer count to 0.

    Returns:
        How many subscriptions were removed.
    """
    volatile = list(session.execute(select(Subscription.id, Subscription.cursor_id).where(~Subscription.durable)))
    if volatile:
        session.execute(delete(Subscription).where(Subscription.id.in_([row.id for row in volatile])))
        for cursor_id in {row.cursor_id for row in volatile if row.cursor_id is not None}:
            delete_cursor(session, cursor_id)
    session.execute(update(Subscription).where(Subscription.consumers != 0).values(consumers=0))
    return len(volatile)


def backlog_count(
    session: Session, record: SubscriptionRecord, matches: Callable[[bytes], bool] | None, *, batch: int = 1000
) -> int:
    """How many journal messages of ``record.topic`` the subscription still holds.

    Those are the persistent messages above its cursor's low-water mark that the cursor has not acknowledged.
    Rows with ``durable = false`` (non-persistent messages journaled while the subscription paged) are not
    counted: the server drops them at its next start. A subscription without a cursor holds nothing.

    Args:
        matches: when given, only payloads it accepts are counted (the subscription's compiled selector); the
            payloads are then streamed ``batch`` rows at a time.
    """
    if record.cursor_id is None:
        return 0
    low_water = session.scalar(select(AckCursor.low_water).where(AckCursor.id == record.cursor_id))
    if low_water is None:
        return 0
    acked = exists().where(Ack.cursor_id == record.cursor_id, Ack.message_id == JournalMessage.id)
    held = (JournalMessage.address == record.topic, JournalMessage.id > low_water, JournalMessage.durable, ~acked)
    if matches is None:
        return session.scalar(select(func.count()).select_from(JournalMessage).where(*held)) or 0
    payloads = select(JournalMessage.payload).where(*held).order_by(JournalMessage.id)
    return sum(1 for payload in session.scalars(payloads.execution_options(yield_per=batch)) if matches(payload))


def _owner_is(client_id: str | None) -> ColumnElement[bool]:
    return Subscription.client_id.is_(None) if client_id is None else Subscription.client_id == client_id


def delete_cursor(session: Session, cursor_id: int) -> None:
    session.execute(delete(Ack).where(Ack.cursor_id == cursor_id))
    session.execute(delete(DeliveryFailure).where(DeliveryFailure.cursor_id == cursor_id))
    session.execute(delete(AckCursor).where(AckCursor.id == cursor_id))


def subscription_record(row: Subscription | Row[Any]) -> SubscriptionRecord:
    """A stored subscription (an ORM object, or a row of its columns) as a plain record."""
    return SubscriptionRecord(
        id=row.id,
        kind=row.kind,
        durable=row.durable,
        client_id=row.client_id,
        name=row.name,
        topic=row.topic,
        selector=row.selector,
        no_local=row.no_local,
        consumers=row.consumers,
        cursor_id=row.cursor_id,
        created_ms=_ms(row.created_at),
    )


def _ms(value: datetime) -> int:
    if value.tzinfo is None:  # SQLite hands timestamps back naive; they were written in UTC
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)  # exact, unlike timestamp() * 1000
