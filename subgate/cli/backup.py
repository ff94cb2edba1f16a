"""``subgate db backup`` and ``subgate db restore``: a consistent copy of a SQLite store while its server runs,
and that copy put back into a stopped store (subgate.storage.backup; docs/operations.md).

For a PostgreSQL store both commands refuse and print the documented ``pg_dump``/``pg_restore`` lines instead:
``pg_dump`` already takes a consistent snapshot of a live database, and the operator's PostgreSQL tooling
(roles, passwords, compression, where dumps go) is better left to it than wrapped here.
"""

from __future__ import annotations

from pathlib import Path

import click

from subgate.cli.options import resolve_store, with_store


def _postgres_refusal(url: str, file: str, what: str) -> click.ClickException:
    from subgate.storage.backup import pg_commands

    dump, restore = pg_commands(url, file)
    return click.ClickException(
        f"subgate does not {what} a PostgreSQL store itself; use PostgreSQL's own tools (docs/operations.md, "
        f"'Backup and restore'). While the server runs (pg_dump reads one consistent snapshot):\n  {dump}\n"
        f"and to restore into a new, empty database, then 'subgate db upgrade' and start the server on it:\n"
        f"  {restore}"
    )


def _print_report(report: object) -> None:
    from subgate.storage.backup import CopyReport

    assert isinstance(report, CopyReport)
    click.echo(f"integrity: {report.integrity}")
    click.echo(f"revision:  {report.revision}")
    width = max((len(name) for name, _ in report.rows), default=5)
    click.echo(f"{'TABLE':<{width}}  ROWS")
    for name, count in report.rows:
        click.echo(f"{name:<{width}}  {count}")


@click.command("backup")
@with_store
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite FILE when it exists.")
def db_backup(store: str | None, file: str, force: bool) -> None:
    """Copy the store to FILE, online: the server may keep running and writing.

    The copy is one consistent snapshot (SQLite's online backup API inside one read transaction), written next
    to FILE and renamed into place once 'PRAGMA integrity_check' passed; the output lists its rows per table.
    For PostgreSQL it prints the pg_dump command to use instead.

    Exits with 0 when FILE is written; 1 when it is refused (FILE exists, no store, a PostgreSQL store) or the
    copy fails its check; 2 on bad usage.
    """
    from subgate.cli.progress import pages
    from subgate.storage.backup import BackupError, backup_sqlite, sqlite_file

    url = resolve_store(store)
    if sqlite_file(url) is None:
        raise _postgres_refusal(url, file, "back up")
    try:
        with pages("copying the store") as progress:
            report = backup_sqlite(url, Path(file), force=force, progress=progress)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"backed up {sqlite_file(url)} to {report.path} ({report.size} bytes)")
    _print_report(report)


@click.command("restore")
@with_store
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def db_restore(store: str | None, file: str) -> None:
    """Replace the store's contents with the backup FILE; the server must be stopped.

    FILE is checked first (integrity and schema revision); the store is then overwritten page by page in one
    transaction. Run 'subgate db upgrade' afterwards when the copy is from an older release.

    Exits with 0 when the store holds the backup; 1 when it is refused (a server owns the store, FILE is not a
    sound copy, a PostgreSQL store) or fails; 2 on bad usage.
    """
    from subgate.cli.owner import store_owner
    from subgate.cli.progress import pages
    from subgate.storage.backup import BackupError, restore_sqlite, sqlite_file

    url = resolve_store(store)
    if sqlite_file(url) is None:
        raise _postgres_refusal(url, file, "restore")
    owner = store_owner(url)
    if owner is not None:
        raise click.ClickException(f"the store is in use by {owner.describe()}; stop it before restoring")
    try:
        with pages("restoring the store") as progress:
            report = restore_sqlite(Path(file), url, progress=progress)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"restored {file} into {report.path}")
    _print_report(report)
    from subgate.storage.db import make_engine, schema_status

    engine = make_engine(url)
    try:
        current, head = schema_status(engine)
    finally:
        engine.dispose()
    if current != head:
        click.echo(f"the store is at {current}, this subgate needs {head}: run 'subgate db upgrade'")
