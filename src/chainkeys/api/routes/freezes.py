"""Freeze routes: an approver or an admin stops the tenant, or one account, at once;
anyone of the tenant sees what holds. Only the operator lifts one early (`chainkeys freeze lift`).
Thin: decode, call the service, shape the envelope."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import freeze_schemas as fs
from chainkeys.api import schemas as s
from chainkeys.api.auth import AUTHENTICATED, BY_REQUEST, services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.freezes.repository import FreezeRow
from chainkeys.freezes.service import record_of
from chainkeys.tokens.service import Principal

TAG = "Freezes"


def freeze(row: FreezeRow) -> fs.Freeze:
    return msgspec.convert(record_of(row), fs.Freeze)


async def create_freeze(request: Request, principal: Principal) -> Response:
    body = await required_body(request, fs.FreezeBody)
    row = await services_of(request).freezes.create(
        principal, body.account, body.until, body.reason
    )
    response = ok(s.Envelope(success=True, message="frozen", data=freeze(row)))
    response.status_code = 201
    return response


async def list_freezes(request: Request, principal: Principal) -> Response:
    rows = await services_of(request).freezes.active(principal)
    data = fs.FreezeList(freezes=[freeze(r) for r in rows])
    return ok(s.Envelope(success=True, message=f"{len(rows)} freezes hold", data=data))


def freeze_routes() -> list[Route]:
    docs = {
        "create": Doc(
            "createFreeze",
            "Freeze the tenant, or one account, now",
            TAG,
            fs.FreezeResponse,
            ("400", "403", "404", "409", *ERRORS_AUTH),
            request=fs.FreezeBody,
            status="201",
            examples={
                "tenant": {"reason": "the payout host may be compromised"},
                "account": {
                    "account": "cosmos/cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
                    "until": "2026-11-26T15:00:00Z",
                    "reason": "unexpected withdrawals",
                },
            },
            response_examples={
                "frozen": {"success": True, "message": "frozen", "data": fs.FREEZE_EXAMPLE}
            },
            description="While it holds, every signature (each kind, and an approved "
            "request's at its quorum), key or wallet export and approving vote in its "
            "scope answers 423 `frozen`, naming it and its reason; a wallet's export (or a "
            "derived key's) is refused while any freeze holds in the tenant. It ends at "
            "`until`, or when an operator lifts it (`chainkeys freeze lift`). Audited; "
            "announced by the webhook (`freeze.created`). A token limited to families "
            "freezes only their accounts. Beyond the schema: `account` must be an "
            "account of the tenant (`invalid_account`, `invalid_account_name`, or 404), "
            "`until` in the future (`invalid_until`), and `reason` not only spaces and "
            "free of control, format and line-break characters (`invalid_reason`).",
        ),
        "list": Doc(
            "listFreezes",
            "The freezes holding now",
            TAG,
            fs.FreezeListResponse,
            ERRORS_AUTH,
            description="Of the caller's tenant: the tenant's own and those of accounts "
            "of the families its token may use.",
        ),
    }
    return [
        resource(
            "/freezes",
            {
                # the people of the tenant: its approvers and its admins (governance)
                "POST": Op(create_freeze, "approve|admin", BY_REQUEST, docs["create"]),
                "GET": Op(list_freezes, AUTHENTICATED, BY_REQUEST, docs["list"]),
            },
        )
    ]
