"""``subgate serve``'s settings options, made from the one table of settings (``gateway.settings.Settings``).

Owns the translation of a ``Settings`` field's metadata into a click option: the flag (``--credit-window`` for
``credit_window`` unless the field names another), the ``SUBGATE_*`` variable, the type (bounds, choices, a
``--x/--no-x`` pair for booleans, a comma-separated list for tuples), the default and the help; and back, from
the parsed values to the ``Settings`` keyword arguments. The TOML file of ``--config`` holds the same names as the
flags, so a new setting needs one line in ``Settings`` and nothing here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import Field, fields
from typing import Any

import click

from subgate.gateway.settings import Settings


def _settings_fields() -> Iterator[Field[Any]]:
    for item in fields(Settings):
        if item.metadata.get("help"):
            yield item


def _param(item: Field[Any]) -> str:
    return str(item.metadata["flag"] or "--" + item.name.replace("_", "-")).lstrip("-").replace("-", "_")


def _option(item: Field[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    meta = item.metadata
    param = _param(item)
    flag = "--" + param.replace("_", "-")
    kwargs: dict[str, Any] = {
        "default": item.default,
        "envvar": "SUBGATE_" + param.upper(),
        "show_envvar": True,
        "show_default": item.default is not None,
        "help": meta["help"],
    }
    if isinstance(item.default, bool) or item.default is None:
        return click.option(f"{flag}/--no-{flag[2:]}", param, **kwargs)
    if isinstance(item.default, tuple):
        kwargs["default"] = ",".join(item.default)
    elif meta["choices"]:
        kwargs["type"] = click.Choice(list(meta["choices"]))
    elif isinstance(item.default, int):
        kwargs["type"] = click.IntRange(meta["minimum"], meta["maximum"])
    elif isinstance(item.default, float):
        kwargs["type"] = click.FloatRange(meta["minimum"], meta["maximum"])
    return click.option(flag, param, **kwargs)


def settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``serve`` with one option per operator setting, in the table's order."""
    for item in reversed(list(_settings_fields())):
        command = _option(item)(command)
    return command


def settings_values(params: dict[str, Any]) -> dict[str, Any]:
    """The ``Settings`` keyword arguments for the values click parsed (comma lists become tuples)."""
    values: dict[str, Any] = {}
    for item in _settings_fields():
        value = params[_param(item)]
        if isinstance(item.default, tuple):
            value = tuple(part.strip() for part in str(value).split(",") if part.strip())
        values[item.name] = value
    return values
