"""The `chainkeys` command: serve, tokens, database. Calls the service, never the API."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from chainkeys import logs
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError
from chainkeys.service import Services, open_services
from chainkeys.store import migrate
from chainkeys.store.db import Database

app = typer.Typer(no_args_is_help=True, help="chainkeys: multi-chain key custody service.")
token_app = typer.Typer(no_args_is_help=True, help="Issue, list and revoke API tokens.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema and data.")
app.add_typer(token_app, name="token")
app.add_typer(db_app, name="db")

T = TypeVar("T")
DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="data directory (CHAINKEYS_DATA_DIR)")
]


def settings_for(data_dir: Path | None) -> Settings:
    # Through the environment, so worker processes read the same settings.
    if data_dir is not None:
        os.environ["CHAINKEYS_DATA_DIR"] = str(data_dir)
    return Settings()


def fail(message: str) -> None:
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
    import uvicorn

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
    uvicorn.run(
        "chainkeys.api.app:app_factory",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_config=None,
        access_log=False,
        server_header=False,
        loop="uvloop",
        http="httptools",
    )


@token_app.command("create")
def token_create(
    tenant: Annotated[str, typer.Option(help="tenant that will own the token")],
    label: Annotated[str, typer.Option(help="a note to recognise the token by")] = "",
    data_dir: DataDir = None,
) -> None:
    """Issue a token; it is printed once, alone on the last line."""
    row, token = run(settings_for(data_dir), lambda svc: svc.tokens.create(tenant, label))
    typer.echo(f"token id {row.id} for tenant {row.tenant} (shown once, keep it):")
    typer.echo(token)


@token_app.command("list")
def token_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's tokens")] = None,
    data_dir: DataDir = None,
) -> None:
    """List tokens (ids and labels; the tokens themselves are never stored)."""
    rows = run(settings_for(data_dir), lambda svc: svc.tokens.list(tenant))
    typer.echo(f"{'ID':32}  {'TENANT':20}  {'CREATED':20}  {'REVOKED':20}  LABEL")
    for r in rows:
        created, revoked = _when(r.created_ms), _when(r.revoked_ms)
        typer.echo(f"{r.id:32}  {r.tenant:20}  {created:20}  {revoked:20}  {r.label}")


@token_app.command("revoke")
def token_revoke(token_id: str, data_dir: DataDir = None) -> None:
    """Revoke a token by id; requests with it fail at once."""
    run(settings_for(data_dir), lambda svc: svc.tokens.revoke(token_id))
    typer.echo(f"revoked {token_id}")


@db_app.command("upgrade")
def db_upgrade(data_dir: DataDir = None) -> None:
    """Apply pending schema migrations."""
    settings = settings_for(data_dir)
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def main() -> str:
        db = Database(settings.db_url, settings)
        try:
            await migrate.upgrade(db)
            return str(await migrate.current_revision(db))
        finally:
            await db.close()

    typer.echo(f"schema at revision {asyncio.run(main())}")


if __name__ == "__main__":
    app()
