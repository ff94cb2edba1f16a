"""Remove-with-session registrations in the store: read back at start-up (the journal writer keeps them)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from subgate.storage.models import RemovalRegistration


@dataclass(frozen=True, slots=True)
class RemovalRecord:
    id: int
    branch: str
    container_id: str | None
    link_name: str


def list_removal_registrations(session: Session) -> list[RemovalRecord]:
    rows = session.scalars(select(RemovalRegistration).order_by(RemovalRegistration.id))
    return [RemovalRecord(row.id, row.branch, row.container_id, row.link_name) for row in rows]


def max_removal_registration_id(session: Session) -> int:
    return session.scalar(select(func.max(RemovalRegistration.id))) or 0
