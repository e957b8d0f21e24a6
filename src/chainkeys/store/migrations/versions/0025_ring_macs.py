"""The master keys authenticated: MAC columns on `master_keys`, `key_ring` and
`key_users` (store/integrity.py MASTER_KEYS, KEY_RING, KEY_USERS), and the ring's head
(vault/heads.py, scope `ring`) pinning every term and ring entry. A database writer
who un-retires a term would otherwise make every process seal with a key they may
hold. A store from before this revision starts only after `chainkeys integrity adopt`
(vault/adoption.py): its record names none of these tables, and nothing adopts itself.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

TABLES = ("master_keys", "key_ring", "key_users")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN mac")
