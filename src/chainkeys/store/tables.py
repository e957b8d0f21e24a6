"""Table definitions: the one description of the schema (migrations follow it)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite only autoincrements an INTEGER PRIMARY KEY; PostgreSQL wants BIGINT.
Id = BigInteger().with_variant(Integer(), "sqlite")

tenants = Table(
    "tenants",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("created_ms", BigInteger, nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False, index=True),
    Column("label", String(128), nullable=False, default=""),
    # sha256 of the token: tokens are 256-bit random, so a fast hash is enough.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("revoked_ms", BigInteger, nullable=True),
)

accounts = Table(
    "accounts",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("family", String(16), nullable=False),
    Column("name", String(100), nullable=False),
    Column("network", String(32), nullable=False),
    Column("address", String(100), nullable=False),
    Column("public_key", String(160), nullable=False),
    # Public, display-only fields (EOS K1 key, Cosmos keyring pubkey, address type…).
    Column("details", Text, nullable=False),
    Column("secret", LargeBinary, nullable=False),  # sealed private key
    Column("key_id", String(16), nullable=False),  # master key that sealed it
    Column("created_ms", BigInteger, nullable=False),
    UniqueConstraint("tenant_id", "family", "name"),
    # Keyset pagination: first page and deep pages cost the same.
    Index("ix_accounts_tenant_family_id", "tenant_id", "family", "id"),
)

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
    Column("key_id", String(16), nullable=True),
)
