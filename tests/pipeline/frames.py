"""Builders of small input frames for the pipeline's transformation tests, with the types the readers give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from subgate.pipeline import names as n

NOW = datetime(2026, 3, 4, 12, 0, 0, 250_000, tzinfo=UTC)
BIG = 2**40  # journal sequences past 32 bits


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def schema(table: str) -> str:
    types = dict(n.SPARK_TYPES[table])
    for column in n.TIMESTAMP_COLUMNS.get(table, ()):
        types[column] = "TIMESTAMP"
    return ", ".join(f"{column} {types[column]}" for column in n.TABLES[table])


def message(
    id: int,
    address: str = "prices/fx",
    publisher: str = "p1",
    seq: int | None = None,
    ts: datetime | None = None,
    *,
    durable: bool = True,
    kind: str = "topic",
) -> tuple[Any, ...]:
    seq = id if seq is None else seq
    return (id, address, kind, publisher, seq, f"{publisher}|{seq}|", ts or ago(60), durable, 100)


def journal(spark: Any, *rows: tuple[Any, ...]) -> Any:
    return spark.createDataFrame(list(rows), schema(n.MESSAGES))


def cursors(spark: Any, *rows: tuple[Any, ...]) -> Any:
    """Rows (id, owner_kind, owner, address, low_water)."""
    return spark.createDataFrame(list(rows), schema(n.ACK_CURSORS))


def acks(spark: Any, *rows: tuple[int, int]) -> Any:
    return spark.createDataFrame(list(rows), schema(n.ACKS))


def subscriptions(spark: Any, *rows: tuple[Any, ...]) -> Any:
    """Rows (id, kind, durable, client_id, name, topic, cursor_id)."""
    return spark.createDataFrame(list(rows), schema(n.SUBSCRIPTIONS))


def publishers(spark: Any, *ids: str) -> Any:
    return spark.createDataFrame([(i, 0) for i in ids], schema(n.PUBLISHERS))
