"""``subgate fanout status``: the fan-out links of a running secondary, through ``$management`` type ``fanout``.

Per link: the primary, the selector, the state (connecting, snapshot, live, lost), the replicated topic count,
the replication messages received, the lag (primary timestamp to local apply, p50 and max over the last minute),
the reconnects and the last error (docs/fanout.md). Live figures only: with no server listening it fails.
"""

from __future__ import annotations

import json
from typing import Any

import click

from subgate.cli.management import (
    ManagementClient,
    ManagementError,
    ManagementUnavailable,
    ServerUnreachable,
    _plain_map,
)
from subgate.cli.subscriptions import make_target, target_options
from subgate.cli.tables import print_table

COLUMNS = ("primary", "selector", "state", "replicated_topics", "messages_received", "lag_p50_ms", "lag_max_ms",
           "reconnects", "last_error")  # fmt: skip


@click.group()
def fanout() -> None:
    """Fan-out links of a running secondary server."""


def read_status(client: ManagementClient) -> list[dict[str, Any]]:
    """The ``links`` of a ``$management`` QUERY of type ``fanout``."""
    body = client.request("QUERY", "fanout", {}).body
    links = body.get("links") if isinstance(body, dict) else None
    return [_plain_map(link) for link in links or []]


@fanout.command("status")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def status_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, as_json: bool
) -> None:
    """Print each fan-out link of the server at --server with its state and figures."""
    target = make_target(listen, user, password, store, timeout)
    try:
        with ManagementClient(target.host, target.port, user=user, password=password, timeout=timeout) as client:
            links = read_status(client)
    except ServerUnreachable as exc:
        raise click.ClickException(f"no server answers at {target.server}: fan-out status is live only") from exc
    except (ManagementError, ManagementUnavailable) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(links, indent=2))
        return
    if not links:
        click.echo("no fan-out links are configured on this server")
        return
    rows = [[_cell(link.get(column)) for column in COLUMNS] for link in links]
    print_table(list(COLUMNS), rows)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)
