"""``subgate connections list|close``: the AMQP connections of the running server.

Connections exist only on a running server, so there is no offline path: with no server owning the store and
nothing at ``--server`` the commands fail with one line saying so. Both go through ``$management`` type
``connection`` (``gateway.server_admin``); a connection is named by its number (``ID``, counted from 1 since the
server started), which ``list`` shows. Closing one sends ``amqp:connection:forced`` ("closed by an operator"); a
JMS client with failover reconnects, as it would after a server restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from subgate.cli import tables
from subgate.cli.errors import management_errors
from subgate.cli.management import ManagementClient
from subgate.cli.subscriptions import Target, make_target, running_server, target_options
from subgate.cli.tables import iso_time
from subgate.storage.errors import safe_url

COLUMNS = ("ID", "CONTAINER-ID", "PRINCIPAL", "REMOTE", "LINKS", "ROLES", "OPENED", "AGE")
EXIT_CODES = "Exit codes: 0 done; 1 failed (no server runs, no such connection, the server refused); 2 usage."


@contextmanager
def live_client(target: Target, action: str) -> Iterator[ManagementClient]:
    """The management client of the running server, its errors made one line (``action`` says what failed); a
    one-line error when no server runs."""
    with running_server(target, store_fallback=False) as client:
        if client is None:
            raise click.ClickException(
                f"no server owns the store {safe_url(target.store)} (connections exist only on a running server; "
                "give the server's store with --store, or --server HOST:PORT)"
            )
        with management_errors(target, action):
            yield client


def connection_json(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "opened": iso_time(item.get("opened"))}


def _age(opened_ms: Any) -> str:
    if not isinstance(opened_ms, int):
        return "-"
    seconds = max(0, int(time.time() - opened_ms / 1000))
    return duration(seconds)


def duration(seconds: float) -> str:
    """``3d 4h``, ``2h 5m``, ``4m 10s``, ``12s``: the two largest units."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def print_connections(items: list[dict[str, Any]]) -> None:
    rows = (
        (
            str(item.get("id")),
            str(item.get("container_id") or ""),
            str(item.get("principal") or "(anonymous)"),
            str(item.get("remote") or "-"),
            str(item.get("links") or 0),
            " ".join(f"{role}:{count}" for role, count in (item.get("roles") or {}).items()) or "-",
            tables.table_time(item.get("opened")),
            _age(item.get("opened")),
        )
        for item in items
    )
    tables.print_table(COLUMNS, rows, right=("ID", "LINKS", "AGE"))


@click.group("connections", epilog=EXIT_CODES)
def connections() -> None:
    """The running server's AMQP connections: list them, close one."""


@connections.command("list", epilog=EXIT_CODES)
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, as_json: bool
) -> None:
    """List open connections: number, container-id, principal, remote address, links, age."""
    target = make_target(listen, user, password, store, timeout)
    with live_client(target, "list the connections") as client:
        items = client.query_connections()
    if as_json:
        click.echo(json.dumps([connection_json(item) for item in items], indent=2))
    elif not items:
        click.echo("no connections")
    else:
        print_connections(items)


@connections.command("close", epilog=EXIT_CODES)
@target_options
@click.argument("number", metavar="ID", type=click.IntRange(1))
def close_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, number: int
) -> None:
    """Close connection ID (as 'connections list' numbers it) with amqp:connection:forced."""
    target = make_target(listen, user, password, store, timeout)
    with live_client(target, f"close connection #{number}") as client:
        client.close_connection(number)
    click.echo(f"closed connection #{number}")
