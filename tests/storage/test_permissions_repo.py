"""storage.permissions on a real database: SQLite and a throwaway PostgreSQL (``store_url``).

Each test frames its own units of work (the repository never commits); principals are added with
``storage.principals``, as ``subgate users add`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from subgate.mapping.permissions import ADMIN_ROLE, ANONYMOUS, PRINCIPAL, ROLE, Grant, Permission, Policy
from subgate.storage.db import session_factory
from subgate.storage.errors import AlreadyExists, NotFound
from subgate.storage.models import PermissionGrant, PrincipalRole
from subgate.storage.permissions import (
    GrantRecord,
    PolicyData,
    add_role,
    assign_role,
    find_grant,
    grant,
    list_grants,
    list_roles,
    load_policy,
    remove_role,
    revoke,
    revoke_all,
    roles_of,
    unassign_role,
)
from subgate.storage.principals import add_principal, remove_principal

READ = Permission.READ_TOPIC
UPDATE = Permission.UPDATE_TOPIC
CONTROL = Permission.CONTROL_SERVER


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    sessions = session_factory(engine)
    with sessions.begin() as session:
        add_principal(session, "alice", "hash-a")
        add_principal(session, "bob", "hash-b")
    return sessions


def shape(record: GrantRecord) -> tuple[str, str, str, str, bool]:
    return (record.subject_kind, record.subject, record.permission.value, record.path, record.allow)


# -- roles ------------------------------------------------------------------------------------------------------
def test_roles_add_list_remove(sessions):
    with sessions.begin() as session:
        record = add_role(session, "ops")
        add_role(session, "dev")
    assert (record.name, record.principals) == ("ops", ())
    with sessions() as session:
        assert [(r.name, r.principals) for r in list_roles(session)] == [("dev", ()), ("ops", ())]
        assert all(isinstance(r.created_at, datetime) for r in list_roles(session))
    with sessions.begin() as session:
        assert remove_role(session, "dev") is True
        assert remove_role(session, "dev") is False
    with sessions() as session:
        assert [r.name for r in list_roles(session)] == ["ops"]


def test_a_role_name_is_unique(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
    with pytest.raises(AlreadyExists, match="role 'ops' already exists"), sessions.begin() as session:
        add_role(session, "ops")


@pytest.mark.parametrize("name", ["", " ops", "ops "])
def test_a_role_name_is_not_blank_or_padded(sessions, name):
    with pytest.raises(ValueError, match="invalid role name"), sessions.begin() as session:
        add_role(session, name)


def test_assign_and_unassign(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
        add_role(session, "dev")
        assert assign_role(session, "ops", "alice") is True
        assert assign_role(session, "ops", "alice") is False  # already held
        assert assign_role(session, "dev", "alice") is True
        assert assign_role(session, "ops", "bob") is True
    with sessions() as session:
        assert roles_of(session, "alice") == ["dev", "ops"]
        assert [(r.name, r.principals) for r in list_roles(session)] == [("dev", ("alice",)), ("ops", ("alice", "bob"))]
    with sessions.begin() as session:
        assert unassign_role(session, "ops", "alice") is True
        assert unassign_role(session, "ops", "alice") is False
        assert unassign_role(session, "nope", "alice") is False
        assert unassign_role(session, "ops", "nobody") is False
    with sessions() as session:
        assert roles_of(session, "alice") == ["dev"]
        assert roles_of(session, "bob") == ["ops"]
        assert roles_of(session, "nobody") == []


@pytest.mark.parametrize(
    ("role", "user", "message"),
    [("ops", "nobody", "no user named 'nobody'"), ("nope", "alice", "no role named 'nope'")],
)
def test_assign_needs_an_existing_user_and_role(sessions, role, user, message):
    with sessions.begin() as session:
        add_role(session, "ops")
    with pytest.raises(NotFound, match=message), sessions.begin() as session:
        assign_role(session, role, user)


def test_anonymous_cannot_hold_a_role(sessions):
    with pytest.raises(NotFound, match="no user named 'anonymous'"), sessions.begin() as session:
        assign_role(session, ADMIN_ROLE, ANONYMOUS)


def test_the_admin_role_is_created_when_first_used(sessions):
    with sessions.begin() as session:
        assert assign_role(session, ADMIN_ROLE, "alice") is True
    with sessions() as session:
        assert [(r.name, r.principals) for r in list_roles(session)] == [(ADMIN_ROLE, ("alice",))]
    with sessions.begin() as session:
        assert assign_role(session, ADMIN_ROLE, "bob") is True  # the existing row this time
    with pytest.raises(AlreadyExists), sessions.begin() as session:
        add_role(session, ADMIN_ROLE)


def test_removing_a_role_removes_its_assignments_and_grants(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
        assign_role(session, "ops", "alice")
        grant(session, ROLE, "ops", READ, "prices")
        grant(session, PRINCIPAL, "alice", READ, "orders")
    with sessions.begin() as session:
        assert remove_role(session, "ops")
    with sessions() as session:
        assert roles_of(session, "alice") == []
        assert session.scalars(select(PrincipalRole)).all() == []
        assert [shape(g) for g in list_grants(session)] == [("principal", "alice", "READ_TOPIC", "orders", True)]


def test_removing_a_user_removes_its_assignments(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
        assign_role(session, "ops", "alice")
        assign_role(session, "ops", "bob")
    with sessions.begin() as session:
        assert remove_principal(session, "alice")
    with sessions() as session:
        assert [(r.name, r.principals) for r in list_roles(session)] == [("ops", ("bob",))]


# -- grants -----------------------------------------------------------------------------------------------------
def test_grant_find_and_list(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
        first = grant(session, PRINCIPAL, "alice", READ, "prices")
        grant(session, PRINCIPAL, "alice", "update_topic")  # a name works; no path = the root
        grant(session, ROLE, "ops", READ, "prices/fx", allow=False)
        grant(session, PRINCIPAL, ANONYMOUS, Permission.SELECT_TOPIC, "public")  # anonymous has no row
        grant(session, ROLE, "ops", CONTROL)
    assert shape(first) == ("principal", "alice", "READ_TOPIC", "prices", True)
    with sessions() as session:
        assert [shape(g) for g in list_grants(session)] == [
            ("principal", "alice", "UPDATE_TOPIC", "", True),
            ("principal", "alice", "READ_TOPIC", "prices", True),
            ("principal", ANONYMOUS, "SELECT_TOPIC", "public", True),
            ("role", "ops", "CONTROL_SERVER", "", True),
            ("role", "ops", "READ_TOPIC", "prices/fx", False),
        ]
        assert [g.path for g in list_grants(session, PRINCIPAL, "alice")] == ["", "prices"]
        assert [g.subject for g in list_grants(session, ROLE)] == ["ops", "ops"]
        assert [g.subject for g in list_grants(session, subject="ops")] == ["ops", "ops"]
        assert [g.subject for g in list_grants(session, permission="read_topic")] == ["alice", "ops"]
        assert list_grants(session, PRINCIPAL, "bob") == []
        found = find_grant(session, ROLE, "ops", READ, "prices/fx")
        assert found is not None and not found.allow
        assert find_grant(session, ROLE, "ops", READ, "prices") is None
        assert find_grant(session, PRINCIPAL, "alice", UPDATE, None) is not None  # None and "" are the root
        assert find_grant(session, ROLE, "ops", CONTROL, None) is not None


def test_granting_again_replaces_allow_or_deny(sessions):
    with sessions.begin() as session:
        grant(session, PRINCIPAL, "alice", READ, "a")
    with sessions.begin() as session:
        replaced = grant(session, PRINCIPAL, "alice", READ, "a", allow=False)
    assert not replaced.allow
    with sessions.begin() as session:
        grant(session, PRINCIPAL, "alice", READ, "a", allow=False)  # the same again: no second row
        grant(session, PRINCIPAL, "alice", CONTROL)
        grant(session, PRINCIPAL, "alice", CONTROL, "")
    with sessions() as session:
        assert [shape(g) for g in list_grants(session)] == [
            ("principal", "alice", "CONTROL_SERVER", "", True),
            ("principal", "alice", "READ_TOPIC", "a", False),
        ]


def test_the_root_is_stored_as_an_empty_path_so_the_unique_constraint_holds(sessions):
    with sessions.begin() as session:
        grant(session, PRINCIPAL, "alice", READ)
    row = {
        "subject_kind": "principal",
        "subject": "alice",
        "permission": "READ_TOPIC",
        "path": "",
        "allow": False,
        "created_at": datetime.now(UTC),
    }
    with pytest.raises(IntegrityError), sessions.begin() as session:
        session.execute(insert(PermissionGrant), [row])


@pytest.mark.parametrize(
    ("kind", "subject", "permission", "path", "error", "message"),
    [
        (PRINCIPAL, "nobody", READ, "a", NotFound, "no user named 'nobody'"),
        (ROLE, "nope", READ, "a", NotFound, "no role named 'nope'"),
        (PRINCIPAL, "alice", CONTROL, "a", ValueError, "CONTROL_SERVER is a global permission"),
        (PRINCIPAL, "alice", "READ", "a", ValueError, "unknown permission 'READ'"),
        ("group", "alice", READ, "a", ValueError, "subject kind"),
    ],
)
def test_grant_refuses(sessions, kind, subject, permission, path, error, message):
    with pytest.raises(error, match=message), sessions.begin() as session:
        grant(session, kind, subject, permission, path)
    with sessions() as session:
        assert list_grants(session) == []


def test_a_grant_to_admin_creates_the_role(sessions):
    with sessions.begin() as session:
        grant(session, ROLE, ADMIN_ROLE, UPDATE, "audit", allow=False)
    with sessions() as session:
        assert [r.name for r in list_roles(session)] == [ADMIN_ROLE]


def test_revoke(sessions):
    with sessions.begin() as session:
        grant(session, PRINCIPAL, "alice", READ, "a")
        grant(session, PRINCIPAL, "alice", READ, "a/b", allow=False)
        grant(session, PRINCIPAL, "alice", CONTROL)
    with sessions.begin() as session:
        assert revoke(session, PRINCIPAL, "alice", READ, "a/b") is True  # a denial, removed like an allow
        assert revoke(session, PRINCIPAL, "alice", READ, "a/b") is False
        assert revoke(session, PRINCIPAL, "alice", READ, "a/b/c") is False  # exactly that path only
        assert revoke(session, PRINCIPAL, "alice", CONTROL) is True
    with sessions() as session:
        assert [shape(g) for g in list_grants(session)] == [("principal", "alice", "READ_TOPIC", "a", True)]


def test_revoke_all(sessions):
    with sessions.begin() as session:
        grant(session, PRINCIPAL, "alice", READ, "a")
        grant(session, PRINCIPAL, "alice", UPDATE, "b")
        grant(session, PRINCIPAL, "bob", READ, "a")
    with sessions.begin() as session:
        assert revoke_all(session, PRINCIPAL, "alice") == 2
        assert revoke_all(session, PRINCIPAL, "alice") == 0
    with sessions() as session:
        assert [g.subject for g in list_grants(session)] == ["bob"]


# -- load_policy ------------------------------------------------------------------------------------------------
def test_load_policy_on_an_empty_store(engine):
    with session_factory(engine)() as session:
        data = load_policy(session)
    assert data == PolicyData(0, (), {})
    assert Policy(*data).allows(None, CONTROL)


def test_load_policy_feeds_the_policy(sessions):
    with sessions.begin() as session:
        add_role(session, "ops")
        assign_role(session, "ops", "alice")
        assign_role(session, ADMIN_ROLE, "bob")
        grant(session, ROLE, "ops", READ, "prices")
        grant(session, ROLE, "ops", READ, "prices/fx", allow=False)
        grant(session, PRINCIPAL, ANONYMOUS, Permission.SELECT_TOPIC, "public")
        grant(session, PRINCIPAL, "alice", CONTROL)
    with sessions() as session:
        data = load_policy(session)
    assert data.principal_count == 2
    assert data.roles_by_principal == {"alice": frozenset({"ops"}), "bob": frozenset({ADMIN_ROLE})}
    assert set(data.grants) == {
        Grant(ROLE, "ops", READ, "prices"),
        Grant(ROLE, "ops", READ, "prices/fx", allow=False),
        Grant(PRINCIPAL, ANONYMOUS, Permission.SELECT_TOPIC, "public"),
        Grant(PRINCIPAL, "alice", CONTROL),
    }
    policy = Policy(*data)
    assert policy.allows("alice", READ, "prices/eq")
    assert not policy.allows("alice", READ, "prices/fx/EURUSD")
    assert policy.allows("alice", CONTROL)
    assert policy.allows("bob", Permission.MODIFY_TOPIC, "anything")
    assert policy.allows(None, Permission.SELECT_TOPIC, "public/news")
    assert not policy.allows(None, READ, "public/news")
