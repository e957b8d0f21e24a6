"""One wallet per seed per tenant, held by a unique keyed fingerprint of the seed.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("wallets") as batch:
        batch.add_column(sa.Column("seed_key", sa.String(64), nullable=True))
        batch.create_unique_constraint("uq_wallets_tenant_id_seed_key", ["tenant_id", "seed_key"])


def downgrade() -> None:
    with op.batch_alter_table("wallets") as batch:
        batch.drop_constraint("uq_wallets_tenant_id_seed_key", type_="unique")
        batch.drop_column("seed_key")
