"""Reading the store's tables into Spark through its JDBC source: the adapter between the store and the jobs.

Owns the store URL's translation (a SQLAlchemy URL, as ``serve --store`` takes it, to a JDBC URL and driver
properties), the journal snapshot (``Snapshot``: the highest journal sequence taken once at job start; every read
of ``messages`` is bounded by it, so a job sees one consistent cut while the server keeps appending), the
partitioned journal read (on ``id``, the journal sequence) and the small tables. Every frame comes out with the
column names of ``names`` and the types of ``names.SPARK_TYPES`` on both stores: SQLite is read with a
``customSchema`` (its driver's type guesses are wrong) and its text timestamps are cast in Spark, with the session
time zone in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from subgate.pipeline import names as n
from subgate.pipeline import summary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession


class UnsupportedStore(ValueError):
    """A store URL the pipeline cannot read (neither a SQLite file nor PostgreSQL)."""


@dataclass(frozen=True)
class JdbcStore:
    """Where the store is, for Spark: a JDBC URL and the connection properties (driver, user, password)."""

    url: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def sqlite(self) -> bool:
        return self.url.startswith("jdbc:sqlite:")


def jdbc_store(store_url: str) -> JdbcStore:
    """The JDBC form of a SQLAlchemy store URL (``sqlite:////abs/file.db``, ``postgresql+psycopg://u:p@h:5432/db``)."""
    try:
        url = make_url(store_url)
    except ArgumentError as exc:
        raise UnsupportedStore(f"the store URL {store_url!r} is not a SQLAlchemy URL") from exc
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise UnsupportedStore(f"the pipeline reads a SQLite file, not {store_url!r}")
        return JdbcStore(f"jdbc:sqlite:{url.database}", {"driver": "org.sqlite.JDBC"})
    if backend == "postgresql":
        host = url.host or "localhost"
        port = f":{url.port}" if url.port else ""
        properties = {"driver": "org.postgresql.Driver", "user": url.username or ""}
        if url.password is not None:
            properties["password"] = str(url.password)
        return JdbcStore(f"jdbc:postgresql://{host}{port}/{url.database or ''}", properties)
    raise UnsupportedStore(f"the pipeline reads SQLite and PostgreSQL stores, not {backend!r} ({store_url!r})")


def _reader(spark: SparkSession, store: JdbcStore) -> DataFrameReader:
    reader = spark.read.format("jdbc").option("url", store.url).option("fetchsize", "10000")
    for key, value in store.properties.items():
        reader = reader.option(key, value)
    return reader


def _select(table: str, columns: tuple[str, ...]) -> str:
    return f"(SELECT {', '.join(columns)} FROM {table}) AS t"


def _typed(df: DataFrame, table: str, wanted: tuple[str, ...]) -> DataFrame:
    """The columns ``wanted`` of ``table``, in that order, with the types of ``names.SPARK_TYPES``."""
    from pyspark.sql import functions as F

    types = n.SPARK_TYPES[table]
    stamps = n.TIMESTAMP_COLUMNS.get(table, ())
    columns = []
    for column in wanted:
        value = F.col(column)
        # SQLite's text times (with or without a fraction) cast to timestamps in the session's zone (UTC).
        columns.append(value.cast("timestamp").alias(column) if column in stamps else value.cast(types[column]))
    return df.select(*columns)


def read_table(spark: SparkSession, store: JdbcStore, table: str) -> DataFrame:
    """A small table (positions, subscriptions, publishers), whole."""
    columns = n.TABLES[table]
    reader = _reader(spark, store).option("dbtable", _select(table, columns))
    if store.sqlite:
        reader = reader.option("customSchema", _custom_schema(table, columns))
    return _typed(reader.load(), table, columns)


def _custom_schema(table: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{column} {n.SPARK_TYPES[table][column]}" for column in columns)


@dataclass(frozen=True)
class Snapshot:
    """The journal's extent at job start: its lowest and highest sequence (0, 0 when it is empty)."""

    first_id: int
    last_id: int

    @property
    def empty(self) -> bool:
        return self.last_id == 0


def take_snapshot(spark: SparkSession, store: JdbcStore) -> Snapshot:
    """Read the journal's lowest and highest sequence once; the jobs read nothing above the highest."""
    query = f"SELECT min({n.ID}) AS lo, max({n.ID}) AS hi FROM {n.MESSAGES}"
    reader = _reader(spark, store).option("query", query)
    if store.sqlite:
        reader = reader.option("customSchema", "lo BIGINT, hi BIGINT")
    row = reader.load().collect()[0]
    return Snapshot(int(row["lo"] or 0), int(row["hi"] or 0))


def read_journal(
    spark: SparkSession,
    store: JdbcStore,
    snapshot: Snapshot,
    partitions: int = 2,
    columns: tuple[str, ...] = n.MESSAGE_COLUMNS,
) -> DataFrame:
    """The journal rows ``snapshot.first_id..last_id`` (``columns``: by default what the jobs read, no payloads),
    read in ``partitions`` ranges of ``id``.

    The bounds only split the range (the first and last partitions are open-ended), so the cut is also a filter,
    which the store applies."""
    from pyspark.sql import functions as F

    reader = (
        _reader(spark, store)
        .option("dbtable", _select(n.MESSAGES, columns))
        .option("partitionColumn", n.ID)
        .option("lowerBound", str(snapshot.first_id))
        .option("upperBound", str(max(snapshot.last_id, snapshot.first_id + 1)))
        .option("numPartitions", str(max(1, partitions)))
    )
    if store.sqlite:
        reader = reader.option("customSchema", _custom_schema(n.MESSAGES, columns))
    df = reader.load().where((F.col(n.ID) >= snapshot.first_id) & (F.col(n.ID) <= snapshot.last_id))
    return _typed(df, n.MESSAGES, columns)


@dataclass(frozen=True)
class StoreTables:
    """What the lag and audit jobs read: the journal up to the snapshot, and the small tables whole."""

    snapshot: Snapshot
    journal: DataFrame
    cursors: DataFrame
    acks: DataFrame
    subscriptions: DataFrame
    publishers: DataFrame


def read_positions(spark: SparkSession, store: JdbcStore) -> tuple[DataFrame, DataFrame]:
    """Every cursor and its accepts (``ack_cursors``, ``acks``), read in one statement and kept: one consistent
    view. Read apart, a low-water mark moving in between (it deletes the accepts it passes) could be missed by
    the cursors' read and seen by the accepts' one, and the rows it passed would count as unaccepted."""
    from pyspark.sql import functions as F

    cursor_columns = n.TABLES[n.ACK_CURSORS]
    query = (
        f"SELECT {', '.join('c.' + c for c in cursor_columns)}, a.{n.MESSAGE_ID} FROM {n.ACK_CURSORS} c "
        f"LEFT JOIN {n.ACKS} a ON a.{n.CURSOR_ID} = c.{n.ID}"
    )
    reader = _reader(spark, store).option("query", query)
    if store.sqlite:
        schema = (
            f"{_custom_schema(n.ACK_CURSORS, cursor_columns)}, {n.MESSAGE_ID} {n.SPARK_TYPES[n.ACKS][n.MESSAGE_ID]}"
        )
        reader = reader.option("customSchema", schema)
    types = n.SPARK_TYPES[n.ACK_CURSORS]
    both = reader.load().select(
        *(F.col(c).cast(types[c]) for c in cursor_columns),
        F.col(n.MESSAGE_ID).cast(n.SPARK_TYPES[n.ACKS][n.MESSAGE_ID]),
    )
    # localCheckpoint: read now, once; every later use takes the kept rows, never the store again.
    kept = both.localCheckpoint(eager=True)
    cursors = kept.select(*cursor_columns).distinct()
    acks = kept.where(F.col(n.MESSAGE_ID).isNotNull()).select(F.col(n.ID).alias(n.CURSOR_ID), n.MESSAGE_ID)
    return cursors, acks


def read_store(spark: SparkSession, store: JdbcStore, partitions: int = 2) -> StoreTables:
    """Take the snapshot and the positions, then describe the other tables the jobs read (Spark reads them when
    a job runs)."""
    snapshot = take_snapshot(spark, store)
    cursors, acks = read_positions(spark, store)
    return StoreTables(
        snapshot,
        read_journal(spark, store, snapshot, partitions),
        cursors,
        acks,
        read_table(spark, store, n.SUBSCRIPTIONS),
        read_table(spark, store, n.PUBLISHERS),
    )


# -- the Parquet export (``export``) as the journal's source -----------------------------------------------------
def parquet_schema(columns: tuple[str, ...] = n.EXPORT_COLUMNS, partition_columns: bool = True) -> str:
    """The export's schema: the journal's columns with their Spark types, then the partition columns (without
    them: the schema of the files of one partition)."""
    types = {**n.SPARK_TYPES[n.MESSAGES], **{column: "TIMESTAMP" for column in n.TIMESTAMP_COLUMNS[n.MESSAGES]}}
    partitions = ["topic STRING", "day DATE"] if partition_columns else []
    return ", ".join([f"{column} {types[column]}" for column in columns] + partitions)


def read_parquet(spark: SparkSession, dataset: str) -> DataFrame:
    """The exported journal at ``dataset`` (``DIR/journal``), every column, partition columns typed as written
    (a topic named ``2026`` stays a string)."""
    return spark.read.schema(parquet_schema()).parquet(dataset)


def parquet_snapshot(journal: DataFrame) -> Snapshot:
    from pyspark.sql import functions as F

    row = journal.agg(F.min(n.ID).alias("lo"), F.max(n.ID).alias("hi")).collect()[0]
    return Snapshot(int(row["lo"] or 0), int(row["hi"] or 0))


def parquet_lag_window(
    spark: SparkSession, dataset: str, snapshot: Snapshot, floor: int, since: datetime, until: datetime
) -> DataFrame:
    """The exported journal rows a lag job can count, up to the cut: those above ``floor`` (the lowest low-water
    mark of every consumer: no backlog lies below it), which Parquet's row-group statistics find without reading
    the rest, and those at or below it journaled in ``(since, until]`` (the last hour's figures), looked for only
    in the partitions of those days. Gives the same answer as the whole journal would."""
    from pyspark.sql import functions as F

    first, last = (_utc(moment).date() for moment in (since, until))
    exported = read_parquet(spark, dataset).where(F.col(n.ID) <= snapshot.last_id)
    above = exported.where(F.col(n.ID) > floor)
    recent = exported.where(
        (F.col("day") >= F.lit(first))
        & (F.col("day") <= F.lit(last))
        & (F.col(n.ID) <= floor)
        & (F.col(n.TS) > F.lit(since))
        & (F.col(n.TS) <= F.lit(until))
    )
    return above.unionByName(recent).select(*n.MESSAGE_COLUMNS)


def _utc(moment: datetime) -> datetime:
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).astimezone(UTC)


def read_store_with_parquet(
    spark: SparkSession, store: JdbcStore, dataset: str, exported: summary.Summary | None = None
) -> StoreTables:
    """The journal from the Parquet export (up to what it holds, its cut; with its summary ``exported``, up to
    what the summary covers, its extent taken from the summary rather than from the files), the small tables
    from the store."""
    from pyspark.sql import functions as F

    parquet = read_parquet(spark, dataset)
    snapshot = parquet_snapshot(parquet) if exported is None else Snapshot(*exported.extent)
    cursors, acks = read_positions(spark, store)
    return StoreTables(
        snapshot,
        parquet.where(F.col(n.ID) <= snapshot.last_id).select(*n.MESSAGE_COLUMNS),
        cursors,
        acks,
        read_table(spark, store, n.SUBSCRIPTIONS),
        read_table(spark, store, n.PUBLISHERS),
    )


def summary_frame(spark: SparkSession, entries: list[tuple[Any, ...]]) -> DataFrame:
    """Entries of the export's summary (``summary.COLUMNS``, as ``summary.read_summary`` gives them) as a frame,
    ``first_ts`` and ``last_ts`` as timestamps."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(entries, summary.SCHEMA, verifySchema=False)  # as the export wrote them
    return frame.withColumns({column: F.timestamp_micros(column) for column in ("first_ts", "last_ts")})


def parquet_blocks(spark: SparkSession, dataset: str, blocks: list[int], days: list[date], through: int) -> DataFrame:
    """The exported persistent rows of these blocks of ``summary.BLOCK`` sequences, up to ``through``, looked for
    in the partitions of ``days`` only (the days they span), by ``id`` range (the files' statistics)."""
    from pyspark.sql import functions as F

    ranges: list[list[int]] = []
    for block in sorted(set(blocks)):  # adjacent blocks as one range
        if ranges and ranges[-1][1] == block * summary.BLOCK - 1:
            ranges[-1][1] = (block + 1) * summary.BLOCK - 1
        else:
            ranges.append([block * summary.BLOCK, (block + 1) * summary.BLOCK - 1])
    wanted: Column = F.lit(False)
    for low, high in ranges:
        wanted = wanted | F.col(n.ID).between(F.lit(low), F.lit(min(high, through)))
    rows = read_parquet(spark, dataset).where(F.col("day").isin(sorted(set(days))) & wanted & F.col(n.DURABLE))
    # the address is the partition's topic: a constant per file, not a column of strings to decode
    return rows.withColumn(n.ADDRESS, F.col("topic")).select(*n.MESSAGE_COLUMNS)
