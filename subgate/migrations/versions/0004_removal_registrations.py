"""remove-with-session registrations

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 03:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision: the open remove-with-session registrations, so a restart can honour them."""
    op.create_table(
        "removal_registrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(length=1024), nullable=False),
        sa.Column("container_id", sa.String(length=256), nullable=True),
        sa.Column("link_name", sa.String(length=1024), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_removal_registrations")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("removal_registrations")
