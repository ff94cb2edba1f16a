"""``subgate bookmarks show``: where a durable subscription stands in the journal.

Like ``subgate subscriptions show``, it asks the running server that owns the store (``$management`` type
``bookmark``: ``gateway.store_reports``), else ``--server`` when one is given, and works on the store itself when
no server runs (``cli.subscriptions.running_server``). Both paths run the same query,
``storage.journal_stats.read_bookmark``; the server runs it on its journal writer thread, so the live answer is
what the store holds: acks are in it, but a cursor's low-water mark is written about once a second, so
``low-water`` may lag the server by that much (the acks below the server's mark still count as accepted above).
This module parses the options, picks the path and prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import click

from subgate.cli.management import ManagementError, ManagementUnavailable
from subgate.cli.options import NAME_512, store_sessions
from subgate.cli.subscriptions import Target, describe, make_target, running_server, scope, target_options
from subgate.engine.records import Bookmark


@dataclass(frozen=True, slots=True)
class BookmarkView:
    """A durable subscription's bookmark as the command prints it (the same from the server and the store)."""

    name: str
    client_id: str | None
    topic: str
    kind: str
    low_water: int
    accepted_above: int
    highest_accepted: int | None
    backlog: int

    @classmethod
    def from_bookmark(cls, bookmark: Bookmark) -> BookmarkView:
        sub, position = bookmark.subscription, bookmark.position
        assert position is not None
        return cls(
            sub.name,
            sub.client_id,
            sub.topic,
            sub.kind,
            position.low_water,
            position.accepted_above,
            position.highest_accepted,
            position.backlog,
        )

    @classmethod
    def from_map(cls, item: dict[str, Any]) -> BookmarkView:
        """From the management READ answer (``gateway.store_reports.bookmark_map``)."""
        highest = item.get("highest_accepted")
        return cls(
            name=str(item.get("name") or ""),
            client_id=None if item.get("client_id") is None else str(item["client_id"]),
            topic=str(item.get("topic") or ""),
            kind=str(item.get("kind") or ""),
            low_water=int(item.get("low_water") or 0),
            accepted_above=int(item.get("accepted_above") or 0),
            highest_accepted=None if highest is None else int(highest),
            backlog=int(item.get("backlog") or 0),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "client_id": self.client_id,
            "topic": self.topic,
            "kind": self.kind,
            "low_water": self.low_water,
            "accepted_above": self.accepted_above,
            "highest_accepted": self.highest_accepted,
            "backlog": self.backlog,
        }

    def position(self) -> str:
        """The low-water mark plus the accepted set above it, in words."""
        if not self.accepted_above:
            return f"{self.low_water} (nothing accepted above it)"
        return f"{self.low_water} + {self.accepted_above} accepted above it (the highest {self.highest_accepted})"


def read_live_or_offline(target: Target, name: str, client_id: str | None) -> BookmarkView:
    """The bookmark from the running server (``cli.subscriptions.running_server``), else from the store."""
    with running_server(target) as client:
        if client is not None:
            try:
                return BookmarkView.from_map(client.read_bookmark(name, client_id=client_id))
            except ManagementError as exc:
                raise click.ClickException(_explain(exc, name, client_id)) from exc
            except ManagementUnavailable as exc:
                raise click.ClickException(f"the server at {target.server} did not answer the request: {exc}") from exc
    return _read_offline(target, name, client_id)


def _read_offline(target: Target, name: str, client_id: str | None) -> BookmarkView:
    from subgate.engine.records import BookmarkRead
    from subgate.storage.journal_stats import missing_bookmark, read_bookmark

    with store_sessions(target.store) as sessions, sessions() as session:
        found = read_bookmark(session.connection(), BookmarkRead(name, client_id))
    missing = missing_bookmark(found, name, client_id)
    if missing is not None or found is None:
        raise click.ClickException(missing or f"no {describe(name, client_id)}")
    return BookmarkView.from_bookmark(found)


def _explain(exc: ManagementError, name: str, client_id: str | None) -> str:
    """A management error status as the sentence the operator reads (404: the server's own sentence, which is
    the one the offline path prints: ``storage.journal_stats.missing_bookmark``)."""
    what = f"the bookmark of {describe(name, client_id)}"
    if exc.status == 404:
        return exc.description or f"no {describe(name, client_id)}"
    detail = f": {exc.description}" if exc.description else ""
    if exc.status == 403:
        return f"the server does not allow this user to read {what}{detail}"
    return f"the server could not read {what} (status {exc.status}{detail})"


def print_details(view: BookmarkView) -> None:
    fields = {
        "name": view.name,
        "client-id": "(global)" if view.client_id is None else view.client_id,
        "topic": view.topic,
        "kind": view.kind,
        "position": view.position(),
        "low-water": str(view.low_water),
        "accepted-above": str(view.accepted_above),
        "backlog": str(view.backlog),
    }
    width = max(len(key) for key in fields) + 2
    for key, value in fields.items():
        click.echo(f"{key + ':':<{width}}{value}")


@click.group("bookmarks")
def bookmarks() -> None:
    """Where durable subscriptions stand in the journal."""


@bookmarks.command("show")
@target_options
@click.argument("subscription", type=NAME_512)
@click.option("--client-id", default=None, type=NAME_512, help="The subscription's client-id.")
@click.option("--global", "global_", is_flag=True, help="A global subscription (no client-id).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show_command(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    subscription: str,
    client_id: str | None,
    global_: bool,
    as_json: bool,
) -> None:
    """Show the journal position of durable SUBSCRIPTION of --client-id ID (or --global): its low-water mark,
    the messages accepted above it, and the backlog (journal rows of its topic not yet accepted, before its
    selector)."""
    owner = scope(client_id, global_, required=True)
    view = read_live_or_offline(make_target(listen, user, password, store, timeout), subscription, owner)
    if as_json:
        click.echo(json.dumps(view.as_json(), indent=2))
    else:
        print_details(view)
