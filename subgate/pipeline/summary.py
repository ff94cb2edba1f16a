"""The export's block summary: what each block of the exported journal holds, written by the export beside the
Parquet files so that the lag job can count whole blocks without reading their rows (docs/pipeline.md, "The
export's summary").

Owns the summary's format, its computation (``block_summary``: pure, ``DataFrame -> DataFrame``) and its files
(``write_summary``, ``read_summary``: plain JSON on the local file system, read on the driver without Spark).

An **entry** stands for every exported row of one address whose journal sequence lies in one block of ``BLOCK``
sequences (``id // BLOCK``) and in one export run's range: its lowest and highest ``id``, its row count, bytes
(``size``) and topic rows (``node_kind = 'topic'``), and of its persistent (``durable``) rows the count and the
lowest and highest ``ts`` (microseconds since the epoch, UTC; null when it has none). Entries of one address never
overlap in ``id``: the rows of the address with ``id`` between an entry's lowest and highest are exactly its rows.

A **file** ``DIR/journal/_summary/<after>-<through>.json`` (Spark's readers skip names starting with ``_``) holds
the entries of the rows with ``after < id <= through``, written by the export run that summarized them (write
to a hidden name, then rename: a reader sees the whole file or none). The files chain: each one's ``after`` is
the one before's ``through``, from 0. ``read_summary`` follows the chain; what lies above its end (rows a run wrote
before failing to write its summary) is summarized by the next run, which starts after the chain's end.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subgate.pipeline import names as n

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

BLOCK = 65_536
FOLDER = "_summary"
FORMAT = "subgate-export-summary"
VERSION = 1
COLUMNS = (
    "address",
    "block",
    "first_id",
    "last_id",
    "rows",
    "bytes",
    "topic_rows",
    "durable_rows",
    "first_ts",
    "last_ts",
)
SCHEMA = (
    "address STRING, block BIGINT, first_id BIGINT, last_id BIGINT, rows BIGINT, bytes BIGINT, topic_rows BIGINT,"
    " durable_rows BIGINT, first_ts BIGINT, last_ts BIGINT"
)
"""An entry's columns with their Spark types (``first_ts`` and ``last_ts``: microseconds since the epoch)."""
_EPOCH = date(1970, 1, 1)
_DAY_US = 86_400_000_000


def block_summary(journal: DataFrame) -> DataFrame:
    """One entry (``COLUMNS``) per address and block of the journal rows given (one export run's)."""
    from pyspark.sql import functions as F

    durable_ts = F.unix_micros(F.when(F.col(n.DURABLE), F.col(n.TS)))
    return (
        journal.groupBy(F.col(n.ADDRESS).alias("address"), F.floor(F.col(n.ID) / BLOCK).cast("long").alias("block"))
        .agg(
            F.min(n.ID).alias("first_id"),
            F.max(n.ID).alias("last_id"),
            F.count(F.lit(1)).alias("rows"),
            F.coalesce(F.sum(n.SIZE), F.lit(0)).cast("long").alias("bytes"),
            F.count(F.when(F.col(n.NODE_KIND) == "topic", F.lit(1))).alias("topic_rows"),
            F.count(F.when(F.col(n.DURABLE), F.lit(1))).alias("durable_rows"),
            F.min(durable_ts).alias("first_ts"),
            F.max(durable_ts).alias("last_ts"),
        )
        .select(*COLUMNS)
    )


@dataclass(frozen=True)
class Summary:
    """The chained summary files of a dataset: the entries of every row with ``id <= through``."""

    through: int
    entries: list[tuple[Any, ...]]

    @property
    def extent(self) -> tuple[int, int]:
        """The lowest and highest exported ``id`` the entries cover ((0, 0) when there are none)."""
        if not self.entries:
            return 0, 0
        first, last = COLUMNS.index("first_id"), COLUMNS.index("last_id")
        return min(e[first] for e in self.entries), max(e[last] for e in self.entries)


def _files(dataset: Path) -> list[tuple[int, int, Path]]:
    found = []
    for path in (dataset / FOLDER).glob("*.json"):
        after, _, through = path.stem.partition("-")
        if after.isdigit() and through.isdigit():
            found.append((int(after), int(through), path))
    return sorted(found)


def read_summary(dataset: Path) -> Summary | None:
    """The summary of ``dataset`` along its chain of files from 0 (None when it has none: an export written
    before summaries were, or a chain that does not start at 0)."""
    through, entries, chained = 0, [], False
    for after, last, path in _files(dataset):
        if after != through:
            continue  # not the next link (a leftover of an interrupted run); the chain ends where a link is missing
        content = json.loads(path.read_text())
        if content.get("format") != FORMAT or content.get("version") != VERSION or content.get("block") != BLOCK:
            return None
        entries += [tuple(entry) for entry in content["entries"]]
        through, chained = last, True
    return Summary(through, entries) if chained else None


def summarized_through(dataset: Path) -> int:
    """The highest ``id`` the dataset's summary covers (0 when it has none)."""
    summary = read_summary(dataset)
    return 0 if summary is None else summary.through


def write_summary(dataset: Path, after: int, through: int, entries: list[Row]) -> Path:
    """Write the entries of the rows with ``after < id <= through`` as the next link of the chain."""
    folder = dataset / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{after:020d}-{through:020d}.json"
    content = {
        "format": FORMAT,
        "version": VERSION,
        "block": BLOCK,
        "after": after,
        "through": through,
        "columns": list(COLUMNS),
        "entries": [[entry[column] for column in COLUMNS] for entry in entries],
    }
    hidden = folder / f".{path.name}.tmp"
    hidden.write_text(json.dumps(content, separators=(",", ":")))
    os.replace(hidden, path)
    return path


def utc_days(first: int, last: int) -> list[date]:
    """The UTC dates from one time to another (microseconds since the epoch): the export's ``day`` partitions
    that hold the rows journaled between them."""
    return [_EPOCH + timedelta(days=day) for day in range(first // _DAY_US, last // _DAY_US + 1)]
