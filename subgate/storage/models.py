"""The store's tables as typed SQLAlchemy 2 models.

Owns the schema (Alembic migrations in ``migrations/`` mirror it) and nothing else: no queries, no sessions.
Column names are a contract for operators and for the Spark pipeline: ``messages`` is the journal
(``id`` is the journal sequence), ``ack_cursors`` and ``acks`` record what each queue or durable subscription
has discarded.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only makes an INTEGER PRIMARY KEY the fast rowid alias; BIGINT elsewhere.
Id64 = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def table_of(model: type[Base]) -> Table:
    """A model's ``Table`` (``__table__`` is typed as the wider ``FromClause``; for a declarative model it is a
    Table)."""
    return cast(Table, model.__table__)


class Node(Base):
    """A queue or a topic the server knows about (auto-created or declared)."""

    __tablename__ = "nodes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(1024), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # "queue" | "topic"
    durable: Mapped[bool] = mapped_column(Boolean, default=True)
    auto_created: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class JournalMessage(Base):
    """One journaled message: the bytes as received plus what operators query by."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Id64, primary_key=True, autoincrement=False)
    address: Mapped[str] = mapped_column(String(1024))
    node_kind: Mapped[str] = mapped_column(String(16))
    publisher_id: Mapped[str] = mapped_column(String(512))
    publisher_seq: Mapped[int] = mapped_column(BigInteger)
    bookmark: Mapped[str] = mapped_column(String(600))
    ts: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    deliver_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # header.durable. False: a non-persistent message, journaled to keep its producer's order while its queue
    # paged (or by --journal-non-persistent); without that flag the server ignores such rows after a restart.
    durable: Mapped[bool] = mapped_column(Boolean)
    priority: Mapped[int] = mapped_column(SmallInteger)
    size: Mapped[int] = mapped_column(Integer)
    payload: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (
        Index("ix_messages_address_id", "address", "id"),
        Index("ix_messages_publisher", "publisher_id", "publisher_seq"),
    )


class AckCursor(Base):
    """Where a consumer of the journal (a queue, or a durable subscription) stands.

    Every message of ``address`` with ``id <= low_water`` is discarded; above it, the rows of ``acks`` say which
    are. Recovery redelivers exactly the rest.
    """

    __tablename__ = "ack_cursors"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    owner_kind: Mapped[str] = mapped_column(String(16))  # "queue" | "subscription"
    owner: Mapped[str] = mapped_column(String(1024), unique=True)
    address: Mapped[str] = mapped_column(String(1024))
    low_water: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Ack(Base):
    """A message above its cursor's low-water mark that the cursor's owner has discarded."""

    __tablename__ = "acks"

    cursor_id: Mapped[int] = mapped_column(ForeignKey("ack_cursors.id", ondelete="CASCADE"), primary_key=True)
    message_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class DeliveryFailure(Base):
    """How many failed deliveries a stored message has had for one cursor (JMSXDeliveryCount across restarts)."""

    __tablename__ = "delivery_failures"

    cursor_id: Mapped[int] = mapped_column(ForeignKey("ack_cursors.id", ondelete="CASCADE"), primary_key=True)
    message_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)


class Publisher(Base):
    """Highest sequence stored per publisher id (duplicate detection)."""

    __tablename__ = "publishers"

    publisher_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Principal(Base):
    """A user that may authenticate with SASL PLAIN; the password is stored as a salted PBKDF2 hash."""

    __tablename__ = "principals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    password_hash: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Subscription(Base):
    """A JMS topic subscription with a name (mapping doc §2.8): durable ones survive restarts; shared volatile
    ones are listed while they exist and removed at start-up.

    ``client_id`` is NULL for a global subscription (shared, no application ClientID). ``kind`` is one of
    ``durable`` (non-shared durable), ``shared-durable`` and ``shared-volatile``. ``cursor_id`` points at the
    journal cursor holding a durable subscription's backlog. ``consumers`` is the number of attached consumer
    links, kept current by the running server.
    """

    __tablename__ = "subscriptions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(32))
    durable: Mapped[bool] = mapped_column(Boolean)
    client_id: Mapped[str | None] = mapped_column(String(512), nullable=True)
    name: Mapped[str] = mapped_column(String(512))
    topic: Mapped[str] = mapped_column(String(1024))
    selector: Mapped[str | None] = mapped_column(Text, nullable=True)
    no_local: Mapped[bool] = mapped_column(Boolean, default=False)
    consumers: Mapped[int] = mapped_column(Integer, default=0)
    cursor_id: Mapped[int | None] = mapped_column(ForeignKey("ack_cursors.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_subscriptions_name", "name"),
        Index("ix_subscriptions_client_id", "client_id"),
        Index("ix_subscriptions_topic", "topic"),
    )


class Role(Base):
    """A named set of grants that principals hold (``principal_roles``); ``admin`` is built in (docs/permissions.md)."""

    __tablename__ = "roles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PrincipalRole(Base):
    """A principal holds a role; removing either removes the assignment."""

    __tablename__ = "principal_roles"

    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), primary_key=True)
    role_id: Mapped[int] = mapped_column(ForeignKey("roles.id", ondelete="CASCADE"), primary_key=True)


class PermissionGrant(Base):
    """One allow (``allow`` true) or denial of a permission to a principal or a role, by name.

    ``subject_kind`` is ``principal`` or ``role``; ``subject`` is the name (grants to ``anonymous`` apply to
    anonymous connections, which have no row in ``principals``). ``path`` is the topic branch the grant covers,
    ``""`` for the root and for the global permissions: never NULL, so that the unique constraint holds (NULLs
    are distinct in a unique constraint).
    """

    __tablename__ = "permission_grants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    subject_kind: Mapped[str] = mapped_column(String(16))
    subject: Mapped[str] = mapped_column(String(256))
    permission: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(String(1024), default="")
    allow: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("subject_kind", "subject", "permission", "path", name="uq_permission_grants_subject"),
    )


class RemovalRegistration(Base):
    """An open remove-with-session registration (design.md §3): the branch, and the container-id and link name
    a reconnecting client re-attaches with to keep it. Rows outlive a server crash: at the next start each one
    waits the reconnection timeout, then its branch is removed unless a client took it over."""

    __tablename__ = "removal_registrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    branch: Mapped[str] = mapped_column(String(1024))
    container_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    link_name: Mapped[str] = mapped_column(String(1024))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ServerLease(Base):
    """The running server that owns the store (storage.lease): at most one row, id 1. The server writes its name,
    host, pid and listen address at start-up, pushes ``expires_ms`` forward while it runs and deletes the row on
    a clean stop; the command line reads it to find that server, and a second server reads it to refuse."""

    __tablename__ = "server_lease"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(256))
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)
    listen_host: Mapped[str] = mapped_column(String(256))
    listen_port: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_ms: Mapped[int] = mapped_column(BigInteger)
