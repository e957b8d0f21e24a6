"""Account routes for every family, built from one parametrised definition.

Handlers are thin: parse, call the service, shape the envelope. The family's
response `Shape` is the only per-family difference.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, route
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath

from chainkeys import metrics
from chainkeys.api import schemas as s
from chainkeys.api.auth import require
from chainkeys.api.body import json_body, query, query_int
from chainkeys.api.doc import Doc, doc_opt
from chainkeys.api.routes.common import CURSOR, DEPENDENCIES, ERRORS_AUTH, NAME, limit_param, ok
from chainkeys.api.routes.shapes import SHAPES, Shape
from chainkeys.chains.registry import FAMILIES
from chainkeys.service import CreateRequest, Services, Tenant

IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "repeat a create safely: the same key and body return the first response "
    "(24 h); the same key with another body is a 409",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}
DELETED = s.MessageResponse(success=True, message="account deleted")


def _svc(request: Request[Any, Any, Any]) -> Services:
    svc: Services = request.app.state.services
    return svc


def family_routes(family: str, list_max_limit: int) -> list[HTTPRouteHandler]:
    """GET/POST /{family}; GET, DELETE /{family}/{name}; POST /{family}/{name}/delete."""
    shape: Shape = SHAPES[family]
    title = family.capitalize()
    create_type = s.CREATE_REQUESTS[family]

    async def list_accounts(
        request: Request[Any, Any, Any], principal: NamedDependency[Tenant]
    ) -> Response[bytes]:
        q = query(request)
        page = await _svc(request).accounts.list(
            principal, family, query_int(q, "limit"), q.get("cursor")
        )
        return ok(shape.listed(page))

    async def create_account(
        request: Request[Any, Any, Any], principal: NamedDependency[Tenant]
    ) -> Response[bytes]:
        parsed = await json_body(request, create_type)
        req = (
            CreateRequest()
            if parsed is None
            else CreateRequest(**{f: getattr(parsed, f) for f in parsed.__struct_fields__})
        )
        idem_key = request.headers.get("idempotency-key")
        created = await _svc(request).accounts.create(principal, family, req, idem_key)
        headers = {"Idempotent-Replayed": "true"} if created.replayed else None
        if not created.replayed:
            source = "import" if created.imported else "generate"
            metrics.ACCOUNTS_CREATED.labels(family, source).inc()
        return ok(shape.created(created), headers)

    async def get_account(
        request: Request[Any, Any, Any],
        principal: NamedDependency[Tenant],
        accountName: FromPath[str],
    ) -> Response[bytes]:
        view = await _svc(request).accounts.get(principal, family, accountName)
        return ok(shape.found(view))

    async def delete_account(
        request: Request[Any, Any, Any],
        principal: NamedDependency[Tenant],
        accountName: FromPath[str],
    ) -> Response[bytes]:
        await _svc(request).accounts.delete(principal, family, accountName)
        return ok(DELETED)

    base, item = f"/{family}", f"/{family}/{{accountName:str}}"
    read, create, delete = [require("read")], [require("create")], [require("delete")]
    listing = Doc(
        f"list{title}Accounts", f"List the caller's {title} accounts", title,
        shape.list_response, ("400", *ERRORS_AUTH),
        parameters=(limit_param(list_max_limit), CURSOR),
    )  # fmt: skip
    creating = Doc(
        f"create{title}Account", f"Create (generate) or import a {title} account", title,
        shape.account_response, ("400", "409", "413", "415", *ERRORS_AUTH),
        request=create_type, request_required=False, parameters=(IDEMPOTENCY_KEY,),
    )  # fmt: skip
    getting = Doc(
        f"get{title}Account", f"Look up one {title} account by name", title,
        shape.account_response, ("400", "404", *ERRORS_AUTH), parameters=(NAME,),
    )  # fmt: skip
    deleting = Doc(
        f"delete{title}Account", f"Delete one {title} account (restorable while retained)",
        title, s.MessageResponse, ("400", "404", *ERRORS_AUTH), parameters=(NAME,),
    )  # fmt: skip
    moon_delete = Doc(
        f"delete{title}AccountMoon", f"Delete one {title} account (Moon's path)", title,
        s.MessageResponse, ("400", "404", *ERRORS_AUTH), parameters=(NAME,),
    )  # fmt: skip
    common: dict[str, Any] = {"dependencies": DEPENDENCIES, "status_code": 200}
    return [
        route(base, http_method=["GET", "HEAD"], guards=read, opt=doc_opt(listing),
              name=f"{family}-list", **common)(list_accounts),
        route(base, http_method=["POST"], guards=create, opt=doc_opt(creating),
              name=f"{family}-create", **common)(create_account),
        route(item, http_method=["GET", "HEAD"], guards=read, opt=doc_opt(getting),
              name=f"{family}-get", **common)(get_account),
        route(item, http_method=["DELETE"], guards=delete, opt=doc_opt(deleting),
              name=f"{family}-delete", **common)(delete_account),
        route(f"{item}/delete", http_method=["POST"], guards=delete, opt=doc_opt(moon_delete),
              name=f"{family}-delete-moon", **common)(delete_account),
    ]  # fmt: skip


def account_routes(list_max_limit: int) -> list[HTTPRouteHandler]:
    return [h for family in FAMILIES for h in family_routes(family, list_max_limit)]
