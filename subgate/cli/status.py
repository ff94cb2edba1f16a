"""``subgate status``: the server at a glance, on one screen.

Live (the server that owns the store, else ``--server``): ``$management`` READ of type ``server``
(``gateway.server_admin``) twice, ``--interval`` seconds apart, for the message rates (the server keeps totals),
and READ of type ``journal`` for its size (``gateway.store_reports``). Health is the server's own view of its
store: the journal writer's last commit (a refused write makes it unhealthy). Offline (no server runs): the
store's URL, schema revision, durable queues and subscriptions, and the journal's size, read from the store.

Exit codes (also in ``--help``): 0 the server runs and is healthy; 1 the status could not be read; 3 no server
runs (the store's figures are printed); 4 the server runs but its store refuses writes; 5 the server runs but its
memory high-water mark blocks every publisher (``memory-blocked``, with the figures: docs/operations.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from subgate.cli.connections import duration
from subgate.cli.errors import management_errors
from subgate.cli.journal import stats_from_map, stats_json
from subgate.cli.management import ManagementClient, ManagementError
from subgate.cli.options import store_sessions
from subgate.cli.subscriptions import Target, make_target, running_server, target_options
from subgate.cli.tables import iso_time, table_time
from subgate.engine.records import JournalStats

NOT_RUNNING = 3
UNHEALTHY = 4
MEMORY_BLOCKED = 5
EXIT_CODES = (
    "Exit codes: 0 the server runs and is healthy; 1 the status could not be read; 3 no server runs (the "
    "store's figures are shown); 4 the server runs but its store refuses writes; 5 the server runs but its memory "
    "high-water mark blocks every publisher; 2 usage."
)
BLOCKED_PREFIX = "memory-blocked"


def health_of(server: dict[str, Any]) -> str | None:
    """Why the server is not healthy, or None."""
    health = server.get("store_health")
    if isinstance(health, dict) and not health.get("ok"):
        return f"the store refused a write: {health.get('error')}"
    return blocked_of(server)


def blocked_of(server: dict[str, Any]) -> str | None:
    """``memory-blocked: ...`` with the figures while the memory high-water mark blocks every publisher, or None."""
    memory = server.get("memory")
    if not isinstance(memory, dict) or not memory.get("blocked"):
        return None
    return (
        f"{BLOCKED_PREFIX}: {_mib(memory['held'])} held of the {_mib(memory['mark'])} high-water mark; every "
        f"publisher gets no credit until it drops to {_mib(memory['low'])}"
    )


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def read_live(target: Target, interval: float) -> dict[str, Any] | None:
    """The live status (see the module docstring), or None when no server runs."""
    with running_server(target) as client:
        if client is None:
            return None
        with management_errors(target, "report its status"):
            first = client.read_server()
            began = time.monotonic()
            time.sleep(interval)
            journal = _live_journal(client)
            second = client.read_server()
            elapsed = max(time.monotonic() - began, 1e-3)
    rates = {key: round((int(second[key]) - int(first[key])) / elapsed, 1) for key in ("messages_in", "messages_out")}
    problem = health_of(second)
    return {
        "running": True,
        "server": second,
        "rates": rates,
        "journal": journal,
        "health": "ok" if problem is None else problem,
    }


def _live_journal(client: ManagementClient) -> dict[str, Any]:
    """The journal's figures, or why the server could not read them (a store that refuses writes may refuse the
    read's batch too: the status still reports the rest)."""
    try:
        return _journal(stats_from_map(client.read_journal()))
    except ManagementError as exc:
        return {"error": exc.description or f"status {exc.status}"}


def live_json(status: dict[str, Any]) -> dict[str, Any]:
    server = status["server"]
    return {**status, "server": {**server, "started": iso_time(server.get("started"))}}


def read_offline(target: Target) -> dict[str, Any]:
    from subgate.storage.db import schema_status
    from subgate.storage.errors import safe_url
    from subgate.storage.journal_stats import journal_stats
    from subgate.storage.queue_admin import list_queues
    from subgate.storage.subscriptions import list_subscriptions

    with store_sessions(target.store) as sessions, sessions() as session:
        revision, _head = schema_status(session.get_bind())  # type: ignore[arg-type]
        stats = journal_stats(session.connection())
        queues = len(list_queues(session))
        subscriptions = sum(1 for record in list_subscriptions(session) if record.durable)
    return {
        "running": False,
        "store": safe_url(target.store),
        "revision": revision,
        "queues": queues,
        "subscriptions": subscriptions,
        "journal": _journal(stats),
        "health": "no server runs",
    }


def _journal(stats: JournalStats) -> dict[str, Any]:
    figures = stats_json(stats)
    return {key: figures[key] for key in ("rows", "bytes", "oldest", "newest")}


# -- output -----------------------------------------------------------------------------------------------------
def _journal_line(journal: dict[str, Any]) -> str:
    if "error" in journal:
        return f"unreadable: {journal['error']}"
    oldest = journal.get("oldest")
    since = f", oldest #{oldest['id']} at {oldest['ts']}" if oldest else ""
    return f"{journal['rows']} rows, {journal['bytes']} bytes{since}"


def print_live(status: dict[str, Any]) -> None:
    server, rates = status["server"], status["rates"]
    health = server.get("store_health")
    age = health.get("last_ok_age") if isinstance(health, dict) else None
    last_write = "" if age is None else f" (last write {age:.1f} s ago)"
    lines = [
        f"subgate {server['version']} '{server['name']}': running, {status['health']}",
        f"uptime:        {duration(float(server['uptime']))} (since {table_time(server.get('started'))} UTC)",
        f"listen:        amqp {server['listen']}; http {server.get('http') or 'off'}",
        f"store:         {server['store']}{last_write}",
        f"connections:   {server['connections']} ({server['links']} links)",
        f"nodes:         {server['queues']} queues, {server['topics']} topics, {server['subscriptions']} subscriptions",
        f"messages:      in {rates['messages_in']}/s, out {rates['messages_out']}/s "
        f"(since start: {server['messages_in']} in, {server['messages_out']} out)",
        f"journal:       {_journal_line(status['journal'])}",
    ]
    memory = server.get("memory")
    if isinstance(memory, dict) and memory.get("mark"):
        lines.append(
            f"memory:        {_mib(memory['held'])} held, {_mib(memory['reserved'])} reserved for publisher credit, "
            f"mark {_mib(memory['mark'])}{' (publishers blocked)' if memory.get('blocked') else ''}"
        )
    click.echo("\n".join(lines))


def print_offline(status: dict[str, Any]) -> None:
    lines = [
        "subgate: no server runs for this store",
        f"store:         {status['store']} (schema {status['revision'] or 'none'})",
        f"nodes:         {status['queues']} durable queues, {status['subscriptions']} durable subscriptions",
        f"journal:       {_journal_line(status['journal'])}",
    ]
    click.echo("\n".join(lines))


@click.command("status", epilog=EXIT_CODES)
@target_options
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 60),
    default=1.0,
    show_default=True,
    help="Seconds between the two samples the message rates are taken from.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def status(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    interval: float,
    as_json: bool,
) -> None:
    """Version, uptime, listen addresses, store, connections, message rates, journal size and health."""
    target = make_target(listen, user, password, store, timeout)
    found = read_live(target, interval)
    shown = found if found is not None else read_offline(target)
    if as_json:
        click.echo(json.dumps(live_json(shown) if found is not None else shown, indent=2))
    elif found is not None:
        print_live(shown)
    else:
        print_offline(shown)
    if found is None:
        click.get_current_context().exit(NOT_RUNNING)
    if found["health"].startswith(BLOCKED_PREFIX):
        click.get_current_context().exit(MEMORY_BLOCKED)
    if found["health"] != "ok":
        click.get_current_context().exit(UNHEALTHY)
