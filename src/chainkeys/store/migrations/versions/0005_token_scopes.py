"""Tokens carry scopes, an optional expiry and an optional restriction to families.

Existing tokens get the default scopes (everything but export), no expiry, no
family restriction: what they could do before, minus export, which is new.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

DEFAULT = "create,delete,read,sign"


def upgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("scopes", sa.String(64), nullable=False, server_default=DEFAULT))
        batch.add_column(sa.Column("expires_ms", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("families", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("families")
        batch.drop_column("expires_ms")
        batch.drop_column("scopes")
