"""Alembic environment: runs migrations against a URL, or a connection passed in ``config.attributes``."""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, Engine, event, pool

from subgate.storage.db import make_engine
from subgate.storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection, *, transactional_ddl: bool | None = None) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        transactional_ddl=transactional_ddl,
        on_version_apply=config.attributes.get("on_version_apply"),  # subgate db upgrade's progress bar
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = make_engine(url, poolclass=pool.NullPool)
    one_transaction = engine.dialect.name == "sqlite"
    if one_transaction:
        _sqlite_transactional_ddl(engine)
    with engine.connect() as conn:
        _run(conn, transactional_ddl=True if one_transaction else None)
    engine.dispose()


def _sqlite_transactional_ddl(engine: Engine) -> None:
    """Every revision of one upgrade in one SQLite transaction: the sqlite3 driver would otherwise commit each
    CREATE/ALTER on its own (one fsync each under synchronous=FULL: 32 for an empty store, which took seconds on
    a loaded disk), and a crash halfway would leave a store between two revisions. The SQLAlchemy recipe: the
    driver's own transaction handling off, BEGIN emitted by SQLAlchemy."""

    @event.listens_for(engine, "connect")
    def _driver_autocommit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
