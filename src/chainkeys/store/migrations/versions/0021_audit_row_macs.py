"""The audit log from the first second: a MAC on each row made at insert (`audit.mac`,
store/integrity.py AUDIT_ROWS: an edit is seen before the row is linked), and on
PostgreSQL `audit.horizon`, the next transaction id when the row was inserted: the
chaining round links a row once every transaction of that moment has ended (commit
order, on the database's own counter: no settling window, no timestamp a writer could
push into the future to stall it).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from chainkeys.store.sql import PG_ROW_HORIZON

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit", sa.Column("mac", sa.String(80), nullable=True))
    pg = op.get_bind().dialect.name == "postgresql"
    default = sa.text(PG_ROW_HORIZON) if pg else None
    column = sa.Column("horizon", sa.BigInteger(), nullable=True, server_default=default)
    op.add_column("audit", column)


def downgrade() -> None:
    op.execute("ALTER TABLE audit DROP COLUMN horizon")
    op.execute("ALTER TABLE audit DROP COLUMN mac")
