"""Engine and session set-up for the store, and the schema-version check.

Owns: turning a store URL into a configured engine (SQLite in WAL mode with durable commits, PostgreSQL as
given), the default URL, and whether the database is at the head revision. That check reads ``alembic_version``
and the ``revision``/``down_revision`` lines of the migration files without importing Alembic (which costs a
few hundred ms of a server's start-up on a loaded machine); Alembic runs only to migrate.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from subgate.storage.errors import NoStore, SchemaOutOfDate, StoreUnavailable, safe_url

_log = logging.getLogger("subgate.server")

DEFAULT_STORE = "sqlite:///subgate.db"
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def default_store_url() -> str:
    """The embedded default: a SQLite file in the working directory."""
    return f"sqlite:///{os.path.abspath('subgate.db')}"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, synchronous=FULL and a busy timeout on every connection."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")  # confirmed means committed, even across power loss
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str) -> Any:
    """An Alembic Config pointing at our migrations, without needing an alembic.ini."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def missing_sqlite_file(url: str) -> bool:
    """True for a SQLite file URL whose file does not exist: connecting would create an empty one."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:") or parsed.query.get("uri"):
        return False
    return not Path(database).exists()


_REVISION_LINE = re.compile(r"^(revision|down_revision)\b[^=]*=\s*(?:None|[\"']([^\"']+)[\"'])", re.MULTILINE)


def head_revision() -> str | None:
    """The head revision of the migration files, read from their ``revision``/``down_revision`` lines (Alembic's
    own answer when the files do not give exactly one head, or declare anything else, such as merge points)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict((m.group(1), m.group(2)) for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8")))
        if "revision" not in found:
            continue
        revisions.add(str(found["revision"]))
        if found.get("down_revision"):
            parents.add(str(found["down_revision"]))
    heads = revisions - parents
    if len(heads) == 1:
        return heads.pop()
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision recorded in the store's ``alembic_version`` (None: an empty database)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return ",".join(sorted(rows)) or None  # several rows (branches, which subgate never has): not the head


def schema_status(engine: Engine) -> tuple[str | None, str | None]:
    """(current revision of the database, head revision of the code). A SQLite file that does not exist is an
    empty database and is not created: a check that refuses must leave nothing behind."""
    url = engine.url.render_as_string(hide_password=False)
    if missing_sqlite_file(url):
        folder = Path(make_url(url).database or "").resolve().parent
        if not folder.is_dir():
            raise StoreUnavailable(f"cannot open the store {engine.url}: the folder {folder} does not exist")
        return None, head_revision()
    with engine.connect() as connection:
        current = current_revision(connection)
    return current, head_revision()


def upgrade(url: str, revision: str = "head", on_step: Callable[[str], None] | None = None) -> None:
    """Migrate the store up to ``revision``; ``on_step(revision)`` is told of each revision once applied."""
    from alembic import command

    config = alembic_config(url)
    if on_step is not None:
        config.attributes["on_version_apply"] = lambda **kw: on_step(str(kw["step"].up_revision_id))
    command.upgrade(config, revision)


def pending_revisions(url: str, revision: str = "head") -> int:
    """How many revisions ``upgrade(url, revision)`` would apply."""
    from alembic.script import ScriptDirectory

    engine = make_engine(url)
    try:
        current, _ = schema_status(engine)
    finally:
        engine.dispose()
    script = ScriptDirectory.from_config(alembic_config(url))
    return sum(1 for _ in script.iterate_revisions(revision, current))


def no_store_message(url: str) -> str:
    """Why an operator command finds no store at ``url``, and where to look instead (never 'db upgrade', which
    would create a second, empty store there)."""
    reason = "the file does not exist" if missing_sqlite_file(url) else "the database holds no subgate tables"
    return (
        f"no store at {safe_url(url)} ({reason}) and no server owns a store there; give the running server's "
        "store with --store URL or SUBGATE_STORE (by default a command uses subgate.db in its working directory)"
    )


def check_schema(
    url: str,
    *,
    migrate: bool,
    timed: Callable[[str], AbstractContextManager[None]] | None = None,
    operator: bool = False,
) -> None:
    """Raise SchemaOutOfDate unless the store is at the head revision (or migrate it when asked); ``timed(step)``
    wraps the check and the migration (the server logs their durations: metrics.startup). ``operator``: a
    command that reads an existing store; an empty one raises NoStore (``no_store_message``)."""
    timed = timed or (lambda _step: nullcontext())
    with timed("schema check"):
        engine = make_engine(url)
        try:
            current, head = schema_status(engine)
        finally:
            engine.dispose()
    if current == head:
        return
    if current is None and operator:
        raise NoStore(no_store_message(url))
    if migrate:
        _log.info("migrating the store from %s to %s", current or "an empty database", head)
        with timed(f"migration to {head}"):
            upgrade(url)
        return
    raise SchemaOutOfDate(
        f"the store is at schema revision {current or 'none (empty database)'} but this subgate needs {head}; "
        "run 'subgate db upgrade' (or start with --migrate)"
    )
