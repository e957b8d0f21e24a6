"""`chainkeys freeze`: the operator's side of emergency freezes (docs/freezes.md).
Approvers make freezes (POST /freezes); only an operator ends one before its `until`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from chainkeys.cli import remote_daily
from chainkeys.cli.common import DataDir, fail, group, run_admin, settings_for, when
from chainkeys.cli.remote import current

if TYPE_CHECKING:  # the services are imported by the command that runs, not by --help
    from chainkeys.bootstrap import Admin
    from chainkeys.freezes.service import FreezeService

freeze_app = group("Emergency freezes: list and lift (operator); with --url list and create.")
Tenant = Annotated[str, typer.Option(help="the tenant")]


def _freezes(admin: Admin) -> FreezeService:
    from chainkeys.freezes.service import FreezeService

    webhook = settings_for(None).webhook_url is not None
    return FreezeService(admin.db, webhook=webhook, integrity=admin.integrity)


@freeze_app.command("list")
def list_freezes(
    tenant: Tenant,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    data_dir: DataDir = None,
) -> None:
    """The tenant's freezes holding now."""
    from chainkeys.freezes.service import record_of

    remote = current()
    if remote is not None:
        remote_daily.freeze_list(remote, tenant, as_json)
        return

    rows = run_admin(  # keyed: freezes are authenticated rows
        settings_for(data_dir), lambda admin: _freezes(admin).listed(tenant), keyed=True
    )
    for r in rows:
        if as_json:
            typer.echo(msgspec.json.encode(record_of(r)).decode())
        else:
            until = when(r.until_ms) if r.until_ms is not None else "until lifted"
            scope = r.account or "(the tenant)"
            typer.echo(f"{r.id:28}  {scope:60}  {until:20}  {r.created_by}: {r.reason}")
    if not rows and not as_json:
        typer.echo(f"no freeze holds in {tenant}")


@freeze_app.command("create")
def create(
    tenant: Tenant,
    reason: Annotated[str, typer.Option(help="why: shown with every refusal it causes")],
    account: Annotated[
        str | None, typer.Option(help="only this account, FAMILY/NAME (default: the tenant)")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="when it ends, ISO time, e.g. 2026-12-01T09:00:00Z")
    ] = None,
) -> None:
    """Freeze the tenant, or one account, now (with --url: POST /freezes, as an
    approver or admin token); audited and announced by the server."""
    remote = current()
    if remote is None:
        fail(
            "freezes are made by the tenant's approvers and admins through a running "
            "server: give --url URL and a token file (--token-file)"
        )
    remote_daily.freeze_create(remote, tenant, account, until, reason)


@freeze_app.command("lift")
def lift(
    tenant: Tenant,
    freeze: Annotated[str, typer.Argument(help="the freeze's id (frz_…)")],
    data_dir: DataDir = None,
) -> None:
    """End a freeze now: what it stopped may be done again. Audited (`freeze.lift`) and
    announced by the webhook (`freeze.lifted`)."""
    settings = settings_for(data_dir)
    row = run_admin(settings, lambda admin: _freezes(admin).lift(tenant, freeze), keyed=True)
    scope = row.account or f"the tenant {tenant}"
    typer.echo(f"lifted {row.id} over {scope} ({row.reason})")
    if settings.webhook_url is None:
        typer.echo(
            "chainkeys: note: CHAINKEYS_WEBHOOK_URL is not set for this command, so the "
            "lift was not announced (run it with the servers' settings)",
            err=True,
        )
