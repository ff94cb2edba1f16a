"""``subgate subscriptions list|show`` and ``subgate unsubscribe``: the operator side of JMS subscriptions.

Every command first asks the running server, through its management node (``cli.management``): the server that
owns the store (its lease, ``cli.owner``), else ``--server`` when one is given. When no server owns the store and
nothing listens at ``--server`` (or none was given) it works on the store directly (``--store``, as for
``serve``). It refuses to change a store whose live owner does not answer. The store path is
``storage.subscription_admin`` (backlogs counted through each subscription's selector, the offline rules for
removing one); this module only parses options, picks the path and prints.

Both paths produce the same ``SubscriptionView`` rows, so the output does not depend on where they came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import click

from subgate.cli import tables
from subgate.cli.management import ManagementClient, ManagementError, ManagementUnavailable, ServerUnreachable
from subgate.cli.options import NAME_512, NAME_1024, OneLineBadParameter, resolve_store, split_address, with_store
from subgate.cli.owner import decide, store_owner
from subgate.cli.tables import iso_time, table_time
from subgate.engine.records import SubscriptionRecord

if TYPE_CHECKING:
    pass

DEFAULT_SERVER = "127.0.0.1:5672"
COLUMNS = ("KIND", "CLIENT-ID", "NAME", "TOPIC", "SELECTOR", "NO-LOCAL", "CONSUMERS", "BACKLOG", "CREATED")


# -- what is shown ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SubscriptionView:
    """One subscription as the commands print it; ``backlog`` is None when it could not be counted."""

    id: int
    kind: str
    durable: bool
    client_id: str | None
    name: str
    topic: str
    selector: str | None
    no_local: bool
    consumers: int
    backlog: int | None
    created_ms: int | None

    @classmethod
    def from_record(cls, record: SubscriptionRecord, backlog: int | None) -> SubscriptionView:
        return cls(
            record.id,
            record.kind,
            record.durable,
            record.client_id,
            record.name,
            record.topic,
            record.selector,
            record.no_local,
            record.consumers,
            backlog,
            record.created_ms,
        )

    @classmethod
    def from_map(cls, item: dict[str, Any]) -> SubscriptionView:
        """From a management response map (``created`` in ms since the epoch)."""
        return cls(
            id=int(item.get("id") or 0),
            kind=str(item.get("kind") or ""),
            durable=bool(item.get("durable")),
            client_id=_optional_str(item.get("client_id")),
            name=str(item.get("name") or ""),
            topic=str(item.get("topic") or ""),
            selector=_optional_str(item.get("selector")),
            no_local=bool(item.get("no_local")),
            consumers=int(item.get("consumers") or 0),
            backlog=None if item.get("backlog") is None else int(item["backlog"]),
            created_ms=None if item.get("created") is None else int(item["created"]),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "durable": self.durable,
            "client_id": self.client_id,
            "name": self.name,
            "topic": self.topic,
            "selector": self.selector,
            "no_local": self.no_local,
            "consumers": self.consumers,
            "backlog": self.backlog,
            "created": iso_time(self.created_ms),
        }


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def describe(name: str, client_id: str | None) -> str:
    from subgate.storage.subscription_admin import describe as describe_subscription

    return describe_subscription(name, client_id)


# -- where it comes from ----------------------------------------------------------------------------------------
class Backend(Protocol):
    """The server's management node or the store; both raise ``click.ClickException`` with the reason."""

    def list(self, *, client_id: str | None, global_only: bool, topic: str | None) -> list[SubscriptionView]: ...

    def show(self, name: str, client_id: str | None) -> SubscriptionView: ...

    def unsubscribe(self, name: str, client_id: str | None) -> None: ...


@dataclass(frozen=True, slots=True)
class Target:
    """Where to look: the server address (and credentials), and the store to use when no server listens."""

    host: str
    port: int
    user: str | None
    password: str | None
    store: str
    timeout: float
    explicit: bool = True  # --server came from a flag, a variable or the config file (not the default)

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"


class ServerBackend:
    """Through the running server's ``$management`` node."""

    def __init__(self, client: ManagementClient, server: str) -> None:
        self._client = client
        self._server = server

    def list(self, *, client_id: str | None, global_only: bool, topic: str | None) -> list[SubscriptionView]:
        with self._errors("list"):
            items = self._client.query_subscriptions(client_id=client_id, global_only=global_only, topic=topic)
        return [SubscriptionView.from_map(item) for item in items]

    def show(self, name: str, client_id: str | None) -> SubscriptionView:
        with self._errors("show", name, client_id):
            return SubscriptionView.from_map(self._client.read_subscription(name, client_id=client_id))

    def unsubscribe(self, name: str, client_id: str | None) -> None:
        with self._errors("unsubscribe", name, client_id):
            self._client.delete_subscription(name, client_id=client_id)

    @contextmanager
    def _errors(self, action: str, name: str | None = None, client_id: str | None = None) -> Iterator[None]:
        try:
            yield
        except ManagementError as exc:
            raise click.ClickException(_explain(exc, action, name, client_id)) from exc
        except ManagementUnavailable as exc:
            raise click.ClickException(f"the server at {self._server} did not answer the request: {exc}") from exc


def _explain(exc: ManagementError, action: str, name: str | None, client_id: str | None) -> str:
    """A management error status as an operator-facing sentence (``action`` is the verb: list, show, ...)."""
    what = "subscriptions" if name is None else describe(name, client_id)
    detail = f": {exc.description}" if exc.description else ""
    if exc.status == 404 and name is not None:
        return f"no {what}"
    if exc.status == 409 and action == "unsubscribe":
        return f"cannot unsubscribe {what}{detail or ': it is in use'} (close its consumers first)"
    if exc.status == 403:
        return f"the server does not allow this user to {action} {what}{detail}"
    return f"the server could not {action} {what} (status {exc.status}{detail})"


class StoreBackend:
    """On the store directly, while no server runs (``storage.subscription_admin``)."""

    def __init__(self, url: str) -> None:
        from subgate.engine.selection import compile_selector
        from subgate.storage.subscription_admin import OfflineSubscriptions

        with _refusals():
            self._store = OfflineSubscriptions(url, compile_selector, lambda text: click.echo(text, err=True))

    def close(self) -> None:
        self._store.close()

    def list(self, *, client_id: str | None, global_only: bool, topic: str | None) -> list[SubscriptionView]:
        counted = self._store.list(client_id=client_id, global_only=global_only, topic=topic)
        return [SubscriptionView.from_record(c.record, c.backlog) for c in counted]

    def show(self, name: str, client_id: str | None) -> SubscriptionView:
        with _refusals():
            counted = self._store.show(name, client_id)
        return SubscriptionView.from_record(counted.record, counted.backlog)

    def unsubscribe(self, name: str, client_id: str | None) -> None:
        with _refusals():
            self._store.unsubscribe(name, client_id)


@contextmanager
def _refusals() -> Iterator[None]:
    from subgate.storage.subscription_admin import OfflineRefusal

    try:
        yield
    except OfflineRefusal as refusal:
        raise click.ClickException(str(refusal)) from None


@contextmanager
def running_server(target: Target, *, store_fallback: bool = True) -> Iterator[ManagementClient | None]:
    """A management client of the server that owns the store, or of ``--server`` when none does (cli.owner);
    None (said on stderr) when no server owns the store and nothing listens at ``--server``, so the caller can
    use the store instead (``store_fallback`` False: a caller that cannot, and does not say it will)."""
    explicit = (target.host, target.port) if target.explicit else None
    try:
        decision = decide(explicit, store_owner(target.store))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if decision.address is None:  # no server owns the store and none was named: the store it is
        yield None
        return
    host, port = decision.address
    client = ManagementClient(host, port, user=target.user, password=target.password, timeout=target.timeout)
    try:
        client.open()
    except ServerUnreachable as exc:
        if decision.owner is not None:
            raise click.ClickException(
                f"the store {_safe(target.store)} is in use by {decision.owner.describe()}, but nothing answers "
                "there; not changing the store behind a running server (retry when it answers, or stop it)"
            ) from exc
        using = f"; using the store {_safe(target.store)}" if store_fallback else ""
        click.echo(f"server not reachable at {target.server}{using}", err=True)
        yield None
        return
    except ManagementUnavailable as exc:
        raise click.ClickException(f"cannot use the server at {host}:{port}: {exc}") from exc
    try:
        yield client
    finally:
        client.close()


@contextmanager
def open_backend(target: Target) -> Iterator[Backend]:
    """The server's management node when something listens at ``target.server``, else the store."""
    with running_server(target) as client:
        if client is not None:
            yield ServerBackend(client, target.server)
            return
        store = StoreBackend(target.store)
        try:
            yield store
        finally:
            store.close()


def _safe(url: str) -> str:
    from subgate.storage.errors import safe_url

    return safe_url(url)


# -- options ----------------------------------------------------------------------------------------------------
def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--server/--user/--password/--timeout plus --store and --config (cli.options)."""
    command = click.option(
        "--timeout",
        type=click.FloatRange(0.1),
        default=10.0,
        show_default=True,
        help="Seconds allowed for each step of talking to the server.",
    )(command)
    command = click.option(
        "--password",
        envvar="SUBGATE_PASSWORD",
        default=None,
        show_envvar=True,
        help="Password for SASL PLAIN (with --user).",
    )(command)
    command = click.option(
        "--user", envvar="SUBGATE_USER", default=None, show_envvar=True, help="User for SASL PLAIN."
    )(command)
    command = click.option(
        "--server",
        "listen",  # shares the config file's ``listen`` key with ``serve``
        envvar=["SUBGATE_SERVER", "SUBGATE_LISTEN"],
        default=DEFAULT_SERVER,
        show_default=True,
        show_envvar=True,
        help="HOST:PORT of the running server (by default where 'subgate serve' listens).",
    )(command)
    return with_store(command)


def make_target(listen: str, user: str | None, password: str | None, store: str | None, timeout: float) -> Target:
    try:
        host, port = split_address(listen)
    except ValueError as exc:
        raise OneLineBadParameter(str(exc), param_hint="--server") from exc
    if port == 0:
        raise OneLineBadParameter("port 0 names no server; give the port it listens on", param_hint="--server")
    if host in ("", "0.0.0.0", "::"):  # a wildcard listen address: the server is reachable on loopback
        host = "127.0.0.1"
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source("listen") if ctx is not None else None
    explicit = source is not None and source != click.core.ParameterSource.DEFAULT
    return Target(host, port, user, password, resolve_store(store), timeout, explicit)


def scope(client_id: str | None, global_: bool, *, required: bool) -> str | None:
    """The client-id to look in (None = global); --client-id and --global exclude each other."""
    if client_id is not None and global_:
        raise click.UsageError("give either --client-id or --global, not both")
    if required and client_id is None and not global_:
        raise click.UsageError("give --client-id ID, or --global for a subscription without a client-id")
    return client_id


# -- output -----------------------------------------------------------------------------------------------------
def print_table(views: list[SubscriptionView]) -> None:
    rows = (
        (
            view.kind,
            view.client_id if view.client_id is not None else "(global)",
            view.name,
            view.topic,
            view.selector if view.selector is not None else "-",
            "yes" if view.no_local else "no",
            str(view.consumers),
            "?" if view.backlog is None else str(view.backlog),
            table_time(view.created_ms),
        )
        for view in views
    )
    tables.print_table(COLUMNS, rows, right=("CONSUMERS", "BACKLOG"))


def print_details(view: SubscriptionView) -> None:
    fields = view.as_json()
    width = max(len(key) for key in fields) + 2
    for key, value in fields.items():
        click.echo(f"{key.replace('_', '-') + ':':<{width}}{_detail(key, value)}")


def _detail(key: str, value: Any) -> str:
    if key == "client_id" and value is None:
        return "(global)"
    if value is None:
        return "unknown" if key == "backlog" else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# -- commands ---------------------------------------------------------------------------------------------------
@click.group("subscriptions")
def subscriptions() -> None:
    """Named topic subscriptions: list and show them (remove one with 'subgate unsubscribe')."""


@subscriptions.command("list")
@target_options
@click.option("--client-id", default=None, type=NAME_512, help="Only subscriptions of this client-id.")
@click.option("--global", "global_", is_flag=True, help="Only global subscriptions (no client-id).")
@click.option("--topic", default=None, type=NAME_1024, help="Only subscriptions on this topic.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_command(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    client_id: str | None,
    global_: bool,
    topic: str | None,
    as_json: bool,
) -> None:
    """List subscriptions with their consumers and backlog."""
    owner = scope(client_id, global_, required=False)
    with open_backend(make_target(listen, user, password, store, timeout)) as backend:
        views = backend.list(client_id=owner, global_only=global_, topic=topic)
    if as_json:
        click.echo(json.dumps([view.as_json() for view in views], indent=2))
    elif not views:
        click.echo("no subscriptions")
    else:
        print_table(views)


@subscriptions.command("show")
@target_options
@click.argument("name", type=NAME_512)
@click.option("--client-id", default=None, type=NAME_512, help="The subscription's client-id.")
@click.option("--global", "global_", is_flag=True, help="A global subscription (no client-id).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def show_command(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    name: str,
    client_id: str | None,
    global_: bool,
    as_json: bool,
) -> None:
    """Show subscription NAME of --client-id ID (or --global)."""
    owner = scope(client_id, global_, required=True)
    with open_backend(make_target(listen, user, password, store, timeout)) as backend:
        view = backend.show(name, owner)
    if as_json:
        click.echo(json.dumps(view.as_json(), indent=2))
    else:
        print_details(view)


@click.command("unsubscribe")
@target_options
@click.argument("name", type=NAME_512)
@click.option("--client-id", default=None, type=NAME_512, help="The subscription's client-id.")
@click.option("--global", "global_", is_flag=True, help="A global subscription (no client-id).")
def unsubscribe(
    listen: str,
    user: str | None,
    password: str | None,
    timeout: float,
    store: str | None,
    name: str,
    client_id: str | None,
    global_: bool,
) -> None:
    """Remove durable subscription NAME of --client-id ID (or --global) and its backlog.

    Refused while the subscription has active consumers.
    """
    owner = scope(client_id, global_, required=True)
    with open_backend(make_target(listen, user, password, store, timeout)) as backend:
        backend.unsubscribe(name, owner)
    click.echo(f"removed {describe(name, owner)}")
