"""subscriptions

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("durable", sa.Boolean(), nullable=False),
        sa.Column("client_id", sa.String(length=512), nullable=True),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("topic", sa.String(length=1024), nullable=False),
        sa.Column("selector", sa.Text(), nullable=True),
        sa.Column("no_local", sa.Boolean(), nullable=False),
        sa.Column("consumers", sa.Integer(), nullable=False),
        sa.Column("cursor_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["cursor_id"],
            ["ack_cursors.id"],
            name=op.f("fk_subscriptions_cursor_id_ack_cursors"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
    )
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.create_index("ix_subscriptions_name", ["name"], unique=False)
        batch_op.create_index("ix_subscriptions_client_id", ["client_id"], unique=False)
        batch_op.create_index("ix_subscriptions_topic", ["topic"], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_index("ix_subscriptions_topic")
        batch_op.drop_index("ix_subscriptions_client_id")
        batch_op.drop_index("ix_subscriptions_name")
    op.drop_table("subscriptions")
