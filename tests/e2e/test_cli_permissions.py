"""``subgate roles ...`` and ``subgate grants ...`` against a SQLite store: in-process through click's ``CliRunner``
(tables with ``rich``, and without it), and once as the installed console script. What the commands wrote is
read back with ``storage.permissions.load_policy`` and asked through ``mapping.permissions.Policy``."""

from __future__ import annotations

import json
import re
import sys

import pytest
from click.testing import CliRunner, Result

from subgate.cli.main import main
from subgate.mapping.permissions import Permission, Policy
from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.permissions import load_policy
from tests.support.cli import run_subgate

OUT_OF_DATE = "the store is at schema revision none (empty database) but this subgate needs"


@pytest.fixture
def store(sqlite_url: str) -> list[str]:
    """``--store URL`` of a migrated store holding the users alice and bob."""
    upgrade(sqlite_url)
    for name in ("alice", "bob"):
        added = invoke("users", "add", name, "--password", "pw", "--store", sqlite_url)
        assert added.exit_code == 0, added.output
    return ["--store", sqlite_url]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def ok(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.output


def fails(code: int, *args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == code, result.output
    return result.output


def table(output: str) -> list[list[str]]:
    """Rows of a table as cells split on runs of two or more spaces, without the header rule."""
    lines = [line for line in output.splitlines() if line.strip() and not set(line.strip()) <= {"─", "-"}]
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


def policy(store: list[str]) -> Policy:
    engine = make_engine(store[1])
    try:
        with session_factory(engine)() as session:
            return Policy(*load_policy(session))
    finally:
        engine.dispose()


# -- roles ------------------------------------------------------------------------------------------------------
def test_roles_refuse_an_out_of_date_store(sqlite_url):
    assert OUT_OF_DATE in fails(1, "roles", "list", "--store", sqlite_url)
    assert OUT_OF_DATE in fails(1, "grants", "add", "READ_TOPIC", "--user", "alice", "--store", sqlite_url)


def test_roles_add_assign_list_unassign_remove(store):
    assert ok("roles", "list", *store).startswith("no roles")
    assert ok("roles", "add", "ops", *store) == "added role 'ops'\n"
    assert "role 'ops' already exists" in fails(1, "roles", "add", "ops", *store)
    assert "invalid role name" in fails(2, "roles", "add", " ops", *store)
    assert ok("roles", "assign", "ops", "alice", *store) == "user 'alice' now holds role 'ops'\n"
    assert ok("roles", "assign", "ops", "alice", *store) == "user 'alice' already holds role 'ops'\n"
    assert ok("roles", "assign", "admin", "bob", *store) == "user 'bob' now holds role 'admin'\n"
    assert "no user named 'carol'" in fails(1, "roles", "assign", "ops", "carol", *store)
    assert "no role named 'dev'" in fails(1, "roles", "assign", "dev", "alice", *store)

    rows = table(ok("roles", "list", *store))
    assert rows[0] == ["ROLE", "USERS", "CREATED"]
    assert [row[:2] for row in rows[1:]] == [["admin (built-in)", "bob"], ["ops", "alice"]]
    listed = json.loads(ok("roles", "list", "--json", *store))
    assert [(r["name"], r["users"]) for r in listed] == [("admin", ["bob"]), ("ops", ["alice"])]

    assert ok("roles", "unassign", "ops", "alice", *store) == "user 'alice' no longer holds role 'ops'\n"
    assert "user 'alice' does not hold role 'ops'" in fails(1, "roles", "unassign", "ops", "alice", *store)
    assert ok("roles", "remove", "ops", *store) == "removed role 'ops' with its grants and assignments\n"
    assert "no role named 'ops'" in fails(1, "roles", "remove", "ops", *store)
    assert [r["name"] for r in json.loads(ok("roles", "list", "--json", *store))] == ["admin"]


# -- grants -----------------------------------------------------------------------------------------------------
def test_grants_add_list_remove(store):
    ok("roles", "add", "ops", *store)
    ok("roles", "assign", "ops", "alice", *store)
    assert ok("grants", "list", *store) == "no grants\n"
    assert ok("grants", "add", "READ_TOPIC", "--role", "ops", "--path", "prices", *store) == (
        "allowed READ_TOPIC on 'prices' to role 'ops'\n"
    )
    assert ok("grants", "add", "read-topic", "--role", "ops", "--path", "prices/fx", "--deny", *store) == (
        "denied READ_TOPIC on 'prices/fx' to role 'ops'\n"
    )
    assert ok("grants", "add", "READ_TOPIC", "--role", "ops", "--path", "prices/fx", "--deny", *store) == (
        "denied READ_TOPIC on 'prices/fx' to role 'ops' (unchanged)\n"
    )
    assert ok("grants", "add", "UPDATE_TOPIC", "--user", "alice", "--deny", *store) == (
        "denied UPDATE_TOPIC on the root to user 'alice'\n"
    )
    assert ok("grants", "add", "UPDATE_TOPIC", "--user", "alice", "--path", "", *store) == (
        "allowed UPDATE_TOPIC on the root to user 'alice' (replacing a denial)\n"
    )
    assert ok("grants", "add", "UPDATE_TOPIC", "--user", "alice", "--deny", *store).endswith("(replacing an allow)\n")
    assert ok("grants", "add", "SELECT_TOPIC", "--user", "anonymous", "--path", "public", *store) == (
        "allowed SELECT_TOPIC on 'public' to user 'anonymous'\n"
    )
    assert ok("grants", "add", "CONTROL_SERVER", "--user", "bob", *store) == "allowed CONTROL_SERVER to user 'bob'\n"

    rows = table(ok("grants", "list", *store))
    assert rows == [
        ["KIND", "SUBJECT", "PERMISSION", "PATH", "EFFECT", "CREATED"],
        ["user", "alice", "UPDATE_TOPIC", "(root)", "deny", rows[1][5]],
        ["user", "anonymous", "SELECT_TOPIC", "public", "allow", rows[2][5]],
        ["user", "bob", "CONTROL_SERVER", "-", "allow", rows[3][5]],
        ["role", "ops", "READ_TOPIC", "prices", "allow", rows[4][5]],
        ["role", "ops", "READ_TOPIC", "prices/fx", "deny", rows[5][5]],
    ]
    assert [row[1] for row in table(ok("grants", "list", "--role", "ops", *store))[1:]] == ["ops", "ops"]
    assert ok("grants", "list", "--user", "carol", *store) == "no grants to principal 'carol'\n"
    listed = json.loads(ok("grants", "list", "--user", "bob", "--json", *store))
    assert [{k: v for k, v in item.items() if k != "created"} for item in listed] == [
        {"subject_kind": "principal", "subject": "bob", "permission": "CONTROL_SERVER", "path": None, "allow": True}
    ]
    listed = json.loads(ok("grants", "list", "--role", "ops", "--json", *store))
    assert [(item["path"], item["allow"]) for item in listed] == [("prices", True), ("prices/fx", False)]

    current = policy(store)
    assert current.allows("alice", Permission.READ_TOPIC, "prices/eq")
    assert not current.allows("alice", Permission.READ_TOPIC, "prices/fx/EURUSD")
    assert not current.allows("alice", Permission.UPDATE_TOPIC, "prices")
    assert current.allows("bob", Permission.CONTROL_SERVER)
    assert current.allows(None, Permission.SELECT_TOPIC, "public/news")

    assert ok("grants", "remove", "READ_TOPIC", "--role", "ops", "--path", "prices/fx", *store) == (
        "removed the grant of READ_TOPIC on 'prices/fx' to role 'ops'\n"
    )
    assert "no grant of READ_TOPIC on 'prices/fx' to role 'ops'" in fails(
        1, "grants", "remove", "READ_TOPIC", "--role", "ops", "--path", "prices/fx", *store
    )
    assert ok("grants", "remove", "CONTROL_SERVER", "--user", "bob", *store) == (
        "removed the grant of CONTROL_SERVER to user 'bob'\n"
    )
    assert policy(store).allows("alice", Permission.READ_TOPIC, "prices/fx/EURUSD")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grants", "add", "READ"], "unknown permission 'READ'; expected one of SELECT_TOPIC"),
        (["grants", "add", "READ_TOPIC"], "give --role ROLE or --user USER"),
        (["grants", "add", "READ_TOPIC", "--role", "ops", "--user", "alice"], "give either --role or --user"),
        (["grants", "add", "READ_TOPIC", "--user", "alice", "--path", "/a"], "must not start with '/'"),
        (["grants", "add", "READ_TOPIC", "--user", "alice", "--path", "a/"], "must not end with '/'"),
        (["grants", "add", "READ_TOPIC", "--user", "alice", "--path", "a//b"], "empty segment"),
        (["grants", "add", "CONTROL_SERVER", "--user", "alice", "--path", "a"], "CONTROL_SERVER is a global"),
        (["grants", "remove", "READ_TOPIC"], "give --role ROLE or --user USER"),
        (["grants", "list", "--role", "ops", "--user", "alice"], "give either --role or --user"),
    ],
)
def test_grants_usage_errors(store, args, message):
    output = fails(2, *args, *store)
    assert message in " ".join(output.split())  # click may wrap the message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "carol"], "no user named 'carol'"),
        (["--role", "ops"], "no role named 'ops'"),
    ],
)
def test_grants_need_an_existing_subject(store, args, message):
    assert message in fails(1, "grants", "add", "READ_TOPIC", *args, *store)
    assert ok("grants", "list", *store) == "no grants\n"


def test_tables_without_rich(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich now raises ImportError
    ok("roles", "assign", "admin", "alice", *store)
    ok("grants", "add", "READ_TOPIC", "--user", "bob", "--path", "a b/c", *store)
    roles = ok("roles", "list", *store)
    assert "─" not in roles
    assert table(roles)[0] == ["ROLE", "USERS", "CREATED"]
    assert table(roles)[1][:2] == ["admin (built-in)", "alice"]
    grants = ok("grants", "list", *store)
    lines = grants.splitlines()
    assert lines[0].startswith("KIND  SUBJECT  PERMISSION  PATH   EFFECT  CREATED")
    assert table(grants)[1][:5] == ["user", "bob", "READ_TOPIC", "a b/c", "allow"]
    assert all(line == line.rstrip() for line in lines)


def test_the_console_script(sqlite_url, tmp_path):
    store = ["--store", sqlite_url]
    assert run_subgate("db", "upgrade", *store, cwd=tmp_path).returncode == 0
    assert run_subgate("users", "add", "alice", *store, cwd=tmp_path, stdin="pw\n").returncode == 0
    assigned = run_subgate("roles", "assign", "admin", "alice", *store, cwd=tmp_path)
    assert (assigned.returncode, assigned.stdout) == (0, "user 'alice' now holds role 'admin'\n")
    denied = run_subgate(
        "grants", "add", "UPDATE_TOPIC", "--user", "alice", "--path", "audit", "--deny", *store, cwd=tmp_path
    )
    assert (denied.returncode, denied.stdout) == (0, "denied UPDATE_TOPIC on 'audit' to user 'alice'\n")
    bad = run_subgate("grants", "add", "NOPE", "--user", "alice", *store, cwd=tmp_path)
    assert bad.returncode == 2 and "unknown permission 'NOPE'" in bad.stderr
    current = policy(store)
    assert current.allows("alice", Permission.UPDATE_TOPIC, "prices")
    assert not current.allows("alice", Permission.UPDATE_TOPIC, "audit/log")
    assert not current.allows(None, Permission.SELECT_TOPIC, "prices")  # a user exists: anonymous has no grant
