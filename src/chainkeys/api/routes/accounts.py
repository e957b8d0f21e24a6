"""Account routes for every family, built from one parametrised definition.

Handlers are thin: parse, call the service, shape the envelope. The family's
response `Shape` is the only per-family difference.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys import metrics
from chainkeys.accounts.models import CreateRequest
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api.auth import services_of
from chainkeys.api.body import json_body
from chainkeys.api.doc import Doc, links
from chainkeys.api.params import ACCOUNT_NAMES
from chainkeys.api.routes.common import (
    ERRORS_AUTH,
    Op,
    ok,
    path_name,
    resource,
)
from chainkeys.api.routes.shapes import SHAPES, Shape
from chainkeys.api.routes.signing import operation_id
from chainkeys.chains.registry import FAMILIES
from chainkeys.tokens.service import Principal


def create_request(parsed: Any, option_names: frozenset[str]) -> CreateRequest:
    """The decoded body as the service's request: the common fields, and the family's
    options (the Struct's other fields, built from its `option_specs`) as a mapping."""
    fields = {f: getattr(parsed, f) for f in parsed.__struct_fields__}
    options = {n: fields.pop(n) for n in option_names if fields.get(n) is not None}
    for name in option_names:
        fields.pop(name, None)
    return CreateRequest(**fields, options=options)


DELETED = s.MessageResponse(success=True, message="account deleted")
NO_STORE = {"Cache-Control": "no-store"}


def family_routes(family: str, list_max_limit: int) -> list[Route]:
    """GET/POST /{family}; GET, DELETE /{family}/{name}; POST /{family}/{name}/delete."""
    shape: Shape = SHAPES[family]
    title = family.capitalize()
    create_type = s.CREATE_REQUESTS[family]

    limit, network = params.limit(list_max_limit), params.network(family)

    async def list_accounts(request: Request, principal: Principal) -> Response:
        page = await services_of(request).accounts.list(
            principal,
            family,
            limit.read(request),
            params.CURSOR.read(request),
            network.read(request),
            params.PREFIX.read(request),  # given empty: refused (a search for nothing)
        )
        return ok(shape.listed(page))

    option_names = frozenset(spec.name for spec in FAMILIES[family].option_specs)

    async def create_account(request: Request, principal: Principal) -> Response:
        parsed = await json_body(request, create_type)
        req = CreateRequest() if parsed is None else create_request(parsed, option_names)
        idem_key = params.IDEMPOTENCY_KEY.read(request)
        created = await services_of(request).accounts.create(principal, family, req, idem_key)
        headers = {"Idempotent-Replayed": "true"} if created.replayed else None
        if not created.replayed:
            source = "import" if created.imported else "generate"
            metrics.ACCOUNTS_CREATED.labels(family, source).inc()
        return ok(shape.created(created), headers)

    async def get_account(request: Request, principal: Principal) -> Response:
        view = await services_of(request).accounts.get(
            principal, family, path_name(request, family)
        )
        return ok(shape.found(view))

    async def export_account(request: Request, principal: Principal) -> Response:
        view, key, path, other = await services_of(request).accounts.export(
            principal, family, path_name(request, family)
        )
        return ok(shape.exported(view, key, path, other), NO_STORE)

    async def delete_account(request: Request, principal: Principal) -> Response:
        await services_of(request).accounts.delete(principal, family, path_name(request, family))
        return ok(DELETED)

    base, item = f"/{family}", f"/{family}/{{accountName}}"
    name = ACCOUNT_NAMES[family]
    listing = Doc(
        f"list{title}Accounts",
        f"List the caller's {title} accounts",
        title,
        shape.list_response,
        ("400", *ERRORS_AUTH),
        parameters=(limit, params.CURSOR, network, params.PREFIX),
    )
    following = [f"{verb}{title}Account" for verb in ("get", "delete", "export")]
    following.append(f"delete{title}AccountMoon")
    following += [operation_id(family, k) for k in FAMILIES[family].signers]
    creating = Doc(
        f"create{title}Account",
        f"Create (generate) or import a {title} account",
        title,
        shape.account_response,
        ("400", "408", "409", "413", "415", *ERRORS_AUTH),
        request=create_type,
        request_required=False,
        parameters=(params.IDEMPOTENCY_KEY,),
        links=links(following, accountName=shape.address_at),
    )
    getting = Doc(
        f"get{title}Account",
        f"Look up one {title} account by name",
        title,
        shape.account_response,
        ("400", "404", *ERRORS_AUTH),
        parameters=(name,),
    )
    deleting = Doc(
        f"delete{title}Account",
        f"Delete one {title} account (restorable while retained)",
        title,
        s.MessageResponse,
        ("400", "404", *ERRORS_AUTH),
        parameters=(name,),
    )
    moon_delete = Doc(
        f"delete{title}AccountMoon",
        f"Delete one {title} account (Moon's path)",
        title,
        s.MessageResponse,
        ("400", "404", *ERRORS_AUTH),
        parameters=(name,),
    )
    exporting = Doc(
        f"export{title}Account",
        f"Export one {title} account's private key (Moon's path)",
        title,
        shape.account_response,
        ("400", "404", "423", *ERRORS_AUTH),
        parameters=(name,),
        description="Only when the server has CHAINKEYS_EXPORT_ENABLED and the token the "
        "`export` scope. The key is in the family's import form (hex for Cosmos, WIF for "
        "Dogecoin/Litecoin, legacy WIF for EOS), with the BIP32 path of a mnemonic import. "
        "Audited; answered with Cache-Control: no-store. 423 while a freeze holds over "
        "the account or the tenant (any freeze in the tenant, for a key derived from a "
        "wallet).",
    )
    return [
        resource(
            base,
            {
                "GET": Op(list_accounts, "read", family, listing),
                "POST": Op(create_account, "create", family, creating),
            },
        ),
        resource(
            item,
            {
                "GET": Op(get_account, "read", family, getting),
                "DELETE": Op(delete_account, "delete", family, deleting),
            },
        ),
        resource(f"{item}/delete", {"POST": Op(delete_account, "delete", family, moon_delete)}),
        resource(f"{item}/export", {"POST": Op(export_account, "export", family, exporting)}),
    ]


def account_routes(list_max_limit: int) -> list[Route]:
    return [r for family in FAMILIES for r in family_routes(family, list_max_limit)]
