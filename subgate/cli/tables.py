"""Tables on the terminal, drawn with ``rich``, for every command that prints rows; times as the commands print
them.

Owns one shape: a header, a rule under it and no borders; cells are plain text (never rich markup: a selector
or a topic may contain ``[...]``). On a terminal rich fits the table to its width; to a pipe or a file no cell
is wrapped or cut and no line has trailing padding, so scripts can split the columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import click


def print_table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, right: Iterable[str] = ()) -> None:
    """Print ``rows`` (one string per column) under ``columns``; the columns named in ``right`` align right."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    right_aligned = set(right)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in right_aligned else "left", no_wrap=True)
    for cells in rows:
        table.add_row(*(Text(cell) for cell in cells))
    console = Console(highlight=False)
    if console.is_terminal:
        console.print(table)
        return
    wide = Console(highlight=False, width=100_000, no_color=True)
    with wide.capture() as captured:
        wide.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def table_time(ms: int | None) -> str:
    """A time in a table cell: UTC to the second, ``-`` when unknown."""
    return "-" if ms is None else f"{datetime.fromtimestamp(ms / 1000, UTC):%Y-%m-%d %H:%M:%S}"


def iso_time(ms: int | None) -> str | None:
    """A time in JSON output: ISO 8601 in UTC to the millisecond (``2026-01-02T03:04:05.123Z``), or None."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
