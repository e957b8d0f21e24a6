"""Governance (docs/governance.md): a tenant's quorum and delay, the changes its admins
file, and their signed votes."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from chainkeys.store.tables.base import metadata

# One row per governed tenant: how many admins must sign a change, and how long a
# change that loosens anything waits once they have. Set once by the operator with the
# master key; the tenant's head pins it (a row deleted by hand would ungovern it).
governance = Table(
    "governance",
    metadata,
    Column("tenant_id", String(32), ForeignKey("tenants.id"), primary_key=True),
    Column("quorum", Integer, nullable=False),
    Column("delay_ms", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py GOVERNANCE
)

# A change filed by an admin (or the operator's `policy set` on a governed tenant):
# `document` is what it would make the policy (NULL: clear it), `base_version` the
# policy version its diff was made against. `state`: pending, scheduled, applied,
# rejected, cancelled; `effective_ms` is when a scheduled change applies.
changes = Table(
    "changes",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("document", Text, nullable=True),
    Column("base_version", Integer, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("diff", Text, nullable=False),
    Column("loosens", Boolean, nullable=False),
    Column("quorum", Integer, nullable=False),
    Column("delay_ms", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("created_by", String(128), nullable=False),
    Column("created_by_token_id", String(32), nullable=False),
    Column("state", String(16), nullable=False),
    Column("effective_ms", BigInteger, nullable=True),
    Column("ended_ms", BigInteger, nullable=True),
    Column("ended_by", String(128), nullable=True),
    Column("reason", Text, nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py CHANGES
    Index("ix_changes_tenant_id_state", "tenant_id", "state"),
    Index("ix_changes_state_effective_ms", "state", "effective_ms"),
)

# One vote per person (`voter`: the label as people compare, approvals/proofs.py
# `person`), each carrying the signature of its enrolled admin credential.
change_votes = Table(
    "change_votes",
    metadata,
    Column("change_id", String(32), ForeignKey("changes.id"), nullable=False),
    Column("voter", String(128), nullable=False),
    Column("voter_label", String(128), nullable=False),
    Column("voter_token_id", String(32), nullable=False),
    Column("decision", String(8), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("proof", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py CHANGE_VOTES
    PrimaryKeyConstraint("change_id", "voter"),
)
