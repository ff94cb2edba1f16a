"""``subgate topics tree|add|remove``: the topic tree of a running server, or of the store when none runs.

With a server listening at ``--server`` the commands go through ``$management`` (type ``topic``, see
``gateway.topic_admin``) and show live figures: subscriptions per topic, the size of each current value, and the
remove-with-session and missing-topic registrations. Without one they read and change the store's topic rows
(``storage.topics``), which only know the paths. The tree is drawn with ``rich``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console
from rich.tree import Tree

from subgate.cli.management import ManagementClient, ManagementError, ManagementUnavailable
from subgate.cli.options import NAME_1024, store_sessions
from subgate.cli.subscriptions import Target, make_target, running_server, target_options
from subgate.topics import TopicsError, is_valid_path, parse_selector


@dataclass
class TreeView:
    """What ``topics tree`` prints: topics with their figures (None offline) and the registrations."""

    topics: list[dict[str, Any]]
    removals: dict[str, int] = field(default_factory=dict)
    handlers: dict[str, int] = field(default_factory=dict)
    live: bool = True


@contextmanager
def _server(target: Target) -> Iterator[ManagementClient | None]:
    """The management client of the running server, or None when nothing listens (then: the store)."""
    with running_server(target) as client:
        try:
            yield client
        except ManagementError as exc:
            raise click.ClickException(exc.description) from exc
        except ManagementUnavailable as exc:
            raise click.ClickException(str(exc)) from exc


@contextmanager
def _store(target: Target) -> Iterator[Any]:
    with store_sessions(target.store) as sessions, sessions.begin() as session:
        yield session


def _check_selector(selector: str) -> None:
    try:
        parse_selector(selector)
    except TopicsError as exc:
        raise click.BadParameter(exc.description, param_hint="SELECTOR") from None


@click.group()
def topics() -> None:
    """The topic tree: print it, add and remove topics."""


@topics.command("tree")
@target_options
@click.argument("selector", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a tree.")
def tree_command(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    selector: str | None,
    as_json: bool,
) -> None:
    """Print the topics SELECTOR selects (every topic without one), with subscriptions, value sizes and
    registrations."""
    if selector is not None:
        _check_selector(selector)
    target = make_target(listen, user, password, store, timeout)
    with _server(target) as client:
        if client is not None:
            body = client.query_topics(selector)
            view = TreeView(
                body["topics"],
                {r["branch"]: r["registrations"] for r in body["removals"]},
                {h["path"]: h["handlers"] for h in body["handlers"]},
            )
        else:
            view = _offline_view(target, selector)
    if as_json:
        click.echo(json.dumps({"topics": view.topics, "removals": view.removals, "handlers": view.handlers}, indent=2))
        return
    print_tree(view)


def _stored_selection(session: Any, selector: str | None) -> list[str]:
    """The store's topic paths, or those ``selector`` selects, sorted."""
    from subgate.storage.topics import list_topics
    from subgate.topics import TopicTree

    paths = list_topics(session)
    if selector is None:
        return paths
    tree: TopicTree[None] = TopicTree()
    for path in paths:
        if is_valid_path(path):
            tree.add(path)
    return sorted(tree.select(selector))


def _offline_view(target: Target, selector: str | None) -> TreeView:
    with _store(target) as session:
        paths = _stored_selection(session, selector)
    return TreeView([{"path": path} for path in paths], live=False)


def print_tree(view: TreeView) -> None:
    console = Console()
    if not view.topics and not view.removals and not view.handlers:
        console.print("no topics")
        return
    root = Tree(f"[bold]topics[/bold] ({len(view.topics)})")
    if view.handlers.get(""):
        root.label = f"{root.label}  [magenta]missing-topic handlers: {view.handlers['']}[/magenta]"
    nodes: dict[str, Tree] = {"": root}
    figures = {t["path"]: t for t in view.topics}
    every = set(figures) | set(view.removals) | {p for p in view.handlers if p}
    for path in sorted(every):
        parent = ""
        for segment in path.split("/"):
            key = f"{parent}/{segment}" if parent else segment
            if key not in nodes:
                nodes[key] = nodes[parent].add(_label(segment, figures.get(key), view, key))
            parent = key
    console.print(root)
    if not view.live:
        console.print("[dim](from the store: start the server for subscriptions, values and registrations)[/dim]")


def _label(segment: str, figures: dict[str, Any] | None, view: TreeView, path: str) -> str:
    parts = [f"[bold]{segment}[/bold]" if figures is not None else f"[dim]{segment}[/dim]"]
    if figures is not None and view.live:
        size = figures.get("value_size")
        parts.append(f"subscriptions {figures.get('subscriptions', 0)}")
        if figures.get("durable_subscriptions"):
            parts.append(f"durable {figures['durable_subscriptions']}")
        parts.append("no value" if size is None else f"value {size} B")
    if path in view.removals:
        parts.append(f"[yellow]remove-with-session: {view.removals[path]}[/yellow]")
    if path in view.handlers:
        parts.append(f"[magenta]missing-topic handlers: {view.handlers[path]}[/magenta]")
    return "  ".join(parts)


@topics.command("add")
@target_options
@click.argument("path", type=NAME_1024)
def add_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, path: str
) -> None:
    """Create the topic PATH (nothing happens when it exists)."""
    if not is_valid_path(path):
        raise click.BadParameter(f"{path!r} is not a topic path (segments separated by '/')", param_hint="PATH")
    target = make_target(listen, user, password, store, timeout)
    with _server(target) as client:
        if client is not None:
            created = client.create_topic(path)
        else:
            from subgate.storage.errors import AlreadyExists
            from subgate.storage.topics import add_topic

            try:
                with _store(target) as session:
                    created = add_topic(session, path)
            except AlreadyExists as exc:
                raise click.ClickException(str(exc)) from exc
    click.echo(f"created topic {path!r}" if created else f"topic {path!r} exists")


@topics.command("remove")
@target_options
@click.argument("selector")
def remove_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, selector: str
) -> None:
    """Remove every topic SELECTOR selects: 'a/b' removes that topic, 'a/b//' the whole branch. Subscriptions
    naming a removed topic are closed and deleted; selector subscriptions stay."""
    _check_selector(selector)
    target = make_target(listen, user, password, store, timeout)
    with _server(target) as client:
        if client is not None:
            try:
                removed = client.remove_topics(selector)
            except ManagementError as exc:
                if exc.status != 404:
                    raise
                removed = []
        else:
            removed = _remove_offline(target, selector)
    if not removed:
        raise click.ClickException(f"no topic matches {selector!r}")
    for path in removed:
        click.echo(f"removed topic {path!r}")


def _remove_offline(target: Target, selector: str) -> list[str]:
    from subgate.storage.topics import remove_topics

    with _store(target) as session:
        selected = _stored_selection(session, selector)
        remove_topics(session, selected)
    return selected
