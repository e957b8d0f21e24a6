"""The store's master keys as terms (created, retired, destroyed); the key ring keeps
every past key under the newest (its primary key becomes (key_id, wrapped_by)); each
process's heartbeat names every key it has sealed with.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The sealed columns at this revision (store/sealed.py is the live registry).
SEALED = ("accounts", "deleted_accounts", "wallets", "idempotency", "meta")


def _ring(name: str) -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("wrapped_by", sa.String(16), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", "wrapped_by", name="pk_key_ring"),
    )


def upgrade() -> None:
    conn = op.get_bind()
    entries = conn.execute(
        sa.text("SELECT key_id, wrapped_by, wrapped, created_ms FROM key_ring")
    ).all()
    op.drop_table("key_ring")
    ring = _ring("key_ring")
    ring.create(conn)
    if entries:
        conn.execute(sa.insert(ring), [dict(r._mapping) for r in entries])

    keys = op.create_table(
        "master_keys",
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("retired_ms", sa.BigInteger(), nullable=True),
        sa.Column("destroyed_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name="pk_master_keys"),
    )
    known: dict[str, int] = {}
    for table in SEALED:
        for (key_id,) in conn.execute(
            sa.text(f"SELECT DISTINCT key_id FROM {table} WHERE key_id IS NOT NULL")  # noqa: S608
        ).all():
            known.setdefault(str(key_id), 0)  # before any ring entry: the oldest
    for r in entries:
        known[str(r.key_id)] = max(known.get(str(r.key_id), 0), int(r.created_ms))
        known.setdefault(str(r.wrapped_by), 0)
    if known:
        conn.execute(sa.insert(keys), [{"key_id": k, "created_ms": t} for k, t in known.items()])

    with op.batch_alter_table("key_users") as batch:
        batch.add_column(
            sa.Column("used_key_ids", sa.String(1024), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("key_users") as batch:
        batch.drop_column("used_key_ids")
    op.drop_table("master_keys")
    conn = op.get_bind()
    entries = conn.execute(
        sa.text("SELECT key_id, wrapped_by, wrapped, created_ms FROM key_ring")
    ).all()
    op.drop_table("key_ring")
    op.create_table(
        "key_ring",
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("wrapped_by", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key_id", name="pk_key_ring"),
    )
    newest: dict[str, dict[str, object]] = {}
    for r in entries:  # the old shape holds one entry per key: the newest wrapping
        seen = newest.get(str(r.key_id))
        if seen is None or int(r.created_ms) > int(str(seen["created_ms"])):
            newest[str(r.key_id)] = dict(r._mapping)
    if newest:
        conn.execute(
            sa.text(
                "INSERT INTO key_ring (key_id, wrapped, wrapped_by, created_ms) "
                "VALUES (:key_id, :wrapped, :wrapped_by, :created_ms)"
            ),
            list(newest.values()),
        )
