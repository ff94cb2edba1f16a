"""The permission rules of design.md §3 as tables (mapping.permissions): most specific path wins, whole segments,
denial beats allow at equal specificity, roles, global permissions, and the default policy."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import UNAUTHORIZED, Refused
from subgate.mapping.permissions import (
    ADMIN_ROLE,
    ANONYMOUS,
    GLOBAL_PERMISSIONS,
    OPEN_POLICY,
    PATH_PERMISSIONS,
    PRINCIPAL,
    ROLE,
    Grant,
    Permission,
    Policy,
    covers,
    depth,
    parse_permission,
    refusal,
    resolve,
)

SELECT = Permission.SELECT_TOPIC
READ = Permission.READ_TOPIC
UPDATE = Permission.UPDATE_TOPIC
MODIFY = Permission.MODIFY_TOPIC
HANDLER = Permission.REGISTER_HANDLER
CONTROL = Permission.CONTROL_SERVER


def allow(subject: str, permission: Permission, path: str | None = None, kind: str = PRINCIPAL) -> Grant:
    return Grant(kind, subject, permission, path)  # type: ignore[arg-type]


def deny(subject: str, permission: Permission, path: str | None = None, kind: str = PRINCIPAL) -> Grant:
    return Grant(kind, subject, permission, path, allow=False)  # type: ignore[arg-type]


# -- the records ------------------------------------------------------------------------------------------------
def test_the_six_permissions_split_into_path_scoped_and_global():
    assert {p.value for p in PATH_PERMISSIONS} == {"SELECT_TOPIC", "READ_TOPIC", "UPDATE_TOPIC", "MODIFY_TOPIC"}
    assert {p.value for p in GLOBAL_PERMISSIONS} == {"REGISTER_HANDLER", "CONTROL_SERVER"}
    assert all(p.scoped for p in PATH_PERMISSIONS) and not any(p.scoped for p in GLOBAL_PERMISSIONS)


@pytest.mark.parametrize(
    ("name", "permission"),
    [("READ_TOPIC", READ), ("read_topic", READ), (" select-topic ", SELECT), ("Control_Server", CONTROL)],
)
def test_parse_permission(name, permission):
    assert parse_permission(name) is permission


@pytest.mark.parametrize("name", ["", "READ", "READ_TOPICS", "admin"])
def test_parse_permission_names_the_valid_ones(name):
    with pytest.raises(ValueError, match="expected one of SELECT_TOPIC, READ_TOPIC, .*CONTROL_SERVER"):
        parse_permission(name)


@pytest.mark.parametrize(
    ("grant", "path"),
    [
        (Grant(PRINCIPAL, "alice", READ), ""),
        (Grant(PRINCIPAL, "alice", READ, ""), ""),
        (Grant(PRINCIPAL, "alice", READ, "a/b"), "a/b"),
        (Grant(ROLE, "ops", CONTROL), None),
        (Grant(ROLE, "ops", CONTROL, ""), None),
        (Grant(ROLE, "ops", "update_topic", "x"), "x"),  # type: ignore[arg-type]  # a name is parsed
    ],
)
def test_grant_paths_are_normalised(grant, path):
    assert grant.path == path
    assert isinstance(grant.permission, Permission)


def test_a_global_permission_takes_no_path():
    with pytest.raises(ValueError, match="REGISTER_HANDLER is a global permission"):
        Grant(PRINCIPAL, "alice", HANDLER, "a")


def test_a_grant_is_to_a_principal_or_a_role():
    with pytest.raises(ValueError, match="subject kind"):
        Grant("group", "ops", READ)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("grant_path", "path", "covered", "specificity"),
    [
        ("", "a", True, 0),
        ("", "", True, 0),
        ("a", "a", True, 1),
        ("a", "a/b/c", True, 1),
        ("a/b", "a/b/c", True, 2),
        ("a/b", "a/bc", False, 2),  # segments, not string prefixes
        ("a/b", "a", False, 2),  # a descendant does not cover its ancestor
        ("a/b", "", False, 2),
        ("b", "a/b", False, 1),
    ],
)
def test_covers_by_whole_segments(grant_path, path, covered, specificity):
    assert covers(grant_path, path) is covered
    assert depth(grant_path) == specificity


# -- resolve ----------------------------------------------------------------------------------------------------
BRANCH = [
    allow("alice", READ, "prices"),
    deny("alice", READ, "prices/fx"),
    allow("alice", READ, "prices/fx/EURUSD"),
]


@pytest.mark.parametrize(
    ("grants", "principal", "roles", "permission", "path", "allowed"),
    [
        # nothing granted: denied
        ([], "alice", frozenset(), READ, "a", False),
        # a grant covers its path and everything below it
        ([allow("alice", READ, "a")], "alice", frozenset(), READ, "a", True),
        ([allow("alice", READ, "a")], "alice", frozenset(), READ, "a/b/c", True),
        ([allow("alice", READ)], "alice", frozenset(), READ, "anything/at/all", True),
        ([allow("alice", READ)], "alice", frozenset(), READ, None, True),
        ([allow("alice", READ, "a")], "alice", frozenset(), READ, None, False),  # the root is above 'a'
        # whole segments: a/b does not cover a/bc, nor the parent a
        ([allow("alice", READ, "a/b")], "alice", frozenset(), READ, "a/bc", False),
        ([allow("alice", READ, "a/b")], "alice", frozenset(), READ, "a", False),
        # the grant is for one permission, and for one principal
        ([allow("alice", READ, "a")], "alice", frozenset(), UPDATE, "a", False),
        ([allow("alice", READ, "a")], "bob", frozenset(), READ, "a", False),
        # most specific path wins: a denial below an allow, an allow below that denial
        (BRANCH, "alice", frozenset(), READ, "prices/eq", True),
        (BRANCH, "alice", frozenset(), READ, "prices/fx", False),
        (BRANCH, "alice", frozenset(), READ, "prices/fx/GBPUSD", False),
        (BRANCH, "alice", frozenset(), READ, "prices/fx/EURUSD", True),
        (BRANCH, "alice", frozenset(), READ, "prices/fx/EURUSD/bid", True),
        (BRANCH, "alice", frozenset(), READ, "prices/fxx", True),
        # ... in whichever order the grants come
        (list(reversed(BRANCH)), "alice", frozenset(), READ, "prices/fx/GBPUSD", False),
        ([deny("alice", READ), allow("alice", READ, "a")], "alice", frozenset(), READ, "a/b", True),
        ([allow("alice", READ, "a"), deny("alice", READ)], "alice", frozenset(), READ, "a/b", True),
        # equal specificity: the denial wins, in either order
        ([allow("alice", READ, "a"), deny("alice", READ, "a")], "alice", frozenset(), READ, "a/b", False),
        ([deny("alice", READ, "a"), allow("alice", READ, "a")], "alice", frozenset(), READ, "a/b", False),
        # roles: a principal holds its roles' grants too, and no others
        ([allow("ops", READ, "a", ROLE)], "alice", frozenset({"ops"}), READ, "a/b", True),
        ([allow("ops", READ, "a", ROLE)], "alice", frozenset({"dev"}), READ, "a/b", False),
        ([allow("ops", READ, "a", ROLE)], "ops", frozenset(), READ, "a/b", False),  # a role is not a principal
        ([allow("alice", READ, "a")], "x", frozenset({"alice"}), READ, "a/b", False),  # nor the other way round
        # principal and role grants compete on specificity alone ...
        ([allow("ops", READ, "a", ROLE), deny("alice", READ, "a/b")], "alice", frozenset({"ops"}), READ, "a/b", False),
        ([deny("ops", READ, "a", ROLE), allow("alice", READ, "a/b")], "alice", frozenset({"ops"}), READ, "a/b", True),
        # ... and a role's denial beats the principal's allow at the same path
        ([deny("ops", READ, "a", ROLE), allow("alice", READ, "a")], "alice", frozenset({"ops"}), READ, "a/b", False),
        ([deny("o", READ, "a", ROLE), allow("d", READ, "a", ROLE)], "x", frozenset({"o", "d"}), READ, "a", False),
        # anonymous (None) is the principal named 'anonymous'
        ([allow(ANONYMOUS, SELECT, "public")], None, frozenset(), SELECT, "public/news", True),
        ([allow(ANONYMOUS, SELECT, "public")], None, frozenset(), SELECT, "private", False),
        ([allow("alice", SELECT, "public")], None, frozenset(), SELECT, "public", False),
        # global permissions: explicit grants only, no path, a denial wins
        ([allow("alice", CONTROL)], "alice", frozenset(), CONTROL, None, True),
        ([allow("alice", CONTROL)], "alice", frozenset(), CONTROL, "ignored/path", True),
        ([allow("ops", HANDLER, kind=ROLE)], "alice", frozenset({"ops"}), HANDLER, None, True),
        ([allow("alice", CONTROL)], "alice", frozenset(), HANDLER, None, False),
        ([allow("alice", p) for p in PATH_PERMISSIONS], "alice", frozenset(), CONTROL, None, False),
        ([allow("alice", CONTROL), deny("ops", CONTROL, kind=ROLE)], "alice", frozenset({"ops"}), CONTROL, None, False),
        ([deny("alice", CONTROL), allow("alice", CONTROL)], "alice", frozenset(), CONTROL, None, False),
        # a global grant says nothing about the path-scoped permissions
        ([allow("alice", CONTROL)], "alice", frozenset(), MODIFY, "a", False),
    ],
)
def test_resolve(grants, principal, roles, permission, path, allowed):
    assert resolve(principal, roles, grants, permission, path) is allowed


# -- the default policy -----------------------------------------------------------------------------------------
# Sorted: the permission sets' order changes from one process to the next, and pytest-xdist workers must collect
# the same tests in the same order.
EVERY_CHECK = [(p, "a/b") for p in sorted(PATH_PERMISSIONS)] + [(p, None) for p in sorted(GLOBAL_PERMISSIONS)]


@pytest.mark.parametrize(("permission", "path"), EVERY_CHECK)
@pytest.mark.parametrize("principal", [None, "alice", "nobody-in-particular"])
def test_without_principals_everybody_may_do_everything(principal, permission, path):
    assert OPEN_POLICY.open
    assert OPEN_POLICY.allows(principal, permission, path)
    OPEN_POLICY.check(principal, permission, path)
    # grants do not matter yet: not even a denial
    policy = Policy(0, (deny(ANONYMOUS, permission), deny("alice", permission)))
    assert policy.allows(principal, permission, path)


@pytest.mark.parametrize(("permission", "path"), EVERY_CHECK)
@pytest.mark.parametrize("principal", [None, "alice"])
def test_with_principals_nothing_is_allowed_without_a_grant(principal, permission, path):
    policy = Policy(principal_count=1)
    assert not policy.open
    assert not policy.allows(principal, permission, path)


PUBLIC = Policy(
    principal_count=2,
    grants=(
        allow(ANONYMOUS, SELECT, "public"),
        allow(ANONYMOUS, READ, "public"),
        allow("alice", UPDATE, "public"),
        allow("ops", MODIFY, "prices", ROLE),
        deny("ops", MODIFY, "prices/locked", ROLE),
        deny(ADMIN_ROLE, UPDATE, "audit", ROLE),
        deny("root", CONTROL),
    ),
    roles_by_principal={"alice": frozenset({"ops"}), "root": frozenset({ADMIN_ROLE}), ANONYMOUS: frozenset({"ops"})},
)


@pytest.mark.parametrize(
    ("principal", "permission", "path", "allowed"),
    [
        # anonymous: only the grants to 'anonymous', never any role (not even one held by a user of that name)
        (None, SELECT, "public/news", True),
        (None, READ, "public", True),
        (None, UPDATE, "public", False),
        (None, READ, "prices", False),
        (None, MODIFY, "prices", False),
        (None, CONTROL, None, False),
        # a user: its own grants and its roles' grants
        ("alice", UPDATE, "public/x", True),
        ("alice", READ, "public/x", False),  # granted to anonymous, not to every user
        ("alice", MODIFY, "prices/fx", True),
        ("alice", MODIFY, "prices/locked/x", False),
        ("alice", MODIFY, "orders", False),
        ("alice", HANDLER, None, False),
        ("bob", SELECT, "public", False),  # a user without grants or roles
        # a PLAIN user that happens to be called 'anonymous' keeps its roles
        (ANONYMOUS, MODIFY, "prices", True),
        # admin: every permission on the root and both global ones ...
        ("root", SELECT, "x", True),
        ("root", READ, None, True),
        ("root", MODIFY, "prices/locked", True),
        ("root", HANDLER, None, True),
        ("root", UPDATE, "public", True),
        # ... narrowed by denials like any other grant
        ("root", UPDATE, "audit/log", False),
        ("root", CONTROL, None, False),
    ],
)
def test_policy_with_principals(principal, permission, path, allowed):
    assert PUBLIC.allows(principal, permission, path) is allowed


def test_admin_holds_every_permission():
    admin = Policy(1, roles_by_principal={"root": frozenset({ADMIN_ROLE})})
    assert all(admin.allows("root", permission, path) for permission, path in EVERY_CHECK)
    assert not any(admin.allows("alice", permission, path) for permission, path in EVERY_CHECK)


def test_roles_of():
    assert PUBLIC.roles_of("alice") == frozenset({"ops"})
    assert PUBLIC.roles_of("bob") == frozenset()
    assert PUBLIC.roles_of(None) == frozenset()


# -- refusals ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("principal", "permission", "path", "kind", "description"),
    [
        (
            "bob",
            READ,
            "prices/fx",
            None,
            "READ_TOPIC on topic path 'prices/fx' denied to principal 'bob' "
            "(grant: subgate grants add READ_TOPIC --user bob --path prices/fx)",
        ),
        (
            None,
            UPDATE,
            "public",
            None,
            "UPDATE_TOPIC on topic path 'public' denied to anonymous "
            "(grant: subgate grants add UPDATE_TOPIC --user anonymous --path public)",
        ),
        (
            "bob",
            SELECT,
            None,
            None,
            "SELECT_TOPIC on the root denied to principal 'bob' (grant: subgate grants add SELECT_TOPIC --user bob)",
        ),
        (
            "bob",
            SELECT,
            "",
            None,
            "SELECT_TOPIC on the root denied to principal 'bob' (grant: subgate grants add SELECT_TOPIC --user bob)",
        ),
        (
            "bob",
            CONTROL,
            None,
            None,
            "CONTROL_SERVER denied to principal 'bob' (grant: subgate grants add CONTROL_SERVER --user bob, or the "
            "role that holds every permission: subgate roles assign admin bob)",
        ),
        (
            None,
            HANDLER,
            None,
            None,
            "REGISTER_HANDLER denied to anonymous (grant: subgate grants add REGISTER_HANDLER --user anonymous)",
        ),
        # Issue 11, defect 12: a queue is named as a queue, and creating one says so.
        (
            "bob",
            MODIFY,
            "q1",
            "queue",
            "may not create queue 'q1': MODIFY_TOPIC denied to principal 'bob' "
            "(grant: subgate grants add MODIFY_TOPIC --user bob --path q1)",
        ),
        (
            "bob",
            READ,
            "q1",
            "queue",
            "READ_TOPIC on queue 'q1' denied to principal 'bob' "
            "(grant: subgate grants add READ_TOPIC --user bob --path q1)",
        ),
    ],
)
def test_check_refuses_with_unauthorized_access(principal, permission, path, kind, description):
    with pytest.raises(Refused) as caught:
        PUBLIC.check(principal, permission, path, kind)
    assert (caught.value.condition, caught.value.description) == (UNAUTHORIZED, description)
    assert caught.value.condition == "amqp:unauthorized-access"
    assert repr(refusal(principal, permission, path, kind)) == repr(caught.value)


def test_check_passes_quietly_when_allowed():
    assert PUBLIC.check("alice", UPDATE, "public/x") is None


def test_policies_compare_by_content():
    assert Policy(1, (allow("a", READ),)) == Policy(1, (allow("a", READ),))
    assert Policy(1, (allow("a", READ),)) != Policy(1, (deny("a", READ),))
