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
    signed: (
        Annotated[
            str,
            Meta(
                description="what signed it: passkey (a WebAuthn assertion) or key (a script "
                "key's signature); absent: the approve token alone",
                extra_json_schema={"enum": ["passkey", "key"]},
            ),
        ]
        | UnsetType
    ) = UNSET


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
    summary: Annotated[
        dict[str, Any] | None,
        Meta(
            description="what it signs, decoded from the stored request each time it is "
            "shown (never a stored copy); null when it cannot be (summary_error says why)"
        ),
    ]
    digest: Annotated[str, Meta(description="vote on this: the sha256 of what is signed")]
    required: Annotated[int, Meta(description="approvals needed (the quorum)")]
    group: str
    votes: list[ApprovalVote]
    passkey: Annotated[
        bool,
        Meta(
            description="votes count only signed by the approver's passkey or key "
            "(GET /approvals/{id}/challenge)"
        ),
    ]
    created_at: str
    expires_at: str
    cancellable: Annotated[
        bool,
        Meta(
            description="the caller may cancel it: its token made the request, which is "
            "pending (POST /approvals/{id}/cancel)"
        ),
    ]
    summary_error: (
        Annotated[str, Meta(description="why there is no summary: nothing of it is signed")]
        | UnsetType
    ) = UNSET
    request: Annotated[
        Any,
        Meta(
            description="the sign endpoint's body as the server read it (every field "
            "sent, with the defaults it filled): what offline verifiers decode"
        ),
    ] = None
    signer: (
        Annotated[
            dict[str, Any],
            Meta(
                description="the signing account's public data an offline verifier needs: "
                "address, public_key, network, address_type (Litecoin), multisig"
            ),
        ]
        | UnsetType
    ) = UNSET
    reason: Annotated[str, Meta(description="why it was rejected or failed")] | UnsetType = UNSET
    result: Annotated[Any, Meta(description="signed: the sign endpoint's own data")] | UnsetType = (
        UNSET
    )


ApprovalResponse = Envelope[Approval]


# the OpenAPI document's example of one: the approval example a sign kind declares
_FAMILY, _KIND = next(
    (name, k)
    for name, fam in FAMILIES.items()
    for k in fam.signers
    if k.approval_example is not None
)
_EXAMPLE: dict[str, Any] = _KIND.approval_example or {}
APPROVAL_EXAMPLE: dict[str, Any] = {
    "success": True,
    "message": "approval required: nothing is signed yet",
    "data": {
        "id": "apr_5c1f0e9a7b3d2c4e6f801a2b",
        "state": "pending",
        "family": _FAMILY,
        "account": _EXAMPLE["account"],
        "kind": _KIND.path,
        "summary": {"account": _EXAMPLE["account"], **_EXAMPLE["summary"]},
        "digest": _EXAMPLE["summary"]["digest"],
        "required": 2,
        "group": "treasury",
        "votes": [
            {
                "label": "bob",
                "decision": "approve",
                "time": "2026-11-25T15:02:11.204Z",
                "signed": "passkey",
            }
        ],
        "passkey": True,
        "created_at": "2026-11-25T15:00:00.000Z",
        "expires_at": "2026-11-26T15:00:00.000Z",
        "cancellable": True,
    },
}


class ApprovalList(Struct, kw_only=True, omit_defaults=True):
    approvals: list[Approval]
    next_cursor: str | UnsetType = UNSET


ApprovalListResponse = Envelope[ApprovalList]


class KeySignature(Struct, kw_only=True, forbid_unknown_fields=True):
    """A script key's vote (`chainkeys approver add-key`)."""

    credential: Annotated[str, Meta(max_length=40, description="the key's id (apc_…)")]
    value: Annotated[
        str,
        Meta(
            max_length=200,
            description="base64url signature of the challenge's 32 bytes: "
            "Ed25519, or ECDSA P-256 with SHA-256 (DER or r||s)",
        ),
    ]


Assertion = Annotated[
    dict[str, Any],
    Meta(
        description="the WebAuthn authentication response (PublicKeyCredential.toJSON()) "
        "for GET /approvals/{id}/challenge's options"
    ),
]


class ApproveBody(Struct, kw_only=True, forbid_unknown_fields=True):
    digest: Annotated[str, Meta(max_length=64, description="the digest you looked at")]
    assertion: Assertion | None = None
    signature: KeySignature | None = None


class RejectBody(Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, Meta(max_length=500)] | None = None
    assertion: Assertion | None = None
    signature: KeySignature | None = None


class RequestOptions(Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """WebAuthn request options in their JSON form (py_webauthn `options_to_json`; a
    browser reads them with PublicKeyCredential.parseRequestOptionsFromJSON)."""

    challenge: Annotated[
        str,
        Meta(
            description='base64url SHA-256("chainkeys approval v2" || id || digest || '
            "hex SHA-256(canonical summary JSON) || decision): canonical JSON has its keys "
            "sorted, no whitespace, UTF-8; the digest and the summary's SHA-256 are "
            "lowercase hex"
        ),
    ]
    summary: Annotated[
        dict[str, Any] | None,
        Meta(description="the summary the challenge covers (derived from the request now)"),
    ] = None
    timeout: int | UnsetType = UNSET
    rp_id: str | UnsetType = UNSET
    allow_credentials: list[dict[str, Any]] | UnsetType = UNSET
    user_verification: str | UnsetType = UNSET
    hints: list[str] | UnsetType = UNSET


class CreationOptions(Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """WebAuthn creation options in their JSON form (PublicKeyCredential.
    parseCreationOptionsFromJSON)."""

    rp: dict[str, Any]
    user: dict[str, Any]
    challenge: str
    pub_key_cred_params: list[dict[str, Any]]
    timeout: int | UnsetType = UNSET
    exclude_credentials: list[dict[str, Any]] | UnsetType = UNSET
    authenticator_selection: dict[str, Any] | UnsetType = UNSET
    attestation: str | UnsetType = UNSET
    hints: list[str] | UnsetType = UNSET


OptionsResponse = Envelope[RequestOptions]
CreationOptionsResponse = Envelope[CreationOptions]


# ---- approvers' credentials ------------------------------------------------------------


class EnrolCode(Struct, kw_only=True, forbid_unknown_fields=True):
    code: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=100,
            description="the one-time code of chainkeys approver invite",
        ),
    ]


class CredentialBody(Struct, kw_only=True, forbid_unknown_fields=True):
    code: Annotated[str, Meta(min_length=1, max_length=100)]
    credential: Annotated[
        dict[str, Any],
        Meta(description="the WebAuthn registration response (PublicKeyCredential.toJSON())"),
    ]


class CredentialCreated(Struct, kw_only=True):
    id: str
    created_at: str


class Credential(Struct, kw_only=True, omit_defaults=True):
    id: str
    kind: Annotated[str, Meta(extra_json_schema={"enum": ["webauthn", "p256", "ed25519"]})]
    label: str
    group: str
    created_at: str
    last_used_at: str | UnsetType = UNSET
    revoked_at: str | UnsetType = UNSET


class CredentialList(Struct, kw_only=True):
    credentials: list[Credential]


CredentialCreatedResponse = Envelope[CredentialCreated]
CredentialResponse = Envelope[Credential]
CredentialListResponse = Envelope[CredentialList]
