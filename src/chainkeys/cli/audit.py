"""`chainkeys audit`: read the audit log, and verify its chain (audit/chain.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from chainkeys.audit.chain import verify
from chainkeys.audit.copies import verify_file
from chainkeys.audit.repository import AuditEvent, AuditQuery
from chainkeys.bootstrap import Admin
from chainkeys.cli import remote_daily
from chainkeys.cli.common import DataDir, fail, run_admin, settings_for, when
from chainkeys.cli.remote import current

audit_app = typer.Typer(
    help="Read the audit log (oldest first), or verify its chain.", rich_markup_mode=None
)


@audit_app.callback(invoke_without_command=True)
def audit(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option(help="only this tenant's events")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="ISO date or time (UTC unless it says), e.g. 2026-11-21T10:00"),
    ] = None,
    action: Annotated[str | None, typer.Option(help="only this action, e.g. sign")] = None,
    family: Annotated[str | None, typer.Option(help="only this family's events")] = None,
    account: Annotated[str | None, typer.Option(help="only this account's events")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="at most this many events (default: all)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    data_dir: DataDir = None,
) -> None:
    """Print the audit log, oldest first.

    Who created, imported, deleted, signed or was refused what (with the reason), and
    token and policy events. `chainkeys audit verify` checks its chain."""
    if ctx.invoked_subcommand is not None:
        return
    since_ms = 0
    if since is not None:
        try:
            moment = datetime.fromisoformat(since)
        except ValueError:
            fail(f"--since {since!r} is not an ISO date or time")
            return
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        since_ms = int(moment.timestamp() * 1000)
    remote = current()
    if remote is not None:  # the server's GET /audit: newest first, as JSON lines
        given = {"since": since_ms, "action": action, "family": family, "account": account}
        filters = {k: v for k, v in given.items() if v}
        remote_daily.audit_list(remote, tenant, filters, limit)
        return

    async def work(admin: Admin) -> int:
        tenant_id = await admin.tokens.tenant_id(tenant) if tenant is not None else None
        q = AuditQuery(tenant_id, since_ms, action=action, family=family, account=account)
        after, shown, page = 0, 0, 1000
        names = await admin.tokens.tenant_names()
        while limit is None or shown < limit:
            want = page if limit is None else min(page, limit - shown)
            events = await admin.audit.events(q, after, want)
            for e in events:
                who = names.get(e.tenant_id or "", e.tenant_id or "-")
                typer.echo(audit_line(e, who, as_json))
            shown += len(events)
            if len(events) < want:
                break
            after = events[-1].id or after
        return shown

    run_admin(settings_for(data_dir), work)


def audit_line(e: AuditEvent, tenant: str, as_json: bool) -> str:
    """One event: a JSON object, or a line for a person with why it was refused."""
    details = msgspec.json.decode(e.details) if e.details else None
    if as_json:
        record = {
            "id": e.id,
            "time": when(e.created_ms),
            "tenant": tenant,
            "action": e.action,
            "outcome": e.outcome,
            "family": e.family,
            "account": e.account_name,
            "token_id": e.actor_token_id,
            "request_id": e.request_id,
            "details": details,
        }
        return msgspec.json.encode(record).decode()
    line = (
        f"{when(e.created_ms)}  {tenant:20}  {e.action:12}  {e.outcome:20}  "
        f"{e.family or '-':8}  {e.account_name or '-'}  "
        f"token={e.actor_token_id or '-'}  rid={e.request_id or '-'}"
    )
    if isinstance(details, dict):
        extra = [
            f"{k}={details[k]}" for k in ("kind", "reason", "scope", "version") if k in details
        ]
        if extra:
            line += "  " + "  ".join(extra)
    return line


@audit_app.command("verify")
def audit_verify(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's chain")] = None,
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            exists=True,
            dir_okay=False,
            help=(
                "check this copy of an audit device (JSON Lines, or a syslog collector's "
                "file) against the table instead; repeat for a rotated series, oldest first"
            ),
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Check that no audit row was edited, deleted or reordered: walk each tenant's
    chain (every row linked so far, and its head). Exits 1 naming the first row where
    the chain breaks, 0 on an honest log. Rows committed since the server's last round (a
    few seconds) are not linked yet: their MACs are checked and they are counted.

    With --file: check a device's copy instead. Every event in it must equal its row,
    and every row from its first event to its last must be in it; exits 1 naming
    each event or row that is not (no master key needed)."""
    if files:
        verify_copy(files, tenant, data_dir)
        return

    async def work(admin: Admin) -> None:
        if admin.integrity is None:  # keyed: open_admin always opens it
            fail("the audit chain needs the master key")
            return
        tenant_id = await admin.tokens.tenant_id(tenant) if tenant is not None else None
        verdict = await verify(admin.db, admin.integrity, tenant_id, all_tenants=tenant is None)
        if verdict.broken is not None:
            where = f"row {verdict.broken.row_id}: " if verdict.broken.row_id else ""
            fail(
                f"the audit chain is broken at {where}{verdict.broken.reason} "
                f"({verdict.rows} rows checked before it)"
            )
            return
        typer.echo(
            f"audit chain ok: {verdict.rows} rows linked and checked, "
            f"{verdict.unlinked} newer rows not linked yet"
        )

    run_admin(settings_for(data_dir), work, keyed=True)


def verify_copy(files: list[Path], tenant: str | None, data_dir: Path | None) -> None:
    """`audit verify --file`: a device's copy against the table (audit/devices.py)."""

    async def work(admin: Admin) -> None:
        tenant_id = await admin.tokens.tenant_id(tenant) if tenant is not None else None
        check = await verify_file(admin.db, files, tenant_id, every_tenant=tenant is None)
        for note in check.notes:
            typer.echo(f"note: {note}")
        if not check.ok:
            for problem in check.problems:
                typer.echo(problem)
            more = f" (and {check.more} more)" if check.more else ""
            fail(
                f"the copy does not match the audit table: {len(check.problems)} problems "
                f"named above{more}; {check.matched} of its {check.events} events "
                "match"
            )
        typer.echo(
            f"audit copy ok: {check.matched} events, each equal to its row, none "
            "missing between its first and last"
        )

    run_admin(settings_for(data_dir), work)
