"""Options shared by every command: the store URL, the TOML config file, HOST:PORT values, and the one place
where store errors become command-line errors.

Precedence, highest first: command-line flag, ``SUBGATE_*`` environment variable, ``--config`` TOML file,
built-in default. The TOML file holds the same names as the flags (``listen = "127.0.0.1:5672"``,
``store = "postgresql+psycopg://..."``), at top level or under a ``[subgate]`` table. One file may serve every
command, so a key is known when any ``subgate`` command has an option of that name; an unknown key, or a value
the current command's option refuses, is a configuration error naming the file and the key (exit code 2).

Exit codes: 1 for an error while doing the work (the store cannot be reached, a row is missing...), 2 for bad
configuration or usage (unknown key, bad value, bad store URL, port out of range).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from subgate.mapping.address_settings import table_to_text
from subgate.mapping.store_values import text_problem
from subgate.storage.db import default_store_url

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


class ConfigError(click.ClickException):
    """Bad configuration (a key, a value, a URL): one line on stderr, exit code 2."""

    exit_code = 2


class StoreText(click.ParamType):
    """A name the store keeps in a column of ``max_chars`` characters (``mapping.store_values``): 1 to
    ``max_chars`` characters of text without U+0000. An argument that is not valid UTF-8 (its bytes arrive as lone
    surrogates) or too long is a usage error naming the parameter (exit code 2), not a traceback from the driver."""

    name = "TEXT"

    def __init__(self, max_chars: int, *, empty: bool = False) -> None:
        self.max_chars = max_chars
        self.empty = empty  # "" is taken too (a grant's path: the root)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = value if isinstance(value, str) else str(value)
        if not text and self.empty:
            return text
        problem = text_problem("it", text, self.max_chars)
        if problem is not None:
            self.fail(problem, param, ctx)
        return text


NAME_256 = StoreText(256)  # users, roles, a grant's subject
NAME_512 = StoreText(512)  # subscription names, client-ids, publisher ids
NAME_1024 = StoreText(1024)  # queue and topic names
PATH_1024 = StoreText(1024, empty=True)  # a grant's path ("": the root)


class FanoutLink(click.ParamType):
    """A fan-out link: ``amqp://[user:password@]host:port=SELECTOR``, or a ``[[fanout]]`` table of the TOML file."""

    name = "URL=SELECTOR"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from subgate.engine.fanout import FanoutConfig, FanoutConfigError, make_config, parse_spec

        if isinstance(value, FanoutConfig):
            return value
        try:
            if isinstance(value, dict):
                return make_config(value)
            return parse_spec(str(value))
        except FanoutConfigError as exc:
            self.fail(str(exc), param, ctx)


class OneLineBadParameter(click.BadParameter):
    """A bad value, said in one line (``Error: Invalid value for '--listen': ...``, exit code 2) without click's
    usage text: the README promises one line for a bad setting."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


class ListenAddress(click.ParamType):
    """``HOST:PORT`` with a port in 0..65535 (``[::1]:5672`` for IPv6); the value stays a string."""

    name = "HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        try:
            split_address(text)
        except ValueError as exc:
            raise OneLineBadParameter(str(exc), ctx=ctx, param=param) from None
        return text


def split_address(value: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT``; an empty host is 127.0.0.1.

    Raises:
        ValueError: not HOST:PORT, or the port is outside 0..65535.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    if int(port) > 65535:
        raise ValueError(f"port {port} is out of range (0 to 65535) in {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _known_keys(ctx: click.Context) -> set[str]:
    """The names of every option of every ``subgate`` command: what a shared config file may hold."""
    known: set[str] = set()
    pending: list[click.Command] = [ctx.find_root().command]
    while pending:
        command = pending.pop()
        known.update(p.name for p in command.params if p.name and p.expose_value)
        if isinstance(command, click.Group):
            pending.extend(command.commands.values())
    return known


def _check_config(ctx: click.Context, path: str, values: dict[str, Any]) -> None:
    """Every key known to some command; every value for this command's options one it accepts."""
    known = _known_keys(ctx)
    for key in values:
        if key not in known:
            raise ConfigError(f"{path}: unknown setting {key!r}")
    for param in ctx.command.params:
        if param.name in values:
            try:
                param.type_cast_value(ctx, values[param.name])
            except click.BadParameter as exc:
                raise ConfigError(f"{path}: bad value for {param.name!r}: {exc.message}") from exc


def _flat(value: Any) -> Any:
    """A list setting may be a TOML array or the flag's comma-separated text (journal_branches, ...); a table of
    tables (``[address_settings."orders.#"]``) becomes the flag's PATTERN:key=value;key=value text."""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        try:
            return table_to_text(value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return value


def load_config(ctx: click.Context, _param: click.Parameter, path: str | None) -> str | None:
    """Eager callback: check the TOML file and put its values into the command's default map."""
    if not path:
        return path
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    section = data.get("subgate", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [subgate] must be a table")
    if section is not data and "fanout" in data:  # [[fanout]] tables next to [subgate]
        section = {**section, "fanout": data["fanout"]}
    # A list setting (journal_branches, publisher_modes, ...) may be a TOML array or the flag's comma-separated text;
    # fanout is an array of tables ([[fanout]]) or of 'URL=SELECTOR' strings, one value each.
    values = {str(key).replace("-", "_"): value if key == "fanout" else _flat(value) for key, value in section.items()}
    _check_config(ctx, path, values)
    defaults = dict(ctx.default_map or {})
    defaults.update(values)
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
    """--config and --store, and the command's body run inside ``store_cli_errors``."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with store_cli_errors(kwargs.get("store")):
            return command(*args, **kwargs)

    return config_option(store_option(run))


def resolve_store(store: str | None) -> str:
    return store or default_store_url()


@contextmanager
def store_cli_errors(store: str | None) -> Iterator[None]:
    """The store's errors as click errors: a bad URL exits 2, everything else 1; one line each."""
    from subgate.storage.errors import BadStoreUrl, StoreError, store_errors

    try:
        with store_errors(resolve_store(store)):
            yield
    except BadStoreUrl as exc:
        raise ConfigError(str(exc)) from exc
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def store_sessions(store: str | None, *, operator: bool = True) -> Iterator[sessionmaker[Session]]:
    """Sessions on the store at ``--store``, once its schema is at the head revision (else a click error). An
    operator command (``operator``) on an empty store is told no store is there, not to upgrade it (which would
    create a second store beside the server's); a set-up command (grants, roles) is told how to create it."""
    from subgate.storage.db import check_schema, make_engine, session_factory

    url = resolve_store(store)
    check_schema(url, migrate=False, operator=operator)  # SchemaOutOfDate: a click error (store_cli_errors)
    engine = make_engine(url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()
