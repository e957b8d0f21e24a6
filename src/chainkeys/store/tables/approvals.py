"""Approvals: requests waiting for people, their votes, approvers' credentials and
invites, and the webhook outbox that announces them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from chainkeys.store.tables.base import Id, metadata

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
    Column("mac", String(80), nullable=True),  # store/integrity.py: never sent without it
    Index("ix_webhook_outbox_delivered_ms_next_ms", "delivered_ms", "next_ms"),
)
