"""Tenants, tokens, accounts, audit, idempotency and policies: the rows every request reads."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from chainkeys.store.joined import JoinedInsert
from chainkeys.store.tables.base import Id, metadata

tenants = Table(
    "tenants",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: a name is whose it is
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
    # Comma-separated, sorted: read, create, delete, sign, export.
    Column("scopes", String(64), nullable=False, server_default="create,delete,read,sign"),
    Column("expires_ms", BigInteger, nullable=True),  # None: never expires
    Column("families", String(64), nullable=True),  # comma-separated; None: every family
    Column("approver_group", String(64), nullable=True),  # `approve` tokens: their group
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
)


def account_columns(tenant: Column[str]) -> list[Column[Any]]:
    """The columns of an account, live (`accounts`) or retained after a delete
    (`deleted_accounts`): one list, so a restore copies every one of them."""
    return [
        Column("id", Id, primary_key=True, autoincrement=True),
        tenant,
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
        # store/integrity.py: binds the address and public key to tenant, family and name
        # (NULL only before adoption); a delete and a restore carry it
        Column("mac", String(80), nullable=True),
    ]


accounts = Table(
    "accounts",
    metadata,
    *account_columns(Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False)),
    # The wallet an account was derived from (details' "wallet", copied at insert so a
    # wallet's accounts are listed by index: a restore fills it again from details).
    Column("wallet_id", String(64), nullable=True),
    UniqueConstraint("tenant_id", "family", "name"),
    # Keyset pagination: first page and deep pages cost the same.
    Index("ix_accounts_tenant_family_id", "tenant_id", "family", "id"),
    Index("ix_accounts_tenant_wallet_id", "tenant_id", "wallet_id", "id"),
    # Start-up proves every key id in use is held; rotation finds what to re-seal.
    Index("ix_accounts_key_id", "key_id"),
)

# Deleted accounts stay sealed here for the retention period, so a stolen token
# (or a mistake) cannot destroy a key for good; an operator can restore them.
deleted_accounts = Table(
    "deleted_accounts",
    metadata,
    *account_columns(Column("tenant_id", String(32), nullable=False)),
    Column("deleted_ms", BigInteger, nullable=False),
    Index("ix_deleted_accounts_tenant_id_family_name", "tenant_id", "family", "name"),
    Index("ix_deleted_accounts_deleted_ms", "deleted_ms"),
    Index("ix_deleted_accounts_key_id", "key_id"),
)

audit = Table(
    "audit",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(32), nullable=True),
    Column("action", String(32), nullable=False),  # create, import, delete, token.create, …
    Column("family", String(16), nullable=True),
    Column("account_name", String(100), nullable=True),
    Column("request_id", String(128), nullable=True),
    Column("outcome", String(64), nullable=False),  # "ok" or the error code
    Column("created_ms", BigInteger, nullable=False),
    Column("actor_token_id", String(32), nullable=True),  # the token that acted (its id)
    Column("client_request_id", String(128), nullable=True),  # the client's X-Request-ID
    Column("details", Text, nullable=True),  # JSON: what was done (e.g. a sign summary)
    # the tenant's chain MAC through this row, set by the chaining round (audit/chain.py)
    Column("chain", String(80), nullable=True),
    # store/integrity.py AUDIT_ROWS: made at insert, so an edit is seen before linking
    Column("mac", String(80), nullable=True),
    # PostgreSQL: the next transaction id at insert (its default, migration 0021): the
    # round links the row once every transaction of that moment ended; NULL on SQLite
    Column("horizon", BigInteger, nullable=True),
    Index("ix_audit_tenant_id_id", "tenant_id", "id"),
    Index("ix_audit_created_ms", "created_ms"),
    Index("ix_audit_tenant_id_created_ms", "tenant_id", "created_ms"),
)

# Each tenant's newest chained audit row (audit/chain.py): a deleted tail of the chain
# leaves a head that no row matches. `tenant_key` is the tenant id, or "-" for events
# of no tenant (the operator's); `mac` authenticates the head row itself.
audit_heads = Table(
    "audit_heads",
    metadata,
    Column("tenant_key", String(33), primary_key=True),
    Column("last_id", BigInteger, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("chain", String(80), nullable=False),
    Column("mac", String(80), nullable=False),
)

# An account and the audit event of its creation, one write (store/joined.py): a
# create's whole write.
account_created = JoinedInsert(
    "account_created",
    accounts,
    (
        "tenant_id",
        "family",
        "name",
        "network",
        "address",
        "public_key",
        "details",
        "secret",
        "key_id",
        "created_ms",
        "wallet_id",
        "mac",
    ),
    audit,
    (
        ("tenant_id", "tenant_id"),
        ("action", "audit_action"),
        ("family", "family"),
        ("account_name", "name"),
        ("request_id", "audit_request_id"),
        ("outcome", "audit_outcome"),
        ("created_ms", "audit_ms"),
        ("actor_token_id", "audit_actor"),
        ("client_request_id", "audit_client_request_id"),
        ("details", "audit_details"),
        ("mac", "audit_mac"),
    ),
)

idempotency = Table(
    "idempotency",
    metadata,
    Column("tenant_id", String(32), primary_key=True),
    Column("key", String(255), primary_key=True),
    # "sealed": the request's fingerprint is inside the sealed response (a fingerprint
    # of a request that holds a key or mnemonic must not be readable from the database).
    Column("fingerprint", String(64), nullable=False),
    Column("response", LargeBinary, nullable=False),  # sealed: may hold a one-time private key
    Column("key_id", String(16), nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
    Column("family", String(16), nullable=True),  # the account it created: deleting it
    Column("account_name", String(100), nullable=True),  # ends every replay of it
    Index("ix_idempotency_expires_ms", "expires_ms"),
    Index("ix_idempotency_tenant_id_family_account_name", "tenant_id", "family", "account_name"),
    Index("ix_idempotency_key_id", "key_id"),
)

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
    Column("key_id", String(16), nullable=True),
)

# Every version of a tenant's signing policy; the highest is in force
# (`document` NULL: the policy was cleared).
policy_versions = Table(
    "policy_versions",
    metadata,
    Column("tenant_id", String(32), ForeignKey("tenants.id"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("document", Text, nullable=True),  # canonical JSON
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
)

# What each counted signature spent, per denom, for the rolling 24 h caps; rows
# leave (and their amounts leave `policy_totals`) once they are older than 24 h.
policy_spends = Table(
    "policy_spends",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("tenant_id", String(32), nullable=False),
    Column("family", String(16), nullable=False),
    Column("network", String(32), nullable=False),
    Column("denom", String(128), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("amount", Text, nullable=False),  # decimal: amounts reach 2^256
    Column("created_ms", BigInteger, nullable=False),
    Index("ix_policy_spends_window", "tenant_id", "family", "network", "created_ms"),
    Index("ix_policy_spends_digest", "tenant_id", "digest"),
)

# The running sum of `policy_spends` per denom (exact: a decimal string).
policy_totals = Table(
    "policy_totals",
    metadata,
    Column("tenant_id", String(32), primary_key=True),
    Column("family", String(16), primary_key=True),
    Column("network", String(32), primary_key=True),
    Column("denom", String(128), primary_key=True),
    Column("total", Text, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: lowering it fails
)
