"""`chainkeys admin` and `chainkeys governance`: the operator's side of governance
(docs/governance.md): admins' keys, and a tenant's quorum and delay, set once with
the master key (afterwards only through a governed change)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import typer

from chainkeys.cli.common import DataDir, group, run_admin, settings_for, when
from chainkeys.cli.governed import BreakGlass

admin_app = group("Tenants' admins: the people who sign governed changes (operator).")
governance_app = group("A tenant's governance: the quorum of admins and the delay (operator).")
TenantOption = Annotated[str, typer.Option("--tenant", help="the tenant")]
TenantArg = Annotated[str, typer.Argument(help="the tenant")]


@admin_app.command("add-key")
def add_key(
    tenant: TenantOption,
    label: Annotated[str, typer.Option(help="the person: their admin tokens' label")],
    key: Annotated[Path, typer.Option(help="the public key: PEM or base64 DER, P-256 or Ed25519")],
    break_glass: BreakGlass = False,
    data_dir: DataDir = None,
) -> None:
    """Enrol an admin's public key: its signatures of a change's challenge are their
    votes (POST /changes/{id}/approve). Prints the credential id. On a governed tenant
    a new admin key is a governed change (kind admin), filed for the admins; its id is
    printed last."""
    from chainkeys.approvals.proofs import ADMINS
    from chainkeys.cli.approver import enrol_key

    row = enrol_key(tenant, label, ADMINS, key, break_glass, data_dir)
    if row is None:
        return
    typer.echo(
        f"{row.kind} admin key enrolled for {row.label} in {tenant}: its votes carry "
        '"signature": {"credential": this id, "value": …}'
    )
    typer.echo(row.id)


@admin_app.command("invite")
def admin_invite(
    tenant: TenantOption,
    label: Annotated[str, typer.Option(help="the person: their admin tokens' label")],
    data_dir: DataDir = None,
) -> None:
    """A one-time enrolment code (15 minutes) for an admin: in the console (/ui, signed
    in with their admin token) they enter it on the Passkeys page and register a
    passkey, which then signs their votes on changes. Printed once, alone on the last
    line."""
    from chainkeys.approvals.proofs import ADMINS
    from chainkeys.cli.approver import _passkeys

    settings = settings_for(data_dir)
    code, row = run_admin(
        settings, lambda a: _passkeys(a).invite(tenant, label, ADMINS), keyed=True
    )
    if settings.public_url is None:
        typer.echo(
            "chainkeys: warning: CHAINKEYS_PUBLIC_URL is not set: the service refuses "
            "enrolment until it is (passkeys are bound to it)",
            err=True,
        )
    typer.echo(
        f"enrolment code for admin {label} in {tenant}, single use, until {when(row.expires_ms)}:"
    )
    typer.echo(code)


@governance_app.command("set")
def governance_set(
    tenant: TenantArg,
    quorum: Annotated[int, typer.Option(help="how many admins sign a change (1 to 20)")],
    delay: Annotated[
        str, typer.Option(help="how long a change that loosens waits once signed: 24h, 7d, 0")
    ],
    data_dir: DataDir = None,
) -> None:
    """Govern TENANT: from now on its policy changes by a quorum of its admins, and a
    change that loosens anything waits DELAY. Once only: afterwards its quorum and
    delay change only through a governed change."""
    settings = settings_for(data_dir)
    webhook = settings.webhook_url is not None
    row = run_admin(
        settings, lambda a: a.governance(webhook).set(tenant, quorum, delay), keyed=True
    )
    typer.echo(
        f"tenant {tenant} is governed: {row.quorum} admins sign a change; one that "
        f"loosens waits {row.delay_ms // 1000} s"
    )


@governance_app.command("show")
def governance_show(
    tenant: TenantArg,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
    data_dir: DataDir = None,
) -> None:
    """Print the tenant's quorum and delay, or say it is not governed."""
    settings = settings_for(data_dir)
    row = run_admin(settings, lambda a: a.governance(False).show(tenant), keyed=True)
    record = (
        None
        if row is None
        else {
            "quorum": row.quorum,
            "delay_seconds": row.delay_ms // 1000,
            "since": when(row.created_ms),
        }
    )
    if as_json:
        typer.echo(msgspec.json.encode({"tenant": tenant, "governance": record}).decode())
    elif record is None:
        typer.echo(f"tenant {tenant} is not governed: its policy is set by the operator alone")
    else:
        typer.echo(
            f"tenant {tenant}: quorum {record['quorum']}, delay {record['delay_seconds']} s "
            f"(since {record['since']})"
        )
