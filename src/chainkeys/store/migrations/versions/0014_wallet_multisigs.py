"""HD multisigs of a wallet: the definition (threshold, the others' extended public
keys, the descriptor); their addresses are accounts, their next index a counter.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "wallet_multisigs",
        sa.Column("seq", Id, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(16), nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("wallet_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("address_type", sa.String(16), nullable=False),
        sa.Column("threshold", sa.Integer(), nullable=False),
        sa.Column("account", sa.Integer(), nullable=False),
        sa.Column("xpubs", sa.Text(), nullable=False),
        sa.Column("descriptor", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_wallet_multisigs"),
        sa.UniqueConstraint("id", name="uq_wallet_multisigs_id"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name="fk_wallet_multisigs_tenant_id_tenants"
        ),
    )
    op.create_index(
        "ix_wallet_multisigs_tenant_wallet", "wallet_multisigs", ["tenant_id", "wallet_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_wallet_multisigs_tenant_wallet", table_name="wallet_multisigs")
    op.drop_table("wallet_multisigs")
