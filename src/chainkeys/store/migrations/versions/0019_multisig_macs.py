"""An HD multisig registration authenticated: a MAC column on `wallet_multisigs`
(store/integrity.py WALLET_MULTISIGS), so a database writer cannot add a co-signer key
of theirs to the members every new index derives from. NULL until the first start that
knows the table adopts the rows (vault/integrity.py).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("wallet_multisigs") as batch:
        batch.add_column(sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("wallet_multisigs") as batch:
        batch.drop_column("mac")
