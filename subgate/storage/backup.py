"""Backup and restore of a SQLite store, and the PostgreSQL commands that do the same (docs/operations.md).

Owns ``backup_sqlite`` (an online, consistent copy while a server writes), ``restore_sqlite`` (a verified copy
put back into a stopped store), ``inspect_copy`` (integrity, schema revision and rows per table of a copy) and
``pg_commands`` (the exact ``pg_dump``/``pg_restore`` lines for a PostgreSQL URL).

Consistency: the store runs in WAL mode, so a reader sees one committed snapshot while the server keeps
writing. ``backup_sqlite`` opens its own connection, starts a read transaction before the first page is copied
and keeps it open until the last one is, so every step of SQLite's online backup API reads the same snapshot:
the copy is the store as of that instant, with each transaction whole or absent. The copy is written to a
temporary file next to the target, checked, made durable and only then renamed into place.

The copy leaves out the ``server_lease`` row: it names the running server that owns the original, and a server
started on the copy would otherwise refuse it while that server lives.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from subgate.storage.errors import StoreError, StoreUnavailable, safe_url

Progress = Callable[[int, int], None]  # (pages copied, pages in all)
PAGES_PER_STEP = 256  # pages copied per backup step: a step holds no lock a writer waits for (WAL)
LEASE_TABLE = "server_lease"


class BackupError(StoreError):
    """The backup or restore cannot be done, or its copy failed the check; the message says which."""


@dataclass(frozen=True, slots=True)
class CopyReport:
    """What ``inspect_copy`` found: ``integrity`` is ``ok`` for a sound file; ``rows`` per table, sorted."""

    path: Path
    integrity: str
    revision: str | None
    rows: tuple[tuple[str, int], ...]
    size: int

    @property
    def sound(self) -> bool:
        return self.integrity == "ok" and self.revision is not None


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite file URL, None for any other store (PostgreSQL) or an in-memory database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or parsed.query.get("uri"):
        return None
    return Path(database).resolve()


def backup_sqlite(url: str, target: Path, *, force: bool = False, progress: Progress | None = None) -> CopyReport:
    """Copy the SQLite store at ``url`` to ``target`` while it may be in use; returns the check of the copy.

    Raises:
        BackupError: not a SQLite file store, the store or the target's folder is missing, ``target`` exists
            (without ``force``) or is the store itself, or the copy failed its check (then it is removed).
    """
    source_path = _existing_store(url)
    target = target.resolve()
    if target == source_path:
        raise BackupError(f"{target} is the store itself; give another file")
    if target.exists() and not force:
        raise BackupError(f"{target} exists; give --force to overwrite it")
    if not target.parent.is_dir():
        raise BackupError(f"cannot write {target}: the folder {target.parent} does not exist")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    _remove_file(temporary)
    try:
        _copy_snapshot(source_path, temporary, progress)
        report = inspect_copy(temporary)
        if not report.sound:
            raise BackupError(f"the copy failed its check (integrity: {report.integrity}); {target} not written")
        _fsync(temporary)
        os.replace(temporary, target)
        _fsync(target.parent)
    finally:
        _remove_file(temporary)
    return CopyReport(target, report.integrity, report.revision, report.rows, report.size)


def _existing_store(url: str) -> Path:
    path = sqlite_file(url)
    if path is None:
        raise BackupError(f"{safe_url(url)} is not a SQLite file store")
    if not path.is_file():
        raise BackupError(f"there is no store at {path}")
    return path


def _copy_snapshot(source_path: Path, temporary: Path, progress: Progress | None) -> None:
    """One read transaction over the whole copy (see the module docstring), then the lease row dropped."""
    try:
        source = sqlite3.connect(source_path, timeout=30, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open the store {source_path}: {exc}") from exc
    try:
        source.execute("BEGIN")
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here
        copy = sqlite3.connect(temporary, isolation_level=None)
        try:
            report = None if progress is None else (lambda _s, left, total: progress(total - left, total))
            source.backup(copy, pages=PAGES_PER_STEP, progress=report)
            _drop_lease(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        finally:
            copy.close()
        source.execute("COMMIT")
    except sqlite3.Error as exc:
        raise BackupError(f"cannot copy {source_path}: {exc}") from exc
    finally:
        source.close()


def _drop_lease(connection: sqlite3.Connection) -> None:
    tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if LEASE_TABLE in tables:
        connection.execute(f"DELETE FROM {LEASE_TABLE}")


def inspect_copy(path: Path) -> CopyReport:
    """Open ``path`` read-only: ``PRAGMA integrity_check``, the Alembic revision, and the rows of each table."""
    if not path.is_file():
        raise BackupError(f"there is no file {path}")
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open {path}: {exc}") from exc
    try:
        found = connection.execute("PRAGMA integrity_check").fetchall()
        integrity = "; ".join(str(row[0]) for row in found[:5])
        names = [
            str(name)
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        revision = None
        if "alembic_version" in names:
            row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            revision = None if row is None else str(row[0])
        rows = tuple((name, int(connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])) for name in names)
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is not a readable SQLite store: {exc}") from exc
    finally:
        connection.close()
    return CopyReport(path, integrity, revision, rows, path.stat().st_size)


def restore_sqlite(source: Path, url: str, *, progress: Progress | None = None) -> CopyReport:
    """Put the backup ``source`` into the (stopped) SQLite store at ``url``, replacing what it holds.

    The caller checks that no server owns the store. The pages go through SQLite's backup API into the store's
    own file, in one transaction, so its ``-wal`` file is taken care of and a failure leaves the store as it was.

    Raises:
        BackupError: ``source`` is not a sound copy, or ``url`` is not a SQLite file store.
    """
    report = inspect_copy(source)
    if not report.sound:
        raise BackupError(f"{source} is not a sound copy (integrity: {report.integrity}, revision: {report.revision})")
    target = sqlite_file(url)
    if target is None:
        raise BackupError(f"{safe_url(url)} is not a SQLite file store")
    if target == source.resolve():
        raise BackupError(f"{source} is the store itself")
    if not target.parent.is_dir():
        raise BackupError(f"cannot write {target}: the folder {target.parent} does not exist")
    try:
        reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        store = sqlite3.connect(target, timeout=30, isolation_level=None)
        try:
            store.execute("PRAGMA journal_mode=WAL")
            store.execute("PRAGMA synchronous=FULL")
            report_pages = None if progress is None else (lambda _s, left, total: progress(total - left, total))
            reader.backup(store, pages=PAGES_PER_STEP, progress=report_pages)
            store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            store.close()
            reader.close()
    except sqlite3.Error as exc:
        raise BackupError(f"cannot restore {source} into {target}: {exc}") from exc
    return inspect_copy(target)


def pg_commands(url: str, file: str) -> tuple[str, str]:
    """The documented ``pg_dump`` and ``pg_restore`` command lines for the PostgreSQL store at ``url``.

    The URL is given to libpq without the SQLAlchemy driver suffix and with its password hidden (libpq takes it
    from ``PGPASSWORD`` or ``~/.pgpass``). ``server_lease``'s data is left out, as in a SQLite backup.
    """
    parsed = make_url(url).set(drivername="postgresql")
    libpq = parsed.render_as_string(hide_password=parsed.password is not None).replace("***", "PASSWORD")
    database = parsed.database or "subgate"
    dump = f"pg_dump --format=custom --exclude-table-data={LEASE_TABLE} --file={file} '{libpq}'"
    fresh = parsed.set(database=f"{database}_restored").render_as_string(hide_password=parsed.password is not None)
    restore = f"pg_restore --no-owner --exit-on-error --dbname='{fresh.replace('***', 'PASSWORD')}' {file}"
    return dump, restore


def _fsync(path: Path) -> None:
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0)
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove_file(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-journal"), path.with_name(path.name + "-wal")):
        leftover.unlink(missing_ok=True)
