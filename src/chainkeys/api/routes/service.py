"""Service endpoints: health, version, metrics, networks, the caller's audit log and
its own token."""

from __future__ import annotations

import hmac
import platform
import time

import msgspec
from msgspec import UNSET
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from chainkeys import __version__, metrics
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api.auth import AUTHENTICATED, BY_REQUEST, NONE, services_of
from chainkeys.api.doc import Doc
from chainkeys.api.errors import NO_SUCH_ENDPOINT
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.audit.export import EXPORTS
from chainkeys.audit.repository import AuditEvent, AuditQuery
from chainkeys.chains.registry import FAMILIES
from chainkeys.clock import now_ms
from chainkeys.errors import NotFound, StorageUnavailable, Unauthorized
from chainkeys.tokens.service import Principal
from chainkeys.version import commit

HEALTHY = s.MessageResponse(success=True, message="ok")
ALIVE = s.MessageResponse(success=True, message="alive")
READY = s.MessageResponse(success=True, message="ready")
VERSION = s.Envelope(
    success=True,
    message="version",
    data=s.VersionData(version=__version__, python=platform.python_version(), commit=commit()),
)


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
    return s.Envelope(
        success=True, message="networks listed", data=s.NetworksData(families=families)
    )


async def healthz(request: Request) -> Response:
    await services_of(request).db_ping()
    return ok(HEALTHY)


async def livez(request: Request) -> Response:
    return ok(ALIVE)


async def readyz(request: Request) -> Response:
    """Ready when the database answers and the barrier may seal (a process whose key was
    retired under it is taken out of a load balancer's rotation, and says why)."""
    svc = getattr(request.app.state, "services", None)
    if svc is None or svc.barrier is None:
        raise StorageUnavailable("starting: the store and master key are not open yet")
    await svc.db_ping()
    svc.barrier.check_may_seal()
    return ok(READY)


async def version(request: Request) -> Response:
    return ok(VERSION)


async def metrics_text(request: Request) -> Response:
    """Prometheus text; with CHAINKEYS_METRICS_TOKEN only for that bearer token, with
    CHAINKEYS_METRICS_PORT not here at all (its own listener serves it)."""
    settings = services_of(request).settings
    if settings.metrics_port is not None:
        raise NotFound(NO_SUCH_ENDPOINT)
    if settings.metrics_token is not None:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        want = settings.metrics_token.get_secret_value()
        if not hmac.compare_digest(given.encode(), want.encode()):
            raise Unauthorized("send the metrics token (CHAINKEYS_METRICS_TOKEN) as a bearer token")
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


async def token_self(request: Request, principal: Principal) -> Response:
    row = await services_of(request).tokens.describe(principal)
    data = s.TokenSelf(
        id=row.id,
        tenant=row.tenant,
        label=row.label,
        scopes=sorted(principal.scopes),
        families=sorted(principal.families) if principal.families is not None else None,
        group=row.group,
        created_ms=row.created_ms,
        expires_ms=row.expires_ms,
    )
    return ok(s.Envelope(success=True, message="this token", data=data))


def audit_query(request: Request, principal: Principal) -> AuditQuery:
    """The filters of GET /audit and /audit/export (a 400 naming the one that is wrong;
    an empty filter is no filter)."""
    action, family, account, outcome = (p.read(request) or None for p in params.AUDIT_FILTERS)
    return AuditQuery(
        principal.tenant_id,
        params.SINCE.read(request) or 0,
        principal.families,
        action=action,
        family=family,
        account=account,
        outcome=outcome,
        until_ms=params.UNTIL.read(request),
    )


def audit_item(e: AuditEvent) -> s.AuditItem:
    return s.AuditItem(
        id=e.id or 0,
        time_ms=e.created_ms,
        action=e.action,
        outcome=e.outcome,
        family=e.family,
        account_name=e.account_name,
        request_id=e.request_id,
        client_request_id=e.client_request_id,
        token_id=e.actor_token_id,
        details=msgspec.json.decode(e.details) if e.details else None,
    )


async def list_audit(request: Request, principal: Principal) -> Response:
    """The caller's own tenant's events, newest first, paginated and filtered. A token
    limited to some families sees only those families' events."""
    filters = audit_query(request, principal)
    maximum = services_of(request).settings.list_max_limit
    events, cursor = await services_of(request).audit.page(
        filters, params.limit(maximum).read(request), params.CURSOR.read(request)
    )
    items = [audit_item(e) for e in events]
    data = s.AuditData(events=items, next_cursor=cursor or UNSET)
    return ok(s.Envelope(success=True, message="audit events listed", data=data))


async def export_audit(request: Request, principal: Principal) -> Response:
    """The filtered view as a download (CSV or JSON Lines), newest first, streamed."""
    fmt = params.EXPORT_FORMAT.read(request) or "csv"  # given empty is not absent: refused
    filters = audit_query(request, principal)
    batches = services_of(request).audit.export(filters)
    media_type, render = EXPORTS[fmt]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms() / 1000))
    headers = {
        "Content-Disposition": f'attachment; filename="chainkeys-audit-{stamp}.{fmt}"',
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
    return StreamingResponse(render(batches), media_type=media_type, headers=headers)


def service_routes(list_max_limit: int) -> list[Route]:
    networks = ok(networks_body()).body

    async def get_networks(request: Request) -> Response:
        return Response(networks, media_type="application/json")

    def public(operation: str, summary: str, response: type, errors: tuple[str, ...]) -> Doc:
        return Doc(operation, summary, "Service", response, errors)

    audit_doc = Doc(
        "listAudit",
        "The caller's tenant's audit events, newest first (creates, imports, "
        "deletes, signatures and refusals with their reason, tokens, policies)",
        "Service",
        s.AuditResponse,
        ("400", *ERRORS_AUTH),
        parameters=(
            params.SINCE,
            params.UNTIL,
            *params.AUDIT_FILTERS,
            params.limit(list_max_limit),
            params.CURSOR,
        ),
    )
    export_doc = Doc(
        "exportAudit",
        "The filtered audit view as a download (CSV or JSON Lines), newest "
        "first, at most 100,000 events (narrow the time range for more)",
        "Service",
        s.AuditResponse,
        ("400", *ERRORS_AUTH),
        parameters=(params.EXPORT_FORMAT, params.SINCE, params.UNTIL, *params.AUDIT_FILTERS),
        media={
            "text/csv": {"schema": {"type": "string"}},
            "application/jsonl": {"schema": {"type": "string"}},
        },
    )
    return [
        resource(
            "/livez",
            {
                "GET": Op(
                    livez,
                    None,
                    NONE,
                    public(
                        "live",
                        "Liveness: the process is up (no storage check)",
                        s.MessageResponse,
                        ("500",),
                    ),
                )
            },
        ),
        resource(
            "/readyz",
            {
                "GET": Op(
                    readyz,
                    None,
                    NONE,
                    public(
                        "ready",
                        "Readiness: the database answers and the master key is loaded",
                        s.MessageResponse,
                        ("500", "503"),
                    ),
                )
            },
        ),
        resource(
            "/healthz",
            {
                "GET": Op(
                    healthz,
                    None,
                    NONE,
                    public(
                        "health",
                        "Liveness and storage check (as /readyz)",
                        s.MessageResponse,
                        ("500", "503"),
                    ),
                )
            },
        ),
        resource(
            "/version",
            {
                "GET": Op(
                    version,
                    None,
                    NONE,
                    public("version", "The running version", s.VersionResponse, ("500",)),
                )
            },
        ),
        resource("/metrics", {"GET": Op(metrics_text, None, NONE)}),
        resource(
            "/networks",
            {
                "GET": Op(
                    get_networks,
                    None,
                    NONE,
                    public(
                        "listNetworks",
                        "Families, their networks and defaults",
                        s.NetworksResponse,
                        ("500",),
                    ),
                )
            },
        ),
        resource("/audit", {"GET": Op(list_audit, "read", BY_REQUEST, audit_doc)}),
        resource("/audit/export", {"GET": Op(export_audit, "read", BY_REQUEST, export_doc)}),
        resource(
            "/tokens/self",
            {
                "GET": Op(
                    token_self,
                    AUTHENTICATED,
                    NONE,
                    Doc(
                        "tokenSelf",
                        "The caller's own token: tenant, label, scopes, families, expiry "
                        "(never the token)",
                        "Service",
                        s.TokenSelfResponse,
                        ERRORS_AUTH,
                    ),
                )
            },
        ),
    ]
