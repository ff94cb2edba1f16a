"""Roles, role assignments and permission grants in the store. The caller owns the session (and the commit).

The rules that decide what a grant means live in ``mapping.permissions``; this module only keeps the rows and
hands them over as ``mapping.permissions.Grant`` records (``load_policy``). It checks what the schema cannot:
a grant or an assignment names a subject that exists (a principal, or ``anonymous``, which never has a row;
or a role), and the built-in role ``admin`` is created on first use. Paths arrive validated by the caller
(``topics.paths``); the root, and the no-path of a global permission, are stored as ``""``, never NULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from subgate.mapping.permissions import (
    ADMIN_ROLE,
    ANONYMOUS,
    PRINCIPAL,
    ROLE,
    Grant,
    Permission,
    SubjectKind,
    parse_permission,
)
from subgate.storage.errors import AlreadyExists, NotFound
from subgate.storage.models import PermissionGrant, Principal, PrincipalRole, Role


@dataclass(frozen=True, slots=True)
class RoleRecord:
    name: str
    created_at: datetime
    principals: tuple[str, ...]  # who holds it, sorted


@dataclass(frozen=True, slots=True)
class GrantRecord:
    subject_kind: SubjectKind
    subject: str
    permission: Permission
    path: str  # "" = the root (and the only value for a global permission)
    allow: bool
    created_at: datetime

    def to_grant(self) -> Grant:
        return Grant(self.subject_kind, self.subject, self.permission, self.path, self.allow)


class PolicyData(NamedTuple):
    """What ``mapping.permissions.Policy`` needs: ``Policy(*load_policy(session))``."""

    principal_count: int
    grants: tuple[Grant, ...]
    roles_by_principal: dict[str, frozenset[str]]


# -- roles ------------------------------------------------------------------------------------------------------
def add_role(session: Session, name: str) -> RoleRecord:
    """Raises AlreadyExists when the name is taken, ValueError when it is empty or padded with spaces."""
    if not name or name != name.strip():
        raise ValueError(f"invalid role name {name!r}: it must be non-empty, without leading or trailing spaces")
    if session.scalar(select(Role.id).where(Role.name == name)) is not None:
        raise AlreadyExists(f"role {name!r} already exists")
    role = Role(name=name, created_at=datetime.now(UTC))
    session.add(role)
    try:
        session.flush()
    except IntegrityError as exc:  # added concurrently
        raise AlreadyExists(f"role {name!r} already exists") from exc
    return RoleRecord(role.name, role.created_at, ())


def remove_role(session: Session, name: str) -> bool:
    """Remove a role, its assignments and the grants made to it; False when there is no such role."""
    role_id = session.scalar(select(Role.id).where(Role.name == name))
    if role_id is None:
        return False
    session.execute(delete(PrincipalRole).where(PrincipalRole.role_id == role_id))
    revoke_all(session, ROLE, name)
    session.execute(delete(Role).where(Role.id == role_id))
    return True


def list_roles(session: Session) -> list[RoleRecord]:
    members: dict[int, list[str]] = {}
    holders = select(PrincipalRole.role_id, Principal.name).join(Principal, Principal.id == PrincipalRole.principal_id)
    for role_id, principal in session.execute(holders.order_by(Principal.name)):
        members.setdefault(role_id, []).append(principal)
    roles = session.scalars(select(Role).order_by(Role.name))
    return [RoleRecord(r.name, r.created_at, tuple(members.get(r.id, ()))) for r in roles]


def assign_role(session: Session, role: str, principal: str) -> bool:
    """Give ``principal`` the role; False when it already holds it.

    Raises:
        NotFound: no such principal, or no such role (``admin`` is created when first assigned).
    """
    principal_id = _principal_id(session, principal)
    role_id = _role_id(session, role)
    key = {"principal_id": principal_id, "role_id": role_id}
    if session.get(PrincipalRole, key) is not None:
        return False
    session.add(PrincipalRole(**key))
    session.flush()
    return True


def unassign_role(session: Session, role: str, principal: str) -> bool:
    """Take the role from ``principal``; False when it did not hold it (or either does not exist)."""
    role_ids = select(Role.id).where(Role.name == role).scalar_subquery()
    principal_ids = select(Principal.id).where(Principal.name == principal).scalar_subquery()
    stmt = delete(PrincipalRole).where(PrincipalRole.role_id == role_ids, PrincipalRole.principal_id == principal_ids)
    return bool(session.execute(stmt).rowcount > 0)  # type: ignore[attr-defined]


def roles_of(session: Session, principal: str) -> list[str]:
    stmt = (
        select(Role.name)
        .join(PrincipalRole, PrincipalRole.role_id == Role.id)
        .join(Principal, Principal.id == PrincipalRole.principal_id)
        .where(Principal.name == principal)
        .order_by(Role.name)
    )
    return list(session.scalars(stmt))


def _principal_id(session: Session, name: str) -> int:
    principal_id = session.scalar(select(Principal.id).where(Principal.name == name))
    if principal_id is None:
        raise NotFound(f"no user named {name!r}")
    return principal_id


def _role_id(session: Session, name: str) -> int:
    role_id = session.scalar(select(Role.id).where(Role.name == name))
    if role_id is not None:
        return role_id
    if name != ADMIN_ROLE:
        raise NotFound(f"no role named {name!r}")
    role = Role(name=ADMIN_ROLE, created_at=datetime.now(UTC))
    session.add(role)
    session.flush()
    return role.id


# -- grants -----------------------------------------------------------------------------------------------------
def grant(
    session: Session,
    subject_kind: SubjectKind,
    subject: str,
    permission: Permission | str,
    path: str | None = None,
    *,
    allow: bool = True,
) -> GrantRecord:
    """Allow (or with ``allow=False`` deny) a permission on ``path`` (None or ``""`` = the root).

    There is at most one grant per subject, permission and path: granting again replaces ``allow`` (so a denial
    overwrites an allow at the same path, and the other way round).

    Raises:
        ValueError: unknown permission or subject kind, or a path given with a global permission.
        NotFound: the principal (other than ``anonymous``) or the role does not exist (``admin`` is created).
    """
    wanted = Grant(subject_kind, subject, parse_permission(permission), path, allow)
    _check_subject(session, wanted.subject_kind, subject)
    row = _find(session, wanted)
    if row is None:
        row = PermissionGrant(
            subject_kind=wanted.subject_kind,
            subject=subject,
            permission=wanted.permission.value,
            path=wanted.path or "",
            allow=allow,
            created_at=datetime.now(UTC),
        )
        session.add(row)
    else:
        row.allow = allow
    session.flush()
    return _record(row)


def revoke(
    session: Session, subject_kind: SubjectKind, subject: str, permission: Permission | str, path: str | None = None
) -> bool:
    """Remove the grant (allow or denial) at exactly ``path``; False when there is none."""
    row = _find(session, Grant(subject_kind, subject, parse_permission(permission), path))
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def revoke_all(session: Session, subject_kind: SubjectKind, subject: str) -> int:
    """Remove every grant to one subject (call it when removing a principal); returns how many went."""
    stmt = delete(PermissionGrant).where(
        PermissionGrant.subject_kind == subject_kind, PermissionGrant.subject == subject
    )
    return int(session.execute(stmt).rowcount)  # type: ignore[attr-defined]


def find_grant(
    session: Session, subject_kind: SubjectKind, subject: str, permission: Permission | str, path: str | None = None
) -> GrantRecord | None:
    row = _find(session, Grant(subject_kind, subject, parse_permission(permission), path))
    return None if row is None else _record(row)


def list_grants(
    session: Session,
    subject_kind: SubjectKind | None = None,
    subject: str | None = None,
    permission: Permission | str | None = None,
) -> list[GrantRecord]:
    """Grants, optionally only those of one subject kind, subject name or permission; in a stable order."""
    stmt = select(PermissionGrant)
    if subject_kind is not None:
        stmt = stmt.where(PermissionGrant.subject_kind == subject_kind)
    if subject is not None:
        stmt = stmt.where(PermissionGrant.subject == subject)
    if permission is not None:
        stmt = stmt.where(PermissionGrant.permission == parse_permission(permission).value)
    stmt = stmt.order_by(
        PermissionGrant.subject_kind, PermissionGrant.subject, PermissionGrant.path, PermissionGrant.permission
    )
    return [_record(row) for row in session.scalars(stmt)]


def load_policy(session: Session) -> PolicyData:
    """Everything the server needs to decide permissions, read in one go (at start-up, and after a change)."""
    count = session.scalar(select(func.count()).select_from(Principal)) or 0
    grants = tuple(record.to_grant() for record in list_grants(session))
    holders = (
        select(Principal.name, Role.name)
        .join(PrincipalRole, PrincipalRole.principal_id == Principal.id)
        .join(Role, Role.id == PrincipalRole.role_id)
    )
    roles: dict[str, set[str]] = {}
    for principal, role in session.execute(holders):
        roles.setdefault(principal, set()).add(role)
    return PolicyData(count, grants, {name: frozenset(held) for name, held in roles.items()})


def _check_subject(session: Session, subject_kind: SubjectKind, subject: str) -> None:
    if subject_kind == ROLE:
        _role_id(session, subject)
    elif subject != ANONYMOUS:
        _principal_id(session, subject)


def _find(session: Session, wanted: Grant) -> PermissionGrant | None:
    stmt = select(PermissionGrant).where(
        PermissionGrant.subject_kind == wanted.subject_kind,
        PermissionGrant.subject == wanted.subject,
        PermissionGrant.permission == wanted.permission.value,
        PermissionGrant.path == (wanted.path or ""),
    )
    return session.scalar(stmt)


def _record(row: PermissionGrant) -> GrantRecord:
    kind: SubjectKind = PRINCIPAL if row.subject_kind == PRINCIPAL else ROLE
    return GrantRecord(kind, row.subject, Permission(row.permission), row.path, row.allow, row.created_at)
