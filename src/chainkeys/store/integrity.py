"""The registry of authenticated tables: the rows that decide what may be done.

Next to `tables.py` and `sealed.py` on purpose. A database writer who does not hold
the master key could otherwise mint or widen a token, loosen a policy or forge a
vote; so each row of these tables carries a MAC (`mac`) over the columns listed
here, made and checked under the barrier's integrity key (`vault/integrity.py`),
and a row whose MAC fails is never used. `tests/store/test_authenticated_tables.py`
fails while a table with a `mac` column is missing here, or a column is neither
covered nor named as left out (with why). Two records that decide are not rows of
this registry: the audit log's rows carry MACs and a chain of their own
(audit/chain.py), and a shamir share set's record (its check key and commitments,
vault/shares.py) is not MACed: a record written by hand can make forged shares
count, but shares that are not the set's combine into a key that opens nothing.

The store knows no key: it says which columns, in which order; the vault MACs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table

from chainkeys.store.tables import (
    accounts,
    approval_votes,
    approvals,
    approver_credentials,
    approver_invites,
    audit,
    audit_heads,
    change_votes,
    changes,
    deleted_accounts,
    freezes,
    governance,
    integrity_heads,
    key_ring,
    key_users,
    master_keys,
    meta,
    policy_totals,
    policy_versions,
    tenants,
    tokens,
    wallet_counters,
    wallet_multisigs,
    wallets,
    webhook_outbox,
)


@dataclass(frozen=True, slots=True)
class Authenticated:
    """One authenticated table: the record name its MACs are bound to, the columns they
    cover (in this order), and the columns left out, each with the reason."""

    table: Table
    record: str
    covered: tuple[str, ...]
    left_out: Mapping[str, str]
    # covered columns added after rows were MACed: covered (as [name, value]) only when
    # not NULL, so an older row's MAC stands and a value set or cleared by hand fails
    later: frozenset[str] = frozenset()

    def fields(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The covered values of `row` (a mapping by column name)."""
        if not self.later:
            return tuple(row[c] for c in self.covered)
        return tuple(
            ([c, row.get(c)] if c in self.later else row[c])
            for c in self.covered
            if c not in self.later or row.get(c) is not None
        )


# A tenant's name is whose it is: swapped between two rows, an operator's `token create
# --tenant mallory` would read prod's accounts.
TENANTS = Authenticated(tenants, "tenant", ("id", "name", "created_ms"), {})
TOKENS = Authenticated(
    tokens,
    "token",
    (
        "id",
        "tenant_id",
        "label",
        "token_hash",
        "created_ms",
        "revoked_ms",
        "scopes",
        "expires_ms",
        "families",
        "approver_group",
    ),
    {},
)
POLICY_VERSIONS = Authenticated(
    policy_versions, "policy", ("tenant_id", "version", "document", "created_ms"), {}
)
# A cap's running total: lowered by hand, the cap would admit more than it says.
POLICY_TOTALS = Authenticated(
    policy_totals, "cap total", ("tenant_id", "family", "network", "denom", "total"), {}
)
APPROVALS = Authenticated(
    approvals,
    "approval",
    (
        "id",
        "tenant_id",
        "requester_token_id",
        "requester_label",
        "family",
        "account_name",
        "kind",
        "request",
        "digest",
        "rule_index",
        "approver_group",
        "quorum",
        "created_ms",
        "expires_ms",
        "passkey",
    ),
    {
        "seq": "a local order, not a fact",
        "summary": "a copy made at opening, never shown: derived from request each time",
        "pending_key": "a uniqueness guard while pending",
        "state": "recomputed from the votes",
        "reason": "why it ended: for people",
        "decided_ms": "when it ended: for people",
        "result": "the requester's copy of a signature the chain verifies",
    },
    later=frozenset({"passkey"}),  # migration 0017: requests from before it keep their MACs
)
APPROVAL_VOTES = Authenticated(
    approval_votes,
    "vote",
    ("approval_id", "voter_label", "voter_token_id", "decision", "digest", "reason", "created_ms"),
    {
        "assertion": "signed by the person's enrolled credential: verified against it when "
        "cast and again when the quorum signs (approvals/passkeys.py)"
    },
)
# Approvers' credentials. `sign_count` is covered and the MAC made again with each use
# (the service holds the key, as for every row it writes): left out, a writer could set
# it to 0, which WebAuthn reads as "this authenticator keeps no counter", and so let a
# cloned authenticator's assertions pass the counter check.
APPROVER_CREDENTIALS = Authenticated(
    approver_credentials,
    "approver credential",
    (
        "id",
        "tenant_id",
        "label",
        "approver_group",
        "kind",
        "credential_id",
        "public_key",
        "sign_count",
        "created_ms",
        "revoked_ms",
    ),
    {"last_used_ms": "when it last signed: for people"},
)
APPROVER_INVITES = Authenticated(
    approver_invites,
    "approver invite",
    ("code_digest", "tenant_id", "label", "approver_group", "created_ms", "expires_ms", "used_ms"),
    {},
)

# An account's public face: a writer who swaps an address or public key between rows (or
# puts their own) is refused. Both tables under one record name: a delete and a restore
# carry the MAC as it is.
_ACCOUNT_COVERED = (
    "tenant_id",
    "family",
    "name",
    "network",
    "address",
    "public_key",
    "details",
    "created_ms",
)
_ACCOUNT_LEFT_OUT = {
    "id": "assigned by the database: tenant, family and name identify the account",
    "secret": "sealed: its associated data binds it to tenant, family and name",
    "key_id": "which master key sealed the secret: a wrong one fails to open it",
}
ACCOUNTS = Authenticated(
    accounts,
    "account",
    _ACCOUNT_COVERED,
    {
        **_ACCOUNT_LEFT_OUT,
        "wallet_id": "copied from details (covered) at insert; a wallet's listing checks it",
    },
)
DELETED_ACCOUNTS = Authenticated(
    deleted_accounts,
    "account",
    _ACCOUNT_COVERED,
    {**_ACCOUNT_LEFT_OUT, "deleted_ms": "when it was deleted: for retention, not a fact"},
)

# An HD wallet: which tenant holds it and under which name decide whose phrase a
# derivation opens (a row moved into another tenant, or two names swapped, would derive
# another tenant's or another wallet's addresses), and `exported` says for good that the
# phrase left. The phrase itself is sealed, bound to tenant and id.
WALLETS = Authenticated(
    wallets,
    "wallet",
    ("id", "tenant_id", "name", "fingerprint", "created_ms", "exported", "deleted_ms", "seed_key"),
    {
        "seq": "a local order, not a fact",
        "secret": "sealed: its associated data binds it to the tenant and the wallet's id, so "
        "another wallet's phrase does not open here",
        "key_id": "which master key sealed the secret: a wrong one fails to open it",
    },
)
# A chain's next index: lowered (or put back from an older copy) it would hand out an
# index, and so an address, a second time. Pinned by the tenant's head (`counters`).
WALLET_COUNTERS = Authenticated(
    wallet_counters,
    "wallet counter",
    (
        "wallet_id",
        "tenant_id",
        "family",
        "network",
        "address_type",
        "account",
        "change",
        "next_index",
    ),
    {},
)

# An HD multisig registration: its members and descriptor make every address a new index
# derives, so a co-signer key a writer adds would receive funds.
WALLET_MULTISIGS = Authenticated(
    wallet_multisigs,
    "wallet multisig",
    (
        "id",
        "tenant_id",
        "wallet_id",
        "family",
        "network",
        "address_type",
        "threshold",
        "account",
        "xpubs",
        "descriptor",
        "created_ms",
    ),
    {"seq": "a local order, not a fact"},
)

# Each audit row is MACed at insert (an edit is seen at once) and then chained
# (audit/chain.py: a deletion or a reordering breaks the next link). Not in REGISTRY:
# `chainkeys audit verify` walks them by pages, millions of them.
AUDIT_ROWS = Authenticated(
    audit,
    "audit row",
    (
        "tenant_id",
        "action",
        "family",
        "account_name",
        "request_id",
        "outcome",
        "created_ms",
        "actor_token_id",
        "client_request_id",
        "details",
    ),
    {
        "id": "assigned by the database: the chain links each row to the one before",
        "chain": "the link itself, made by the chaining round",
        "horizon": "PostgreSQL's transaction counter at insert: when linking is safe",
    },
)
# What a deleted tail would change is each tenant's head.
AUDIT_HEADS = Authenticated(
    audit_heads, "audit head", ("tenant_key", "last_id", "rows", "chain"), {}
)

# Webhook events: the service signs each with the webhook secret when it sends it, so
# a row a writer inserts would reach the customer signed (`Chainkeys-Signature`).
WEBHOOK_OUTBOX = Authenticated(
    webhook_outbox,
    "webhook event",
    ("event_id", "body", "created_ms"),
    {
        "id": "assigned by the database: the order of sending",
        "attempts": "delivery bookkeeping",
        "next_ms": "delivery bookkeeping: when to try again",
        "claimed_until": "delivery bookkeeping: which process sends it",
        "delivered_ms": "delivery bookkeeping: sent",
        "last_error": "why the last attempt failed: for people",
    },
)

# An audit device's cursor (a `meta` record's JSON, audit/shipping.py): moved past the
# end by a writer, nothing more would be shipped while CHAINKEYS_AUDIT_REQUIRED still
# let changes through. Its MAC covers the record's key, the cursor and its gaps.
DEVICE_CURSORS = Authenticated(meta, "audit device cursor", ("key", "through", "gaps"), {})

# Emergency freezes: a writer who deletes or lifts one would sign during an emergency.
FREEZES = Authenticated(
    freezes,
    "freeze",
    (
        "id",
        "tenant_id",
        "family",
        "account_name",
        "reason",
        "created_ms",
        "until_ms",
        "created_by",
        "created_by_token_id",
        "lifted_ms",
    ),
    {},
)

# Governance (governance/): a tenant's quorum and delay, deleted or lowered by a writer,
# would let one person loosen the rules; a change's document, state or countdown edited
# would apply what nobody signed, or apply it early.
GOVERNANCE = Authenticated(
    governance, "governance", ("tenant_id", "quorum", "delay_ms", "created_ms"), {}
)
CHANGES = Authenticated(
    changes,
    "change",
    (
        "id",
        "tenant_id",
        "kind",
        "document",
        "base_version",
        "digest",
        "diff",
        "loosens",
        "quorum",
        "delay_ms",
        "created_ms",
        "created_by",
        "created_by_token_id",
        "state",
        "effective_ms",
        "ended_ms",
        "ended_by",
        "reason",
    ),
    {},
)
CHANGE_VOTES = Authenticated(
    change_votes,
    "change vote",
    ("change_id", "voter", "voter_label", "voter_token_id", "decision", "digest", "created_ms"),
    {
        "proof": "signed by the admin's enrolled credential: verified against it when cast "
        "and again when the votes are counted (governance/service.py)"
    },
)

# The master keys (vault/barrier.py): the newest term neither retired nor destroyed is
# the key every process seals with, so a term un-retired, back-dated or inserted by a
# writer would have new secrets sealed under a key the writer may hold (a stolen file
# of a retired key). Every term is pinned by the ring's head (vault/heads.py).
MASTER_KEYS = Authenticated(
    master_keys, "master key", ("key_id", "created_ms", "retired_ms", "destroyed_ms"), {}
)
# Keys wrapped under keys: each is sealed with its key id as associated data, so a
# forged one does not open; what the MAC and the ring's head add is that one a retire
# deleted cannot be put back (a retired key would unlock the current one again).
KEY_RING = Authenticated(
    key_ring, "ring entry", ("key_id", "wrapped_by", "wrapped", "created_ms"), {}
)
# Processes' heartbeats, rewritten (and MACed again) by each process every few seconds.
# What decides: which keys a process seals with, started from and used (retire refuses
# while one seals with an older key, destroy while one used the key: edited, they would
# let either finish early and leave a process unable to seal, or a value it sealed
# unopenable) and when it was seen (whether rotation waits for it). A heartbeat that
# fails its MAC blocks retire and destroy until it is named with --gone.
KEY_USERS = Authenticated(
    key_users,
    "key user",
    ("process", "sealing_key_id", "root_key_id", "used_key_ids", "seen_ms"),
    {
        "host": "for people: where the process runs (the process id decides)",
        "pid": "for people: which process to stop (the process id decides)",
    },
)

# Which version of each authorizing row is the latest (vault/heads.py).
HEADS = Authenticated(integrity_heads, "head", ("scope", "version", "body"), {})

REGISTRY: tuple[Authenticated, ...] = (
    HEADS,
    TENANTS,
    TOKENS,
    POLICY_VERSIONS,
    POLICY_TOTALS,
    APPROVALS,
    APPROVAL_VOTES,
    AUDIT_HEADS,
    ACCOUNTS,
    DELETED_ACCOUNTS,
    WALLETS,
    WALLET_COUNTERS,
    WALLET_MULTISIGS,
    APPROVER_CREDENTIALS,
    APPROVER_INVITES,
    WEBHOOK_OUTBOX,
    FREEZES,
    GOVERNANCE,
    CHANGES,
    CHANGE_VOTES,
    MASTER_KEYS,
    KEY_RING,
    KEY_USERS,
)
