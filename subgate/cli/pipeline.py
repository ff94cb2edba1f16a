"""``subgate pipeline lag|audit|retention|export|report``: the Spark jobs over the store (``subgate.pipeline``),
from the command line.

Parses the options, checks that pyspark, Java and the store's JDBC driver are installed (one line saying what to
install when not), starts the SparkSession (``--master``, default ``local[*]``), runs one job with a progress
report on stderr, and prints its rows: a JSON array with ``--json``, tables otherwise; ``--out DIR`` also writes
them there as JSON files (for ``export``, DIR is where the Parquet dataset is kept). ``--from-parquet DIR`` runs
lag or audit on the export's journal. pyspark is imported only here, inside the commands: the broker never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from subgate.cli.options import config_option, resolve_store
from subgate.cli.tables import print_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from subgate.pipeline.readers import JdbcStore

Row = dict[str, Any]


def job_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every pipeline command takes."""
    options = [
        click.option(
            "--store",
            envvar="SUBGATE_STORE",
            default=None,
            show_envvar=True,
            help="SQLAlchemy URL of the store (default: the one 'serve' uses, SQLite file subgate.db here).",
        ),
        click.option(
            "--master",
            default=None,
            help="Spark master URL (default: local[*], an embedded Spark; under spark-submit, its --master).",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Also write the rows to this directory (JSON).",
        ),
        click.option("--partitions", type=click.IntRange(1), default=2, show_default=True, help="JDBC read ranges."),
        click.option("--json", "as_json", is_flag=True, help="Print a JSON array of rows instead of tables."),
        click.option("--quiet", is_flag=True, help="No progress report on stderr."),
        config_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command


@contextmanager
def spark_for(store_url: str, master: str | None) -> Iterator[tuple[SparkSession, JdbcStore]]:
    """The SparkSession and the store's JDBC form; one click error line when something is missing. A session
    that was already running (a test's) is left running."""
    from subgate.pipeline.readers import UnsupportedStore, jdbc_store
    from subgate.pipeline.session import SessionSettings, missing_requirement

    try:
        store = jdbc_store(store_url)
    except UnsupportedStore as exc:
        raise click.ClickException(str(exc)) from exc
    if store.sqlite and not Path(store.url.removeprefix("jdbc:sqlite:")).exists():
        raise click.ClickException(f"no store at {store_url}: the SQLite file does not exist")
    missing = missing_requirement(store.url)
    if missing is not None:
        raise click.ClickException(missing)
    from pyspark.sql import SparkSession

    from subgate.pipeline.session import start_session, under_spark_submit

    running = SparkSession.getActiveSession()
    if master is None and not under_spark_submit():
        master = "local[*]"
    spark = running or start_session(SessionSettings(master=master))
    try:
        yield spark, store
    finally:
        if running is None:
            spark.stop()


def _run_job(job: Callable[[SparkSession, JdbcStore], Any], store: str | None, master: str | None, quiet: bool) -> Any:
    from subgate.pipeline.progress import stage_progress

    with spark_for(resolve_store(store), master) as (spark, jdbc), stage_progress(spark, quiet=quiet):
        try:
            return job(spark, jdbc)
        except Exception as exc:  # py4j/Spark errors: the first line says what failed
            if isinstance(exc, click.ClickException):
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise click.ClickException(f"the pipeline job failed: {first[:500]}") from exc


def _write(out: Path | None, name: str, rows: list[Row]) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(columns: Sequence[str], rows: list[Row], right: Sequence[str]) -> None:
    print_table(
        [c.upper().replace("_", "-") for c in columns],
        ([_cell(r[c]) for c in columns] for r in rows),
        right=[c.upper().replace("_", "-") for c in right],
    )


@click.group("pipeline")
def pipeline() -> None:
    """Spark jobs over the store: who is behind (lag), did publishers lose or repeat messages (audit), what may be
    deleted (retention), the journal as Parquet (export), charts on one page (report)."""


from_parquet = click.option(
    "--from-parquet",
    "parquet",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Read the journal from the Parquet export in DIR ('pipeline export --out DIR'); the rest from the store.",
)


def _dataset(parquet: Path | None) -> str | None:
    if parquet is None:
        return None
    from subgate.pipeline.export import DATASET

    dataset = parquet / DATASET
    if not dataset.is_dir():
        raise click.ClickException(f"no Parquet export in {parquet} (run 'subgate pipeline export --out {parquet}')")
    return str(dataset)


LAG_SHOWN = (
    "kind",
    "name",
    "client_id",
    "topic",
    "backlog",
    "oldest_unaccepted_age_s",
    "in_last_hour",
    "out_last_hour",
)
LAG_RIGHT = ("backlog", "oldest_unaccepted_age_s", "in_last_hour", "out_last_hour")


@pipeline.command("lag")
@job_options
@from_parquet
def lag_command(
    store: str | None,
    master: str | None,
    out: Path | None,
    partitions: int,
    as_json: bool,
    quiet: bool,
    parquet: Path | None,
) -> None:
    """Backlog, oldest unaccepted age and messages in/out over the last hour, per durable subscription and queue,
    and totals per topic branch."""
    from subgate.pipeline.jobs import run_lag

    now = datetime.now(UTC)
    dataset = _dataset(parquet)
    result = _run_job(
        lambda spark, jdbc: run_lag(spark, jdbc, now, partitions, dataset), store, master, quiet or as_json
    )
    _write(out, "lag", result.rows)
    _write(out, "lag_branches", result.branches)
    if as_json:
        click.echo(json.dumps(result.rows, indent=2))
        return
    if not result.rows:
        click.echo("no durable subscriptions or queues in the store")
        return
    _table(LAG_SHOWN, result.rows, LAG_RIGHT)
    click.echo("")
    from subgate.pipeline.lag import BRANCH_COLUMNS

    _table(BRANCH_COLUMNS, result.branches, BRANCH_COLUMNS[2:])
    click.echo(f"\njournal read up to #{result.snapshot.last_id}, ages at {now:%Y-%m-%d %H:%M:%S} UTC")


AUDIT_SHOWN = ("publisher_id", "numbered", "count", "first_seq", "last_seq", "gaps", "duplicates", "out_of_order")
AUDIT_RIGHT = ("count", "first_seq", "last_seq", "duplicates", "out_of_order")


@pipeline.command("audit")
@job_options
@from_parquet
def audit_command(
    store: str | None,
    master: str | None,
    out: Path | None,
    partitions: int,
    as_json: bool,
    quiet: bool,
    parquet: Path | None,
) -> None:
    """Per publisher id: count, first and last seq, the gaps in its seqs, duplicates and out-of-order rows."""
    from subgate.pipeline.jobs import run_audit

    dataset = _dataset(parquet)
    result = _run_job(lambda spark, jdbc: run_audit(spark, jdbc, partitions, dataset), store, master, quiet or as_json)
    _write(out, "audit", result.rows)
    if as_json:
        click.echo(json.dumps(result.rows, indent=2))
        return
    if not result.rows:
        click.echo("the journal is empty")
        return
    shown = [{**row, "gaps": _gaps_text(row["gaps"])} for row in result.rows]
    _table(AUDIT_SHOWN, shown, AUDIT_RIGHT)
    click.echo(f"\njournal read up to #{result.snapshot.last_id}")


def _gaps_text(gaps: list[list[int]]) -> str:
    if not gaps:
        return "-"
    return ",".join(str(a) if a == b else f"{a}..{b}" for a, b in gaps)


@pipeline.command("export")
@job_options
def export_command(
    store: str | None, master: str | None, out: Path | None, partitions: int, as_json: bool, quiet: bool
) -> None:
    """Append the journal rows not exported yet to Parquet in --out DIR (DIR/journal, partitioned by topic and
    UTC day), up to the journal's end when the run starts."""
    if out is None:
        raise click.UsageError("export needs --out DIR (where the Parquet dataset is kept)")
    from subgate.pipeline.export import export_journal

    target = out
    result = _run_job(lambda spark, jdbc: export_journal(spark, jdbc, target, partitions), store, master, quiet)
    if as_json:
        click.echo(json.dumps(result.as_json(), indent=2))
        return
    if result.rows:
        click.echo(f"exported {result.rows} journal rows (#{result.from_id}..#{result.to_id}) to {result.path}")
    else:
        click.echo(f"nothing new to export: {result.path} holds the journal up to #{result.to_id}")
    if result.closed:
        click.echo(f"closed {result.closed} partitions of past days (each now one file, not written again)")


PLAN_SHOWN = ("topic", "kind", "consumers", "rows", "bytes", "delete_through", "free_rows", "free_bytes")


def _retention_ms(_ctx: click.Context, _param: click.Parameter, value: str) -> int:
    from subgate.mapping.retention import DurationError, parse_duration_ms

    try:
        return parse_duration_ms(value)
    except DurationError as exc:
        raise click.BadParameter(str(exc)) from exc


@pipeline.command("retention")
@job_options
@from_parquet
@click.option(
    "--retention",
    "retention_ms",
    default="7d",
    show_default=True,
    callback=_retention_ms,
    help="How long the journal keeps rows for replay (as 'serve --retention').",
)
def retention_command(
    store: str | None,
    master: str | None,
    out: Path | None,
    partitions: int,
    as_json: bool,
    quiet: bool,
    parquet: Path | None,
    retention_ms: int,
) -> None:
    """Per topic and queue: the journal sequence up to which every row is older than the retention period and
    accepted by every queue and durable subscription, with the rows and bytes that frees. Deletes nothing: with
    --out DIR it writes DIR/retention-plan.json, which 'subgate journal compact --plan FILE' applies."""
    from subgate.pipeline.jobs import run_retention

    now = datetime.now(UTC)
    dataset = _dataset(parquet)
    result = _run_job(
        lambda spark, jdbc: run_retention(spark, jdbc, now, retention_ms, partitions, dataset),
        store,
        master,
        quiet or as_json,
    )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "retention-plan.json").write_text(json.dumps(result.plan, indent=2) + "\n")
    if as_json:
        click.echo(json.dumps(result.rows, indent=2))
        return
    if not result.rows:
        click.echo("the journal is empty")
        return
    _table(PLAN_SHOWN, result.rows, PLAN_SHOWN[2:])
    freed = sum(row["free_rows"] for row in result.rows), sum(row["free_bytes"] for row in result.rows)
    click.echo(f"\n{freed[0]} rows ({freed[1]} bytes) may be deleted; journal read up to #{result.snapshot.last_id}")
    if out is not None:
        click.echo(f"plan written to {out / 'retention-plan.json'}")


@pipeline.command("report")
@job_options
@from_parquet
def report_command(
    store: str | None,
    master: str | None,
    out: Path | None,
    partitions: int,
    as_json: bool,
    quiet: bool,
    parquet: Path | None,
) -> None:
    """One self-contained HTML page with charts (backlog per subscription, gaps per publisher, journal rows and
    bytes per topic and day), written to --out DIR/report.html."""
    if out is None:
        raise click.UsageError("report needs --out DIR (where report.html is written)")
    from subgate.pipeline.jobs import run_report

    now = datetime.now(UTC)
    dataset = _dataset(parquet)
    snapshot, page = _run_job(
        lambda spark, jdbc: run_report(spark, jdbc, now, partitions, dataset), store, master, quiet or as_json
    )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(page)
    if as_json:
        click.echo(json.dumps({"path": str(path), "journal_cut": snapshot.last_id}))
    else:
        click.echo(f"report written to {path} (journal read up to #{snapshot.last_id})")


if __name__ == "__main__":  # spark-submit ... subgate/cli/pipeline.py lag --store URL (docs/pipeline.md)
    pipeline(prog_name="subgate pipeline")
