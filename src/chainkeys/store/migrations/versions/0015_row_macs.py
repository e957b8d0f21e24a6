"""The database is not trusted: a MAC column on every row that authorizes anything
(store/integrity.py lists them). NULL until the first start that holds the master key
adopts the rows this store already had (vault/integrity.py); after that a row without
a valid MAC is never used.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLES = ("tokens", "policy_versions", "approvals", "approval_votes")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("mac")
