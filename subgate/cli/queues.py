"""``subgate queues list|show|purge``: point-to-point queues, on the running server or on the store.

Like ``subgate subscriptions``, each command asks the server that owns the store (its lease), else ``--server``
when one is given, through ``$management`` type ``queue`` (``gateway.server_admin``), and works on the store
when no server runs (``storage.queue_admin``: durable queues only, their journal backlog). Live, a queue shows
what the server holds (available in memory, paged out to the journal, consumers, traffic); offline only its
backlog in the journal and the time of its oldest row. ``oldest`` (and its age) is the journal time of the
oldest row of a durable queue's backlog, read from the store live too (in memory or paged out alike), when the
server reports the same store as ``--store``: the server's queues keep no arrival time, and the reactor never
waits on the store. A purge goes in steps of ``--step`` messages (each one
request, or one transaction on the store) under a progress bar on stderr, and stops when a step comes back
short or the queue's depth at the start has gone (a producer still sending does not keep it going).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import click

from subgate.cli import tables
from subgate.cli.connections import duration
from subgate.cli.errors import management_errors
from subgate.cli.options import NAME_1024, store_sessions
from subgate.cli.progress import stepped
from subgate.cli.subscriptions import Target, make_target, running_server, target_options
from subgate.cli.tables import iso_time

COLUMNS = ("QUEUE", "DURABLE", "DEPTH", "AVAILABLE", "PAGED", "CONSUMERS", "IN", "OUT", "OLDEST")
RIGHT = ("DEPTH", "AVAILABLE", "PAGED", "CONSUMERS", "IN", "OUT")
LIVE_FIELDS = ("available", "paged", "consumers", "messages_in", "messages_out", "expired", "rejected", "blocked")
EXIT_CODES = "Exit codes: 0 done; 1 failed (no such queue, the server refused, the store cannot be read); 2 usage."


@dataclass(frozen=True, slots=True)
class QueueView:
    """One queue as the commands print it: ``live`` holds the running server's figures (empty offline),
    ``oldest_ms`` the journal time of the oldest row of its backlog in the store (None: none, or not known)."""

    name: str
    durable: bool
    depth: int
    live: dict[str, Any]
    oldest_ms: int | None = None

    @classmethod
    def from_map(cls, item: dict[str, Any]) -> QueueView:
        live = {key: item.get(key) for key in LIVE_FIELDS}
        return cls(str(item.get("name") or ""), bool(item.get("durable")), int(item.get("depth") or 0), live)

    def as_json(self) -> dict[str, Any]:
        live = {key: self.live.get(key) for key in LIVE_FIELDS}
        return {
            "name": self.name,
            "durable": self.durable,
            "depth": self.depth,
            **live,
            "oldest": iso_time(self.oldest_ms),
        }


def _stored(queue: Any) -> QueueView:
    return QueueView(queue.name, True, queue.depth, {}, queue.oldest_ms)


# -- the two paths ----------------------------------------------------------------------------------------------
def with_journal_times(target: Target, server_store: object, views: Iterable[QueueView]) -> list[QueueView]:
    """Live views with ``oldest_ms`` from the store's backlog of each durable queue, when the server serves the
    store of ``--store`` (else as they are)."""
    from subgate.storage.errors import StoreError, safe_url, store_errors
    from subgate.storage.queue_admin import list_queues as stored_queues

    views = list(views)
    if server_store != safe_url(target.store) or not any(view.durable for view in views):
        return views
    try:
        with store_errors(target.store), store_sessions(target.store) as sessions, sessions() as session:
            oldest = {queue.name: queue.oldest_ms for queue in stored_queues(session)}
    except StoreError:  # the figure is a courtesy: the server's own figures still stand
        return views
    return [replace(view, oldest_ms=oldest.get(view.name)) if view.durable else view for view in views]


def list_queues(target: Target) -> list[QueueView]:
    with running_server(target) as client:
        if client is not None:
            with management_errors(target, "list the queues"):
                views = [QueueView.from_map(item) for item in client.query_queues()]
                return with_journal_times(target, client.read_server().get("store"), views)
    from subgate.storage.queue_admin import list_queues as stored_queues

    with store_sessions(target.store) as sessions, sessions() as session:
        return [_stored(queue) for queue in stored_queues(session)]


def show_queue(target: Target, name: str) -> QueueView:
    with running_server(target) as client:
        if client is not None:
            with management_errors(target, f"show queue {name!r}"):
                view = QueueView.from_map(client.read_queue(name))
                return with_journal_times(target, client.read_server().get("store"), [view])[0]
    from subgate.storage.queue_admin import find_queue

    with store_sessions(target.store) as sessions, sessions() as session:
        found = find_queue(session, name)
    if found is None:
        raise click.ClickException(f"no durable queue {name!r} in the store {_safe(target.store)}")
    return _stored(found)


def purge_queue(target: Target, name: str, step: int) -> tuple[int, int]:
    """Purge in steps under a progress bar; returns (messages purged, depth left)."""
    with running_server(target) as client:
        if client is not None:
            with management_errors(target, f"purge queue {name!r}"):
                shown = client.read_queue(name)
                start = int(shown.get("available") or 0) + int(shown.get("paged") or 0)  # what waits

                def live_step() -> tuple[int, int]:
                    answer = client.purge_queue(name, step)
                    return int(answer["purged"]), int(answer["depth"])

                return stepped(f"purging {name}", start, step, live_step)
    return _purge_offline(target, name, step)


def _purge_offline(target: Target, name: str, step: int) -> tuple[int, int]:
    from subgate.storage.queue_admin import find_queue, purge_step

    with store_sessions(target.store) as sessions:
        with sessions() as session:
            found = find_queue(session, name)
        if found is None:
            raise click.ClickException(f"no durable queue {name!r} in the store {_safe(target.store)}")
        queue = found
        left = queue.depth

        def store_step() -> tuple[int, int]:
            nonlocal left
            with sessions.begin() as session:
                purged = purge_step(session, queue, step)
            left = max(0, left - purged)
            return purged, left

        return stepped(f"purging {name}", queue.depth, step, store_step)


def _safe(url: str) -> str:
    from subgate.storage.errors import safe_url

    return safe_url(url)


# -- output -----------------------------------------------------------------------------------------------------
def _cell(view: QueueView, key: str) -> str:
    value = view.live.get(key)
    return "-" if value is None else str(value)


def print_queues(views: list[QueueView]) -> None:
    rows = (
        (
            view.name,
            "yes" if view.durable else "no",
            str(view.depth),
            _cell(view, "available"),
            _cell(view, "paged"),
            _cell(view, "consumers"),
            _cell(view, "messages_in"),
            _cell(view, "messages_out"),
            tables.table_time(view.oldest_ms),
        )
        for view in views
    )
    tables.print_table(COLUMNS, rows, right=RIGHT)


def print_queue(view: QueueView) -> None:
    fields = view.as_json()
    if view.oldest_ms is not None:  # and how long it has waited
        fields["oldest"] = f"{fields['oldest']} ({duration(max(0.0, time.time() - view.oldest_ms / 1000))} ago)"
    width = max(len(key) for key in fields) + 2
    for key, value in fields.items():
        shown = "-" if value is None else ("yes" if value is True else "no" if value is False else str(value))
        click.echo(f"{key.replace('_', '-') + ':':<{width}}{shown}")


# -- commands ---------------------------------------------------------------------------------------------------
@click.group("queues", epilog=EXIT_CODES)
def queues() -> None:
    """Point-to-point queues: list, show and purge them."""


def _target(listen: str, user: str | None, password: str | None, store: str | None, timeout: float) -> Target:
    return make_target(listen, user, password, store, timeout)


def queue_command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    return queues.command(name, epilog=EXIT_CODES)


@queue_command("list")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, as_json: bool
) -> None:
    """List the queues: depth, what is in memory and paged out, consumers and traffic (offline: the durable
    queues' backlogs in the store)."""
    views = list_queues(_target(listen, user, password, store, timeout))
    if as_json:
        click.echo(json.dumps([view.as_json() for view in views], indent=2))
    elif not views:
        click.echo("no queues")
    else:
        print_queues(views)


@queue_command("show")
@target_options
@click.argument("name", type=NAME_1024)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, name: str, as_json: bool
) -> None:
    """Show queue NAME."""
    view = show_queue(_target(listen, user, password, store, timeout), name)
    if as_json:
        click.echo(json.dumps(view.as_json(), indent=2))
    else:
        print_queue(view)


@queue_command("purge")
@target_options
@click.argument("name", type=NAME_1024)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--step", type=click.IntRange(1), default=10_000, show_default=True, help="Messages per step.")
def purge_command(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    name: str,
    yes: bool,
    step: int,
) -> None:
    """Discard every message waiting on queue NAME (not those delivered and not settled yet)."""
    if not yes:
        click.confirm(f"discard every message waiting on queue {name!r}?", abort=True, err=True)
    purged, left = purge_queue(_target(listen, user, password, store, timeout), name, step)
    click.echo(f"purged {purged} message(s) from queue {name!r}; {left} left")
