"""Sign routes: `POST /{family}/{name}/{kind}` for every signer a family offers.

Built from the chain layer's `SignKind` table: the request and response Structs
are the ecosystem's own shapes, so decoding, the envelope and the OpenAPI
document all come from the same types. Handlers stay thin: decode, call the
signing service, wrap `data` in the envelope.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, route
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from litestar.params import FromPath

from chainkeys.api.auth import require
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc, doc_opt
from chainkeys.api.routes.common import DEPENDENCIES, ERRORS_AUTH, NAME, ok
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import SignKind
from chainkeys.service import Services, Tenant


def envelope_type(kind: SignKind) -> type[msgspec.Struct]:
    """`{"success", "message", "data": <the kind's response>}` as its own Struct."""
    name = "".join(part.capitalize() for part in kind.response.__name__.split("_"))
    return msgspec.defstruct(
        f"{name}Envelope",
        [("success", bool), ("message", str), ("data", kind.response)],
        kw_only=True,
    )


def kind_route(family: str, kind: SignKind) -> HTTPRouteHandler:
    response_type = envelope_type(kind)

    async def sign(
        request: Request[Any, Any, Any],
        principal: NamedDependency[Tenant],
        accountName: FromPath[str],
    ) -> Response[bytes]:
        body = await required_body(request, kind.request)
        svc: Services = request.app.state.services
        signed = await svc.signing.sign(principal, family, accountName, kind, body)  # type: ignore[attr-defined]
        return ok(response_type(success=True, message="signed", data=signed.data))

    title = family.capitalize()
    words = "".join(part.capitalize() for part in kind.path.split("-"))
    doc = Doc(
        f"{family}{words}", f"{title}: {kind.summary}", f"{title} signing", response_type,
        ("400", "404", "413", "415", *ERRORS_AUTH), request=kind.request,
        parameters=(NAME,), description=kind.description, examples=kind.examples,
    )  # fmt: skip
    return route(
        f"/{family}/{{accountName:str}}/{kind.path}",
        http_method=["POST"],
        guards=[require("sign")],
        dependencies=DEPENDENCIES,
        status_code=200,
        opt=doc_opt(doc),
        name=f"{family}-{kind.path}",
    )(sign)


def signing_routes(kinds: tuple[SignKind, ...]) -> list[HTTPRouteHandler]:
    return [kind_route(f, k) for k in kinds for f in k.families if f in FAMILIES]
