"""Request and response bodies of the approval endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.schemas import Envelope
from chainkeys.chains.registry import FAMILIES

# ---- approvals -------------------------------------------------------------------


class ApprovalVote(Struct, kw_only=True, omit_defaults=True):
    label: Annotated[str, Meta(description="the approver (a person)")]
    decision: Annotated[str, Meta(description="approve or reject")]
    time: str
    reason: str | UnsetType = UNSET


class Approval(Struct, kw_only=True, omit_defaults=True):
    id: str
    state: Annotated[
        str,
        Meta(
            extra_json_schema={
                "enum": [
                    "pending",
                    "approved",
                    "signed",
                    "failed",
                    "rejected",
                    "expired",
                    "cancelled",
                ]
            }
        ),
    ]
    family: str
    account: str
    kind: Annotated[str, Meta(description="the sign endpoint: sign-psbt, sign-transfer, …")]
    summary: Annotated[dict[str, Any], Meta(description="what it signs, decoded")]
    digest: Annotated[str, Meta(description="vote on this: the sha256 of what is signed")]
    required: Annotated[int, Meta(description="approvals needed (the quorum)")]
    group: str
    votes: list[ApprovalVote]
    created_at: str
    expires_at: str
    cancellable: Annotated[
        bool,
        Meta(
            description="the caller may cancel it: its token made the request, which is "
            "pending (POST /approvals/{id}/cancel)"
        ),
    ]
    reason: Annotated[str, Meta(description="why it was rejected or failed")] | UnsetType = UNSET
    result: Annotated[Any, Meta(description="signed: the sign endpoint's own data")] | UnsetType = (
        UNSET
    )


ApprovalResponse = Envelope[Approval]


# the OpenAPI document's example of one: the approval example a sign kind declares
_FAMILY, _KIND = next((name, k) for name, fam in FAMILIES.items() for k in fam.signers
                      if k.approval_example is not None)  # fmt: skip
_EXAMPLE: dict[str, Any] = _KIND.approval_example or {}
APPROVAL_EXAMPLE: dict[str, Any] = {
    "success": True,
    "message": "approval required: nothing is signed yet",
    "data": {
        "id": "apr_5c1f0e9a7b3d2c4e6f801a2b", "state": "pending", "family": _FAMILY,
        "account": _EXAMPLE["account"], "kind": _KIND.path, "summary": _EXAMPLE["summary"],
        "digest": _EXAMPLE["summary"]["digest"],
        "required": 2, "group": "treasury",
        "votes": [{"label": "bob", "decision": "approve", "time": "2026-11-25T15:02:11.204Z"}],
        "created_at": "2026-11-25T15:00:00.000Z", "expires_at": "2026-11-26T15:00:00.000Z",
        "cancellable": True,
    },
}  # fmt: skip


class ApprovalList(Struct, kw_only=True, omit_defaults=True):
    approvals: list[Approval]
    next_cursor: str | UnsetType = UNSET


ApprovalListResponse = Envelope[ApprovalList]


class ApproveBody(Struct, kw_only=True, forbid_unknown_fields=True):
    digest: Annotated[str, Meta(max_length=64, description="the digest you looked at")]


class RejectBody(Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, Meta(max_length=500)] | None = None
