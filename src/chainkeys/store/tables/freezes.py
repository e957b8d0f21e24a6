"""Emergency freezes (docs/freezes.md): while one holds, nothing is signed, exported or
approved in its scope."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, ForeignKey, Index, String, Table, Text

from chainkeys.store.tables.base import metadata

# A freeze of a tenant (`family` and `account_name` NULL) or of one account. It holds
# from `created_ms` until `until_ms` (NULL: until lifted) or `lifted_ms` (an operator's
# `chainkeys freeze lift`), whichever comes first. `created_by` is the person (the
# token's label), `created_by_token_id` the token.
freezes = Table(
    "freezes",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("family", String(16), nullable=True),
    Column("account_name", String(100), nullable=True),
    Column("reason", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("until_ms", BigInteger, nullable=True),
    Column("created_by", String(128), nullable=False),
    Column("created_by_token_id", String(32), nullable=False),
    Column("lifted_ms", BigInteger, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py FREEZES
    Index("ix_freezes_tenant_id_lifted_ms", "tenant_id", "lifted_ms"),
)
