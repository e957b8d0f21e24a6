"""HD wallets authenticated: MAC columns on `wallets` and `wallet_counters`
(store/integrity.py WALLETS, WALLET_COUNTERS), and `wallet_counters.tenant_id`, the
tenant whose head pins each counter (the `counters` set, vault/heads.py).

The tenant is filled from the counter's wallet. Counters of wallets purged before this
revision are deleted: a wallet id is random and never used again, so nothing would ever
read them, and no tenant can be named for them. The rows themselves get their MACs,
the heads their `counters` sets, and the seed fingerprints their new key from
`chainkeys integrity adopt` (vault/adoption.py): a store from before this revision
starts only once an operator ran it, as after 0020-0022. Nothing adopts itself.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wallets", sa.Column("mac", sa.String(80), nullable=True))
    op.add_column("wallet_counters", sa.Column("tenant_id", sa.String(32), nullable=True))
    op.add_column("wallet_counters", sa.Column("mac", sa.String(80), nullable=True))
    op.execute(
        "UPDATE wallet_counters SET tenant_id = (SELECT wallets.tenant_id FROM wallets"
        " WHERE wallets.id = wallet_counters.wallet_id)"
    )
    op.execute("DELETE FROM wallet_counters WHERE tenant_id IS NULL")
    with op.batch_alter_table("wallet_counters") as batch:  # (no table names this one)
        batch.alter_column("tenant_id", existing_type=sa.String(32), nullable=False)
    op.create_index("ix_wallet_counters_tenant_id", "wallet_counters", ["tenant_id"])


def downgrade() -> None:
    op.drop_index("ix_wallet_counters_tenant_id", table_name="wallet_counters")
    op.execute("ALTER TABLE wallet_counters DROP COLUMN mac")
    op.execute("ALTER TABLE wallet_counters DROP COLUMN tenant_id")
    op.execute("ALTER TABLE wallets DROP COLUMN mac")
