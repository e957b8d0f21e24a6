"""Table definitions: the one description of the schema (migrations follow it).

Every table is defined on the one `metadata` (base.py) by a module of this package,
each imported here, so that importing `chainkeys.store.tables` (what migrations,
`db copy` and the integrity checks do) always sees every table.
"""

from __future__ import annotations

from chainkeys.store.tables.approvals import (
    approval_votes,
    approvals,
    approver_credentials,
    approver_invites,
    webhook_outbox,
)
from chainkeys.store.tables.base import Id, metadata
from chainkeys.store.tables.core import (
    account_columns,
    account_created,
    accounts,
    audit,
    audit_heads,
    deleted_accounts,
    idempotency,
    meta,
    policy_spends,
    policy_totals,
    policy_versions,
    tenants,
    tokens,
)
from chainkeys.store.tables.freezes import freezes
from chainkeys.store.tables.governance import change_votes, changes, governance
from chainkeys.store.tables.heads import integrity_heads
from chainkeys.store.tables.keys import key_ring, key_users, master_keys
from chainkeys.store.tables.wallets import wallet_counters, wallet_multisigs, wallets

__all__ = [
    "Id",
    "account_columns",
    "account_created",
    "accounts",
    "approval_votes",
    "approvals",
    "approver_credentials",
    "approver_invites",
    "audit",
    "audit_heads",
    "change_votes",
    "changes",
    "deleted_accounts",
    "freezes",
    "governance",
    "idempotency",
    "integrity_heads",
    "key_ring",
    "key_users",
    "master_keys",
    "meta",
    "metadata",
    "policy_spends",
    "policy_totals",
    "policy_versions",
    "tenants",
    "tokens",
    "wallet_counters",
    "wallet_multisigs",
    "wallets",
    "webhook_outbox",
]
