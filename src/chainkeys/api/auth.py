"""Who is calling: one authentication per request, a guard per route naming its scope.

A route declares the scope it needs (`api/routes/common.py` `endpoint(scope=…)`);
before its handler runs, `authorize` authenticates the `Authorization` header,
checks the token's scopes and only then the rate limit (bad tokens spend no
budget), and hands the handler the `Principal`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from chainkeys import metrics
from chainkeys.api.ratelimit import enforce
from chainkeys.api.transport import ARRIVED, TOKEN_ID
from chainkeys.errors import Forbidden, RateLimited, Unauthorized
from chainkeys.service import Services, Tenant

SCOPES = ("read", "create", "delete", "sign", "export")


def services_of(request: Request) -> Services:
    svc: Services = request.app.state.services
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


async def authorize(request: Request, scope: str) -> Tenant:
    """The caller, if its token is live, carries `scope` and is within its rate limit."""
    token = bearer(request.headers.get("authorization"))
    svc = services_of(request)
    principal: Any = await svc.tokens.authenticate(token, request.scope.get(ARRIVED))
    if principal is None:
        raise Unauthorized()
    request.scope[TOKEN_ID] = principal.token_id
    scopes = getattr(principal, "scopes", None)
    if scopes is not None and scope not in scopes:
        raise Forbidden(f"this token lacks the {scope!r} scope", code="forbidden")
    limiter = getattr(request.app.state, "rate_limiter", None)
    if limiter is not None:
        try:
            await enforce(limiter, principal.token_id)
        except RateLimited:
            metrics.RATE_LIMITED.inc()
            raise
    result: Tenant = principal
    return result
