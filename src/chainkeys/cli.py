"""The `chainkeys` command: serve, tokens, database. Calls the service, never the API."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from chainkeys import __version__, logs
from chainkeys.bootstrap import (
    Admin,
    Services,
    copy_between,
    open_admin,
    open_services,
    upgrade_schema,
)
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError
from chainkeys.tokens.service import parse_duration, parse_families, parse_scopes

app = typer.Typer(no_args_is_help=True, help="chainkeys: multi-chain key custody service.")
token_app = typer.Typer(no_args_is_help=True, help="Issue, list and revoke API tokens.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema and data.")
key_app = typer.Typer(no_args_is_help=True, help="Master-key rotation.")
account_app = typer.Typer(no_args_is_help=True, help="Operator recovery of deleted accounts.")
app.add_typer(token_app, name="token")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"chainkeys {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
) -> None:
    """chainkeys: multi-chain key custody service."""


app.add_typer(db_app, name="db")
app.add_typer(key_app, name="key")
app.add_typer(account_app, name="account")

T = TypeVar("T")
DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="data directory (CHAINKEYS_DATA_DIR)")
]


def settings_for(data_dir: Path | None) -> Settings:
    # Through the environment, so worker processes read the same settings.
    if data_dir is not None:
        os.environ["CHAINKEYS_DATA_DIR"] = str(data_dir)
    return Settings()


def fail(message: str) -> NoReturn:
    typer.echo(f"chainkeys: {message}", err=True)
    raise typer.Exit(1)


def run(settings: Settings, work: Callable[[Services], Awaitable[T]]) -> T:
    """Open the services, do `work`, close; domain errors end the command cleanly."""

    async def main() -> T:
        svc = await open_services(settings)
        try:
            return await work(svc)
        finally:
            await svc.close()

    return _finish(main)


def run_admin(settings: Settings, work: Callable[[Admin], Awaitable[T]]) -> T:
    """As `run`, for commands that need no master key (tokens, tenants, audit)."""

    async def main() -> T:
        admin = await open_admin(settings)
        try:
            return await work(admin)
        finally:
            await admin.close()

    return _finish(main)


def _finish(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(main())
    except ChainkeysError as exc:
        fail(exc.message)
        raise  # unreachable: fail exits


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address (CHAINKEYS_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (CHAINKEYS_PORT)")] = None,
    data_dir: DataDir = None,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 1,
) -> None:
    """Start the HTTP API (SQLite in the data directory unless CHAINKEYS_DATABASE_URL is set)."""
    from chainkeys.api.serve import serve as serve_api

    if host is not None:
        os.environ["CHAINKEYS_HOST"] = host
    if port is not None:
        os.environ["CHAINKEYS_PORT"] = str(port)
    settings = settings_for(data_dir)
    logs.configure(settings.log_level, settings.log_json)
    # Schema, master key and the first token are settled once, before any worker starts.
    first = run(settings, lambda svc: svc.tokens.issue_first())
    if first is not None:
        typer.echo(
            'chainkeys: first start: issued an API token for tenant "default". '
            "It is shown only this once; keep it:"
        )
        typer.echo(first)
        sys.stdout.flush()
    serve_api(settings, workers)


@token_app.command("create")
def token_create(
    tenant: Annotated[str, typer.Option(help="tenant that will own the token")],
    label: Annotated[str, typer.Option(help="a note to recognise the token by")] = "",
    scope: Annotated[
        str | None,
        typer.Option(help="comma list of read,create,delete,sign,export (default: all but export)"),
    ] = None,
    expires: Annotated[
        str | None, typer.Option(help="lifetime, e.g. 30d, 12h, 90m (default: never)")
    ] = None,
    family: Annotated[
        str | None, typer.Option(help="only these families' accounts, e.g. cosmos,eos")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Issue a token; it is printed once, alone on the last line."""
    try:
        scopes = parse_scopes(scope)
        lifetime = parse_duration(expires) if expires is not None else None
        families = parse_families(family)
    except ChainkeysError as exc:
        fail(exc.message)
    row, token = run_admin(
        settings_for(data_dir),
        lambda admin: admin.tokens.create(tenant, label, scopes, lifetime, families),
    )
    typer.echo(
        f"token id {row.id} for tenant {row.tenant}, scopes {row.scopes}"
        + (f", families {row.families}" if row.families else "")
        + (f", expires {_when(row.expires_ms)}" if row.expires_ms else "")
        + " (shown once, keep it):"
    )
    typer.echo(token)


@token_app.command("list")
def token_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's tokens")] = None,
    data_dir: DataDir = None,
) -> None:
    """List tokens (ids and labels; the tokens themselves are never stored)."""
    rows = run_admin(settings_for(data_dir), lambda admin: admin.tokens.list(tenant))
    typer.echo(
        f"{'ID':32}  {'TENANT':20}  {'SCOPES':26}  {'FAMILIES':16}  {'CREATED':20}  "
        f"{'EXPIRES':20}  {'REVOKED':20}  LABEL"
    )
    for r in rows:
        created, revoked, expires = _when(r.created_ms), _when(r.revoked_ms), _when(r.expires_ms)
        typer.echo(
            f"{r.id:32}  {r.tenant:20}  {r.scopes:26}  {r.families or 'all':16}  {created:20}  "
            f"{expires:20}  {revoked:20}  {r.label}"
        )


@token_app.command("revoke")
def token_revoke(token_id: str, data_dir: DataDir = None) -> None:
    """Revoke a token by id; requests with it fail at once."""
    run_admin(settings_for(data_dir), lambda admin: admin.tokens.revoke(token_id))
    typer.echo(f"revoked {token_id}")


@app.command()
def audit(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's events")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="ISO date or time (UTC unless it says), e.g. 2026-11-21T10:00"),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="at most this many events (default: all)")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Print the audit log: who created, imported, deleted what, and token events."""
    since_ms = 0
    if since is not None:
        try:
            when = datetime.fromisoformat(since)
        except ValueError:
            fail(f"--since {since!r} is not an ISO date or time")
            return
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        since_ms = int(when.timestamp() * 1000)

    async def work(admin: Admin) -> int:
        tenant_id = await admin.tokens.tenant_id(tenant) if tenant is not None else None
        after, shown, page = 0, 0, 1000
        names = await admin.tokens.tenant_names()
        while limit is None or shown < limit:
            want = page if limit is None else min(page, limit - shown)
            events = await admin.audit.events(tenant_id, since_ms, after, want)
            for e in events:
                who = names.get(e.tenant_id or "", e.tenant_id or "-")
                typer.echo(
                    f"{_when(e.created_ms)}  {who:20}  {e.action:12}  {e.outcome:20}  "
                    f"{e.family or '-':8}  {e.account_name or '-'}  "
                    f"token={e.actor_token_id or '-'}  rid={e.request_id or '-'}"
                )
            shown += len(events)
            if len(events) < want:
                break
            after = events[-1].id or after
        return shown

    run_admin(settings_for(data_dir), work)


@account_app.command("deleted")
def account_deleted(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's")] = None,
    data_dir: DataDir = None,
) -> None:
    """List deleted accounts still retained (restorable until the retention period ends)."""
    rows = run(settings_for(data_dir), lambda svc: svc.accounts.deleted(tenant))
    typer.echo(f"{'DELETED':20}  {'TENANT':32}  {'FAMILY':8}  NAME")
    for d in rows:
        a = d.account
        typer.echo(f"{_when(d.deleted_ms):20}  {a.tenant_id:32}  {a.family:8}  {a.name}")


@account_app.command("restore")
def account_restore(
    family: Annotated[str, typer.Argument(help="cosmos, dogecoin, eos or litecoin")],
    name: Annotated[str, typer.Argument(help="the account name (address)")],
    tenant: Annotated[str, typer.Option(help="tenant that owned it")],
    data_dir: DataDir = None,
) -> None:
    """Bring back a deleted account (its sealed key was retained)."""
    view = run(settings_for(data_dir), lambda svc: svc.accounts.restore(tenant, family, name))
    typer.echo(f"restored {view.family} account {view.name} for tenant {tenant}")


@key_app.command("rotate")
def key_rotate(data_dir: DataDir = None) -> None:
    """Re-seal every secret under a new master key (safe to interrupt and run again).

    Key file: a new key is made beside the current one, every secret is re-sealed,
    then it replaces master.key; the old key stays as master.key.retired-<id>
    until `chainkeys key retire`. CHAINKEYS_MASTER_KEY: set it to the new key and
    CHAINKEYS_PREVIOUS_MASTER_KEYS to the old one(s), then run this. Restart every
    replica afterwards so it seals with the new key.
    """
    report = run(settings_for(data_dir), lambda svc: svc.keys.rotate())
    typer.echo(
        f"re-sealed {report.accounts} accounts and {report.records} other records "
        f"under master key {report.new_key_id}"
    )
    if report.retired_key_file:
        typer.echo(f"old key kept at {report.retired_key_file}; `chainkeys key retire` removes it")


@key_app.command("retire")
def key_retire(data_dir: DataDir = None) -> None:
    """Delete retired key files once nothing is sealed by them any more."""
    removed = run(settings_for(data_dir), lambda svc: svc.keys.retire())
    typer.echo("\n".join(f"removed {p}" for p in removed) or "no retired key files")


@db_app.command("upgrade")
def db_upgrade(data_dir: DataDir = None) -> None:
    """Apply pending schema migrations."""
    revision = asyncio.run(upgrade_schema(settings_for(data_dir)))
    typer.echo(f"schema at revision {revision}")


@db_app.command("copy")
def db_copy(
    source: Annotated[str, typer.Option("--from", help="database URL to copy from")],
    target: Annotated[str, typer.Option("--to", help="empty database URL to copy into")],
    data_dir: DataDir = None,
) -> None:
    """Copy every tenant, token hash and sealed account between SQLite and PostgreSQL.

    URLs look like sqlite:////abs/path/chainkeys.db or postgresql://user@host/db.
    The master key (CHAINKEYS_MASTER_KEY or the key file) must open the source.
    """
    from chainkeys.store.copy import display_url

    try:
        report = asyncio.run(copy_between(settings_for(data_dir), source, target))
    except ChainkeysError as exc:
        fail(f"copy failed: {exc.message}")
        raise  # unreachable: fail exits
    typer.echo(f"copied {display_url(source)} -> {display_url(target)}")
    for table, count in report.counts.items():
        typer.echo(f"  {table:12} {count}")
    keys = ", ".join(sorted(report.key_ids)) or "-"
    typer.echo(f"verified: row counts match; {report.opened} accounts open (key ids {keys})")


if __name__ == "__main__":
    app()
