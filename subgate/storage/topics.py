"""Topics in the store: the ``nodes`` rows of kind ``topic`` (used by ``subgate topics`` when no server runs).

Owns listing, adding and removing topic rows directly in the store. A running server keeps its own tree and
writes the same rows through the journal writer; these functions are for the offline CLI and tests. Removing a
topic also removes the durable subscriptions on it (as the server does), with their cursors.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from subgate.storage.errors import AlreadyExists
from subgate.storage.models import Node, Subscription
from subgate.storage.subscriptions import delete_cursor

TOPIC = "topic"


def list_topics(session: Session) -> list[str]:
    """Every topic path in the store, sorted."""
    return list(session.scalars(select(Node.name).where(Node.kind == TOPIC).order_by(Node.name)))


def add_topic(session: Session, path: str) -> bool:
    """Add a durable topic; False when it exists already.

    Raises:
        AlreadyExists: the name is taken by a queue.
    """
    existing = session.scalar(select(Node).where(Node.name == path))
    if existing is not None:
        if existing.kind != TOPIC:
            raise AlreadyExists(f"{path!r} is a {existing.kind}, not a topic")
        return False
    next_id = (session.scalar(select(func.max(Node.id))) or 0) + 1
    session.add(Node(id=next_id, name=path, kind=TOPIC, durable=True, auto_created=False, created_at=datetime.now(UTC)))
    session.flush()
    return True


def remove_topics(session: Session, paths: list[str]) -> int:
    """Remove these topics and the subscriptions on them. Returns how many topic rows went."""
    if not paths:
        return 0
    for sub in session.scalars(select(Subscription).where(Subscription.topic.in_(paths))).all():
        cursor_id = sub.cursor_id
        session.delete(sub)
        session.flush()
        if cursor_id is not None:
            delete_cursor(session, cursor_id)
    nodes = session.scalars(select(Node).where(Node.kind == TOPIC, Node.name.in_(paths))).all()
    for node in nodes:
        session.delete(node)
    session.flush()
    return len(nodes)
