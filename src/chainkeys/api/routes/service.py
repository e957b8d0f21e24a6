"""Service endpoints: health, networks, the caller's audit log, the API document."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, route
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from msgspec import UNSET

from chainkeys.api import schemas as s
from chainkeys.api.auth import require
from chainkeys.api.body import query, query_int
from chainkeys.api.doc import Doc, doc_opt
from chainkeys.api.routes.common import CURSOR, DEPENDENCIES, ERRORS_AUTH, ok
from chainkeys.api.routes.common import limit_param as limit
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest
from chainkeys.service import Services, Tenant

HEALTHY = s.MessageResponse(success=True, message="ok")
SINCE = {"name": "since", "in": "query", "required": False,
         "schema": {"type": "integer", "minimum": 0}}  # fmt: skip


def networks_body() -> s.NetworksResponse:
    families = {
        name: s.FamilyNetworks(
            default=fam.default_network,
            networks=[
                s.NetworkInfo(
                    name=n.name,
                    testnet=n.testnet,
                    coin_type=n.coin_type,
                    chain_id=n.chain_id,
                    bech32_prefix=n.hrp,
                )
                for n in fam.networks.values()
            ],
        )
        for name, fam in FAMILIES.items()
    }
    return s.NetworksResponse(
        success=True, message="networks listed", data=s.NetworksData(families=families)
    )


def _svc(request: Request[Any, Any, Any]) -> Services:
    svc: Services = request.app.state.services
    return svc


async def healthz(request: Request[Any, Any, Any]) -> Response[bytes]:
    await _svc(request).db_ping()
    return ok(HEALTHY)


async def list_audit(
    request: Request[Any, Any, Any], principal: NamedDependency[Tenant]
) -> Response[bytes]:
    """The caller's own tenant's events, oldest first, paginated."""
    q = query(request)
    try:
        since_ms = query_int(q, "since", digits=15) or 0
    except BadRequest:
        raise BadRequest(
            "since is a time in milliseconds since the epoch", code="invalid_since"
        ) from None
    events, cursor = await _svc(request).audit.page(
        principal.id, since_ms, query_int(q, "limit"), q.get("cursor")
    )
    items = [
        s.AuditItem(
            id=e.id or 0,
            time_ms=e.created_ms,
            action=e.action,
            outcome=e.outcome,
            family=e.family,
            account_name=e.account_name,
            request_id=e.request_id,
        )
        for e in events
    ]
    data = s.AuditData(events=items, next_cursor=cursor or UNSET)
    return ok(s.AuditResponse(success=True, message="audit events listed", data=data))


def service_routes(list_max_limit: int) -> list[HTTPRouteHandler]:
    networks = ok(networks_body()).content

    async def get_networks() -> Response[bytes]:
        return Response(networks, media_type="application/json")

    common: dict[str, Any] = {"http_method": ["GET", "HEAD"]}
    health_doc = Doc("health", "Liveness and storage check", "Service", s.MessageResponse,
                     ("500", "503"), public=True)  # fmt: skip
    networks_doc = Doc("listNetworks", "Families, their networks and defaults", "Service",
                       s.NetworksResponse, ("500",), public=True)  # fmt: skip
    audit_doc = Doc(
        "listAudit", "The caller's tenant's audit events (creates, imports, deletes, tokens)",
        "Service", s.AuditResponse, ("400", *ERRORS_AUTH),
        parameters=(SINCE, limit(list_max_limit), CURSOR),
    )  # fmt: skip
    return [
        route("/healthz", opt=doc_opt(health_doc), **common)(healthz),
        route("/networks", opt=doc_opt(networks_doc), **common)(get_networks),
        route("/audit", guards=[require("read")], dependencies=DEPENDENCIES,
              opt=doc_opt(audit_doc), **common)(list_audit),
    ]  # fmt: skip
