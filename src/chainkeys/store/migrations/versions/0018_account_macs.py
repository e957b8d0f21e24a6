"""An account's public face authenticated: a MAC column on `accounts` and
`deleted_accounts` (store/integrity.py ACCOUNTS), so a database writer who swaps an
address or a public key between rows, or writes their own, is refused. NULL until the
first start that knows these tables adopts the rows (vault/integrity.py).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TABLES = ("accounts", "deleted_accounts")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("mac")
