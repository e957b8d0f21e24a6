"""POST /{family}/multisig (the families with multisig forms): register an m-of-n
multisig account; GET /{family}/{accountName}/multisig: its members and descriptor;
POST /{family}/{accountName}/combine where the family assembles its members'
signatures (Cosmos)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.accounts.multisig import FAMILIES, MultisigView, view_of
from chainkeys.api import multisig_schemas as ms
from chainkeys.api import params
from chainkeys.api.auth import BY_REQUEST, NONE, services_of
from chainkeys.api.body import json_body
from chainkeys.api.doc import Doc, links
from chainkeys.api.params import ACCOUNT_NAMES
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, path_name, resource
from chainkeys.api.routes.shapes import iso
from chainkeys.api.routes.signing import operation_id
from chainkeys.api.routes.wallets import wallet_ref
from chainkeys.api.schemas import Envelope
from chainkeys.chains.registry import FAMILIES as FAMILIES_BY_NAME
from chainkeys.errors import BadRequest
from chainkeys.signing.combine import combine_multisig
from chainkeys.signing.requests import MULTISIG_KINDS
from chainkeys.tokens.service import Principal
from chainkeys.wallets.multisig import FAMILIES as HD_FAMILIES
from chainkeys.wallets.multisig import WalletMultisigView

DESCRIPTION = (
    "chainkeys holds some of the keys (accounts of this tenant on the same network), the "
    "others are held elsewhere; the account's name is its address. `sign-psbt` on it adds "
    "the signature of every member key held here and finalizes an input once its "
    "signatures reach the threshold. At most 15 keys (a P2SH redeem script is at most 520 "
    "bytes). Beyond the schema: the threshold is at most the number of keys, the keys are "
    "distinct and points of the curve, one is held by an account of this tenant on the "
    "network (else 400 `invalid_multisig`)."
)


def answer(view: MultisigView) -> ms.MultisigResponse:
    members = [
        ms.MultisigMember(public_key=m.public_key, held=m.account is not None, account=m.account)
        for m in view.members
    ]
    data = ms.MultisigAccount(
        family=view.family,
        network=view.network,
        name=view.address,
        address=view.address,
        address_type=view.multisig.address_type,
        threshold=view.multisig.threshold,
        members=members,
        created_at=iso(view.created_ms),
    )
    if view.descriptor is not None:
        data.descriptor = view.descriptor
    pubkey = view.multisig.public_json()
    if pubkey is not None:
        data.pubkey = pubkey
    return ms.MultisigResponse(success=True, message="multisig account", data=data)


def family_routes(family: str) -> list[Route]:
    title = family.capitalize()
    forms = FAMILIES_BY_NAME[family].multisig
    combined = forms.combined if forms is not None else None

    async def register(request: Request, principal: Principal) -> Response:
        body: Any = await json_body(request, ms.MULTISIG_CREATES[family])
        if body is None:
            raise BadRequest(
                "a body with threshold and public_keys is required", code="invalid_multisig"
            )
        view = await services_of(request).multisig.register(
            principal,
            family,
            body.threshold,
            body.public_keys,
            body.network,
            getattr(body, "address_type", None),  # Cosmos has none
        )
        return ok(answer(view))

    async def get(request: Request, principal: Principal) -> Response:
        row = await services_of(request).accounts.row(principal, family, path_name(request, family))
        return ok(answer(view_of(row)))

    following = [f"get{title}Multisig", f"get{title}Account", f"delete{title}Account"]
    following += [
        operation_id(family, k)
        for k in FAMILIES_BY_NAME[family].signers
        if k.path in MULTISIG_KINDS
    ]
    if combined is not None:
        following.append(f"combine{title}Multisig")
    registering = Doc(
        f"register{title}Multisig",
        f"Register an m-of-n {title} multisig account",
        title,
        ms.MultisigResponse,
        ("400", "408", "409", "413", "415", *ERRORS_AUTH),
        request=ms.MULTISIG_CREATES[family],
        description=DESCRIPTION,
        links=links(following, accountName="$response.body#/data/address"),
    )
    getting = Doc(
        f"get{title}Multisig",
        f"A {title} multisig account's members and descriptor",
        title,
        ms.MultisigResponse,
        ("400", "404", *ERRORS_AUTH),
        parameters=(ACCOUNT_NAMES[family],),
    )
    routes = [
        resource(f"/{family}/multisig", {"POST": Op(register, "create", family, registering)}),
        resource(f"/{family}/{{accountName}}/multisig", {"GET": Op(get, "read", family, getting)}),
    ]
    if combined is not None:
        routes.append(combine_route(family, combined))
    return routes


def combine_route(family: str, combined: type) -> Route:
    """POST /{family}/{accountName}/combine: the transaction its members signed, answered
    in the family's `combined` shape (Cosmos: the TxRaw, as sign-transfer answers)."""
    title = family.capitalize()
    answered: Any = Envelope[combined]  # type: ignore[valid-type]

    async def combine(request: Request, principal: Principal) -> Response:
        body = await json_body(request, ms.CombineRequest)
        if body is None:
            raise BadRequest(
                "a body with signDoc and signatures is required", code="invalid_sign_request"
            )
        pairs = [(s.pub_key.value, s.signature) for s in body.signatures]
        signing = services_of(request).signing
        name = path_name(request, family)
        signed = await combine_multisig(signing, principal, family, name, body.signDoc, pairs)
        return ok(answered(success=True, message="combined", data=signed.data))

    combining = Doc(
        f"combine{title}Multisig",
        f"Assemble a {title} multisig transaction from its members' signatures",
        title,
        answered,
        ("400", "404", "408", "413", "415", "423", *ERRORS_AUTH),
        request=ms.CombineRequest,
        parameters=(ACCOUNT_NAMES[family],),
        description="The amino StdSignDoc every member signed (read in full, as sign-amino "
        "reads it) and at least threshold member signatures; each is verified. The answer "
        "is the TxRaw cosmjs makeMultisignedTx builds (SIGN_MODE_LEGACY_AMINO_JSON), ready "
        f"to broadcast. Nothing is signed here. Beyond the schema: the account is a {title} "
        "multisig (else 400 `not_multisig`), the document is its, each signature its "
        "member's over it (`invalid_signature`).",
    )
    return resource(
        f"/{family}/{{accountName}}/combine", {"POST": Op(combine, "sign", family, combining)}
    )


def multisig_routes() -> list[Route]:
    return [r for family in FAMILIES for r in family_routes(family)]


# ---- HD multisig of a wallet (BIP48: wallets/multisig.py FAMILIES) ---------------------


def wallet_multisig(view: WalletMultisigView) -> ms.WalletMultisig:
    r = view.row
    return ms.WalletMultisig(
        id=r.id,
        wallet=r.wallet_id,
        family=r.family,
        network=r.network,
        address_type=r.address_type,
        threshold=r.threshold,
        account=r.account,
        path=view.path,
        key=view.own_key,
        xpubs=r.xpubs,
        descriptor=r.descriptor,
        created_at=iso(r.created_ms),
    )


async def create_wallet_multisig(request: Request, principal: Principal) -> Response:
    body = await json_body(request, ms.WalletMultisigCreate)
    if body is None:
        raise BadRequest(
            "a body with family, threshold and xpubs is required", code="invalid_multisig"
        )
    view = await services_of(request).wallet_multisig.create(
        principal,
        wallet_ref(request),
        body.family,
        body.network,
        body.address_type,
        body.threshold,
        body.xpubs,
        body.account,
    )
    return ok(
        ms.WalletMultisigResponse(
            success=True, message="multisig created", data=wallet_multisig(view)
        )
    )


async def list_wallet_multisigs(request: Request, principal: Principal) -> Response:
    views = await services_of(request).wallet_multisig.list(principal, wallet_ref(request))
    data = ms.WalletMultisigList(multisigs=[wallet_multisig(v) for v in views])
    return ok(ms.WalletMultisigListResponse(success=True, message="multisigs listed", data=data))


async def get_wallet_multisig(request: Request, principal: Principal) -> Response:
    view = await services_of(request).wallet_multisig.get(
        principal, wallet_ref(request), params.MULTISIG_ID.read(request)
    )
    return ok(
        ms.WalletMultisigResponse(success=True, message="multisig", data=wallet_multisig(view))
    )


async def derive_wallet_multisig(request: Request, principal: Principal) -> Response:
    body = await json_body(request, ms.WalletMultisigDerive) or ms.WalletMultisigDerive()
    views = await services_of(request).wallet_multisig.derive(
        principal,
        wallet_ref(request),
        params.MULTISIG_ID.read(request),
        body.index,
        body.count,
        body.preview,
    )
    accounts = [answer(v).data for v in views]
    return ok(
        ms.MultisigAccountsResponse(
            success=True, message="multisig accounts", data=ms.MultisigAccounts(accounts=accounts)
        )
    )


def wallet_multisig_routes() -> list[Route]:
    base = "/wallets/{wallet}/multisig"
    creating = Doc(
        "createWalletMultisig",
        f"Make an HD multisig of this wallet ({', '.join(f.capitalize() for f in HD_FAMILIES)})",
        "Wallets",
        ms.WalletMultisigResponse,
        ("400", "403", "404", "408", "413", "415", *ERRORS_AUTH),
        request=ms.WalletMultisigCreate,
        parameters=(params.WALLET,),
        links=links(
            ["getWalletMultisig", "deriveWalletMultisig"],
            wallet="$response.body#/data/wallet",
            multisig="$response.body#/data/id",
        ),
        description="The wallet's BIP48 key (m/48'/coin'/account'/2' for p2wsh, "
        "1' for p2sh-p2wsh) is one member, the xpubs the others; the answer's "
        "descriptor imports into Core, Sparrow or Electrum to watch the same "
        "addresses. Beyond the schema: the threshold is at most the number of "
        "members, each xpub is of the body's network and distinct from the others "
        "and the wallet's own (400 `invalid_multisig`, `invalid_xpub`).",
    )
    listing = Doc(
        "listWalletMultisigs",
        "This wallet's HD multisigs",
        "Wallets",
        ms.WalletMultisigListResponse,
        ("400", "404", *ERRORS_AUTH),
        parameters=(params.WALLET,),
    )
    getting = Doc(
        "getWalletMultisig",
        "One HD multisig of this wallet",
        "Wallets",
        ms.WalletMultisigResponse,
        ("400", "404", *ERRORS_AUTH),
        parameters=(params.WALLET, params.MULTISIG_ID),
    )
    deriving = Doc(
        "deriveWalletMultisig",
        "The multisig accounts of the next indices (or of one index)",
        "Wallets",
        ms.MultisigAccountsResponse,
        ("400", "404", "408", "409", "413", "415", *ERRORS_AUTH),
        request=ms.WalletMultisigDerive,
        request_required=False,
        parameters=(params.WALLET, params.MULTISIG_ID),
        description="Beyond the schema: index + count stays below 2^31 (400 `invalid_index`).",
    )
    return [
        resource(
            base,
            {
                "GET": Op(list_wallet_multisigs, "read", NONE, listing),
                "POST": Op(create_wallet_multisig, "create", BY_REQUEST, creating),
            },
        ),
        resource(
            f"{base}/{{multisig}}", {"GET": Op(get_wallet_multisig, "read", BY_REQUEST, getting)}
        ),
        resource(
            f"{base}/{{multisig}}/accounts",
            {"POST": Op(derive_wallet_multisig, "create", BY_REQUEST, deriving)},
        ),
    ]
