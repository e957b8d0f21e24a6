"""`chainkeys integrity`: verify the store's authenticated rows and heads, adopt a
store explicitly (vault/adoption.py: nothing adopts itself), and rotate its MAC key
(vault/rotation.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.bootstrap import Services, open_unadopted
from chainkeys.cli.common import DataDir, fail, finish, group, run, settings_for
from chainkeys.errors import Conflict
from chainkeys.store.sql import Tx
from chainkeys.vault.adoption import Plan, adopt, inspecting, plan

integrity_app = group(
    "Verify the store's authenticated rows, adopt a store, or rotate its MAC key."
)
SHOWN = 50  # rows named per table before "and N more"


@integrity_app.command("verify")
def verify(
    checkpoints: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoints",
            exists=True,
            dir_okay=False,
            help=(
                "also check the store against the newest checkpoint in this copy of an "
                "audit device (what a syslog collector or HTTP receiver stored); repeat "
                "for several"
            ),
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Check every authenticated row's MAC and every tenant's head against its rows,
    and the store against the audit devices' newest checkpoints.

    Exits 1 naming each failure (a row edited, put back from an older copy, removed or
    added by someone without the master key; a checkpoint line that fails its MAC; a
    store behind the audit file's or a copy's checkpoint). Not a start: what a start
    would refuse (a failing ring, a store behind a checkpoint) is named, not refused."""
    from chainkeys.audit.rollback import compare, unreadable
    from chainkeys.vault.verify import verify_store

    settings = settings_for(data_dir)
    files = ([settings.audit_file] if settings.audit_file is not None else []) + list(
        checkpoints or []
    )

    async def work() -> Any:  # (not a start: a ring that fails is reported, not refused)
        db, barrier = await open_unadopted(settings)
        try:
            gate = await inspecting(db, barrier)
            return await verify_store(db, gate, full=True), await compare(db, gate, files)
        finally:
            await db.close()

    report, compared = finish(work)
    for kind in unreadable(settings):
        typer.echo(
            f"note: the {kind} audit device cannot be read back: check a copy of what it "
            "received with --checkpoints FILE"
        )
    for seen in compared:
        for where in seen.found.forged:
            report.failures.append(f"the checkpoint line in {where} fails its MAC: not trusted")
        if seen.found.foreign:
            typer.echo(
                f"note: {seen.path} holds {seen.found.foreign} checkpoints of another store "
                "(another integrity key), after its newest of this one: not compared"
            )
        newest = seen.found.newest
        if newest is None:
            typer.echo(f"note: {seen.path} holds no checkpoint of this store")
        elif seen.behind:
            report.failures += [
                f"behind the checkpoint of {newest.time} ({newest.where}): {late}"
                for late in seen.behind
            ]
        else:
            typer.echo(f"checkpoint of {newest.time} in {seen.path}: the store is not behind it")
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


@integrity_app.command("rotate")
def rotate_command(data_dir: DataDir = None) -> None:
    """Rotate the integrity MAC key: a new key MACs every authenticated row, audit row,
    link and head again, then the old key is retired (a MAC under it is refused from
    then on); audited as `integrity.rotate`. Token digests keep their key (the tokens
    are not stored, so they could not be digested again).

    Stop every server first: the command refuses while another process has a live
    heartbeat, and refuses a store that does not verify. Interrupted, run it again: it
    finishes the rotation it started. Needs the master key."""
    from chainkeys.audit.rekey import rekey_audit
    from chainkeys.vault.barrier import live_since
    from chainkeys.vault.repository import KeyUsers
    from chainkeys.vault.rotation import Rotated, rotate

    settings = settings_for(data_dir)

    async def work(svc: Services) -> Rotated:
        gate = svc.barrier.integrity
        if gate is None:
            fail("the integrity key is not open")

        async def live() -> list[str]:
            since = live_since(settings.key_refresh_seconds)
            async with svc.db.read() as tx:
                users = await KeyUsers.all(tx, gate)
            return [
                f"{u.host} pid {u.pid}"
                for u in users
                if u.seen_ms >= since and u.process != svc.barrier.process
            ]

        async def record(tx: Tx, details: dict[str, Any]) -> None:  # the operator's
            await Audit.insert(tx, audit_event(None, "integrity.rotate", "ok", details=details))

        try:
            return await rotate(svc.db, svc.barrier, gate, live, rekey_audit, record)
        except Conflict as exc:  # every refusal audited (its message names no key)
            refused = audit_event(None, "integrity.rotate", exc.code, details={"why": exc.message})
            await Audit.record(svc.db, refused)
            raise

    done = run(settings, work)
    again = "finished the rotation left unfinished: " if done.resumed else ""
    typer.echo(
        f"integrity rotate: {again}MAC key generation {done.new} writes; "
        f"{sum(done.counts.values())} rows MACed again; generations {done.old} retired"
    )
    for table, n in sorted(done.counts.items()):
        typer.echo(f"  {table}: {n}")
