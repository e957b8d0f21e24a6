"""Audit rows name the acting token, the client's own request id and details; an
idempotency record names the account it created, so deleting it ends every replay.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.add_column(sa.Column("actor_token_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("client_request_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("details", sa.Text(), nullable=True))
    with op.batch_alter_table("idempotency") as batch:
        batch.add_column(sa.Column("family", sa.String(16), nullable=True))
        batch.add_column(sa.Column("account_name", sa.String(100), nullable=True))
    op.create_index(
        "ix_idempotency_tenant_id_family_account_name",
        "idempotency",
        ["tenant_id", "family", "account_name"],
    )


def downgrade() -> None:
    op.drop_index("ix_idempotency_tenant_id_family_account_name", table_name="idempotency")
    with op.batch_alter_table("idempotency") as batch:
        batch.drop_column("account_name")
        batch.drop_column("family")
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("details")
        batch.drop_column("client_request_id")
        batch.drop_column("actor_token_id")
