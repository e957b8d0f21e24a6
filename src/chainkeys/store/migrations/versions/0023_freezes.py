"""Emergency freezes: a tenant's or one account's signing, exports and approvals
stopped until a time or until an operator lifts them (docs/freezes.md).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "freezes",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=True),
        sa.Column("account_name", sa.String(100), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("until_ms", sa.BigInteger(), nullable=True),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_by_token_id", sa.String(32), nullable=False),
        sa.Column("lifted_ms", sa.BigInteger(), nullable=True),
        sa.Column("mac", sa.String(80), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_freezes"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name="fk_freezes_tenant_id_tenants"),
    )
    op.create_index("ix_freezes_tenant_id_lifted_ms", "freezes", ["tenant_id", "lifted_ms"])


def downgrade() -> None:
    op.drop_index("ix_freezes_tenant_id_lifted_ms", table_name="freezes")
    op.drop_table("freezes")
