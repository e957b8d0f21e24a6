"""Request and response bodies of the governance change endpoints (msgspec Structs)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from chainkeys.api.approval_schemas import Assertion, KeySignature
from chainkeys.api.schemas import Envelope

STATES = ("pending", "scheduled", "applied", "rejected", "cancelled")


class ChangeBody(Struct, kw_only=True, forbid_unknown_fields=True):
    kind: Annotated[
        str,
        Meta(
            max_length=32,
            description="what it changes: policy (token, approver, admin, governance and "
            "freeze.lift are not built yet)",
        ),
    ]
    document: Annotated[
        dict[str, Any] | None,
        Meta(
            description="kind policy: the whole new policy (as `chainkeys policy set` reads "
            "it); null clears it"
        ),
    ] = None


class VoteBody(Struct, kw_only=True, forbid_unknown_fields=True):
    digest: Annotated[str, Meta(max_length=64, description="the change's digest you looked at")]
    signature: KeySignature | None = None
    assertion: Assertion | None = None


class ChangeVote(Struct, kw_only=True):
    label: Annotated[str, Meta(description="the admin (a person)")]
    decision: str
    at: str


class Change(Struct, kw_only=True):
    id: str
    kind: str
    state: Annotated[str, Meta(extra_json_schema={"enum": list(STATES)})]
    digest: Annotated[
        str,
        Meta(
            description='vote on this: SHA-256("chainkeys change v1" || id || digest || '
            "decision) is what your key signs"
        ),
    ]
    diff: Annotated[list[str], Meta(description="what it changes, in words")]
    loosens: Annotated[
        bool,
        Meta(
            description="false only when it only tightens: then it applies at the quorum; "
            "otherwise it waits the tenant's delay"
        ),
    ]
    document: dict[str, Any] | None
    base_version: Annotated[int, Meta(description="the policy version its diff is against")]
    quorum: int
    delay_seconds: int
    approvals: int
    votes: list[ChangeVote]
    created_at: str
    created_by: str
    effective_at: Annotated[
        str | None, Meta(description="scheduled: when it applies; applied: when it did")
    ]
    countdown_seconds: Annotated[int | None, Meta(description="scheduled: seconds left")]
    ended_at: str | None
    ended_by: str | None
    reason: str | None


class ChangeList(Struct, kw_only=True):
    changes: list[Change]


ChangeResponse = Envelope[Change]
ChangeListResponse = Envelope[ChangeList]
