"""``subgate journal stats``: how big the journal is and how old, whole and per topic branch; ``subgate journal
compact --plan FILE``: apply a retention plan of ``subgate pipeline retention`` (``storage.compaction``).

Like ``subgate subscriptions list``, it asks the running server that owns the store (``$management`` type
``journal``, operation READ: ``gateway.store_reports``), else ``--server`` when one is given, and reads the store
itself when no server runs (``cli.subscriptions.running_server``). Both paths run the same query,
``storage.journal_stats.journal_stats``: a topic's rows are counted under the first segment of its path
(``prices/fx/EURUSD`` under ``prices``), a queue's under its whole name. This module parses the options, picks
the path and prints (the table with ``cli.tables``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from subgate.cli.management import ManagementError, ManagementUnavailable
from subgate.cli.options import resolve_store, store_sessions, with_store
from subgate.cli.subscriptions import Target, make_target, running_server, target_options
from subgate.cli.tables import iso_time, print_table, table_time
from subgate.engine.records import BranchFigures, JournalEnd, JournalFigures, JournalStats

COLUMNS = ("BRANCH", "KIND", "ROWS", "BYTES", "OLDEST-ID", "OLDEST", "NEWEST-ID", "NEWEST")
RIGHT = ("ROWS", "BYTES", "OLDEST-ID", "NEWEST-ID")


# -- where it comes from ----------------------------------------------------------------------------------------
def read_live_or_offline(target: Target) -> JournalStats:
    """The journal's figures from the running server (``cli.subscriptions.running_server``), else the store."""
    with running_server(target) as client:
        if client is not None:
            try:
                return stats_from_map(client.read_journal())
            except ManagementError as exc:
                detail = f": {exc.description}" if exc.description else ""
                raise click.ClickException(
                    f"the server could not read the journal's figures (status {exc.status}{detail})"
                ) from exc
            except ManagementUnavailable as exc:
                raise click.ClickException(f"the server at {target.server} did not answer the request: {exc}") from exc
    from subgate.storage.journal_stats import journal_stats

    with store_sessions(target.store) as sessions, sessions() as session:
        return journal_stats(session.connection())


def stats_from_map(body: dict[str, Any]) -> JournalStats:
    """The management READ answer (``gateway.store_reports.stats_map``) as the record the store path gives."""
    branches = tuple(
        BranchFigures(str(item.get("branch") or ""), str(item.get("kind") or ""), _figures(item))
        for item in body.get("branches") or []
    )
    return JournalStats(_figures(body), branches)


def _figures(item: dict[str, Any]) -> JournalFigures:
    return JournalFigures(
        int(item.get("rows") or 0), int(item.get("bytes") or 0), _end(item.get("oldest")), _end(item.get("newest"))
    )


def _end(value: Any) -> JournalEnd | None:
    return None if not isinstance(value, dict) else JournalEnd(int(value["id"]), int(value["ts"]))


# -- output -----------------------------------------------------------------------------------------------------
def stats_json(stats: JournalStats) -> dict[str, Any]:
    branches = [{"branch": b.branch, "kind": b.kind, **_figures_json(b.figures)} for b in stats.branches]
    return {**_figures_json(stats.total), "branches": branches}


def _figures_json(figures: JournalFigures) -> dict[str, Any]:
    return {
        "rows": figures.rows,
        "bytes": figures.bytes,
        "oldest": _end_json(figures.oldest),
        "newest": _end_json(figures.newest),
    }


def _end_json(end: JournalEnd | None) -> dict[str, Any] | None:
    return None if end is None else {"id": end.id, "ts": iso_time(end.ts_ms)}


def print_stats(stats: JournalStats) -> None:
    total = stats.total
    if not total.rows:
        click.echo("the journal is empty")
        return
    click.echo(f"rows:    {total.rows}")
    click.echo(f"bytes:   {total.bytes}")
    click.echo(f"oldest:  {_end_text(total.oldest)}")
    click.echo(f"newest:  {_end_text(total.newest)}")
    click.echo("")
    rows = (
        (
            b.branch,
            b.kind,
            str(b.figures.rows),
            str(b.figures.bytes),
            _id_text(b.figures.oldest),
            table_time(None if b.figures.oldest is None else b.figures.oldest.ts_ms),
            _id_text(b.figures.newest),
            table_time(None if b.figures.newest is None else b.figures.newest.ts_ms),
        )
        for b in stats.branches
    )
    print_table(COLUMNS, rows, right=RIGHT)


def _end_text(end: JournalEnd | None) -> str:
    return "-" if end is None else f"#{end.id} at {table_time(end.ts_ms)} UTC"


def _id_text(end: JournalEnd | None) -> str:
    return "-" if end is None else str(end.id)


# -- commands ---------------------------------------------------------------------------------------------------
@click.group("journal")
def journal() -> None:
    """The journal (the store's messages table)."""


@journal.command("stats")
@target_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of a table.")
def stats_command(
    listen: str, user: str | None, password: str | None, timeout: float, store: str | None, as_json: bool
) -> None:
    """Rows, bytes, oldest and newest message of the journal, and of each topic branch (a topic path's first
    segment) and queue."""
    stats = read_live_or_offline(make_target(listen, user, password, store, timeout))
    if as_json:
        click.echo(json.dumps(stats_json(stats), indent=2))
    else:
        print_stats(stats)


@journal.command("compact")
@click.option(
    "--plan",
    "plan_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The plan written by 'subgate pipeline retention --out DIR' (DIR/retention-plan.json).",
)
@click.option("--batch", type=click.IntRange(1), default=10_000, show_default=True, help="Rows per transaction.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of text.")
@with_store
def compact_command(plan_path: Path, batch: int, as_json: bool, store: str | None) -> None:
    """Delete the journal rows a retention plan names, in bounded batches; refused when queues or durable
    subscriptions were created (or set back) since the plan was made."""
    from subgate.storage.compaction import PlanRefused, compact
    from subgate.storage.db import check_schema, make_engine

    try:
        plan = json.loads(plan_path.read_text())
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read the plan {plan_path}: {exc}") from exc
    url = resolve_store(store)
    check_schema(url, migrate=False, operator=True)
    engine = make_engine(url)
    try:
        deleted = compact(engine, plan, batch=batch)
    except PlanRefused as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        engine.dispose()
    if as_json:
        click.echo(json.dumps({"deleted": deleted}))
    else:
        click.echo(f"deleted {deleted} journal rows")
