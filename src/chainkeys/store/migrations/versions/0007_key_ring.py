"""The master-key ring (keys introduced by a rotation, sealed under their predecessor)
and the heartbeats of the processes that seal.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "key_ring",
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("wrapped_by", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", name="pk_key_ring"),
    )
    op.create_table(
        "key_users",
        sa.Column("process", sa.String(32), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("sealing_key_id", sa.String(16), nullable=False),
        sa.Column("root_key_id", sa.String(16), nullable=False),
        sa.Column("seen_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("process", name="pk_key_users"),
    )


def downgrade() -> None:
    op.drop_table("key_users")
    op.drop_table("key_ring")
