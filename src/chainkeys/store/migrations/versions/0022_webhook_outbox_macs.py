"""Webhook events authenticated: a MAC column on `webhook_outbox` (store/integrity.py
WEBHOOK_OUTBOX). The service signs each event with the webhook secret when it sends
it, so an event a database writer inserted would reach the customer signed; one that
fails its MAC is parked, never sent. Events already queued get theirs from
`chainkeys integrity adopt`.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("webhook_outbox", sa.Column("mac", sa.String(80), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE webhook_outbox DROP COLUMN mac")
