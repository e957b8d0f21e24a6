"""The master keys' tables: the keyring, the keys wrapped under one another, and the
processes that seal with them (vault/repository.py reads and writes them, nothing else,
each row MACed: store/integrity.py)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    String,
    Table,
)

from chainkeys.store.tables.base import metadata

# The store's master keys, as Vault's keyring keeps its terms: every key that ever
# sealed here, when it came, when it stopped sealing (retired) and when it was
# destroyed (explicitly, once nothing could need it). The newest key not retired
# is the one that seals.
master_keys = Table(
    "master_keys",
    metadata,
    Column("key_id", String(16), primary_key=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("retired_ms", BigInteger, nullable=True),
    Column("destroyed_ms", BigInteger, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
)

# Master keys sealed under other master keys (`wrapped_by`). Backward: every past key
# under the newest, so the newest alone opens every secret sealed under any of them.
# Forward: a rotation's new key under the key current before it, so a running process
# that holds the older key learns the newer one within seconds; retiring the older key
# deletes what it wraps, so a retired key unlocks nothing.
key_ring = Table(
    "key_ring",
    metadata,
    Column("key_id", String(16), primary_key=True),
    Column("wrapped_by", String(16), primary_key=True),
    Column("wrapped", LargeBinary, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
)

# One row per running server process, refreshed every few seconds: the key it seals
# with, the key it started from and every key it has sealed with since it started.
# Rotation waits for every live process to seal with the new key; retirement refuses
# while a live one still seals with the old; destroying a key refuses while any row
# (live or stale: a stopped process is unknown, not gone) names it.
key_users = Table(
    "key_users",
    metadata,
    Column("process", String(32), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("sealing_key_id", String(16), nullable=False),
    Column("root_key_id", String(16), nullable=False),
    Column("seen_ms", BigInteger, nullable=False),
    Column("used_key_ids", String(1024), nullable=False, server_default=""),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
    info={"copy": False},  # a heartbeat of this database's processes, not data
)
