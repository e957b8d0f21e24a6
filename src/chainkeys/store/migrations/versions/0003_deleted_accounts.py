"""Deleted accounts are retained (sealed) for a recovery period.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "deleted_accounts",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("address", sa.String(100), nullable=False),
        sa.Column("public_key", sa.String(160), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("deleted_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_deleted_accounts"),
    )
    op.create_index(
        "ix_deleted_accounts_tenant_id_family_name",
        "deleted_accounts",
        ["tenant_id", "family", "name"],
    )
    op.create_index("ix_deleted_accounts_deleted_ms", "deleted_accounts", ["deleted_ms"])
    op.create_index("ix_deleted_accounts_key_id", "deleted_accounts", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_deleted_accounts_key_id", table_name="deleted_accounts")
    op.drop_index("ix_deleted_accounts_deleted_ms", table_name="deleted_accounts")
    op.drop_index("ix_deleted_accounts_tenant_id_family_name", table_name="deleted_accounts")
    op.drop_table("deleted_accounts")
