"""The audit log read by tenant and time: the console's 24 h counts and time filters.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_audit_tenant_id_created_ms", "audit", ["tenant_id", "created_ms"])


def downgrade() -> None:
    op.drop_index("ix_audit_tenant_id_created_ms", table_name="audit")
