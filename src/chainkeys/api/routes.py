"""Account routes, built once per family from one parametrised definition.

Handlers are thin: authenticate, parse, call the service, shape the envelope.
The only per-family difference is the response `Shape` (Cosmos nests its
payload twice and can delete; Dogecoin, EOS and Litecoin share one shape).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from chainkeys.api import schemas as s
from chainkeys.api.http import Handler, Request, Response, Router, respond
from chainkeys.api.ratelimit import enforce
from chainkeys.chains.cosmos import keyring_pubkey
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import (
    BadRequest,
    InvalidJSON,
    Unauthorized,
    UnsupportedMediaType,
)
from chainkeys.service import AccountView, Created, CreateRequest, Page, Services, Tenant

UNSET = msgspec.UNSET


def services(request: Request) -> Services:
    svc: Services = request.app.services
    return svc


async def authenticate(request: Request) -> Tenant:
    """`Authorization: <token>` or `Authorization: Bearer <token>`."""
    header = request.header(b"authorization")
    if not header:
        raise Unauthorized("send your token in the Authorization header")
    scheme, _, rest = header.strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else header.strip()
    if not token or len(token) > 256:
        raise Unauthorized()
    tenant = await services(request).tokens.authenticate(token, request.arrived)
    if tenant is None:
        raise Unauthorized()
    if request.app.rate_limiter is not None:  # after auth: bad tokens spend no budget
        await enforce(request.app.rate_limiter, tenant.token_id)
    return tenant


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def parse_create(request: Request, family: str) -> CreateRequest:
    body = await request.body(services(request).settings.max_body_bytes)
    content_type = request.header(b"content-type")
    if not body:  # no body: a generated key with the defaults (whitespace is not JSON)
        return CreateRequest()
    if content_type is not None and not _is_json(content_type):
        raise UnsupportedMediaType()
    try:
        parsed = msgspec.json.decode(body, type=s.CREATE_REQUESTS[family])
    except msgspec.ValidationError as exc:
        raise BadRequest(str(exc), code="invalid_field") from None
    except msgspec.DecodeError:
        raise InvalidJSON() from None
    return CreateRequest(**{f: getattr(parsed, f) for f in parsed.__struct_fields__})


def query_limit(request: Request) -> int | None:
    raw = request.query("limit")
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:  # str.isdigit takes '¹'
        raise BadRequest("limit must be a positive whole number", code="invalid_limit")
    return int(raw)


@dataclass(frozen=True, slots=True)
class Shape:
    """How one family's responses look."""

    created: Callable[[Created], Any]
    found: Callable[[AccountView], Any]
    listed: Callable[[Page], Any]
    account_response: type
    list_response: type
    deletable: bool


def _cosmos_account(view: AccountView, message: str, private_key: str | None) -> Any:
    account = s.CosmosAccount(address=view.address, private_key=private_key or UNSET)
    return s.CosmosAccountResponse(
        success=True, message=message, data=s.CosmosAccountData(data=account)
    )


def _cosmos_list(page: Page) -> Any:
    keys = [s.CosmosKey(address=r.address, pubkey=keyring_pubkey(r.public_key)) for r in page.items]
    inner = s.CosmosKeys(keys=keys, next_cursor=page.next_cursor or UNSET)
    return s.CosmosListResponse(
        success=True, message="accounts listed", data=s.CosmosKeysData(data=inner)
    )


def _fields(view: AccountView, private_key: str | None) -> dict[str, Any]:
    return {
        "address": view.address,
        "public_key": view.public_key,
        "private_key": private_key or UNSET,
        "public_key_k1": view.extra.get("public_key_k1", UNSET),
    }


def _account(view: AccountView, message: str, private_key: str | None) -> Any:
    fields = _fields(view, private_key)
    data = s.AccountData(**fields, data=s.AccountFields(**fields))
    return s.AccountResponse(success=True, message=message, address=view.address, data=data)


def _names(page: Page) -> Any:
    names = [r.name for r in page.items]
    cursor = page.next_cursor or UNSET
    data = s.KeyNamesData(
        keys=names, next_cursor=cursor, data=s.KeyNames(keys=names, next_cursor=cursor)
    )
    return s.ListResponse(success=True, message="accounts listed", data=data)


def _created_message(created: Created) -> str:
    return "account imported" if created.imported else "account created"


COSMOS = Shape(
    created=lambda c: _cosmos_account(c.view, _created_message(c), c.private_key),
    found=lambda v: _cosmos_account(v, "account found", None),
    listed=_cosmos_list,
    account_response=s.CosmosAccountResponse,
    list_response=s.CosmosListResponse,
    deletable=True,
)
ACCOUNT = Shape(
    created=lambda c: _account(c.view, _created_message(c), c.private_key),
    found=lambda v: _account(v, "account found", None),
    listed=_names,
    account_response=s.AccountResponse,
    list_response=s.ListResponse,
    deletable=False,
)
SHAPES: dict[str, Shape] = {
    "cosmos": COSMOS,
    "dogecoin": ACCOUNT,
    "eos": ACCOUNT,
    "litecoin": ACCOUNT,
}


def add_family_routes(router: Router, family: str, shape: Shape) -> None:
    """GET/POST /{family}, GET (and for Cosmos DELETE) /{family}/{accountName}."""

    async def list_accounts(request: Request) -> Response:
        tenant = await authenticate(request)
        cursor = request.query("cursor")
        page = await services(request).accounts.list(tenant, family, query_limit(request), cursor)
        return respond(shape.listed(page))

    async def create_account(request: Request) -> Response:
        tenant = await authenticate(request)
        req = await parse_create(request, family)
        idem_key = request.header(b"idempotency-key")
        created = await services(request).accounts.create(tenant, family, req, idem_key)
        headers = {"Idempotent-Replayed": "true"} if created.replayed else None
        return respond(shape.created(created), headers=headers)

    async def get_account(request: Request) -> Response:
        tenant = await authenticate(request)
        view = await services(request).accounts.get(tenant, family, request.name or "")
        return respond(shape.found(view))

    async def delete_account(request: Request) -> Response:
        tenant = await authenticate(request)
        await services(request).accounts.delete(tenant, family, request.name or "")
        return respond(s.MessageResponse(success=True, message="account deleted"))

    by_name: dict[str, Handler] = {"GET": get_account}
    if shape.deletable:
        by_name["DELETE"] = delete_account
    router.add(f"/{family}", {"GET": list_accounts, "POST": create_account})
    router.add(f"/{family}/{{name}}", by_name)


def add_account_routes(router: Router) -> None:
    for family in FAMILIES:
        add_family_routes(router, family, SHAPES[family])


async def list_audit(request: Request) -> Response:
    """GET /audit: the caller's own tenant's events, oldest first, paginated."""
    tenant = await authenticate(request)
    since = request.query("since")
    since_ms = 0
    if since is not None:
        if not (since.isascii() and since.isdigit()) or len(since) > 15:
            raise BadRequest(
                "since is a time in milliseconds since the epoch", code="invalid_since"
            )
        since_ms = int(since)
    events, cursor = await services(request).audit.page(
        tenant.id, since_ms, query_limit(request), request.query("cursor")
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
    return respond(s.AuditResponse(success=True, message="audit events listed", data=data))
