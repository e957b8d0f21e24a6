"""Builds the services from settings: the one place the API and the CLI get them from.

Dependencies point one way: api/cli → bootstrap → domain packages (accounts,
wallets, tokens, signing, policies, approvals, audit, masterkey) → chains, vault
(the barrier) → store.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chainkeys.audit.repository import Audit
from chainkeys.audit.rollback import check_at_start
from chainkeys.audit.service import AuditService, audit_event
from chainkeys.config import Settings
from chainkeys.errors import StartupError, StorageUnavailable
from chainkeys.masterkey.service import KeyService
from chainkeys.store import migrate
from chainkeys.store.backend import Backend, open_backend
from chainkeys.store.datadir import prepare_data_dir
from chainkeys.store.dbcopy import CopyReport, Opener, copy_database, display_url
from chainkeys.store.sealed import SealedRow
from chainkeys.tokens.service import TokenService
from chainkeys.vault.adoption import open_integrity
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.gate import Gate
from chainkeys.vault.opening import open_barrier
from chainkeys.vault.repository import Meta
from chainkeys.vault.seal import Context, SealError
from chainkeys.vault.shamir import (
    UNSEALER,
    Unsealer,
)

if TYPE_CHECKING:  # imported by open_services: token, audit and policy commands skip them
    from chainkeys.accounts.multisig import MultisigService
    from chainkeys.accounts.service import AccountService
    from chainkeys.approvals.service import ApprovalService
    from chainkeys.freezes.service import FreezeService
    from chainkeys.governance.service import GovernanceService
    from chainkeys.policies.service import PolicyService
    from chainkeys.signing.service import SigningService
    from chainkeys.wallets.multisig import WalletMultisigService
    from chainkeys.wallets.service import WalletService

log = logging.getLogger("chainkeys")


@dataclass
class Services:
    """Everything a running chainkeys holds; built once per process."""

    settings: Settings
    db: Backend
    barrier: Barrier  # the one holder of master keys (refreshed while the process runs)
    accounts: AccountService
    tokens: TokenService
    audit: AuditService
    keys: KeyService
    policies: PolicyService
    signing: SigningService
    wallets: WalletService
    approvals: ApprovalService
    multisig: MultisigService
    wallet_multisig: WalletMultisigService
    freezes: FreezeService
    governance: GovernanceService

    async def close(self) -> None:
        await self.signing.close()  # the co-signer's connections
        await self.db.close()

    async def db_ping(self) -> None:
        """Raises StorageUnavailable when the database does not answer."""
        async with self.db.read() as tx:
            await Meta.ping(tx)


@dataclass
class Admin:
    """What token, tenant, policy and audit administration needs: the store, and the
    integrity key only for the commands that write an authenticated row (`keyed`)."""

    db: Backend
    tokens: TokenService
    audit: AuditService
    keys: KeyService  # moves between providers open the key themselves
    integrity: Gate | None = None

    @functools.cached_property
    def policies(self) -> PolicyService:
        """Made when asked: policies load the chain code (addresses in documents), which
        token and audit commands never need."""
        from chainkeys.policies.service import PolicyService

        return PolicyService(self.db, integrity=self.integrity)

    def governance(self, webhook: bool) -> GovernanceService:
        """The operator's side of governance (set, show, `policy set` on a governed
        tenant); `webhook`: whether a break glass is announced."""
        from chainkeys.governance.service import GovernanceService

        return GovernanceService(self.db, self.policies, None, webhook, self.integrity)

    async def close(self) -> None:
        await self.db.close()


class NoStore(StartupError):
    """A command other than `serve`/`init` pointed at a place that holds no store."""

    code = "no_store"


def where_to_point() -> str:
    return (
        "start the service there (`chainkeys serve`) or create it (`chainkeys init`), "
        "or point at the right one with --data-dir, CHAINKEYS_DATA_DIR or "
        "CHAINKEYS_DATABASE_URL"
    )


async def open_store(
    settings: Settings, unseal: bool, create: bool = False, adopted: bool = True
) -> tuple[Backend, Barrier | None]:
    """The database with its schema settled (once, under the start-up lock) and, when
    `unseal`, the vault opened against it; nothing is left open on failure. Without
    `create`, a place with no store is refused (NoStore) and nothing is made there:
    only `serve` and `init` make a store."""
    if settings.database_url is None:
        if not create and not settings.sqlite_path.exists():
            looked = settings.sqlite_path.resolve()
            raise NoStore(
                f"no chainkeys store in {settings.data_dir.resolve()} (looked for "
                f"{looked}); {where_to_point()}"
            )
        prepare_data_dir(settings)
    db = open_backend(settings.db_url, settings)
    try:
        async with db.startup_lock():
            if not create and await migrate.current_revision(db) is None:
                raise NoStore(
                    f"the database {display_url(settings.db_url)} holds no chainkeys "
                    f"store; {where_to_point()}"
                )
            await migrate.ensure_schema(db)
            barrier = await open_barrier(db, settings) if unseal else None
            if barrier is not None:
                barrier.audit_refusal = functools.partial(_ring_refused, db)
            if barrier is not None and adopted:
                barrier.integrity = await open_integrity(db, barrier)
                db.signer = barrier.integrity  # audit rows MACed by their INSERT
                await _check_heads(db, barrier.integrity)
                await check_at_start(db, barrier.integrity, settings)  # a rollback
    except StorageUnavailable as exc:
        await db.close()
        raise StartupError(
            f"cannot open the database {display_url(settings.db_url)}: {storage_cause(exc)}"
        ) from None
    except BaseException:
        await db.close()
        raise
    return db, barrier


async def _ring_refused(db: Backend, why: str) -> None:
    """The barrier's refusal of a master-key ring that failed its integrity check."""
    await Audit.record(db, audit_event(None, "key.ring", "refused", details={"reason": why}))


async def _check_heads(db: Backend, gate: Gate) -> None:
    """The start's check of what the heads pin (vault/verify.py): what fails is logged
    and counted, and fails closed where it is used (a tenant whose tokens were put back
    has none that works); the other tenants are served."""
    from chainkeys.vault.verify import verify_store

    report = await verify_store(db, gate, full=False)
    for failure in report.failures[:20]:
        log.error("integrity at start: %s", failure)
    if len(report.failures) > 20:
        log.error("integrity at start: and %d more", len(report.failures) - 20)


async def open_unadopted(settings: Settings) -> tuple[Backend, Barrier]:
    """The store and its barrier, the integrity record left as it is (`chainkeys
    integrity adopt`: the one command that may adopt)."""
    db, barrier = await open_store(settings, unseal=True, adopted=False)
    if barrier is None:
        await db.close()
        raise StartupError("the barrier did not open")  # never: unseal=True opens it
    return db, barrier


def storage_cause(exc: BaseException) -> str:
    """The innermost cause of a storage failure, in one line (drivers never quote the
    password; the URL is shown masked by the caller)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = " ".join(str(exc).split()) or "no answer"
    return f"{type(exc).__name__}: {text}"[:300]


async def open_admin(settings: Settings, create: bool = False, keyed: bool = False) -> Admin:
    """The store; with `keyed`, the master key too (a command that writes an
    authenticated row: issuing or revoking a token, setting a policy). Listing tokens and
    reading the audit log need no secret."""
    db, barrier = await open_store(settings, unseal=keyed, create=create)
    integrity = barrier.integrity if barrier is not None else None
    return Admin(
        db,
        TokenService(db, integrity),
        AuditService(db, settings, None),
        KeyService(db, settings),
        integrity,
    )


async def upgrade_schema(settings: Settings) -> tuple[str, bool]:
    """Apply pending migrations (`chainkeys db upgrade`, the migration step before
    the replicas start); the revision reached, and whether the schema was created.

    Schema only: no master key and no token are needed (the first replica to start
    settles both under the start-up lock). An empty database that exists (a
    PostgreSQL database made on purpose by whoever deploys) gets the schema; a
    database that does not exist (a SQLite file nobody made: more likely the wrong
    directory) is refused and nothing is made. Idempotent, and safe to run from
    several places at once (the start-up lock)."""
    if settings.database_url is None and not settings.sqlite_path.exists():
        raise NoStore(f"no chainkeys store in {settings.data_dir.resolve()}; {where_to_point()}")
    db = open_backend(settings.db_url, settings)
    try:
        if not db.database_exists():
            raise NoStore(
                f"the database {display_url(settings.db_url)} does not exist; {where_to_point()}"
            )
        if settings.database_url is None:
            prepare_data_dir(settings)
        async with db.startup_lock():
            empty = await migrate.current_revision(db) is None
            await migrate.upgrade(db)
        return str(await migrate.current_revision(db)), empty
    finally:
        await db.close()


async def sealed_opener(db: Backend, settings: Settings) -> Opener:
    """What opens a sealed value with this install's keys (proven on `db` first)."""
    barrier = await open_barrier(db, settings)

    def opens(row: SealedRow) -> bool:
        purpose, tenant, family, name = row.aad
        try:
            barrier.open(row.blob, row.key_id, Context(tenant, family, name, purpose=purpose))
        except SealError:
            return False
        return True

    return opens


async def copy_between(settings: Settings, source: str, target: str) -> CopyReport:
    """Copy every row between two databases, verified (`chainkeys db copy`)."""
    src, dst = open_backend(source, settings), open_backend(target, settings)
    try:
        return await copy_database(src, dst, lambda db: sealed_opener(db, settings))
    finally:
        await src.close()
        await dst.close()


async def open_services(
    settings: Settings, create: bool = True, unsealer: Unsealer | None = None
) -> Services:
    """Open the store (creating it on a server's first start) and the vault; with the
    shamir provider, `unsealer` gives the unseal key (else the process's, if any)."""
    if unsealer is not None:
        reset = UNSEALER.set(unsealer)
        try:
            return await open_services(settings, create)
        finally:
            UNSEALER.reset(reset)  # the unseal key is not kept once the barrier is open

    from chainkeys.accounts.multisig import MultisigService
    from chainkeys.accounts.service import AccountService
    from chainkeys.approvals.service import ApprovalService
    from chainkeys.freezes.service import FreezeService
    from chainkeys.governance.service import GovernanceService
    from chainkeys.policies.service import PolicyService
    from chainkeys.signing.cosigner import Cosigner
    from chainkeys.signing.service import SigningService
    from chainkeys.vault.derive import Cursors
    from chainkeys.wallets.multisig import WalletMultisigService
    from chainkeys.wallets.service import WalletService, derived_export

    db, barrier = await open_store(settings, unseal=True, create=create)
    if barrier is None:
        raise StartupError("the barrier did not open")  # never: unseal=True opens it
    cursors = Cursors(barrier)
    exported = functools.partial(derived_export, barrier.integrity)
    accounts = AccountService(db, barrier, settings, cursors, exported)
    policies = PolicyService(db, settings.policy_refresh_seconds, barrier.integrity)
    approvals = ApprovalService(db, settings, cursors, barrier.integrity)
    tokens = TokenService(db, barrier.integrity)
    wallets = WalletService(db, barrier, settings, cursors, accounts)
    webhook = settings.webhook_url is not None
    governance = GovernanceService(db, policies, approvals.passkeys, webhook, barrier.integrity)
    return Services(
        settings,
        db,
        barrier,
        accounts,
        tokens,
        AuditService(db, settings, cursors),
        KeyService(db, settings, barrier),
        policies,
        SigningService(db, barrier, accounts, policies, approvals, tokens, Cosigner.of(settings)),
        wallets,
        approvals,
        MultisigService(db, barrier),
        WalletMultisigService(db, barrier, wallets, accounts),
        FreezeService(db, accounts, webhook, barrier.integrity),
        governance,
    )
