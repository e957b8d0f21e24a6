"""Service endpoints: health, networks, the caller's audit log, the API document."""

from __future__ import annotations

import platform
from typing import Any

from litestar import Request, Response, route
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from msgspec import UNSET

from chainkeys import __version__, metrics
from chainkeys.api import schemas as s
from chainkeys.api.auth import require
from chainkeys.api.body import query, query_int
from chainkeys.api.doc import Doc, doc_opt
from chainkeys.api.routes.common import CURSOR, DEPENDENCIES, ERRORS_AUTH, ok
from chainkeys.api.routes.common import limit_param as limit
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest, StorageUnavailable
from chainkeys.service import Services, Tenant

HEALTHY = s.MessageResponse(success=True, message="ok")
ALIVE = s.MessageResponse(success=True, message="alive")
READY = s.MessageResponse(success=True, message="ready")
VERSION = s.VersionResponse(
    success=True,
    message="version",
    data=s.VersionData(version=__version__, python=platform.python_version()),
)
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
    return svc  # None only while starting


async def healthz(request: Request[Any, Any, Any]) -> Response[bytes]:
    await _svc(request).db_ping()
    return ok(HEALTHY)


async def livez() -> Response[bytes]:
    return ok(ALIVE)


async def readyz(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Ready when the database answers and the master key is loaded."""
    svc = _svc(request)
    if svc is None or svc.vault is None:
        raise StorageUnavailable("starting: the store and master key are not open yet")
    await svc.db_ping()
    return ok(READY)


async def version() -> Response[bytes]:
    return ok(VERSION)


async def metrics_text() -> Response[bytes]:
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


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
    live_doc = Doc("live", "Liveness: the process is up (no storage check)", "Service",
                   s.MessageResponse, ("500",), public=True)  # fmt: skip
    ready_doc = Doc("ready", "Readiness: the database answers and the master key is loaded",
                    "Service", s.MessageResponse, ("500", "503"), public=True)  # fmt: skip
    version_doc = Doc("version", "The running version", "Service", s.VersionResponse,
                      ("500",), public=True)  # fmt: skip
    return [
        route("/livez", opt=doc_opt(live_doc), **common)(livez),
        route("/readyz", opt=doc_opt(ready_doc), **common)(readyz),
        route("/version", opt=doc_opt(version_doc), **common)(version),
        route("/metrics", include_in_schema=False, **common)(metrics_text),
        route("/healthz", opt=doc_opt(health_doc), **common)(healthz),
        route("/networks", opt=doc_opt(networks_doc), **common)(get_networks),
        route("/audit", guards=[require("read")], dependencies=DEPENDENCIES,
              opt=doc_opt(audit_doc), **common)(list_audit),
    ]  # fmt: skip
