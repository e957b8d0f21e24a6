"""`chainkeys approver`: an operator's side of approver passkeys (docs/approvals.md
"Passkeys"): one-time enrolment codes, script keys, listing and revoking credentials.
The approver enrols a passkey in the console (or any WebAuthn client) with the code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from chainkeys.cli import governed
from chainkeys.cli.common import DataDir, fail, group, run_admin, settings_for, when
from chainkeys.cli.governed import BreakGlass

if TYPE_CHECKING:  # the services are imported by the command that runs, not by --help
    from chainkeys.approvals.credentials import CredentialRow
    from chainkeys.approvals.passkeys import Passkeys
    from chainkeys.bootstrap import Admin

approver_app = group("Approvers' passkeys and keys (operator).")
Tenant = Annotated[str, typer.Option(help="the tenant")]
Label = Annotated[str, typer.Option(help="the person: their approve tokens' label")]
Group = Annotated[str, typer.Option(help="the approver group")]


def _passkeys(admin: Admin) -> Passkeys:
    from chainkeys.approvals.passkeys import Passkeys

    return Passkeys(admin.db, settings_for(None), admin.integrity)


def enrol_key(
    tenant: str, label: str, group: str, key: Path, break_glass: bool, data_dir: Path | None
) -> CredentialRow | None:
    """A person's public key read from `key` and enrolled in `group` (an approver group,
    or the admins': cli/governance.py), in the store's credentials; on a governed tenant
    filed as a change for its admins instead (its id, digest and diff printed; None),
    unless `break_glass` (cli/governed.py)."""
    try:
        text = key.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {key}: {exc.__class__.__name__}")
    how, done = governed.enrol_key(data_dir, tenant, label, group, text, break_glass)
    if how == "filed":
        governed.echo_filed(tenant, done)
        return None
    if how == "break_glass":
        typer.echo(f"tenant {tenant} is governed:{governed.BREAK_GLASS_NOTE}", err=True)
    row: CredentialRow = done
    return row


@approver_app.command("invite")
def invite(tenant: Tenant, label: Label, group: Group, data_dir: DataDir = None) -> None:
    """A one-time enrolment code (15 minutes) for this person of this group: in the
    console (/ui, signed in with their approve token) they enter it and register a
    passkey. Printed once, alone on the last line."""
    settings = settings_for(data_dir)

    async def work(admin: Admin) -> tuple[str, int]:
        await _holds_approve_token(admin, tenant, label, group)
        code, row = await _passkeys(admin).invite(tenant, label, group)
        return code, row.expires_ms

    code, expires_ms = run_admin(settings, work, keyed=True)
    if settings.public_url is None:
        typer.echo(
            "chainkeys: warning: CHAINKEYS_PUBLIC_URL is not set: the service refuses "
            "enrolment until it is (passkeys are bound to it)",
            err=True,
        )
    typer.echo(
        f"enrolment code for {label} ({group}) in {tenant}, single use, until {when(expires_ms)}:"
    )
    typer.echo(code)


async def _holds_approve_token(admin: Admin, tenant: str, label: str, group: str) -> None:
    """Refuse (audited) an invite for a person with no live approve token of `group`.

    Refused rather than warned: the console enrols a passkey only for someone signed in
    with such a token, and a vote counts only from one, so the code could never be
    used; it is nearly always a typo in --label or --group, or a token not made yet,
    and the operator is told which. Labels compare as votes compare them (one person).
    """
    from chainkeys.approvals.proofs import person
    from chainkeys.audit.service import audit_event
    from chainkeys.clock import now_ms
    from chainkeys.errors import BadRequest
    from chainkeys.tokens.service import Principal

    tenant_id = await admin.tokens.tenant_id(tenant)
    now = now_ms()
    theirs = [
        t
        for t in await admin.tokens.list(tenant)
        if person(t.label) == person(label)
        and t.revoked_ms is None
        and (t.expires_ms is None or t.expires_ms > now)
        and "approve" in t.scopes.split(",")
    ]
    if any(t.group == group for t in theirs):
        return
    groups = sorted({t.group for t in theirs if t.group})
    held = f" (their approve tokens are of {', '.join(groups)})" if groups else ""
    details = {"label": label, "group": group, "code": "no_approve_token"}
    actor = Principal(tenant_id, tenant, "")
    await admin.audit.record(audit_event(actor, "approver.invite", "refused", details=details))
    raise BadRequest(
        f"{label} holds no live approve token of group {group} in {tenant}{held}, so a "
        "passkey enrolled with this code could never vote; create one first: chainkeys "
        f"token create --tenant {tenant} --scope approve --group {group} --label {label}",
        code="no_approve_token",
    )


@approver_app.command("add-key")
def add_key(
    tenant: Tenant,
    label: Label,
    group: Group,
    key: Annotated[Path, typer.Option(help="the public key: PEM or base64 DER, P-256 or Ed25519")],
    break_glass: BreakGlass = False,
    data_dir: DataDir = None,
) -> None:
    """Enrol a script's public key as this person's: its signature of a request's
    challenge (GET /approvals/{id}/challenge) is their vote, on passkey rules too. On
    a governed tenant, filed as a change for its admins (its id printed last)."""
    row = enrol_key(tenant, label, group, key, break_glass, data_dir)
    if row is None:
        return
    typer.echo(
        f"{row.kind} key {row.id} enrolled for {row.label} ({row.approver_group}): "
        'its votes carry "signature": {"credential": its id, "value": …}'
    )


@approver_app.command("list")
def list_credentials(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    data_dir: DataDir = None,
) -> None:
    """Every approver credential: passkeys and script keys, live and revoked."""
    rows = run_admin(settings_for(data_dir), lambda admin: _passkeys(admin).listed(tenant))
    for name, r in rows:
        record = {
            "id": r.id,
            "tenant": name,
            "label": r.label,
            "group": r.approver_group,
            "kind": r.kind,
            "created": when(r.created_ms),
            "last_used": when(r.last_used_ms) if r.last_used_ms else None,
            "revoked": when(r.revoked_ms) if r.revoked_ms else None,
        }
        if as_json:
            typer.echo(msgspec.json.encode(record).decode())
        else:
            state = when(r.revoked_ms) if r.revoked_ms else "live"
            typer.echo(
                f"{r.id:28}  {name:20}  {r.kind:8}  {r.approver_group:12}  {state:20}  {r.label}"
            )


@approver_app.command("revoke")
def revoke(
    credential: Annotated[str, typer.Argument(help="the credential's id (apc_…)")],
    data_dir: DataDir = None,
) -> None:
    """Revoke any approver's credential: its signatures count no more, on votes already
    cast too (they are verified again when the quorum signs)."""
    row = run_admin(
        settings_for(data_dir), lambda admin: _passkeys(admin).revoke(credential), keyed=True
    )
    typer.echo(f"revoked {row.id} ({row.kind}) of {row.label}")
