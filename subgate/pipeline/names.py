"""The store's tables and columns the pipeline reads: the one contract with ``subgate/storage/models.py``.

The pipeline imports nothing of ``storage`` (it reads the tables through Spark's JDBC source), so every table and
column name it uses is spelled here, and ``tests/unit/pipeline/test_names.py`` fails when a name here is not a
column of the SQLAlchemy models. ``SPARK_TYPES`` are the Spark types the SQLite JDBC driver must be told
(``customSchema``): without them it reports 64-bit ids as 32-bit ints, BIGINT as decimal and DATETIME as date.
Timestamps are read from SQLite as text and cast in Spark (``readers``).
"""

from __future__ import annotations

# -- the journal (``JournalMessage``): ``id`` is the journal sequence -----------------------------------------
MESSAGES = "messages"
ID = "id"
ADDRESS = "address"
NODE_KIND = "node_kind"
PUBLISHER_ID = "publisher_id"
PUBLISHER_SEQ = "publisher_seq"
BOOKMARK = "bookmark"
TS = "ts"
DURABLE = "durable"
SIZE = "size"
MESSAGE_COLUMNS = (ID, ADDRESS, NODE_KIND, PUBLISHER_ID, PUBLISHER_SEQ, BOOKMARK, TS, DURABLE, SIZE)
EXPIRES_AT = "expires_at"
DELIVER_AT = "deliver_at"
PRIORITY = "priority"
PAYLOAD = "payload"  # the message as received (AMQP bytes)
EXPORT_COLUMNS = (*MESSAGE_COLUMNS, EXPIRES_AT, DELIVER_AT, PRIORITY, PAYLOAD)
"""What the Parquet export keeps of each journal row: every column."""

# -- positions (``AckCursor``, ``Ack``) --------------------------------------------------------------------------
ACK_CURSORS = "ack_cursors"
OWNER_KIND = "owner_kind"  # "queue" | "subscription"
OWNER = "owner"
LOW_WATER = "low_water"
CURSOR_COLUMNS = (ID, OWNER_KIND, OWNER, ADDRESS, LOW_WATER)

ACKS = "acks"
CURSOR_ID = "cursor_id"
MESSAGE_ID = "message_id"
ACK_COLUMNS = (CURSOR_ID, MESSAGE_ID)

# -- subscriptions (``Subscription``) ----------------------------------------------------------------------------
SUBSCRIPTIONS = "subscriptions"
KIND = "kind"  # "durable" | "shared-durable" | "shared-volatile"
CLIENT_ID = "client_id"  # NULL: a global subscription
NAME = "name"
TOPIC = "topic"
SUBSCRIPTION_COLUMNS = (ID, KIND, DURABLE, CLIENT_ID, NAME, TOPIC, CURSOR_ID)

# -- publisher high-water marks (``Publisher``): a row only for publishers that number their own messages --------
PUBLISHERS = "publishers"
LAST_SEQ = "last_seq"
PUBLISHER_COLUMNS = (PUBLISHER_ID, LAST_SEQ)

TABLES: dict[str, tuple[str, ...]] = {
    MESSAGES: MESSAGE_COLUMNS,
    ACK_CURSORS: CURSOR_COLUMNS,
    ACKS: ACK_COLUMNS,
    SUBSCRIPTIONS: SUBSCRIPTION_COLUMNS,
    PUBLISHERS: PUBLISHER_COLUMNS,
}
"""Every table the pipeline reads, with the columns it reads (in this order)."""

QUEUE = "queue"
SUBSCRIPTION = "subscription"

# Spark types of every column read: the SQLite driver's customSchema, and what both stores' columns are cast to.
SPARK_TYPES: dict[str, dict[str, str]] = {
    MESSAGES: {
        ID: "BIGINT",
        ADDRESS: "STRING",
        NODE_KIND: "STRING",
        PUBLISHER_ID: "STRING",
        PUBLISHER_SEQ: "BIGINT",
        BOOKMARK: "STRING",
        TS: "STRING",
        DURABLE: "BOOLEAN",
        SIZE: "BIGINT",
        EXPIRES_AT: "STRING",
        DELIVER_AT: "STRING",
        PRIORITY: "INT",
        PAYLOAD: "BINARY",
    },
    ACK_CURSORS: {ID: "BIGINT", OWNER_KIND: "STRING", OWNER: "STRING", ADDRESS: "STRING", LOW_WATER: "BIGINT"},
    ACKS: {CURSOR_ID: "BIGINT", MESSAGE_ID: "BIGINT"},
    SUBSCRIPTIONS: {
        ID: "BIGINT",
        KIND: "STRING",
        DURABLE: "BOOLEAN",
        CLIENT_ID: "STRING",
        NAME: "STRING",
        TOPIC: "STRING",
        CURSOR_ID: "BIGINT",
    },
    PUBLISHERS: {PUBLISHER_ID: "STRING", LAST_SEQ: "BIGINT"},
}
TIMESTAMP_COLUMNS: dict[str, tuple[str, ...]] = {MESSAGES: (TS, EXPIRES_AT, DELIVER_AT)}
"""Columns SQLite holds as text (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC) that the reader casts to timestamps."""
