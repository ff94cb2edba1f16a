"""``subgate roles ...`` and ``subgate grants ...``: who holds which role, and which permission on which path.

They work on the store (``--store``, as for ``users``), refuse an out-of-date schema the same way, and call one
function of ``storage.permissions`` each. Permission names and topic paths are checked here, with the rules of
``mapping.permissions`` and ``topics.paths``; a path that is omitted or ``""`` means the root. Tables use
``rich`` when it is installed and plain columns otherwise. The model and the default policy: docs/permissions.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from subgate.cli.options import NAME_256, PATH_1024, store_sessions, with_store
from subgate.mapping.permissions import (
    ADMIN_ROLE,
    ANONYMOUS,
    PRINCIPAL,
    ROLE,
    Permission,
    SubjectKind,
    parse_permission,
)
from subgate.topics.errors import TopicPathError
from subgate.topics.paths import validate_path

if TYPE_CHECKING:
    from subgate.storage.permissions import GrantRecord


@contextmanager
def _store_errors() -> Iterator[None]:
    """A missing user or role, or a name already taken, is the operator's error: exit 1 with the message."""
    from subgate.storage.errors import AlreadyExists, NotFound

    try:
        yield
    except (AlreadyExists, NotFound) as exc:
        raise click.ClickException(str(exc)) from exc


# -- output -----------------------------------------------------------------------------------------------------
def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table with ``rich`` when it is importable, else plain space-aligned columns; never cut or wrapped."""
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        widths = [max(len(cell) for cell in column) for column in zip(columns, *rows, strict=True)]
        for line in (columns, *rows):
            click.echo("  ".join(f"{cell:<{width}}" for cell, width in zip(line, widths, strict=True)).rstrip())
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: names and paths may contain [markup]
    console = Console(highlight=False)
    if console.is_terminal:
        console.print(table)
        return
    wide = Console(highlight=False, width=100_000, no_color=True)  # to a pipe or a file: one line per row
    with wide.capture() as captured:
        wide.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _time(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}"


def _iso(value: datetime) -> str:
    return value.isoformat()


# -- roles ------------------------------------------------------------------------------------------------------
@click.group("roles")
def roles() -> None:
    """Roles: named sets of grants that users hold. The built-in role 'admin' may do everything."""


@roles.command("add")
@with_store
@click.argument("name", type=NAME_256)
def roles_add(store: str | None, name: str) -> None:
    """Add a role NAME (then give it grants with 'subgate grants add --role NAME')."""
    from subgate.storage.permissions import add_role

    with store_sessions(store, operator=False) as sessions, _store_errors(), sessions.begin() as session:
        try:
            add_role(session, name)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="NAME") from exc
    click.echo(f"added role {name!r}")


@roles.command("remove")
@with_store
@click.argument("name", type=NAME_256)
def roles_remove(store: str | None, name: str) -> None:
    """Remove role NAME, its grants, and every user's assignment to it."""
    from subgate.storage.permissions import remove_role

    with store_sessions(store, operator=False) as sessions, sessions.begin() as session:
        removed = remove_role(session, name)
    if not removed:
        raise click.ClickException(f"no role named {name!r}")
    click.echo(f"removed role {name!r} with its grants and assignments")


@roles.command("list")
@with_store
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def roles_list(store: str | None, as_json: bool) -> None:
    """List roles and the users holding them."""
    from subgate.storage.permissions import list_roles

    with store_sessions(store, operator=False) as sessions, sessions() as session:
        records = list_roles(session)
    if as_json:
        items = [{"name": r.name, "users": list(r.principals), "created": _iso(r.created_at)} for r in records]
        click.echo(json.dumps(items, indent=2))
        return
    if not records:
        click.echo(f"no roles (assigning the built-in role '{ADMIN_ROLE}' creates it)")
        return
    rows = [
        (
            r.name + (" (built-in)" if r.name == ADMIN_ROLE else ""),
            ", ".join(r.principals) or "-",
            _time(r.created_at),
        )
        for r in records
    ]
    print_table(("ROLE", "USERS", "CREATED"), rows)


@roles.command("assign")
@with_store
@click.argument("role", type=NAME_256)
@click.argument("user", type=NAME_256)
def roles_assign(store: str | None, role: str, user: str) -> None:
    """Give ROLE to USER."""
    from subgate.storage.permissions import assign_role

    with store_sessions(store, operator=False) as sessions, _store_errors(), sessions.begin() as session:
        added = assign_role(session, role, user)
    click.echo(f"user {user!r} {'now holds' if added else 'already holds'} role {role!r}")


@roles.command("unassign")
@with_store
@click.argument("role", type=NAME_256)
@click.argument("user", type=NAME_256)
def roles_unassign(store: str | None, role: str, user: str) -> None:
    """Take ROLE away from USER."""
    from subgate.storage.permissions import unassign_role

    with store_sessions(store, operator=False) as sessions, sessions.begin() as session:
        removed = unassign_role(session, role, user)
    if not removed:
        raise click.ClickException(f"user {user!r} does not hold role {role!r}")
    click.echo(f"user {user!r} no longer holds role {role!r}")


# -- grants -----------------------------------------------------------------------------------------------------
def _permission(_ctx: click.Context, _param: click.Parameter, value: str) -> Permission:
    try:
        return parse_permission(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _subject(role: str | None, user: str | None) -> tuple[SubjectKind, str] | None:
    """(kind, name) from --role/--user, which exclude each other; None when neither is given."""
    if role is not None and user is not None:
        raise click.UsageError("give either --role or --user, not both")
    if role is not None:
        return ROLE, role
    if user is not None:
        return PRINCIPAL, user
    return None


def _required_subject(role: str | None, user: str | None) -> tuple[SubjectKind, str]:
    subject = _subject(role, user)
    if subject is None:
        raise click.UsageError("give --role ROLE or --user USER (--user anonymous for anonymous connections)")
    return subject


def _path(permission: Permission, path: str | None) -> str:
    """The grant path: ``""`` (the root) when omitted; a topic path otherwise; none for a global permission."""
    if not path:
        return ""
    if not permission.scoped:
        raise click.BadParameter(f"{permission} is a global permission: it takes no path", param_hint="--path")
    try:
        return validate_path(path)
    except TopicPathError as exc:
        raise click.BadParameter(str(exc), param_hint="--path") from exc


def _describe(permission: Permission, path: str, kind: SubjectKind, subject: str) -> str:
    where = "" if not permission.scoped else f" on {repr(path) if path else 'the root'}"
    who = f"role {subject!r}" if kind == ROLE else f"user {subject!r}"
    return f"{permission}{where} to {who}"


def grant_options(command: Any) -> Any:
    """PERMISSION, --role/--user, --path and --store."""
    path_help = "Topic path the grant covers, with everything below it (default: the root)."
    command = click.option("--path", default=None, type=PATH_1024, help=path_help)(command)
    user_help = f"Grant to this user ('{ANONYMOUS}': anonymous connections)."
    command = click.option("--user", default=None, type=NAME_256, help=user_help)(command)
    command = click.option("--role", default=None, type=NAME_256, help="Grant to this role.")(command)
    command = click.argument("permission", callback=_permission, metavar="PERMISSION")(command)
    return with_store(command)


@click.group("grants")
def grants() -> None:
    """Permissions on topic paths (SELECT_TOPIC, READ_TOPIC, UPDATE_TOPIC, MODIFY_TOPIC) and global ones
    (REGISTER_HANDLER, CONTROL_SERVER), granted to a user or a role. The most specific path wins."""


@grants.command("add")
@grant_options
@click.option("--deny", is_flag=True, help="Deny instead of allow (takes the right away at and below --path).")
def grants_add(
    store: str | None, permission: Permission, role: str | None, user: str | None, path: str | None, deny: bool
) -> None:
    """Allow (or with --deny, deny) PERMISSION to a role or a user; replaces a grant at the same path."""
    from subgate.storage.permissions import find_grant, grant

    kind, subject = _required_subject(role, user)
    where = _path(permission, path)
    with store_sessions(store, operator=False) as sessions, _store_errors(), sessions.begin() as session:
        before = find_grant(session, kind, subject, permission, where)
        grant(session, kind, subject, permission, where, allow=not deny)
    verb = "denied" if deny else "allowed"
    note = ""
    if before is not None:
        note = " (unchanged)" if before.allow != deny else f" (replacing {'an allow' if deny else 'a denial'})"
    click.echo(f"{verb} {_describe(permission, where, kind, subject)}{note}")


@grants.command("remove")
@grant_options
def grants_remove(
    store: str | None, permission: Permission, role: str | None, user: str | None, path: str | None
) -> None:
    """Remove the grant (allow or denial) of PERMISSION to a role or a user at exactly --path."""
    from subgate.storage.permissions import revoke

    kind, subject = _required_subject(role, user)
    where = _path(permission, path)
    with store_sessions(store, operator=False) as sessions, sessions.begin() as session:
        removed = revoke(session, kind, subject, permission, where)
    if not removed:
        raise click.ClickException(f"no grant of {_describe(permission, where, kind, subject)}")
    click.echo(f"removed the grant of {_describe(permission, where, kind, subject)}")


@grants.command("list")
@with_store
@click.option("--role", default=None, type=NAME_256, help="Only the grants to this role.")
@click.option(
    "--user", default=None, type=NAME_256, help="Only the grants made to this user by name (not through roles)."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def grants_list(store: str | None, role: str | None, user: str | None, as_json: bool) -> None:
    """List grants, by subject, then by path (a branch before the paths below it)."""
    from subgate.storage.permissions import list_grants

    subject = _subject(role, user)
    kind, name = subject if subject is not None else (None, None)
    with store_sessions(store, operator=False) as sessions, sessions() as session:
        records = list_grants(session, kind, name)
    if as_json:
        click.echo(json.dumps([_grant_json(r) for r in records], indent=2))
        return
    if not records:
        click.echo("no grants" + ("" if subject is None else f" to {subject[0]} {subject[1]!r}"))
        return
    print_table(("KIND", "SUBJECT", "PERMISSION", "PATH", "EFFECT", "CREATED"), [_grant_row(r) for r in records])


def _grant_row(record: GrantRecord) -> tuple[str, ...]:
    kind = "user" if record.subject_kind == PRINCIPAL else "role"
    path = record.path or ("(root)" if record.permission.scoped else "-")
    effect = "allow" if record.allow else "deny"
    return (kind, record.subject, record.permission.value, path, effect, _time(record.created_at))


def _grant_json(record: GrantRecord) -> dict[str, Any]:
    return {
        "subject_kind": record.subject_kind,
        "subject": record.subject,
        "permission": record.permission.value,
        "path": record.path if record.permission.scoped else None,
        "allow": record.allow,
        "created": _iso(record.created_at),
    }
