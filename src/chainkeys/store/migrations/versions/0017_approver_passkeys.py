"""Approver passkeys (docs/approvals.md "Passkeys"): approvers' credentials (WebAuthn
passkeys and script keys) and their one-time enrolment codes, both authenticated rows
(store/integrity.py); a request's `passkey` (its rule asks for signed votes) and a
vote's `assertion` (what signed it). Existing requests and votes keep NULL: they
were opened and cast without passkeys, and their MACs stay as they were.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approver_credentials",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(32), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("label", sa.String(128), nullable=False),
        sa.Column("approver_group", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("credential_id", sa.String(1400), nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("sign_count", sa.BigInteger, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("revoked_ms", sa.BigInteger, nullable=True),
        sa.Column("last_used_ms", sa.BigInteger, nullable=True),
        sa.Column("mac", sa.String(80), nullable=True),
        sa.UniqueConstraint(
            "tenant_id", "credential_id", name="uq_approver_credentials_tenant_id_credential_id"
        ),
    )
    op.create_index(
        "ix_approver_credentials_tenant_id_label", "approver_credentials", ["tenant_id", "label"]
    )
    op.create_table(
        "approver_invites",
        sa.Column("code_digest", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(32), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("label", sa.String(128), nullable=False),
        sa.Column("approver_group", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("used_ms", sa.BigInteger, nullable=True),
        sa.Column("mac", sa.String(80), nullable=True),
    )
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("passkey", sa.Boolean, nullable=True))
    with op.batch_alter_table("approval_votes") as batch:
        batch.add_column(sa.Column("assertion", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approval_votes") as batch:
        batch.drop_column("assertion")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("passkey")
    op.drop_table("approver_invites")
    op.drop_index("ix_approver_credentials_tenant_id_label", "approver_credentials")
    op.drop_table("approver_credentials")
