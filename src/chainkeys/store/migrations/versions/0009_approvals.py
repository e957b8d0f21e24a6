"""Approvals: approver groups on tokens, approval requests and votes, the webhook outbox.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("approver_group", sa.String(64), nullable=True))
    op.create_table(
        "approvals",
        sa.Column("seq", Id, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("requester_token_id", sa.String(32), nullable=False),
        sa.Column("requester_label", sa.String(128), nullable=False),
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("account_name", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("pending_key", sa.String(128), nullable=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("rule_index", sa.Integer(), nullable=False),
        sa.Column("approver_group", sa.String(64), nullable=False),
        sa.Column("quorum", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=False),
        sa.Column("decided_ms", sa.BigInteger(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_approvals"),
        sa.UniqueConstraint("id", name="uq_approvals_id"),
        sa.UniqueConstraint("pending_key", name="uq_approvals_pending_key"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name="fk_approvals_tenant_id_tenants"
        ),
    )
    op.create_index("ix_approvals_tenant_id_seq", "approvals", ["tenant_id", "seq"])
    op.create_index("ix_approvals_state_expires_ms", "approvals", ["state", "expires_ms"])
    op.create_table(
        "approval_votes",
        sa.Column("approval_id", sa.String(32), nullable=False),
        sa.Column("voter_label", sa.String(128), nullable=False),
        sa.Column("voter_token_id", sa.String(32), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("approval_id", "voter_label", name="pk_approval_votes"),
    )
    op.create_table(
        "webhook_outbox",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_ms", sa.BigInteger(), nullable=False),
        sa.Column("claimed_until", sa.BigInteger(), nullable=True),
        sa.Column("delivered_ms", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_outbox"),
        sa.UniqueConstraint("event_id", name="uq_webhook_outbox_event_id"),
    )
    op.create_index(
        "ix_webhook_outbox_delivered_ms_next_ms", "webhook_outbox", ["delivered_ms", "next_ms"]
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_outbox_delivered_ms_next_ms", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
    op.drop_table("approval_votes")
    op.drop_index("ix_approvals_state_expires_ms", table_name="approvals")
    op.drop_index("ix_approvals_tenant_id_seq", table_name="approvals")
    op.drop_table("approvals")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("approver_group")
