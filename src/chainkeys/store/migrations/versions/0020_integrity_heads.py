"""Freshness and more authenticated tables: `integrity_heads` (vault/heads.py: which
version of each authorizing row is the latest), and MAC columns on `tenants` (a name
swapped between tenants is refused) and `policy_totals` (a cap's count lowered by hand
is refused). A store from before this revision starts only after `chainkeys integrity
adopt` (vault/adoption.py): nothing adopts itself.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "integrity_heads",
        sa.Column("scope", sa.String(40), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("mac", sa.String(80), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_integrity_heads"),
    )
    # plain ALTERs (SQLite 3.35+ has both): a batch copy of `tenants` would drop a table
    # other tables' foreign keys name
    for table in ("tenants", "policy_totals"):
        op.add_column(table, sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    for table in ("tenants", "policy_totals"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN mac")
    op.drop_table("integrity_heads")
