"""Principals (users) for SASL PLAIN: add, list, remove, look up. The caller owns the session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from subgate.storage.errors import AlreadyExists
from subgate.storage.models import Principal


@dataclass(frozen=True, slots=True)
class PrincipalRecord:
    name: str
    password_hash: str
    created_at: datetime


def _record(p: Principal) -> PrincipalRecord:
    return PrincipalRecord(p.name, p.password_hash, p.created_at)


def add_principal(session: Session, name: str, password_hash: str) -> PrincipalRecord:
    principal = Principal(name=name, password_hash=password_hash, created_at=datetime.now(UTC))
    session.add(principal)
    try:
        session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(f"principal {name!r} already exists") from exc
    return _record(principal)


def set_password(session: Session, name: str, password_hash: str) -> bool:
    principal = session.scalar(select(Principal).where(Principal.name == name))
    if principal is None:
        return False
    principal.password_hash = password_hash
    return True


def replace_password_hash(session: Session, name: str, old: str, new: str) -> bool:
    """Set ``name``'s hash to ``new`` only if it is still ``old`` (a password set meanwhile is kept)."""
    result = session.execute(
        update(Principal).where(Principal.name == name, Principal.password_hash == old).values(password_hash=new)
    )
    return result.rowcount > 0  # type: ignore[attr-defined]


def remove_principal(session: Session, name: str) -> bool:
    return session.execute(delete(Principal).where(Principal.name == name)).rowcount > 0  # type: ignore[attr-defined]


def list_principals(session: Session) -> list[PrincipalRecord]:
    return [_record(p) for p in session.scalars(select(Principal).order_by(Principal.name))]


def find_principal(session: Session, name: str) -> PrincipalRecord | None:
    principal = session.scalar(select(Principal).where(Principal.name == name))
    return None if principal is None else _record(principal)


def count_principals(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Principal)) or 0
