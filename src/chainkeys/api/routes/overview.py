"""GET /overview: what a tenant holds and did in the last 24 h, in one answer (the
console's first page, and a script's health check of a tenant)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import schemas as s
from chainkeys.api.auth import NONE, services_of
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.approvals.repository import PENDING
from chainkeys.audit.repository import AuditQuery
from chainkeys.clock import now_ms
from chainkeys.policies.service import DAY_MS
from chainkeys.tokens.service import Principal


async def overview(request: Request, principal: Principal) -> Response:
    svc = services_of(request)
    since = now_ms() - DAY_MS
    signed, refused = await svc.audit.tally(
        AuditQuery(principal.tenant_id, since, principal.families)
    )
    data = s.Overview(
        accounts=await svc.accounts.counts(principal),
        wallets=await svc.wallets.count(principal),
        approvals_pending=await svc.approvals.count(principal, PENDING),
        last_24h=s.Last24h(since_ms=since, signatures=signed, refusals=refused),
    )
    return ok(s.Envelope(success=True, message="overview", data=data))


def overview_routes() -> list[Route]:
    return [
        resource(
            "/overview",
            {
                "GET": Op(
                    overview,
                    "read",
                    NONE,
                    Doc(
                        "overview",
                        "The tenant at a glance: accounts per family, wallets, pending "
                        "approvals, signatures and refusals in the last 24 h",
                        "Service",
                        s.OverviewResponse,
                        ERRORS_AUTH,
                    ),
                )
            },
        ),
    ]
