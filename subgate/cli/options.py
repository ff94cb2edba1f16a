"""Options shared by every command: the store URL and the TOML config file.

Precedence, highest first: command-line flag, ``SUBGATE_*`` environment variable, ``--config`` TOML file,
built-in default. The TOML file holds the same names as the flags (``listen = "127.0.0.1:5672"``,
``store = "postgresql+psycopg://..."``), at top level or under a ``[subgate]`` table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from subgate.storage.db import default_store_url

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


def load_config(ctx: click.Context, _param: click.Parameter, path: str | None) -> str | None:
    """Eager callback: put the TOML file's values into the command's default map."""
    if not path:
        return path
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise click.BadParameter(f"{path} is not valid TOML: {exc}") from exc
    section = data.get("subgate", data)
    if not isinstance(section, dict):
        raise click.BadParameter(f"{path}: [subgate] must be a table")
    defaults = dict(ctx.default_map or {})
    defaults.update({str(key).replace("-", "_"): value for key, value in section.items()})
    ctx.default_map = defaults
    return path


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar="SUBGATE_CONFIG",
    is_eager=True,
    expose_value=False,
    callback=load_config,
    help="TOML file with settings (same names as the flags).",
)

store_option = click.option(
    "--store",
    "store",
    envvar="SUBGATE_STORE",
    default=None,
    show_envvar=True,
    help="SQLAlchemy URL of the store (default: SQLite file subgate.db in the working directory).",
)


def with_store(command: Callable[..., Any]) -> Callable[..., Any]:
    return config_option(store_option(command))


def resolve_store(store: str | None) -> str:
    return store or default_store_url()


@contextmanager
def store_sessions(store: str | None) -> Iterator[sessionmaker[Session]]:
    """Sessions on the store at ``--store``, once its schema is at the head revision (else a click error)."""
    from subgate.gateway.server import check_schema
    from subgate.storage.db import make_engine, session_factory
    from subgate.storage.errors import SchemaOutOfDate

    url = resolve_store(store)
    try:
        check_schema(url, migrate=False)
    except SchemaOutOfDate as exc:
        raise click.ClickException(str(exc)) from exc
    engine = make_engine(url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()
