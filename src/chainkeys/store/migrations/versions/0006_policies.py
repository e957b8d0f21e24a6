"""Signing policies: their versions, and the spends the rolling 24 h caps count.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "policy_versions",
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.Text(), nullable=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "version", name="pk_policy_versions"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name="fk_policy_versions_tenant_id_tenants"
        ),
    )
    op.create_table(
        "policy_spends",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("denom", sa.String(128), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("amount", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_policy_spends"),
    )
    op.create_index(
        "ix_policy_spends_window",
        "policy_spends",
        ["tenant_id", "family", "network", "created_ms"],
    )
    op.create_index("ix_policy_spends_digest", "policy_spends", ["tenant_id", "digest"])
    op.create_table(
        "policy_totals",
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("denom", sa.String(128), nullable=False),
        sa.Column("total", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "family", "network", "denom", name="pk_policy_totals"),
    )


def downgrade() -> None:
    op.drop_table("policy_totals")
    op.drop_index("ix_policy_spends_digest", table_name="policy_spends")
    op.drop_index("ix_policy_spends_window", table_name="policy_spends")
    op.drop_table("policy_spends")
    op.drop_table("policy_versions")
