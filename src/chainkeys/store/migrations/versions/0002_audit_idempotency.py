"""Audit log, idempotency records, key-id index for rotation.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_index("ix_accounts_key_id", "accounts", ["key_id"])
    op.create_table(
        "audit",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("family", sa.String(16), nullable=True),
        sa.Column("account_name", sa.String(100), nullable=True),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("outcome", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_tenant_id_id", "audit", ["tenant_id", "id"])
    op.create_index("ix_audit_created_ms", "audit", ["created_ms"])
    op.create_table(
        "idempotency",
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "key", name="pk_idempotency"),
    )
    op.create_index("ix_idempotency_expires_ms", "idempotency", ["expires_ms"])
    op.create_index("ix_idempotency_key_id", "idempotency", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_key_id", table_name="idempotency")
    op.drop_index("ix_idempotency_expires_ms", table_name="idempotency")
    op.drop_table("idempotency")
    op.drop_index("ix_audit_created_ms", table_name="audit")
    op.drop_index("ix_audit_tenant_id_id", table_name="audit")
    op.drop_table("audit")
    op.drop_index("ix_accounts_key_id", table_name="accounts")
