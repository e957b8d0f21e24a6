"""How a route is declared: a path, and per method a handler, its scope (guard), its Doc.

The route keeps each method's scope and Doc for the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from chainkeys.api import params
from chainkeys.api.auth import BY_REQUEST, EVERY, NONE, authorize, scope_words, services_of
from chainkeys.api.body import TEXT_REFUSED, storable
from chainkeys.api.doc import Doc
from chainkeys.api.errors import PayloadTooLarge, error_response, internal_error
from chainkeys.api.transport import BODY
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest, ChainkeysError

FAMILY_RULES = (EVERY, BY_REQUEST, NONE)

_encoder = msgspec.json.Encoder()
JSON = "application/json"
ERRORS_AUTH = ("401", "403", "429", "500", "503")
READS = ("GET", "HEAD")  # they write no audit event (the rest do), so devices never stop them
Guarded = Callable[[Request, Any], Awaitable[Response]]
Public = Callable[[Request], Awaitable[Response]]


def ok(body: Any, headers: dict[str, str] | None = None) -> Response:
    """A msgspec Struct as the 200 JSON response."""
    return Response(_encoder.encode(body), media_type=JSON, headers=headers)


@dataclass(frozen=True, slots=True)
class Op:
    """One method of a path: its handler, the scope it needs (None: public; several any
    one of which will do as `"approve|admin"`, auth.py `scope_words`), which
    families a token limited to families may use it for, and its Doc.

    `family` is declared by every route, never defaulted (a route added without it
    does not build): a family name (the token must be allowed that family), EVERY (a
    wallet-wide operation: the seed derives every family's keys, so the token must not
    be limited to families), BY_REQUEST (the family is in the request; the service
    checks it against the token) or NONE (nothing of any family's accounts).
    `tests/api/test_route_matrix.py` tries every route of this table with a token of
    each scope and a family-limited token, and reads these declarations to know the
    answers."""

    handler: Guarded | Public
    scope: str | None
    family: str
    doc: Doc | None = None
    max_body: int | None = None  # its own body cap, above the server's (sign-batch)

    def __post_init__(self) -> None:
        if self.scope is not None:
            scope_words(self.scope)  # ValueError: a route declared wrongly does not build
        if self.family not in (*FAMILIES, *FAMILY_RULES):
            raise ValueError(f"unknown family rule {self.family!r}")


def resource(path: str, ops: dict[str, Op]) -> Route:
    """One path with a handler per method (HEAD answers as GET; others get 405 + Allow).

    Each handler runs after its guard, and every error, expected or not, leaves
    as the envelope.
    """

    async def call(request: Request) -> Response:
        op = ops["GET" if request.method == "HEAD" else request.method]
        try:
            storable_url(request)
            if op.scope is None:
                oversize(request)
                return await op.handler(request)  # type: ignore[call-arg]
            principal = await authorize(request, op.scope, op.family)
            if op.max_body is not None and (body := request.scope.get(BODY)) is not None:
                body.widen(op.max_body)
            if request.method not in READS:  # a change is audited: AUDIT_REQUIRED, first
                await services_of(request).audit.require_devices(
                    principal, request.method, request.url.path
                )
            if op.scope != "sign":  # a sign handler reads (and audits) its own refusal
                oversize(request)
            return await op.handler(request, principal)  # type: ignore[call-arg]
        except ChainkeysError as exc:
            return error_response(exc)
        except Exception as exc:
            return internal_error(exc)

    call.ops = ops  # type: ignore[attr-defined]  # read by the OpenAPI builder
    return Route(path, call, methods=list(ops))


def ops_of(route: BaseRoute) -> dict[str, Op]:
    """A route's methods as `resource` declared them (none for a route it did not make)."""
    ops: dict[str, Op] = getattr(getattr(route, "endpoint", None), "ops", {})
    return ops


def storable_url(request: Request) -> None:
    """A path or query holding text no engine stores (NUL, an unpaired surrogate) is a
    400 before anything reads it: never a storage outage, never an audit row that
    cannot be written. (Bodies: `body.decode`.)"""
    query_string: bytes = request.scope.get("query_string", b"")
    if not storable(request.scope["path"]) or b"%00" in query_string or (b"\x00" in query_string):
        raise BadRequest(TEXT_REFUSED, code="invalid_text")


def oversize(request: Request) -> None:
    """413 for a declared body over the limit (the transport leaves it to the route)."""
    body = request.scope.get(BODY)
    if body is not None and body.oversize:
        raise PayloadTooLarge(f"request body is larger than {body.limit} bytes")


def paged(request: Request) -> tuple[int | None, str | None]:
    """A list's limit (up to the settings' maximum) and cursor, checked."""
    maximum = services_of(request).settings.list_max_limit
    return params.limit(maximum).read(request), params.CURSOR.read(request)


def path_name(request: Request, family: str) -> str:
    """The account name in the path, checked against the family's parameter type."""
    name: str = params.ACCOUNT_NAMES[family].read(request)
    return name
