"""Who is calling: one authentication per request, a guard per route naming its scope.

`require(scope)` is the guard a route declares; it authenticates the
`Authorization` header once (the principal is kept in the ASGI scope), checks
the token's scopes and, after that, the rate limit (bad tokens spend no
budget). Handlers take the `principal` dependency, which reads what the guard
found.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from chainkeys import metrics
from chainkeys.api.ratelimit import enforce
from chainkeys.api.transport import ARRIVED, TOKEN_ID
from chainkeys.errors import Forbidden, RateLimited, Unauthorized
from chainkeys.service import Services, Tenant

PRINCIPAL = "chainkeys.principal"
SCOPES = ("read", "create", "delete", "sign", "export")
Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]


def services_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Services:
    svc: Services = connection.app.state.services
    return svc


def bearer(header: str | None) -> str:
    """The token of `Authorization: <token>` or `Authorization: Bearer <token>`."""
    if not header:
        raise Unauthorized("send your token in the Authorization header")
    scheme, _, rest = header.strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else header.strip()
    if not token or len(token) > 256:
        raise Unauthorized()
    return token


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Tenant:
    found: Tenant | None = connection.scope.get(PRINCIPAL)  # type: ignore[assignment]
    if found is not None:
        return found
    token = bearer(connection.headers.get("authorization"))
    svc = services_of(connection)
    principal = await svc.tokens.authenticate(token, connection.scope.get(ARRIVED))  # type: ignore[arg-type]
    if principal is None:
        raise Unauthorized()
    connection.scope[PRINCIPAL] = principal  # type: ignore[literal-required]
    connection.scope[TOKEN_ID] = principal.token_id  # type: ignore[literal-required]
    return principal


def require(scope: str) -> Guard:
    """The guard of a route that needs `scope` (one of SCOPES)."""
    assert scope in SCOPES, scope

    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], _handler: BaseRouteHandler
    ) -> None:
        principal = await authenticate(connection)
        scopes = getattr(principal, "scopes", None)
        if scopes is not None and scope not in scopes:
            raise Forbidden(f"this token lacks the {scope!r} scope", code="forbidden")
        limiter = connection.app.state.get("rate_limiter")
        if limiter is not None:
            try:
                await enforce(limiter, principal.token_id)
            except RateLimited:
                metrics.RATE_LIMITED.inc()
                raise

    guard.scope = scope  # type: ignore[attr-defined]  # read by the OpenAPI builder
    return guard


async def principal(request: Request[Any, Any, Any]) -> Tenant:
    """The dependency handlers take: the caller the route's guard authenticated."""
    return await authenticate(request)
