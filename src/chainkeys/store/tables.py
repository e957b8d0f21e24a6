"""Table definitions: the one description of the schema (migrations follow it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
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

from chainkeys.store.joined import JoinedInsert

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
    ("tenant_id", "family", "name", "network", "address", "public_key", "details", "secret",
     "key_id", "created_ms", "wallet_id", "mac"),
    audit,
    (("tenant_id", "tenant_id"), ("action", "audit_action"), ("family", "family"),
     ("account_name", "name"), ("request_id", "audit_request_id"),
     ("outcome", "audit_outcome"), ("created_ms", "audit_ms"),
     ("actor_token_id", "audit_actor"), ("client_request_id", "audit_client_request_id"),
     ("details", "audit_details")),
)  # fmt: skip

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
)

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
    info={"copy": False},  # a heartbeat of this database's processes, not data
)

# HD wallets: one sealed BIP39 phrase (and passphrase) per wallet. A deleted wallet
# keeps its row (deleted_ms set) for the retention period, restorable; the accounts
# derived from it are ordinary accounts and stay usable either way.
wallets = Table(
    "wallets",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),  # keyset pages, rotation batches
    Column("id", String(32), nullable=False, unique=True),  # public: random, not guessable
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("name", String(64), nullable=False),
    Column("fingerprint", String(8), nullable=False),  # the master key's (public)
    Column("secret", LargeBinary, nullable=False),  # sealed {"mnemonic", "passphrase"}
    Column("key_id", String(16), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("exported", Integer, nullable=False),  # 1 once exported, for good
    Column("deleted_ms", BigInteger, nullable=True),
    # HMAC-SHA256 of the phrase and passphrase under a per-store key (sealed in `meta`):
    # one wallet per seed per tenant, held by the database, with nothing unkeyed stored
    # (NULL for wallets made before it existed: the phrases themselves are compared).
    Column("seed_key", String(64), nullable=True),
    UniqueConstraint("tenant_id", "name"),
    UniqueConstraint("tenant_id", "seed_key"),
    Index("ix_wallets_tenant_id_seq", "tenant_id", "seq"),
    Index("ix_wallets_tenant_id_fingerprint", "tenant_id", "fingerprint"),
    Index("ix_wallets_key_id", "key_id"),
)

# The next index of each (wallet, family, network, address type, account, change): the
# one after the highest derived so far, taken atomically (compare-and-set on this row).
wallet_counters = Table(
    "wallet_counters",
    metadata,
    Column("wallet_id", String(32), primary_key=True),
    Column("family", String(16), primary_key=True),
    Column("network", String(32), primary_key=True),
    Column("address_type", String(16), primary_key=True),  # "" where the family has one
    Column("account", Integer, primary_key=True),
    Column("change", Integer, primary_key=True),
    Column("next_index", BigInteger, nullable=False),
)

# HD multisigs of a wallet (docs/multisig.md): the wallet's BIP48 key is one member,
# the others' extended public keys are stored as given (public data); each index's
# address is a multisig account, its next index a wallet counter named by `id`.
wallet_multisigs = Table(
    "wallet_multisigs",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("id", String(16), nullable=False, unique=True),  # public: wms_ + 12 hex
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("wallet_id", String(32), nullable=False),
    Column("family", String(16), nullable=False),
    Column("network", String(32), nullable=False),
    Column("address_type", String(16), nullable=False),
    Column("threshold", Integer, nullable=False),
    Column("account", Integer, nullable=False),
    Column("xpubs", Text, nullable=False),  # JSON: the other members, as given
    Column("descriptor", Text, nullable=False),  # the receive chain, ranged, with checksum
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: the members are facts
    Index("ix_wallet_multisigs_tenant_wallet", "tenant_id", "wallet_id"),
)

# Sign requests waiting for people (docs/approvals.md). `request` is the sign
# endpoint's body as decoded (it holds no secret), signed again at the quorum;
# `pending_key` is set only while pending, so the same request (token, bytes) cannot
# open two at once; `result` is the sign endpoint's own answer once signed.
approvals = Table(
    "approvals",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("id", String(32), nullable=False, unique=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("requester_token_id", String(32), nullable=False),
    Column("requester_label", String(128), nullable=False),
    Column("family", String(16), nullable=False),
    Column("account_name", String(100), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("request", Text, nullable=False),
    Column("pending_key", String(128), nullable=True, unique=True),
    Column("digest", String(64), nullable=False),
    Column("summary", Text, nullable=False),
    Column("rule_index", Integer, nullable=False),
    Column("approver_group", String(64), nullable=False),
    Column("quorum", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
    Column("decided_ms", BigInteger, nullable=True),
    Column("result", Text, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
    # true: a vote counts only with the person's passkey or key (approvals/passkeys.py);
    # NULL on requests from before passkeys (and on those of rules without them)
    Column("passkey", Boolean, nullable=True),
    Index("ix_approvals_tenant_id_seq", "tenant_id", "seq"),
    Index("ix_approvals_state_expires_ms", "state", "expires_ms"),
)

# One vote per person (label) per approval, on the digest they saw.
approval_votes = Table(
    "approval_votes",
    metadata,
    Column("approval_id", String(32), primary_key=True),
    Column("voter_label", String(128), primary_key=True),
    Column("voter_token_id", String(32), nullable=False),
    Column("decision", String(8), nullable=False),  # approve, reject
    Column("digest", String(64), nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: NULL only before adoption
    # JSON: the WebAuthn assertion or key signature that cast it (approvals/passkeys.py)
    Column("assertion", Text, nullable=True),
)

# Approvers' passkeys (WebAuthn) and script keys (P-256, Ed25519): each a person's
# (tenant, label) in a group; a vote on a passkey rule's request is signed by one.
# `credential_id` is the authenticator's id (base64url; a key's is the row id),
# `public_key` base64url (a COSE key, or a key's DER SubjectPublicKeyInfo),
# `sign_count` the authenticator's counter at its last use.
approver_credentials = Table(
    "approver_credentials",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("label", String(128), nullable=False),
    Column("approver_group", String(64), nullable=False),
    Column("kind", String(16), nullable=False),  # webauthn, p256, ed25519
    Column("credential_id", String(1400), nullable=False),
    Column("public_key", Text, nullable=False),
    Column("sign_count", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("revoked_ms", BigInteger, nullable=True),
    Column("last_used_ms", BigInteger, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py
    UniqueConstraint("tenant_id", "credential_id"),
    Index("ix_approver_credentials_tenant_id_label", "tenant_id", "label"),
)

# One-time enrolment codes (`chainkeys approver invite`): a keyed digest of the code,
# whose it is, until when; `used_ms` once a credential was registered with it.
approver_invites = Table(
    "approver_invites",
    metadata,
    Column("code_digest", String(64), primary_key=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("label", String(128), nullable=False),
    Column("approver_group", String(64), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("expires_ms", BigInteger, nullable=False),
    Column("used_ms", BigInteger, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py
)

# Webhook events, written in the transaction of the change they announce and sent
# (with retries) by any process: a restart loses none.
webhook_outbox = Table(
    "webhook_outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("event_id", String(32), nullable=False, unique=True),
    Column("body", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_ms", BigInteger, nullable=False),
    Column("claimed_until", BigInteger, nullable=True),
    Column("delivered_ms", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),
    Index("ix_webhook_outbox_delivered_ms_next_ms", "delivered_ms", "next_ms"),
)
