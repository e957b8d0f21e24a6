"""Accounts carry the wallet they were derived from in a column of their own (it was
only in details' JSON), so a wallet's accounts are listed by index.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("wallet_id", sa.String(64), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, details FROM accounts WHERE details LIKE '%\"wallet\"%'")
    ).all()
    for row_id, details in rows:
        wallet = json.loads(str(details)).get("wallet")
        if isinstance(wallet, str) and wallet:
            bind.execute(
                sa.text("UPDATE accounts SET wallet_id = :w WHERE id = :id"),
                {"w": wallet, "id": row_id},
            )
    op.create_index("ix_accounts_tenant_wallet_id", "accounts", ["tenant_id", "wallet_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_accounts_tenant_wallet_id", table_name="accounts")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("wallet_id")
