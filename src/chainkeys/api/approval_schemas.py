"""Request and response bodies of the approval endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.schemas import Envelope

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
    reason: Annotated[str, Meta(description="why it was rejected or failed")] | UnsetType = UNSET
    result: Annotated[Any, Meta(description="signed: the sign endpoint's own data")] | UnsetType = (
        UNSET
    )


ApprovalResponse = Envelope[Approval]


APPROVAL_EXAMPLE: dict[str, Any] = {  # the OpenAPI document's example of one
    "success": True,
    "message": "approval required: nothing is signed yet",
    "data": {
        "id": "apr_5c1f0e9a7b3d2c4e6f801a2b", "state": "pending", "family": "cosmos",
        "account": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c", "kind": "sign-transfer",
        "summary": {
            "family": "cosmos", "network": "cosmoshub", "kind": "sign-transfer",
            "chain_id": "cosmoshub-4", "memo": "payout 7", "raw": False,
            "digest": "1fb1a5dee5fcb6b2c2f6a38efea23ad623c57d50c5773b63434b8958b36780a1",
            "items": [{"type": "/cosmos.bank.v1beta1.MsgSend",
                       "recipient": "cosmos1q6hag67dl53wl99vzg42z8eyzfz2xlkvsrxukv",
                       "amounts": [{"denom": "uatom", "amount": "1500000"}]}],
            "fee": [{"denom": "uatom", "amount": "5000"}],
        },
        "digest": "1fb1a5dee5fcb6b2c2f6a38efea23ad623c57d50c5773b63434b8958b36780a1",
        "required": 2, "group": "treasury",
        "votes": [{"label": "bob", "decision": "approve", "time": "2026-11-25T15:02:11.204Z"}],
        "created_at": "2026-11-25T15:00:00.000Z", "expires_at": "2026-11-26T15:00:00.000Z",
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
