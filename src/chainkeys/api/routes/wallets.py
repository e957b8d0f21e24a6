"""Wallet routes: `/wallets` (create, list), `/wallets/{wallet}` (get, delete), and a
wallet's derived accounts, extended public key and export. Thin: decode, call the
wallet service, shape the envelope."""

from __future__ import annotations

import msgspec
from msgspec import UNSET
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.accounts.models import AccountView
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api import wallet_schemas as ws
from chainkeys.api.auth import BY_REQUEST, EVERY, NONE, services_of
from chainkeys.api.body import json_body, required_body
from chainkeys.api.doc import Doc, links
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, paged, resource
from chainkeys.api.routes.shapes import iso
from chainkeys.chains.registry import FAMILIES
from chainkeys.tokens.service import Principal
from chainkeys.wallets.models import DeriveRequest, WalletView

TAG = "Wallets"
NO_STORE = {"Cache-Control": "no-store"}
DELETED = s.MessageResponse(success=True, message="wallet deleted")


def wallet_data(view: WalletView) -> ws.Wallet:
    return ws.Wallet(
        id=view.id,
        name=view.name,
        fingerprint=view.fingerprint,
        created_at=iso(view.created_ms),
        exported=view.exported,
    )


def derived(view: AccountView) -> ws.DerivedAccount:
    origin = view.origin
    if origin is None:  # never: every account the wallet service answers was derived
        raise ValueError("not a derived account")
    fam = FAMILIES[view.family]
    chosen = any(spec.name == "address_type" for spec in fam.option_specs)  # more than one
    return ws.DerivedAccount(
        family=view.family,
        network=view.network,
        name=view.name,
        address=view.address,
        public_key=view.public_key,
        public_key_k1=view.extra.get("public_key_k1", UNSET),
        pubkey=fam.public_key_forms(view.public_key).get("pubkey", UNSET),
        address_type=view.address_type or UNSET if chosen else UNSET,
        wallet=origin.wallet,
        path=origin.path,
        index=origin.index,
        created_at=iso(view.created_ms),
    )


# two families of the table, and each family option's example (EOS: a chosen name)
_FIRST, *_, _LAST = FAMILIES
DERIVE_EXAMPLES = {
    "next": {"family": _LAST, "count": 10},
    "index": {"family": _FIRST, "index": 7},
    **{
        name: {"family": name, spec.name: spec.example}
        for name, fam in FAMILIES.items()
        for spec in fam.option_specs
        if spec.example
    },
}


def wallet_ref(request: Request) -> str:
    ref: str = params.WALLET.read(request)
    return ref


async def create_wallet(request: Request, principal: Principal) -> Response:
    body = await json_body(request, ws.WalletCreate) or ws.WalletCreate()
    view = await services_of(request).wallets.create(
        principal, body.name, body.words, body.mnemonic, body.passphrase
    )
    message = "wallet imported" if body.mnemonic is not None else "wallet created"
    return ok(s.Envelope(success=True, message=message, data=wallet_data(view)))


async def list_wallets(request: Request, principal: Principal) -> Response:
    views, cursor = await services_of(request).wallets.page(principal, *paged(request))
    data = ws.WalletList(wallets=[wallet_data(v) for v in views], next_cursor=cursor or UNSET)
    return ok(s.Envelope(success=True, message="wallets listed", data=data))


async def get_wallet(request: Request, principal: Principal) -> Response:
    view = await services_of(request).wallets.get(principal, wallet_ref(request))
    return ok(s.Envelope(success=True, message="wallet found", data=wallet_data(view)))


async def wallet_accounts(request: Request, principal: Principal) -> Response:
    rows, cursor = await services_of(request).wallets.derived(
        principal, wallet_ref(request), *paged(request)
    )
    items = []
    for r in rows:
        details = msgspec.json.decode(r.details) if r.details else {}
        items.append(
            ws.WalletAccount(
                family=r.family,
                network=r.network,
                name=r.name,
                address=r.address,
                path=str(details.get("path", "")),
                index=int(details.get("index", -1)),
                address_type=details.get("address_type") or UNSET,
                created_ms=int(r.created_ms),
            )
        )
    data = ws.WalletAccounts(accounts=items, next_cursor=cursor or UNSET)
    return ok(s.Envelope(success=True, message="accounts derived from the wallet", data=data))


async def delete_wallet(request: Request, principal: Principal) -> Response:
    await services_of(request).wallets.delete(principal, wallet_ref(request))
    return ok(DELETED)


async def derive_accounts(request: Request, principal: Principal) -> Response:
    b = await required_body(request, ws.DeriveBody)
    req = DeriveRequest(
        s.family_of(b),
        b.network,
        getattr(b, "address_type", None),
        b.account,
        b.change,
        b.index,
        b.count,
        getattr(b, "name", None),
        b.preview,
    )
    views = await services_of(request).wallets.derive(principal, wallet_ref(request), req)
    data = ws.DerivedAccounts(accounts=[derived(v) for v in views])
    message = "accounts previewed" if b.preview else "accounts derived"
    return ok(s.Envelope(success=True, message=message, data=data))


async def wallet_xpub(request: Request, principal: Principal) -> Response:
    family, network, address_type, account, fmt = (p.read(request) for p in params.XPUB)
    answer = await services_of(request).wallets.xpub(
        principal, wallet_ref(request), family, network, address_type, account or 0, fmt
    )
    k = answer.key
    data = ws.Xpub(
        xpub=k.xpub,
        format=k.format,
        formats=list(answer.formats),
        path=k.path,
        fingerprint=k.fingerprint,
        descriptor=answer.descriptor or UNSET,
        change_descriptor=answer.change_descriptor or UNSET,
    )
    return ok(s.Envelope(success=True, message="extended public key", data=data))


async def export_wallet(request: Request, principal: Principal) -> Response:
    view, mnemonic, passphrase = await services_of(request).wallets.export(
        principal, wallet_ref(request)
    )
    data = ws.WalletSecret(
        mnemonic=mnemonic, passphrase=passphrase or UNSET, wallet=wallet_data(view)
    )
    return ok(s.Envelope(success=True, message="wallet exported", data=data), NO_STORE)


def wallet_routes(list_max_limit: int) -> list[Route]:
    item = (params.WALLET,)
    pages = (params.limit(list_max_limit), params.CURSOR)
    docs = {
        "create": Doc(
            "createWallet",
            "Create (generate) or import an HD wallet",
            TAG,
            ws.WalletResponse,
            ("400", "408", "409", "413", "415", *ERRORS_AUTH),
            request=ws.WalletCreate,
            request_required=False,
            links=links(
                [
                    "getWallet",
                    "deleteWallet",
                    "deriveAccounts",
                    "listWalletAccounts",
                    "walletXpub",
                    "exportWallet",
                    "createWalletMultisig",
                    "listWalletMultisigs",
                ],
                wallet="$response.body#/data/id",
            ),
            description="The phrase is never in the answer: export it (where "
            "allowed) or import your own.",
            examples={
                "generate": {"name": "deposits", "words": 24},
                "import": {
                    "mnemonic": " ".join(["abandon"] * 11 + ["about"]),
                    "passphrase": "optional",
                },
            },
        ),
        "list": Doc(
            "listWallets",
            "List the tenant's wallets",
            TAG,
            ws.WalletListResponse,
            ("400", *ERRORS_AUTH),
            parameters=pages,
        ),
        "get": Doc(
            "getWallet",
            "One wallet, by id or name",
            TAG,
            ws.WalletResponse,
            ("404", *ERRORS_AUTH),
            parameters=item,
        ),
        "delete": Doc(
            "deleteWallet",
            "Delete a wallet's seed (restorable while retained; derived accounts stay)",
            TAG,
            s.MessageResponse,
            ("404", *ERRORS_AUTH),
            parameters=item,
        ),
        "derive": Doc(
            "deriveAccounts",
            "Derive accounts (by index, or the next ones)",
            TAG,
            ws.DeriveResponse,
            ("400", "403", "404", "409", *ERRORS_AUTH),
            request=ws.DeriveBody,
            parameters=item,
            description="Paths m/purpose'/coin'/account'/change/index (docs/"
            "wallets.md). Without index, the next indices are taken atomically; the "
            "same path again answers the same account; preview stores nothing. "
            "Beyond the schema: index + count stays below 2^31 (400 "
            "`invalid_index`).",
            examples=DERIVE_EXAMPLES,
        ),
        "accounts": Doc(
            "listWalletAccounts",
            "The accounts derived from a wallet (of the families the token may use), oldest first",
            TAG,
            ws.WalletAccountsResponse,
            ("400", "404", *ERRORS_AUTH),
            parameters=(*item, *pages),
        ),
        "xpub": Doc(
            "walletXpub",
            "The account-level extended public key",
            TAG,
            ws.XpubResponse,
            ("400", "403", "404", *ERRORS_AUTH),
            parameters=(*item, *params.XPUB),
            description="Deriving change/index from it gives exactly the service's "
            "addresses; UTXO families add BIP380 descriptors. Beyond the schema "
            "(a query parameter's schema cannot depend on another's): network, "
            "address_type and format must be the family's (400 `unknown_network`, "
            "`invalid_option`, `invalid_format`).",
        ),
        "export": Doc(
            "exportWallet",
            "Export a wallet's phrase",
            TAG,
            ws.WalletExportResponse,
            ("403", "404", "423", *ERRORS_AUTH),
            parameters=item,
            description="Only with CHAINKEYS_EXPORT_ENABLED and the `export` scope; "
            "audited; the wallet is marked exported for good; Cache-Control: "
            "no-store. 423 while any freeze holds in the tenant (the phrase gives the "
            "keys of every account derived from it).",
        ),
    }
    return [
        resource(
            "/wallets",
            {
                "GET": Op(list_wallets, "read", NONE, docs["list"]),
                "POST": Op(create_wallet, "create", EVERY, docs["create"]),
            },
        ),
        resource(
            "/wallets/{wallet}",
            {
                "GET": Op(get_wallet, "read", NONE, docs["get"]),
                "DELETE": Op(delete_wallet, "delete", EVERY, docs["delete"]),
            },
        ),
        resource(
            "/wallets/{wallet}/accounts",
            {
                "GET": Op(wallet_accounts, "read", NONE, docs["accounts"]),
                "POST": Op(derive_accounts, "create", BY_REQUEST, docs["derive"]),
            },
        ),
        resource(
            "/wallets/{wallet}/xpub", {"GET": Op(wallet_xpub, "read", BY_REQUEST, docs["xpub"])}
        ),
        resource(
            "/wallets/{wallet}/export", {"POST": Op(export_wallet, "export", EVERY, docs["export"])}
        ),
    ]
