"""`chainkeys integrity`: verify the store's authenticated rows and heads, and adopt a
store explicitly (vault/adoption.py: nothing adopts itself)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.bootstrap import open_unadopted
from chainkeys.cli.common import DataDir, fail, finish, group, settings_for
from chainkeys.store.sql import Tx
from chainkeys.vault.adoption import Plan, adopt, inspecting, plan

integrity_app = group("Verify the store's authenticated rows, or adopt a store.")
SHOWN = 50  # rows named per table before "and N more"


@integrity_app.command("verify")
def verify(data_dir: DataDir = None) -> None:
    """Check every authenticated row's MAC and every tenant's head against its rows.

    Exits 1 naming each failure (a row edited, put back from an older copy, removed or
    added by someone without the master key)."""
    from chainkeys.vault.verify import verify_store

    async def work() -> Any:  # (not a start: a ring that fails is reported, not refused)
        db, barrier = await open_unadopted(settings_for(data_dir))
        try:
            return await verify_store(db, await inspecting(db, barrier), full=True)
        finally:
            await db.close()

    report = finish(work)
    rows = sum(report.rows.values())
    if not report.ok:
        for failure in report.failures:
            typer.echo(f"FAILED: {failure}")
        fail(f"integrity verify: {len(report.failures)} failures in {rows} rows")
    typer.echo(
        f"integrity verify: ok, {rows} rows, {report.tenants} tenants' heads, the "
        f"master-key ring's head ({report.master_keys} master keys)"
    )


def _show(found: Plan) -> None:
    typer.echo(f"integrity record: {found.record}")
    for table, n in found.rows.items():
        typer.echo(f"  {table}: {n} rows")
    if not found.doubtful:
        typer.echo("every row carries a valid MAC under the record's key")
        return
    typer.echo(
        f"{found.doubtful} rows carry no valid MAC: whoever wrote them did not hold the "
        "master key (or the store predates integrity). Adopting makes them trusted:"
    )
    for table, names in found.unauthenticated.items():
        for name in names[:SHOWN]:
            typer.echo(f"  - {name}")
        if len(names) > SHOWN:
            typer.echo(f"  - and {len(names) - SHOWN} more in {table}")


@integrity_app.command("adopt")
def adopt_command(
    yes: Annotated[
        bool, typer.Option("--yes", help="adopt without asking (after reading the list)")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only show what it finds")] = False,
    data_dir: DataDir = None,
) -> None:
    """Adopt this store's rows as they are: MAC every row, write the integrity record
    of this release, rebuild every tenant's head; audited as `integrity.adopt`.

    For a store upgraded from an earlier release, or one restored from a backup you
    trust. A store that lost its record without a reason you know was stripped by a
    database writer: restore a backup instead. Needs the master key."""
    settings = settings_for(data_dir)

    async def look() -> Plan:
        db, barrier = await open_unadopted(settings)
        try:
            return (await plan(db, barrier))[0]
        finally:
            await db.close()

    found = finish(look)
    _show(found)
    if dry_run:
        return
    if not yes:
        if not sys.stdin.isatty():
            fail("adopting needs --yes when no terminal can ask (read the list above first)")
        if not typer.confirm("adopt these rows as the store's own?", default=False):
            fail("nothing was adopted")

    async def record(tx: Tx, details: dict[str, Any]) -> None:  # the operator's: no tenant
        await Audit.insert(tx, audit_event(None, "integrity.adopt", "ok", details=details))

    async def work() -> Plan:
        db, barrier = await open_unadopted(settings)
        try:
            return await adopt(db, barrier, record)
        finally:
            await db.close()

    done = finish(work)
    typer.echo(f"adopted: {sum(done.rows.values())} rows; the store starts from now on")
