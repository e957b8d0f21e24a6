"""Who is calling: one authentication per request, a guard per route naming its scope.

A route declares the scope it needs (`api/routes/common.py`: an `Op` per method, in
the route table): one scope, or several any one of which will do, written once there
as `"approve|admin"` (`scope_words` reads it). Before its handler runs, `authorize`
authenticates the `Authorization` header, checks the token's scopes and only then the
rate limit (bad tokens spend no budget), and hands the handler the `Principal`.
"""

from __future__ import annotations

import contextlib
import functools

from starlette.requests import Request

from chainkeys import metrics
from chainkeys.api.ratelimit import enforce
from chainkeys.api.transport import ARRIVED, AUTHORIZATION, TOKEN_ID
from chainkeys.audit.service import audit_event
from chainkeys.bootstrap import Services
from chainkeys.errors import ChainkeysError, Forbidden, RateLimited, Unauthorized
from chainkeys.tokens.service import SCOPES, Principal

# A route any live token may call, whatever its scopes (`GET /tokens/self`).
AUTHENTICATED = "authenticated"
# What a route does with families (routes/common.py `Op.family`), beside a family name:
EVERY = "*every"  # every family at once (a wallet's seed): no family-limited token
BY_REQUEST = "*by-request"  # the family is in the request: the service checks the token
NONE = "*none"  # no family's accounts
# Between the scopes of a route any one of which will do ("approve|admin").
EITHER = "|"


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


@functools.cache  # a handful of declarations, read on every request
def scope_words(scope: str) -> tuple[str, ...]:
    """The token scopes a route's declared scope names, any one of which will do
    (`"approve|admin"`: two). Read once, when the route is declared, so a misspelt or
    empty word is a route that does not build, never a route nobody may call.

    Raises:
        ValueError: a word that is not a token scope, a repeated one, or AUTHENTICATED
            beside another (any live token already includes them).
    """
    if scope == AUTHENTICATED:
        return (AUTHENTICATED,)
    words = tuple(scope.split(EITHER))
    if any(w not in SCOPES for w in words) or len(set(words)) != len(words):
        raise ValueError(
            f"unknown scope {scope!r}: one of {', '.join(SCOPES)}, or several joined by {EITHER!r}"
        )
    return words


def scope_phrase(scope: str) -> str:
    """A declared scope in words, for refusals and the OpenAPI document."""
    return " or ".join(f"`{w}`" for w in scope_words(scope)) + " scope"


def holds(scopes: frozenset[str] | set[str], scope: str) -> bool:
    """Whether a token with `scopes` may call a route declaring `scope`."""
    return scope == AUTHENTICATED or not scopes.isdisjoint(scope_words(scope))


def refusal(principal: Principal, scope: str, family: str, export_on: bool) -> str | None:
    """Why this caller may not do this (None: it may)."""
    missing = []
    if scope == "export" and not export_on:
        missing.append("export is disabled on this server (CHAINKEYS_EXPORT_ENABLED)")
    if not holds(principal.scopes, scope):
        named = " or ".join(f"'{w}'" for w in scope_words(scope))
        missing.append(f"this token lacks the {named} scope")
    if family == EVERY and principal.families is not None:
        allowed = ", ".join(sorted(principal.families))
        missing.append(
            "a wallet spans every family: this needs a token not limited to "
            f"families (this one may use {allowed})"
        )
    elif family not in (EVERY, BY_REQUEST, NONE) and not principal.may_use(family):
        missing.append(f"this token may not use {family} accounts")
    return "; ".join(missing) or None


async def authorize(request: Request, scope: str, family: str) -> Principal:
    """The caller, if its token is live, may do `scope` on `family` and is within its
    rate limit. A refusal is 403 naming what is missing, audited as denied."""
    raw = request.scope.get(AUTHORIZATION)  # read once by the transport (no Headers object)
    header = raw.decode("latin-1") if raw is not None else request.headers.get("authorization")
    token = bearer(header)
    svc = services_of(request)
    principal = await svc.tokens.authenticate(token, request.scope.get(ARRIVED))
    if principal is None:
        raise Unauthorized()
    request.scope[TOKEN_ID] = principal.token_id
    why = refusal(principal, scope, family, svc.settings.export_enabled)
    if why is not None:
        details = {"scope": scope, "method": request.method, "path": request.url.path[:200]}
        named = family if not family.startswith("*") else None
        event = audit_event(principal, "denied", Forbidden.code, family=named, details=details)
        with contextlib.suppress(ChainkeysError):
            await svc.audit.record(event)
        raise Forbidden(why)
    limiter = getattr(request.app.state, "rate_limiter", None)
    if limiter is not None:
        try:
            await enforce(limiter, principal.token_id)
        except RateLimited:
            metrics.RATE_LIMITED.inc()
            raise
    result: Principal = principal
    return result
