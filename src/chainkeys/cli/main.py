"""The `chainkeys` command: serve, tokens, audit, accounts, keys, database."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from chainkeys import __version__, logs
from chainkeys.bootstrap import (
    Services,
    copy_between,
    upgrade_schema,
)
from chainkeys.cli import governed, remote_daily
from chainkeys.cli.approval import approval_app
from chainkeys.cli.approver import approver_app
from chainkeys.cli.audit import audit_app
from chainkeys.cli.changes import changes_app
from chainkeys.cli.common import DataDir, fail, finish, group, run, run_admin, settings_for, when
from chainkeys.cli.freeze import freeze_app
from chainkeys.cli.governance import admin_app, governance_app
from chainkeys.cli.integrity import integrity_app
from chainkeys.cli.masterkey import hsm_app, key_app
from chainkeys.cli.operator import PromptUnsealer, operator_app, print_shares
from chainkeys.cli.policy import policy_app
from chainkeys.cli.remote import current as current_remote
from chainkeys.cli.remote import use as use_remote
from chainkeys.cli.wallet import wallet_app
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError
from chainkeys.tokens.service import parse_duration, parse_families, parse_scopes
from chainkeys.vault.shamir import UNSEALER

FIRST_TOKEN_FILE = "first-token"  # noqa: S105 - a file name, not a secret
# A crash's traceback never shows local variables: they can hold a token being issued,
# a key file's bytes or a database URL with its password.
app = typer.Typer(
    no_args_is_help=True,
    help="chainkeys: multi-chain key custody service.",
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    add_completion=False,
)
token_app = group("Issue, list and revoke API tokens.")
db_app = group("Database schema and data.")
account_app = group("Operator recovery of deleted accounts.")
app.add_typer(token_app, name="token")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"chainkeys {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(
            envvar="CHAINKEYS_URL",
            help="run the daily commands (policy, changes, freeze, audit) against this "
            "running server instead of opening the store: no shares asked",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="CHAINKEYS_TOKEN_FILE",
            help="with --url: a file holding the admin token (never the token itself on "
            "the command line: ps, shell history and CI logs keep it)",
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            envvar="CHAINKEYS_CA_FILE",
            help="with --url: the CA bundle that signed the server's certificate (default: "
            "the system's; TLS is always verified)",
        ),
    ] = None,
) -> None:
    """chainkeys: multi-chain key custody service."""
    use_remote(url, token_file, ca_file, ctx.invoked_subcommand or "")
    # With the shamir provider, a command that needs the master key asks for shares.
    UNSEALER.set(PromptUnsealer())


app.add_typer(db_app, name="db")
app.add_typer(key_app, name="key")
app.add_typer(hsm_app, name="hsm")
app.add_typer(account_app, name="account")
app.add_typer(policy_app, name="policy")
app.add_typer(wallet_app, name="wallet")
app.add_typer(approver_app, name="approver")
app.add_typer(approval_app, name="approval")
app.add_typer(operator_app, name="operator")
app.add_typer(audit_app, name="audit")
app.add_typer(integrity_app, name="integrity")
app.add_typer(freeze_app, name="freeze")
app.add_typer(admin_app, name="admin")
app.add_typer(governance_app, name="governance")
app.add_typer(changes_app, name="changes")


def worker_count(value: str | int) -> int:
    """`serve --workers`: a number from 1, or auto (0 here; api/serve.py makes it one per
    core, one under shamir)."""
    text = str(value).strip().lower()
    if text in ("auto", "0"):
        return 0
    if not text.isdigit() or int(text) < 1:
        raise typer.BadParameter(f"{value!r}: a number from 1, or auto")
    return int(text)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address (CHAINKEYS_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (CHAINKEYS_PORT)")] = None,
    data_dir: DataDir = None,
    workers: Annotated[
        int | None,
        typer.Option(
            parser=worker_count,
            metavar="N|auto",
            show_default="CHAINKEYS_WORKERS, auto",
            help="worker processes; auto: one per core (one under shamir)",
        ),
    ] = None,
) -> None:
    """Start the HTTP API.

    The store is SQLite in the data directory unless CHAINKEYS_DATABASE_URL is set. The
    first start creates the store and issues a token for tenant "default": shown
    on a terminal, otherwise written once to DATA_DIR/first-token (mode 0600) so it
    never lands in `docker logs` or the journal.
    """
    from chainkeys.api.serve import WhenServing, claim_port
    from chainkeys.api.serve import serve as serve_api

    if port is not None and not 1 <= port <= 65535:
        fail(f"--port {port}: out of range: from 1 to 65535")
    if host is not None:
        os.environ["CHAINKEYS_HOST"] = host
    if port is not None:
        os.environ["CHAINKEYS_PORT"] = str(port)
    settings = settings_for(data_dir)
    logs.configure(settings.log_level, settings.log_json)
    if workers is None:
        workers = worker_count(settings.workers)
    try:
        lock = claim_port(settings.host, settings.port)
    except ChainkeysError as exc:
        typer.echo(f"chainkeys: {exc.message}", err=True)
        raise typer.Exit(2) from None
    first = None
    if settings.key_provider == "shamir":  # starts sealed: the store must be there already
        if workers > 1:
            fail(
                "CHAINKEYS_MASTER_KEY_PROVIDER=shamir serves with one worker (each process "
                "is unsealed on its own): run more replicas instead"
            )
        finish(lambda: check_sealed_store(settings))
    else:
        # Schema, master key and the first token are settled once, before any worker starts.
        first = run(settings, lambda svc: svc.tokens.issue_first(), create=True)
    announce = None
    if first is not None:
        show = hand_over_first_token(first, settings.data_dir)
        announce = WhenServing(settings.host, settings.port, show)
    try:
        serve_api(settings, workers)
    except ChainkeysError as exc:
        typer.echo(f"chainkeys: {exc.message}", err=True)
        raise typer.Exit(2) from None
    finally:
        if announce is not None:
            announce.fire()  # a start that failed still hands the token over
        lock.close()


async def check_sealed_store(settings: Settings) -> None:
    """A shamir server's store is made by `chainkeys init --shares`: refused now, in one
    line, rather than by the worker at its start."""
    from chainkeys.unsealing import open_sealed

    store = await open_sealed(settings)
    await store.close()


def hand_over_first_token(token: str, data_dir: Path) -> Callable[[], None]:
    """The first token: anywhere but a terminal (a container's log, the journal) it
    is written now to a 0600 file, never to the log. Returns what to print once the
    server is up, as a block of its own: the token on a terminal, else the file."""
    intro = 'chainkeys: first start: issued an API token for tenant "default".'
    if sys.stdout.isatty():
        lines = [f"{intro} It is shown only this once; keep it:", token]
    else:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = data_dir / FIRST_TOKEN_FILE
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        lines = [
            f"{intro} It is in {path} (mode 0600): read it once, keep it, then delete the file."
        ]

    def show() -> None:
        typer.echo("\n" + "\n".join(lines) + "\n")
        sys.stdout.flush()

    return show


@token_app.command("create")
def token_create(
    tenant: Annotated[str, typer.Option(help="tenant that will own the token")],
    label: Annotated[str, typer.Option(help="a note to recognise the token by")] = "",
    scope: Annotated[
        str | None,
        typer.Option(
            help="comma list of read,create,delete,sign,export,approve,admin (default: all "
            "but export, approve and admin)"
        ),
    ] = None,
    expires: Annotated[
        str | None, typer.Option(help="lifetime, e.g. 30d, 12h, 90m (default: never)")
    ] = None,
    family: Annotated[
        str | None, typer.Option(help="only these families' accounts, e.g. cosmos,eos")
    ] = None,
    group: Annotated[
        str | None, typer.Option(help="approve tokens: the approver group (docs/approvals.md)")
    ] = None,
    break_glass: governed.BreakGlass = False,
    data_dir: DataDir = None,
) -> None:
    """Issue a token; it is printed once, alone on the last line. On a governed tenant
    a token that may sign, export or approve is filed as a change for its admins (the
    token is printed now and opens nothing until the change applies); with --url the
    server files it, whatever its scopes."""
    from chainkeys.tokens.service import Grant

    try:
        scopes = parse_scopes(scope)
        lifetime = parse_duration(expires) if expires is not None else None
        families = parse_families(family)
    except ChainkeysError as exc:
        fail(exc.message)
    grant = Grant(label, scopes, lifetime, families, group)
    remote = current_remote()
    if remote is not None:  # through the server: a change for the tenant's admins
        remote_daily.token_create(
            remote, tenant, governed.token_change(grant, expires), break_glass
        )
        return
    if scopes & governed.GOVERNED_SCOPES:
        how, done, token = governed.create_token(data_dir, tenant, grant, expires, break_glass)
    else:  # widens nothing that signs: at once, governed or not
        how, (done, token) = (
            "applied",
            run_admin(  # keyed: the row is authenticated
                settings_for(data_dir),
                lambda admin: admin.tokens.create(tenant, label, scopes, lifetime, families, group),
                keyed=True,
            ),
        )
    governed.echo_token(tenant, how, done, token)


@token_app.command("list")
def token_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's tokens")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    data_dir: DataDir = None,
) -> None:
    """List tokens (ids and labels; the tokens themselves are never stored)."""
    rows = run_admin(settings_for(data_dir), lambda admin: admin.tokens.list(tenant))
    if as_json:
        for r in rows:
            record = {
                "id": r.id,
                "tenant": r.tenant,
                "label": r.label,
                "scopes": r.scopes.split(","),
                "families": r.families.split(",") if r.families else None,
                "group": r.group,
                "created": when(r.created_ms),
                "expires": when(r.expires_ms) if r.expires_ms else None,
                "revoked": when(r.revoked_ms) if r.revoked_ms else None,
            }
            typer.echo(msgspec.json.encode(record).decode())
        return
    typer.echo(
        f"{'ID':32}  {'TENANT':20}  {'SCOPES':26}  {'FAMILIES':16}  {'GROUP':12}  "
        f"{'CREATED':20}  {'EXPIRES':20}  {'REVOKED':20}  LABEL"
    )
    for r in rows:
        created, revoked, expires = when(r.created_ms), when(r.revoked_ms), when(r.expires_ms)
        typer.echo(
            f"{r.id:32}  {r.tenant:20}  {r.scopes:26}  {r.families or 'all':16}  "
            f"{r.group or '-':12}  {created:20}  {expires:20}  {revoked:20}  {r.label}"
        )


@token_app.command("revoke")
def token_revoke(token_id: str, data_dir: DataDir = None) -> None:
    """Revoke a token by id; requests with it fail at once."""
    run_admin(settings_for(data_dir), lambda admin: admin.tokens.revoke(token_id), keyed=True)
    typer.echo(f"revoked {token_id}")


@account_app.command("deleted")
def account_deleted(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's")] = None,
    data_dir: DataDir = None,
) -> None:
    """List deleted accounts still retained (restorable until the retention period ends)."""
    rows = run(settings_for(data_dir), lambda svc: svc.accounts.deleted(tenant))
    typer.echo(f"{'DELETED':20}  {'TENANT':32}  {'FAMILY':8}  NAME")
    for d in rows:  # the tenant by its name, as `account restore --tenant` takes it
        a = d.account
        typer.echo(f"{when(d.deleted_ms):20}  {d.tenant or a.tenant_id:32}  {a.family:8}  {a.name}")


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


@db_app.command("upgrade")
def db_upgrade(data_dir: DataDir = None) -> None:
    """Apply pending schema migrations: to an existing store, or to an empty PostgreSQL
    database (the migration step of a deploy, before its replicas start)."""
    settings = settings_for(data_dir)
    revision, created = finish(lambda: upgrade_schema(settings))
    typer.echo(
        f"schema created at revision {revision}" if created else f"schema at revision {revision}"
    )


@app.command()
def init(
    data_dir: DataDir = None,
    shares: Annotated[
        int | None,
        typer.Option(min=1, max=255, help="shamir provider: how many unseal shares to print"),
    ] = None,
    threshold: Annotated[
        int | None, typer.Option(min=1, max=255, help="shamir provider: how many open the store")
    ] = None,
) -> None:
    """Create an empty store without starting the service.

    The schema and the master key, so that tokens and policies can be set up first.
    `serve` does the same on its first start. With CHAINKEYS_MASTER_KEY_PROVIDER=shamir,
    --shares N --threshold K: the master key is wrapped by a key that any K of the N
    shares printed here rebuild (shown only this once: give one to each operator), and
    the first token is issued here (a sealed `serve` cannot)."""
    settings = settings_for(data_dir)
    logs.configure(settings.log_level, settings.log_json)
    where = settings.data_dir.resolve() if settings.database_url is None else "the database"
    if settings.key_provider == "shamir" or shares is not None or threshold is not None:
        init_shamir(settings, shares, threshold, where)
        return

    async def work(svc: Services) -> str:
        return svc.barrier.key_id

    key_id = run(settings, work, create=True)
    typer.echo(f"store ready in {where} (master key id {key_id})")


def init_shamir(
    settings: Settings, shares: int | None, threshold: int | None, where: object
) -> None:
    from chainkeys.unsealing import init_shamir as create

    if settings.key_provider != "shamir":
        fail("--shares and --threshold are for CHAINKEYS_MASTER_KEY_PROVIDER=shamir")
    if shares is None or threshold is None:
        fail("CHAINKEYS_MASTER_KEY_PROVIDER=shamir: give --shares N --threshold K")

    async def work() -> tuple[str, list[str], str | None]:
        svc, texts = await create(settings, shares, threshold)
        try:
            return svc.barrier.key_id, texts, await svc.tokens.issue_first()
        finally:
            await svc.close()

    key_id, texts, first = finish(work)
    typer.echo(
        f"store ready in {where} (master key id {key_id}), held by {shares} Shamir "
        f"shares, any {threshold} of which open it. They are shown only this once: "
        "give each to one operator."
    )
    print_shares(texts)
    if first is not None:
        hand_over_first_token(first, settings.data_dir)()


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
    from chainkeys.store.dbcopy import display_url

    try:
        report = asyncio.run(copy_between(settings_for(data_dir), source, target))
    except ChainkeysError as exc:
        fail(f"copy failed: {exc.message}")
        raise  # unreachable: fail exits
    typer.echo(f"copied {display_url(source)} -> {display_url(target)}")
    for table, count in report.counts.items():
        typer.echo(f"  {table:12} {count}")
    keys = ", ".join(sorted(report.key_ids)) or "-"
    typer.echo(f"verified: row counts match; {report.opened} sealed values open (key ids {keys})")


if __name__ == "__main__":
    app()
