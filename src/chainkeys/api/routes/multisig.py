"""POST /{family}/multisig (Dogecoin, Litecoin): register an m-of-n multisig account;
GET /{family}/{accountName}/multisig: its members and descriptor."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.accounts.multisig import FAMILIES, MultisigView, view_of
from chainkeys.api import multisig_schemas as ms
from chainkeys.api.auth import services_of
from chainkeys.api.body import json_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, NAME, Op, ok, path_name, resource
from chainkeys.api.routes.shapes import iso
from chainkeys.api.schemas import Envelope
from chainkeys.chains.tx.cosmos.multisig import CosmosMultisig
from chainkeys.chains.tx.cosmos.transfer import CosmosTransactionResponse
from chainkeys.errors import BadRequest
from chainkeys.tokens.service import Principal

DESCRIPTION = (
    "chainkeys holds some of the keys (accounts of this tenant on the same network), the "
    "others are held elsewhere; the account's name is its address. `sign-psbt` on it adds "
    "the signature of every member key held here and finalizes an input once its "
    "signatures reach the threshold. At most 15 keys (a P2SH redeem script is at most 520 "
    "bytes)."
)


def answer(view: MultisigView) -> ms.MultisigResponse:
    members = [ms.MultisigMember(public_key=m.public_key, held=m.account is not None,
                                 account=m.account) for m in view.members]  # fmt: skip
    data = ms.MultisigAccount(
        family=view.family, network=view.network, name=view.address, address=view.address,
        address_type=view.multisig.address_type, threshold=view.multisig.threshold,
        members=members, created_at=iso(view.created_ms),
    )  # fmt: skip
    if view.descriptor is not None:
        data.descriptor = view.descriptor
    if isinstance(view.multisig, CosmosMultisig):
        data.pubkey = view.multisig.pubkey_json()
    return ms.MultisigResponse(success=True, message="multisig account", data=data)


def family_routes(family: str) -> list[Route]:
    title = family.capitalize()

    async def register(request: Request, principal: Principal) -> Response:
        body = await json_body(request, ms.MultisigCreate)
        if body is None:
            raise BadRequest("a body with threshold and public_keys is required",
                             code="invalid_multisig")  # fmt: skip
        view = await services_of(request).multisig.register(
            principal, family, body.threshold, body.public_keys, body.network, body.address_type
        )
        return ok(answer(view))

    async def get(request: Request, principal: Principal) -> Response:
        row = await services_of(request).accounts.row(principal, family, path_name(request))
        return ok(answer(view_of(row)))

    registering = Doc(
        f"register{title}Multisig", f"Register an m-of-n {title} multisig account", title,
        ms.MultisigResponse, ("400", "408", "409", "413", "415", *ERRORS_AUTH),
        request=ms.MultisigCreate, description=DESCRIPTION,
    )  # fmt: skip
    getting = Doc(
        f"get{title}Multisig", f"A {title} multisig account's members and descriptor", title,
        ms.MultisigResponse, ("400", "404", *ERRORS_AUTH), parameters=(NAME,),
    )  # fmt: skip
    routes = [
        resource(f"/{family}/multisig", {"POST": Op(register, "create", family, registering)}),
        resource(f"/{family}/{{accountName}}/multisig",
                 {"GET": Op(get, "read", family, getting)}),
    ]  # fmt: skip
    if family == "cosmos":
        routes.append(resource("/cosmos/{accountName}/combine",
                               {"POST": Op(combine, "sign", family, COMBINING)}))  # fmt: skip
    return routes


async def combine(request: Request, principal: Principal) -> Response:
    body = await json_body(request, ms.CombineRequest)
    if body is None:
        raise BadRequest("a body with signDoc and signatures is required",
                         code="invalid_sign_request")  # fmt: skip
    pairs = [(s.pub_key.value, s.signature) for s in body.signatures]
    signed = await services_of(request).signing.combine(
        principal, "cosmos", path_name(request), body.signDoc, pairs
    )
    return ok(Envelope[CosmosTransactionResponse](success=True, message="combined",
                                                  data=signed.data))  # fmt: skip


COMBINING = Doc(
    "combineCosmosMultisig", "Assemble a Cosmos multisig transaction from its members' "
    "signatures", "Cosmos", Envelope[CosmosTransactionResponse],
    ("400", "404", "408", "413", "415", *ERRORS_AUTH), request=ms.CombineRequest,
    parameters=(NAME,),
    description="The amino StdSignDoc every member signed (read in full, as sign-amino "
    "reads it) and at least threshold member signatures; each is verified. The answer is "
    "the TxRaw cosmjs makeMultisignedTx builds (SIGN_MODE_LEGACY_AMINO_JSON), ready to "
    "broadcast. Nothing is signed here.",
)  # fmt: skip


def multisig_routes() -> list[Route]:
    return [r for family in FAMILIES for r in family_routes(family)]
