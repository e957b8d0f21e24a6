"""HD wallets (a sealed phrase each) and their next-index counters.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "wallets",
        sa.Column("seq", Id, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.String(8), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("exported", sa.Integer(), nullable=False),
        sa.Column("deleted_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_wallets"),
        sa.UniqueConstraint("id", name="uq_wallets_id"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name="fk_wallets_tenant_id_tenants"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_wallets_tenant_id_name"),
    )
    op.create_index("ix_wallets_tenant_id_seq", "wallets", ["tenant_id", "seq"])
    op.create_index("ix_wallets_tenant_id_fingerprint", "wallets", ["tenant_id", "fingerprint"])
    op.create_index("ix_wallets_key_id", "wallets", ["key_id"])
    op.create_table(
        "wallet_counters",
        sa.Column("wallet_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("network", sa.String(32), nullable=False),
        sa.Column("address_type", sa.String(16), nullable=False),
        sa.Column("account", sa.Integer(), nullable=False),
        sa.Column("change", sa.Integer(), nullable=False),
        sa.Column("next_index", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "wallet_id",
            "family",
            "network",
            "address_type",
            "account",
            "change",
            name="pk_wallet_counters",
        ),
    )


def downgrade() -> None:
    op.drop_table("wallet_counters")
    op.drop_index("ix_wallets_key_id", table_name="wallets")
    op.drop_index("ix_wallets_tenant_id_fingerprint", table_name="wallets")
    op.drop_index("ix_wallets_tenant_id_seq", table_name="wallets")
    op.drop_table("wallets")
