"""Sign routes: `POST /{family}/{name}/{kind}` for every signer a family offers.

Built from the chain layer's `SignKind` table: the request and response Structs
are the ecosystem's own shapes, so decoding, the envelope and the OpenAPI
document all come from the same types. Handlers stay thin: decode, call the
signing service, wrap `data` in the envelope.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import schemas as s
from chainkeys.api.auth import services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.params import ACCOUNT_NAMES
from chainkeys.api.routes.approvals import answer
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.approvals.service import ApprovalView
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import SignKind
from chainkeys.errors import ChainkeysError


def envelope_type(response: type) -> Any:
    """`{"success", "message", "data": <response>}`: the one generic envelope around a
    kind's answer (kinds that answer alike share it, and the document names it once)."""
    return s.Envelope[response]  # type: ignore[valid-type]


# What every sign request's schema cannot say (the fields' shapes it does say).
BEYOND_THE_SCHEMA = (
    "Beyond this schema: the transaction or message is decoded whole and must fit this "
    "account (its network's chain id, its inputs, keys and actions, a multisig or not); "
    "a request that does not is a 400 (`invalid_sign_request`, `wrong_chain`, "
    "`not_owner`, `invalid_amount`, …: docs/signing.md), audited."
)


def operation_id(family: str, kind: SignKind) -> str:
    """A sign route's operationId (`cosmosSignDirect`): what links from elsewhere name."""
    return family + "".join(part.capitalize() for part in kind.path.split("-"))


def kind_route(family: str, kind: SignKind) -> Route:
    response_type = envelope_type(kind.response)
    request_type = s.sign_request(kind.request)
    account = ACCOUNT_NAMES[family]

    async def sign(request: Request, principal: Any) -> Response:
        signing = services_of(request).signing
        try:
            name = account.read(request)
            body = await required_body(request, request_type)
        except ChainkeysError as exc:  # a bad name; too large, too slow, malformed: audited
            given = str(request.path_params.get("accountName", ""))
            await signing.refuse_unread(principal, family, given, kind, exc)
            raise
        signed = await signing.sign(principal, family, name, kind, body)
        if isinstance(signed, ApprovalView):  # the policy asks people first: 202
            return answer(signed, principal, "approval required: nothing is signed yet", 202)
        return ok(s.Envelope(success=True, message="signed", data=signed.data))

    title = family.capitalize()
    doc = Doc(
        operation_id(family, kind),
        f"{title}: {kind.summary}",
        f"{title} signing",
        response_type,
        ("202", "400", "404", "408", "413", "415", "423", *ERRORS_AUTH),
        request=request_type,
        parameters=(account,),
        description=f"{kind.description} {BEYOND_THE_SCHEMA}".strip(),
        examples=kind.examples,
    )
    path = f"/{family}/{{accountName}}/{kind.path}"
    return resource(path, {"POST": Op(sign, "sign", family, doc)})


def signing_routes() -> list[Route]:
    """A route per sign kind each family offers (its `signers` slot)."""
    return [kind_route(name, k) for name, fam in FAMILIES.items() for k in fam.signers]
