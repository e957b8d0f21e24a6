"""Governance (docs/governance.md): a tenant's quorum and delay, the changes its admins
file and their signed votes, all authenticated rows (store/integrity.py GOVERNANCE,
CHANGES, CHANGE_VOTES). New tables: nothing existing changes.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "governance",
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("quorum", sa.Integer(), nullable=False),
        sa.Column("delay_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("mac", sa.String(80), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", name="pk_governance"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name="fk_governance_tenant_id_tenants"
        ),
    )
    op.create_table(
        "changes",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("document", sa.Text(), nullable=True),
        sa.Column("base_version", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("diff", sa.Text(), nullable=False),
        sa.Column("loosens", sa.Boolean(), nullable=False),
        sa.Column("quorum", sa.Integer(), nullable=False),
        sa.Column("delay_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_by_token_id", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("effective_ms", sa.BigInteger(), nullable=True),
        sa.Column("ended_ms", sa.BigInteger(), nullable=True),
        sa.Column("ended_by", sa.String(128), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("mac", sa.String(80), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_changes"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name="fk_changes_tenant_id_tenants"),
    )
    op.create_index("ix_changes_tenant_id_state", "changes", ["tenant_id", "state"])
    op.create_index("ix_changes_state_effective_ms", "changes", ["state", "effective_ms"])
    op.create_table(
        "change_votes",
        sa.Column("change_id", sa.String(32), nullable=False),
        sa.Column("voter", sa.String(128), nullable=False),
        sa.Column("voter_label", sa.String(128), nullable=False),
        sa.Column("voter_token_id", sa.String(32), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("proof", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("mac", sa.String(80), nullable=True),
        sa.PrimaryKeyConstraint("change_id", "voter", name="pk_change_votes"),
        sa.ForeignKeyConstraint(
            ["change_id"], ["changes.id"], name="fk_change_votes_change_id_changes"
        ),
    )


def downgrade() -> None:
    op.drop_table("change_votes")
    op.drop_index("ix_changes_state_effective_ms", table_name="changes")
    op.drop_index("ix_changes_tenant_id_state", table_name="changes")
    op.drop_table("changes")
    op.drop_table("governance")
