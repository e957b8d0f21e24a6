"""The audit log chained: each row's `chain` MAC covers the tenant's previous row, and
`audit_heads` holds each tenant's newest chained row (audit/chain.py), so `chainkeys
audit verify` finds edited, deleted and reordered rows, not only edited ones.

`chain` is NULL until the chaining round reaches the row (a few seconds after it
settles); rows written before this revision are chained by the first round.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.add_column(sa.Column("chain", sa.String(80), nullable=True))
    op.create_table(
        "audit_heads",
        sa.Column("tenant_key", sa.String(33), primary_key=True),
        sa.Column("last_id", sa.BigInteger, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("chain", sa.String(80), nullable=False),
        sa.Column("mac", sa.String(80), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("audit_heads")
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("chain")
