"""The registry of authenticated tables: every row the service trusts to authorize.

Next to `tables.py` and `sealed.py` on purpose. A database writer who does not hold
the master key could otherwise mint or widen a token, loosen a policy or forge a
vote; so each row of these tables carries a MAC (`mac`) over the columns listed
here, made and checked under the barrier's integrity key (`vault/integrity.py`),
and a row whose MAC fails is never used. `tests/store/test_integrity.py` fails while
a table with a `mac` column is missing here, or a column is neither covered nor
named as left out (with why).

The store knows no key: it says which columns, in which order; the vault MACs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table

from chainkeys.store.tables import (
    approval_votes,
    approvals,
    audit_heads,
    policy_versions,
    tokens,
)


@dataclass(frozen=True, slots=True)
class Authenticated:
    """One authenticated table: the record name its MACs are bound to, the columns they
    cover (in this order), and the columns left out, each with the reason."""

    table: Table
    record: str
    covered: tuple[str, ...]
    left_out: Mapping[str, str]

    def fields(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The covered values of `row` (a mapping by column name)."""
        return tuple(row[c] for c in self.covered)


TOKENS = Authenticated(
    tokens, "token",
    ("id", "tenant_id", "label", "token_hash", "created_ms", "revoked_ms", "scopes",
     "expires_ms", "families", "approver_group"),
    {},
)  # fmt: skip
POLICY_VERSIONS = Authenticated(
    policy_versions, "policy", ("tenant_id", "version", "document", "created_ms"), {}
)
APPROVALS = Authenticated(
    approvals, "approval",
    ("id", "tenant_id", "requester_token_id", "requester_label", "family", "account_name",
     "kind", "request", "digest", "rule_index", "approver_group", "quorum", "created_ms",
     "expires_ms"),
    {"seq": "a local order, not a fact", "summary": "derived from request when it is signed",
     "pending_key": "a uniqueness guard while pending", "state": "recomputed from the votes",
     "reason": "why it ended: for people", "decided_ms": "when it ended: for people",
     "result": "the requester's copy of a signature the chain verifies"},
)  # fmt: skip
APPROVAL_VOTES = Authenticated(
    approval_votes, "vote",
    ("approval_id", "voter_label", "voter_token_id", "decision", "digest", "reason",
     "created_ms"),
    {},
)  # fmt: skip

# The audit rows themselves are chained, not MACed one by one (audit/chain.py); what a
# deleted tail would change is each tenant's head.
AUDIT_HEADS = Authenticated(audit_heads, "audit head", ("tenant_key", "last_id", "rows", "chain"), {})

REGISTRY: tuple[Authenticated, ...] = (
    TOKENS, POLICY_VERSIONS, APPROVALS, APPROVAL_VOTES, AUDIT_HEADS,
)  # fmt: skip
