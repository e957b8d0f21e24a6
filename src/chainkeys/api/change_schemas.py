"""Request and response bodies of the governance change endpoints (msgspec Structs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from msgspec import Meta, Struct

from chainkeys.api.approval_schemas import Assertion, KeySignature
from chainkeys.api.schemas import Envelope

STATES = ("pending", "scheduled", "applied", "rejected", "cancelled")


class PolicyChange(
    Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="policy"
):
    """The whole new policy; it only tightens, or it waits the tenant's delay."""

    document: Annotated[
        dict[str, Any] | None,
        Meta(
            description="the whole new policy (as `chainkeys policy set` reads it); null clears it"
        ),
    ] = None


class FreezeLiftChange(
    Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="freeze.lift"
):
    """End a freeze before its `until`: it loosens, so it waits the tenant's delay."""

    freeze: Annotated[str, Meta(min_length=1, max_length=40, description="the freeze's id (frz_…)")]


class GovernanceChange(
    Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="governance"
):
    """The tenant's quorum and delay: raising them applies at the quorum, lowering
    either waits the current delay."""

    quorum: Annotated[
        int,
        Meta(
            ge=1,
            le=20,
            description="admins who must sign a change; at most the admins with a live key",
        ),
    ]
    delay: Annotated[
        str,
        Meta(
            max_length=16,
            description="how long a loosening change waits: 30s, 15m, 24h, 7d (at most 30d) or 0",
        ),
    ]


Label = Annotated[str, Meta(min_length=1, max_length=128, description="the person")]
PublicKey = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=4096,
        description="a P-256 or Ed25519 public key, PEM or base64 DER SubjectPublicKeyInfo",
    ),
]
Group = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="an approver group (an approve token's, an approver key's)",
    ),
]


class TokenChange(Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="token"):
    """A new token: it waits the tenant's delay. The answer that files it carries the
    token, once, to you alone; it works once the change applies."""

    label: Label
    scopes: Annotated[
        list[Literal["sign", "export", "approve"]],
        Meta(min_length=1, max_length=3, description="what it may do; no scope twice"),
    ]
    families: Annotated[
        list[str] | None,
        Meta(description="the families it may use (null: every family)"),
    ] = None
    expires: (
        Annotated[str, Meta(max_length=16, description="30d, 12h, 90m: from when it applies")]
        | None
    ) = None
    approver_group: Group | None = None  # with the approve scope


class ApproverChange(
    Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="approver"
):
    """Enrol an approver's script key (as `chainkeys approver add-key`)."""

    label: Label
    group: Group
    key: PublicKey


class AdminChange(Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind", tag="admin"):
    """Enrol an admin's key (as `chainkeys admin add-key`): it signs governance changes."""

    label: Label
    key: PublicKey


ChangeBody: Any = Union[  # noqa: UP007 - a union built by kind
    PolicyChange, FreezeLiftChange, GovernanceChange, TokenChange, ApproverChange, AdminChange
]


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
    document: Annotated[
        dict[str, Any] | None,
        Meta(
            description="what it makes true, by kind: policy, the new policy (null: cleared); "
            'freeze.lift, {"freeze"}; governance, {"quorum", "delay_ms", "from"}'
        ),
    ]
    base_version: Annotated[
        int, Meta(description="policy: the version its diff is against (0 for other kinds)")
    ]
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
    token: Annotated[
        str | None,
        Meta(
            description="a token change's new token, in the answer that files it only (to "
            "the admin who files it; it works once the change applies); null elsewhere"
        ),
    ] = None


class ChangeList(Struct, kw_only=True):
    changes: list[Change]


ChangeResponse = Envelope[Change]
ChangeListResponse = Envelope[ChangeList]
