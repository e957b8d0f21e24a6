"""`chainkeys wallet`: an operator's view of a tenant's HD wallets (list, show, derive,
xpub, restore). No export here: a phrase leaves only through the API, under the same
setting and scope as a key export, and audited."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from chainkeys.cli.common import DataDir, group, run, settings_for, when
from chainkeys.tokens.service import DEFAULT_SCOPES, Principal

if TYPE_CHECKING:  # the services are imported by the command that runs, not by --help
    from chainkeys.bootstrap import Services
    from chainkeys.wallets.models import WalletView

wallet_app = group("HD wallets of a tenant (operator).")
Tenant = Annotated[str, typer.Argument(help="tenant name")]
Wallet = Annotated[str, typer.Argument(help="the wallet's id or name")]
Family = Annotated[str, typer.Option(help="cosmos, dogecoin, eos or litecoin")]
Network = Annotated[str | None, typer.Option(help="default: the family's")]
AddressType = Annotated[str | None, typer.Option(help="Litecoin: p2wpkh, p2sh-p2wpkh, p2pkh")]
Account = Annotated[int, typer.Option(min=0, help="BIP44 account")]
AsJson = Annotated[bool, typer.Option("--json", help="JSON output")]


async def operator(svc: Services, tenant: str) -> Principal:
    """The tenant as the operator acts for it (audited with no token id)."""
    return Principal(await svc.tokens.tenant_id(tenant), tenant, "", DEFAULT_SCOPES)


def _echo(record: object, as_json: bool, line: str) -> None:
    typer.echo(msgspec.json.encode(record).decode() if as_json else line)


@wallet_app.command("list")
def wallet_list(tenant: Tenant, as_json: AsJson = False, data_dir: DataDir = None) -> None:
    """The tenant's wallets: id, name, fingerprint, created, exported."""

    async def work(svc: Services) -> None:
        who, cursor = await operator(svc, tenant), None
        while True:
            views, cursor = await svc.wallets.page(who, 1000, cursor)
            for v in views:
                _echo(
                    _record(v),
                    as_json,
                    f"{v.id}  {v.name:24}  {v.fingerprint}  {when(v.created_ms)}  "
                    f"{'exported' if v.exported else '-'}",
                )
            if cursor is None:
                return

    run(settings_for(data_dir), work)


class _Wallet(msgspec.Struct):
    id: str
    name: str
    fingerprint: str
    created: str
    exported: bool


def _record(v: WalletView) -> _Wallet:
    return _Wallet(v.id, v.name, v.fingerprint, when(v.created_ms), v.exported)


@wallet_app.command("show")
def wallet_show(tenant: Tenant, wallet: Wallet, data_dir: DataDir = None) -> None:
    """One wallet (by id or name), as JSON."""

    async def work(svc: Services) -> None:
        view = await svc.wallets.get(await operator(svc, tenant), wallet)
        typer.echo(msgspec.json.encode(_record(view)).decode())

    run(settings_for(data_dir), work)


@wallet_app.command("derive")
def wallet_derive(
    tenant: Tenant,
    wallet: Wallet,
    family: Family,
    network: Network = None,
    address_type: AddressType = None,
    account: Account = 0,
    change: Annotated[int, typer.Option(min=0, max=1, help="0 receive, 1 change")] = 0,
    index: Annotated[int | None, typer.Option(min=0, help="default: the next")] = None,
    count: Annotated[int, typer.Option(min=1, max=100)] = 1,
    preview: Annotated[bool, typer.Option(help="derive only, store nothing")] = False,
    data_dir: DataDir = None,
) -> None:
    """Derive accounts (stored as the tenant's, unless --preview): one line each."""

    from chainkeys.wallets.models import DeriveRequest

    async def work(svc: Services) -> None:
        req = DeriveRequest(
            family, network, address_type, account, change, index, count, None, preview
        )
        for v in await svc.wallets.derive(await operator(svc, tenant), wallet, req):
            origin = v.origin
            typer.echo(
                f"{origin.index if origin else '-':>6}  {origin.path if origin else '-':24}"
                f"  {v.address}"
            )

    run(settings_for(data_dir), work)


@wallet_app.command("xpub")
def wallet_xpub(
    tenant: Tenant,
    wallet: Wallet,
    family: Family,
    network: Network = None,
    address_type: AddressType = None,
    account: Account = 0,
    fmt: Annotated[str | None, typer.Option("--format", help="xpub, Ltub, zpub, dgub, …")] = None,
    data_dir: DataDir = None,
) -> None:
    """The account-level extended public key (and, for UTXO families, descriptors)."""

    async def work(svc: Services) -> None:
        who = await operator(svc, tenant)
        answer = await svc.wallets.xpub(who, wallet, family, network, address_type, account, fmt)
        typer.echo(f"{answer.key.format}  {answer.key.path}  {answer.key.xpub}")
        for desc in (answer.descriptor, answer.change_descriptor):
            if desc:
                typer.echo(desc)

    run(settings_for(data_dir), work)


@wallet_app.command("restore")
def wallet_restore(tenant: Tenant, wallet: Wallet, data_dir: DataDir = None) -> None:
    """Undo a wallet delete while it is retained."""

    async def work(svc: Services) -> str:
        who = await operator(svc, tenant)
        view = await svc.wallets.restore(who.tenant_id, wallet, who)
        return view.id

    typer.echo(f"restored wallet {run(settings_for(data_dir), work)} for tenant {tenant}")
