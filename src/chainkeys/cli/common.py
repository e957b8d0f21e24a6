"""What every `chainkeys` command shares: settings, opening services, failing cleanly."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from chainkeys.bootstrap import Admin, NoStore, Services, open_admin, open_services
from chainkeys.config import ConfigError, Settings, load_settings
from chainkeys.errors import ChainkeysError

T = TypeVar("T")
DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="data directory (CHAINKEYS_DATA_DIR)")
]


def settings_for(data_dir: Path | None) -> Settings:
    """The settings, or one line and exit 2 when one cannot be used; unknown
    CHAINKEYS_* variables are warned about (with a "did you mean"). Under --url no
    command reads the local settings: one that would is refused (cli/remote.py)."""
    from chainkeys.cli.remote import current, refuse_store

    if current() is not None:
        refuse_store()
    # Through the environment, so worker processes read the same settings.
    if data_dir is not None:
        os.environ["CHAINKEYS_DATA_DIR"] = str(data_dir)
    try:
        settings, warnings = load_settings()
    except ConfigError as exc:
        typer.echo(f"chainkeys: {exc}", err=True)
        raise typer.Exit(2) from None
    for warning in warnings:
        typer.echo(f"chainkeys: warning: {warning}", err=True)
    return settings


def group(help: str) -> typer.Typer:
    """A command group. Help is click's plain text, rewrapped to the terminal (Typer's
    rich panels kept the docstrings' line breaks mid-sentence and showed a `<bool>`
    beside every flag)."""
    return typer.Typer(no_args_is_help=True, help=help, rich_markup_mode=None)


def fail(message: str) -> NoReturn:
    typer.echo(f"chainkeys: {message}", err=True)
    raise typer.Exit(1)


def run(settings: Settings, work: Callable[[Services], Awaitable[T]], create: bool = False) -> T:
    """Open the services, do `work`, close; domain errors end the command cleanly. Only
    `serve` and `init` pass `create`: every other command refuses a place with no store."""

    async def main() -> T:
        svc = await open_services(settings, create=create)
        try:
            return await work(svc)
        finally:
            await svc.close()

    return finish(main)


def run_admin(settings: Settings, work: Callable[[Admin], Awaitable[T]], keyed: bool = False) -> T:
    """As `run`, for administration (tokens, tenants, policies, audit); `keyed` loads
    the master key for a command that writes an authenticated row."""

    async def main() -> T:
        admin = await open_admin(settings, keyed=keyed)
        try:
            return await work(admin)
        finally:
            await admin.close()

    return finish(main)


def finish(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a command's work on the store: every command that opens it passes here, so
    under --url (cli/remote.py) it is refused before anything is opened or asked."""
    from chainkeys.cli.remote import current, refuse_store

    if current() is not None:
        refuse_store()
    try:
        return asyncio.run(main())
    except NoStore as exc:
        typer.echo(f"chainkeys: {exc.message}", err=True)
        raise typer.Exit(2) from None
    except ChainkeysError as exc:
        fail(exc.message)
        raise  # unreachable: fail exits


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
