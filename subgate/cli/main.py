"""``subgate``: serve, db, users, subscriptions, topics, bookmarks, journal, queues, connections, status,
pipeline. Each command parses its arguments and calls one function."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from subgate.cli.backup import db_backup, db_restore
from subgate.cli.bookmarks import bookmarks
from subgate.cli.client_commands import publish, subscribe
from subgate.cli.connections import connections
from subgate.cli.fanout import fanout
from subgate.cli.journal import journal
from subgate.cli.logs import FORMATS, configure_logging
from subgate.cli.management import ManagementClient
from subgate.cli.options import (
    NAME_256,
    ConfigError,
    FanoutLink,
    ListenAddress,
    config_option,
    resolve_store,
    split_address,
    store_cli_errors,
    with_store,
)
from subgate.cli.permissions import grants, roles
from subgate.cli.pipeline import pipeline
from subgate.cli.queues import queues
from subgate.cli.serve_options import settings_options, settings_values
from subgate.cli.status import status
from subgate.cli.subscriptions import subscriptions, unsubscribe
from subgate.cli.topics import topics
from subgate.engine.memory_mark import mark_problem
from subgate.gateway.settings import Settings
from subgate.gateway.tls import TlsConfigError
from subgate.mapping.address_settings import AddressSettingsError, parse_entries
from subgate.mapping.branch_modes import BranchModeError, parse_journal_branches, parse_publisher_modes
from subgate.mapping.retention import DurationError, parse_duration_ms


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="subgate")
def main() -> None:
    """subgate: an AMQP 1.0 broker for JMS subscriptions, bookmarks and topic trees."""


main.add_command(subscriptions)
main.add_command(unsubscribe)
main.add_command(roles)
main.add_command(grants)
main.add_command(topics)
main.add_command(fanout)
main.add_command(bookmarks)
main.add_command(journal)
main.add_command(publish)
main.add_command(subscribe)
main.add_command(queues)
main.add_command(connections)
main.add_command(status)
main.add_command(pipeline)


@main.command()
@config_option
@click.option(
    "--listen",
    type=ListenAddress(),
    default="127.0.0.1:5672",
    envvar="SUBGATE_LISTEN",
    show_default=True,
    show_envvar=True,
    help="HOST:PORT to listen on; port 0 picks a free port (the log line says which).",
)
@click.option(
    "--store",
    default=None,
    envvar="SUBGATE_STORE",
    show_envvar=True,
    help="SQLAlchemy URL of the store (default: SQLite file subgate.db here).",
)
@settings_options
@click.option(
    "--fanout",
    "fanout",
    type=FanoutLink(),
    multiple=True,
    envvar="SUBGATE_FANOUT",
    show_envvar=True,
    help="A fan-out link to a primary, URL=SELECTOR (amqp://[user:password@]host:port=A//): replicate the topics "
    "SELECTOR matches there into this server's tree. Repeatable. In the file: [[fanout]] tables with url, selector, "
    "user, password, retry_interval (s, default 1), reconnect_timeout (s, default 60), max_in_flight (default "
    "1000); docs/fanout.md.",
)
@click.option(
    "--migrate/--no-migrate",
    default=False,
    envvar="SUBGATE_MIGRATE",
    show_default=True,
    show_envvar=True,
    help="Upgrade an out-of-date store schema before serving.",
)
@click.option(
    "--ephemeral",
    is_flag=True,
    default=False,
    help="A throwaway server for test suites: a fresh store in a temporary folder (tmpfs) removed on exit, a free "
    'port unless --listen is given, one JSON line on stdout once listening ({"url": "amqp://127.0.0.1:PORT", '
    "...}), and it stops when its parent process ends. Not with --store. docs/jms.md.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    envvar="SUBGATE_LOG_LEVEL",
    show_default=True,
    show_envvar=True,
    help="Least severe log records written to stderr.",
)
@click.option(
    "--log-format",
    type=click.Choice(FORMATS),
    default="text",
    envvar="SUBGATE_LOG_FORMAT",
    show_default=True,
    show_envvar=True,
    help="text lines, or json: one object per line with time, level, logger, message and the event's fields.",
)
def serve(
    listen: str,
    store: str | None,
    fanout: tuple[Any, ...],
    migrate: bool,
    ephemeral: bool,
    log_level: str,
    log_format: str,
    **settings_params: Any,
) -> None:
    """Run the server. Every option has a SUBGATE_* variable and a key of the same name in the --config file."""
    if ephemeral:
        parent = os.getppid()  # before anything slow: the parent may be gone by the time the watch starts
        if store is not None:
            raise click.UsageError(
                "--ephemeral makes its own store: leave out --store (and SUBGATE_STORE, a config file's store)"
            )
        if click.get_current_context().get_parameter_source("listen") == ParameterSource.DEFAULT:
            listen = "127.0.0.1:0"
    configure_logging(log_level, log_format)
    host, port = split_address(listen)
    settings = Settings(
        listen_host=host,
        listen_port=port,
        store_url=resolve_store(store) if not ephemeral else "sqlite://",
        fanout=tuple(fanout),
        **settings_values(settings_params),
    )
    try:
        parse_journal_branches(settings.journal_branches)
        parse_publisher_modes(settings.publisher_modes)
        parse_duration_ms(settings.retention)
        parse_entries(settings.address_settings, settings.wildcard_delimiter)
        if settings.http:
            split_address(settings.http)
    except (BranchModeError, DurationError, AddressSettingsError) as exc:
        raise ConfigError(str(exc)) from exc
    except ValueError as exc:
        raise ConfigError(f"http: {exc}") from exc
    _check_tls(settings)
    problem = mark_problem(settings.memory_high_water, settings.max_message_size)
    if problem is not None:
        raise ConfigError(problem)
    code = _serve_ephemeral(settings, listen, parent) if ephemeral else _serve(settings, listen, migrate)
    sys.exit(code)


def _serve(settings: Settings, listen: str, migrate: bool, **options: Any) -> int:
    from subgate.gateway.server import serve as run_server

    try:
        with store_cli_errors(settings.store_url):
            return run_server(settings, migrate=migrate, management=ManagementClient, **options)
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from exc
    except OSError as exc:
        from subgate.gateway.server import ListenFailed

        where = f"{exc.address} ({exc.option})" if isinstance(exc, ListenFailed) else listen
        raise click.ClickException(f"cannot listen on {where}: {exc.strerror or exc}") from exc


def _serve_ephemeral(settings: Settings, listen: str, parent: int) -> int:
    """``serve --ephemeral``: a fresh store, the parent watch, the JSON line; the store's folder removed after."""
    from subgate.cli.ephemeral import announce, tie_to_parent
    from subgate.storage.ephemeral import EphemeralStore

    tie_to_parent(parent)
    store = EphemeralStore()
    try:
        settings = dataclasses.replace(settings, store_url=store.url)
        return _serve(settings, listen, False, schema_checked=True, on_listening=lambda s: announce(s, store.url))
    finally:
        store.remove()


def _check_tls(settings: Settings) -> None:
    """The TLS options make sense together (the files themselves are read when the server starts)."""
    if not settings.tls_listen:
        if settings.tls_cert or settings.tls_key or settings.tls_ca or settings.tls_verify_client:
            raise ConfigError("--tls-cert, --tls-key, --tls-ca and --tls-verify-client need --tls-listen")
        return
    try:
        split_address(settings.tls_listen)
    except ValueError as exc:
        raise ConfigError(f"tls-listen: {exc}") from exc
    if not settings.tls_cert or not settings.tls_key:
        raise ConfigError("--tls-listen needs --tls-cert and --tls-key")


# -- db ---------------------------------------------------------------------------------------------------------
@main.group()
def db() -> None:
    """Store schema and contents: upgrade, inspect, back up and restore."""


db.add_command(db_backup)
db.add_command(db_restore)


@db.command("upgrade")
@with_store
@click.option("--revision", default="head", show_default=True)
def db_upgrade(store: str | None, revision: str) -> None:
    """Apply migrations up to REVISION (a progress bar on stderr, one step per revision)."""
    from subgate.cli.progress import revisions
    from subgate.storage.db import pending_revisions, upgrade

    url = resolve_store(store)
    with revisions(pending_revisions(url, revision)) as step:
        upgrade(url, revision, step)
    click.echo(f"store {_safe(url)} is at {revision}")


STORE_BEHIND = 3  # ``db current``'s exit code when the store is not at the head revision


@db.command("current")
@with_store
def db_current(store: str | None) -> None:
    """Print the store's schema revision and the code's head revision.

    Exits with 0 when the store is at the head revision, 3 when it is not (1: the store cannot be read).
    """
    from subgate.storage.db import make_engine, schema_status

    engine = make_engine(resolve_store(store))
    try:
        current, head = schema_status(engine)
    finally:
        engine.dispose()
    click.echo(f"current: {current or 'none'}")
    click.echo(f"head:    {head}")
    if current != head:
        click.echo("the store is out of date: run 'subgate db upgrade'")
        click.get_current_context().exit(STORE_BEHIND)


def _safe(url: str) -> str:
    from subgate.storage.errors import safe_url

    return safe_url(url)


# -- users ------------------------------------------------------------------------------------------------------
@main.group()
def users() -> None:
    """Principals for SASL PLAIN (stored as salted PBKDF2 hashes)."""


def _sessions(store: str | None):  # type: ignore[no-untyped-def]
    from subgate.storage.db import check_schema, make_engine, session_factory

    url = resolve_store(store)
    check_schema(url, migrate=False)  # SchemaOutOfDate: a click error through with_store
    return session_factory(make_engine(url))


def _password_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--password`` of ``users add`` and ``users passwd``: prompted for when absent, or from SUBGATE_PASSWORD."""
    return click.option(
        "--password",
        envvar="SUBGATE_PASSWORD",
        default=None,
        help=f"{what} (prompted for when absent; SUBGATE_PASSWORD works too).",
    )


@users.command("add")
@with_store
@click.argument("name", type=NAME_256)
@_password_option("The password")
@click.option(
    "--role",
    "roles_",
    multiple=True,
    metavar="ROLE",
    help="Give the new user this role (repeatable); 'admin' may do everything.",
)
def users_add(store: str | None, name: str, password: str | None, roles_: tuple[str, ...]) -> None:
    """Add a user NAME (with --role ROLE to give it roles at once).

    Once a user exists only grants count: anonymous access is off (unless 'serve --allow-anonymous') and a user
    may do only what its grants and roles allow (docs/permissions.md). The output says so for the first user.
    """
    from subgate.storage.errors import AlreadyExists, NotFound
    from subgate.storage.passwords import hash_password
    from subgate.storage.permissions import assign_role
    from subgate.storage.principals import add_principal, count_principals

    password = _new_password(password)
    try:
        with _sessions(store).begin() as session:
            first = count_principals(session) == 0
            add_principal(session, name, hash_password(password))
            for role in dict.fromkeys(roles_):
                assign_role(session, role, name)
    except (AlreadyExists, NotFound) as exc:
        raise click.ClickException(str(exc)) from exc
    held = f" with role(s) {', '.join(dict.fromkeys(roles_))}" if roles_ else ""
    click.echo(f"added user {name!r}{held}")
    if first:
        click.echo("anonymous access is now off because a user exists (unless the server runs with --allow-anonymous)")
    if not roles_:
        click.echo(
            f"{name!r} may do nothing until granted: 'subgate roles assign admin {name}' for everything, or "
            f"'subgate grants add PERMISSION --user {name} [--path PATH]' (docs/permissions.md)"
        )


def _new_password(password: str | None) -> str:
    if password is None:
        if not sys.stdin.isatty():
            password = sys.stdin.readline().rstrip("\n")
        else:
            password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("the password must not be empty")
    return password


@users.command("passwd")
@with_store
@click.argument("name", type=NAME_256)
@_password_option("The new password")
def users_passwd(store: str | None, name: str, password: str | None) -> None:
    """Set user NAME's password (stored for both PLAIN and SCRAM-SHA-256: docs/security.md)."""
    from subgate.storage.passwords import hash_password
    from subgate.storage.principals import set_password

    password = _new_password(password)
    with _sessions(store).begin() as session:
        changed = set_password(session, name, hash_password(password))
    if not changed:
        raise click.ClickException(f"no user named {name!r}")
    click.echo(f"set the password of {name!r}")


@users.command("list")
@with_store
def users_list(store: str | None) -> None:
    """List users with their roles ('-': none; a user without roles has only its own grants)."""
    from subgate.storage.permissions import load_policy
    from subgate.storage.principals import list_principals

    with _sessions(store)() as session:
        rows = list_principals(session)
        roles = load_policy(session).roles_by_principal
    if not rows:
        click.echo("no users (anonymous access is allowed while there are none, unless turned off)")
        return
    held = {r.name: ",".join(sorted(roles.get(r.name, ()))) or "-" for r in rows}
    width, roles_width = max(len(r.name) for r in rows), max(len("ROLES"), *(len(h) for h in held.values()))
    click.echo(f"{'NAME':<{width}}  {'ROLES':<{roles_width}}  CREATED")
    for row in rows:
        click.echo(f"{row.name:<{width}}  {held[row.name]:<{roles_width}}  {row.created_at:%Y-%m-%d %H:%M:%S}")


@users.command("remove")
@with_store
@click.argument("name", type=NAME_256)
def users_remove(store: str | None, name: str) -> None:
    """Remove user NAME."""
    from subgate.storage.permissions import PRINCIPAL, revoke_all
    from subgate.storage.principals import remove_principal

    with _sessions(store).begin() as session:
        removed = remove_principal(session, name)
        if removed:
            revoke_all(session, PRINCIPAL, name)  # a user re-added under this name starts without grants
    if not removed:
        raise click.ClickException(f"no user named {name!r}")
    click.echo(f"removed user {name!r}")
