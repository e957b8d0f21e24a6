"""Request and response bodies of the freeze endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.schemas import Envelope


class FreezeBody(Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=500,
            description="why: shown in every refusal it causes, the webhook and the audit log",
        ),
    ]
    account: (
        Annotated[
            str,
            Meta(
                min_length=3,
                max_length=120,
                description="family/name of the one account to freeze; left out: the whole "
                "tenant (a token not limited to families)",
            ),
        ]
        | None
    ) = None
    until: (
        Annotated[
            datetime,
            Meta(tz=True, description="RFC 3339, in the future; left out: until lifted"),
        ]
        | None
    ) = None


class Freeze(Struct, kw_only=True, omit_defaults=True):
    id: str
    account: Annotated[str | None, Meta(description="family/name; null: the whole tenant")]
    until: Annotated[str | None, Meta(description="when it ends (UTC); null: when lifted")]
    reason: str
    created_at: str
    created_by: Annotated[str, Meta(description="the person (the approve token's label)")]
    lifted_at: str | UnsetType = UNSET


class FreezeList(Struct, kw_only=True):
    freezes: list[Freeze]


FreezeResponse = Envelope[Freeze]
FreezeListResponse = Envelope[FreezeList]

FREEZE_EXAMPLE = {
    "id": "frz_4b7c1d2e3f405162738495a6",
    "account": None,
    "until": "2026-11-26T15:00:00.000Z",
    "reason": "the payout host may be compromised",
    "created_at": "2026-11-25T15:00:00.000Z",
    "created_by": "alice",
}
