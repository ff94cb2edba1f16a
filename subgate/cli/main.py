"""``subgate``: serve, db, users, subscriptions. Each command parses its arguments and calls one function."""

from __future__ import annotations

import logging
import sys

import click

from subgate.cli.options import ListenAddress, config_option, resolve_store, split_address, store_cli_errors, with_store
from subgate.cli.permissions import grants, roles
from subgate.cli.subscriptions import subscriptions, unsubscribe
from subgate.cli.topics import topics
from subgate.gateway.settings import Settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="subgate")
def main() -> None:
    """subgate: an AMQP 1.0 broker for JMS subscriptions, bookmarks and topic trees."""


main.add_command(subscriptions)
main.add_command(unsubscribe)
main.add_command(roles)
main.add_command(grants)
main.add_command(topics)


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
@click.option(
    "--name",
    default="subgate",
    envvar="SUBGATE_NAME",
    show_default=True,
    show_envvar=True,
    help="Server name (the container-id it opens connections with).",
)
@click.option(
    "--allow-anonymous/--no-allow-anonymous",
    default=None,
    envvar="SUBGATE_ALLOW_ANONYMOUS",
    show_envvar=True,
    help="SASL ANONYMOUS (default: allowed only while no user exists).",
)
@click.option(
    "--auto-create/--no-auto-create",
    default=True,
    envvar="SUBGATE_AUTO_CREATE",
    show_default=True,
    show_envvar=True,
    help="Create queues and topics on first use.",
)
@click.option(
    "--default-node-type",
    type=click.Choice(["queue", "topic"]),
    default="queue",
    envvar="SUBGATE_DEFAULT_NODE_TYPE",
    show_default=True,
    show_envvar=True,
    help="Node type for a new address whose attach names none.",
)
@click.option(
    "--credit-window",
    type=click.IntRange(1, 1_000_000),
    default=1000,
    envvar="SUBGATE_CREDIT_WINDOW",
    show_default=True,
    show_envvar=True,
    help="Credit granted to each publisher link.",
)
@click.option(
    "--max-message-size",
    type=click.IntRange(1024),
    default=10 * 1024 * 1024,
    envvar="SUBGATE_MAX_MESSAGE_SIZE",
    show_default=True,
    show_envvar=True,
)
@click.option(
    "--max-frame-size",
    type=click.IntRange(512),
    default=1024 * 1024,
    envvar="SUBGATE_MAX_FRAME_SIZE",
    show_default=True,
    show_envvar=True,
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(0),
    default=60.0,
    envvar="SUBGATE_IDLE_TIMEOUT",
    show_default=True,
    show_envvar=True,
    help="Seconds; half of it is advertised to peers.",
)
@click.option(
    "--journal-non-persistent/--no-journal-non-persistent",
    default=False,
    envvar="SUBGATE_JOURNAL_NON_PERSISTENT",
    show_default=True,
    show_envvar=True,
    help="Also journal messages sent without header.durable.",
)
@click.option(
    "--reconnect-timeout",
    type=click.FloatRange(0),
    default=60.0,
    envvar="SUBGATE_RECONNECT_TIMEOUT",
    show_default=True,
    show_envvar=True,
    help="Seconds a connection lost without a close frame keeps its remove-with-session registrations.",
)
@click.option(
    "--missing-topic-timeout",
    type=click.FloatRange(0.01),
    default=10.0,
    envvar="SUBGATE_MISSING_TOPIC_TIMEOUT",
    show_default=True,
    show_envvar=True,
    help="Seconds a subscribe or fetch waits for a silent missing-topic handler before it proceeds.",
)
@click.option(
    "--policy-refresh",
    type=click.FloatRange(0.1),
    default=2.0,
    envvar="SUBGATE_POLICY_REFRESH",
    show_default=True,
    show_envvar=True,
    help="Seconds between re-reads of users, roles and grants from the store.",
)
@click.option(
    "--page-messages",
    type=click.IntRange(0),
    default=2000,
    envvar="SUBGATE_PAGE_MESSAGES",
    show_default=True,
    show_envvar=True,
    help="Messages a durable queue or subscription keeps in memory; the rest is read from the journal as "
    "consumers get there (0: keep everything in memory).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=10000,
    envvar="SUBGATE_MAX_CONNECTIONS",
    show_default=True,
    show_envvar=True,
    help="Open connections in all; a client over the limit is refused with a reason.",
)
@click.option(
    "--max-connections-per-address",
    type=click.IntRange(1),
    default=1000,
    envvar="SUBGATE_MAX_CONNECTIONS_PER_ADDRESS",
    show_default=True,
    show_envvar=True,
    help="Open connections from one IP address.",
)
@click.option(
    "--handshake-timeout",
    type=click.FloatRange(0.1),
    default=10.0,
    envvar="SUBGATE_HANDSHAKE_TIMEOUT",
    show_default=True,
    show_envvar=True,
    help="Seconds from accept to the end of SASL and the client's open; slower clients are disconnected.",
)
@click.option(
    "--frame-timeout",
    type=click.FloatRange(0.1),
    default=30.0,
    envvar="SUBGATE_FRAME_TIMEOUT",
    show_default=True,
    show_envvar=True,
    help="Seconds a frame may take to arrive whole once it has begun.",
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
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    envvar="SUBGATE_LOG_LEVEL",
    show_default=True,
    show_envvar=True,
)
@click.option(
    "--memory-limit-messages",
    type=click.IntRange(0),
    default=100_000,
    envvar="SUBGATE_MEMORY_LIMIT_MESSAGES",
    show_default=True,
    show_envvar=True,
    help="Messages not in the journal (non-persistent ones, any on a temporary queue or non-durable "
    "subscription) a queue may hold in memory (0: no limit).",
)
@click.option(
    "--memory-limit-bytes",
    type=click.IntRange(0),
    default=64 * 1024 * 1024,
    envvar="SUBGATE_MEMORY_LIMIT_BYTES",
    show_default=True,
    show_envvar=True,
    help="Bytes of such messages a queue may hold in memory (0: no limit).",
)
@click.option(
    "--memory-full-policy",
    type=click.Choice(["block", "fail"]),
    default="block",
    envvar="SUBGATE_MEMORY_FULL_POLICY",
    show_default=True,
    show_envvar=True,
    help="A queue at its memory limit: block (no more credit for its publishers until it drains) or fail "
    "(reject further such messages with amqp:resource-limit-exceeded). Topic subscriptions drop the copy.",
)
@click.option(
    "--anycast-prefixes",
    default="queue://",
    envvar="SUBGATE_ANYCAST_PREFIXES",
    show_default=True,
    show_envvar=True,
    help="Comma-separated address prefixes that name a queue (as Artemis' anycastPrefix); '' for none.",
)
@click.option(
    "--multicast-prefixes",
    default="topic://",
    envvar="SUBGATE_MULTICAST_PREFIXES",
    show_default=True,
    show_envvar=True,
    help="Comma-separated address prefixes that name a topic (as Artemis' multicastPrefix); '' for none.",
)
def serve(
    listen: str,
    store: str | None,
    name: str,
    allow_anonymous: bool | None,
    auto_create: bool,
    default_node_type: str,
    credit_window: int,
    max_message_size: int,
    max_frame_size: int,
    idle_timeout: float,
    journal_non_persistent: bool,
    reconnect_timeout: float,
    missing_topic_timeout: float,
    policy_refresh: float,
    page_messages: int,
    max_connections: int,
    max_connections_per_address: int,
    handshake_timeout: float,
    frame_timeout: float,
    migrate: bool,
    log_level: str,
    memory_limit_messages: int,
    memory_limit_bytes: int,
    memory_full_policy: str,
    anycast_prefixes: str,
    multicast_prefixes: str,
) -> None:
    """Run the server."""
    from subgate.gateway.server import serve as run_server

    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    host, port = split_address(listen)
    settings = Settings(
        listen_host=host,
        listen_port=port,
        store_url=resolve_store(store),
        name=name,
        allow_anonymous=allow_anonymous,
        auto_create=auto_create,
        default_node_type=default_node_type,
        credit_window=credit_window,
        max_message_size=max_message_size,
        max_frame_size=max_frame_size,
        idle_timeout=idle_timeout,
        journal_non_persistent=journal_non_persistent,
        reconnect_timeout=reconnect_timeout,
        missing_topic_timeout=missing_topic_timeout,
        policy_refresh_interval=policy_refresh,
        page_messages=page_messages,
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
        handshake_timeout=handshake_timeout,
        frame_timeout=frame_timeout,
        memory_limit_messages=memory_limit_messages,
        memory_limit_bytes=memory_limit_bytes,
        memory_full_policy=memory_full_policy,
        anycast_prefixes=_prefixes(anycast_prefixes),
        multicast_prefixes=_prefixes(multicast_prefixes),
    )
    try:
        with store_cli_errors(settings.store_url):
            code = run_server(settings, migrate=migrate)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {listen}: {exc.strerror or exc}") from exc
    sys.exit(code)


def _prefixes(value: str) -> tuple[str, ...]:
    return tuple(prefix.strip() for prefix in value.split(",") if prefix.strip())


# -- db ---------------------------------------------------------------------------------------------------------
@main.group()
def db() -> None:
    """Store schema: upgrade and inspect."""


@db.command("upgrade")
@with_store
@click.option("--revision", default="head", show_default=True)
def db_upgrade(store: str | None, revision: str) -> None:
    """Apply migrations up to REVISION."""
    from subgate.storage.db import upgrade

    url = resolve_store(store)
    upgrade(url, revision)
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


@users.command("add")
@with_store
@click.argument("name")
@click.option(
    "--password",
    envvar="SUBGATE_PASSWORD",
    default=None,
    help="The password (prompted for when absent; SUBGATE_PASSWORD works too).",
)
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


@users.command("list")
@with_store
def users_list(store: str | None) -> None:
    """List users."""
    from subgate.storage.principals import list_principals

    with _sessions(store)() as session:
        rows = list_principals(session)
    if not rows:
        click.echo("no users (anonymous access is allowed while there are none, unless turned off)")
        return
    width = max(len(r.name) for r in rows)
    click.echo(f"{'NAME':<{width}}  CREATED")
    for row in rows:
        click.echo(f"{row.name:<{width}}  {row.created_at:%Y-%m-%d %H:%M:%S}")


@users.command("remove")
@with_store
@click.argument("name")
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
