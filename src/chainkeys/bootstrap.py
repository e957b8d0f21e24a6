"""Builds the services from settings: the one place the API and the CLI get them from.

Dependencies point one way: api/cli → bootstrap → domain packages (accounts,
wallets, tokens, signing, policies, approvals, audit, masterkey) → chains, vault
(the barrier) → store.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chainkeys.audit.service import AuditService
from chainkeys.config import Settings
from chainkeys.errors import StartupError, StorageUnavailable
from chainkeys.masterkey.service import KeyService
from chainkeys.store import migrate
from chainkeys.store.backend import Backend, open_backend
from chainkeys.store.dbcopy import CopyReport, Opener, copy_database, display_url
from chainkeys.store.sealed import SealedRow
from chainkeys.tokens.service import TokenService
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.integrity import Integrity, open_integrity
from chainkeys.vault.opening import open_barrier
from chainkeys.vault.repository import Meta, MetaBlobs
from chainkeys.vault.seal import Context, SealError
from chainkeys.vault.shamir import (
    SHAMIR_WRAPPED,
    UNSEALER,
    GivenKey,
    Unsealer,
    rekey,
    share_set_of,
    unwrap,
)
from chainkeys.vault.shares import (
    InvalidShare,
    Share,
    ShareSet,
    UnsealKey,
    check_set,
    combine,
    parse_share,
    split,
)

if TYPE_CHECKING:  # imported by open_services: token, audit and policy commands skip them
    from chainkeys.accounts.multisig import MultisigService
    from chainkeys.accounts.service import AccountService
    from chainkeys.approvals.service import ApprovalService
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

    async def close(self) -> None:
        await self.db.close()

    async def db_ping(self) -> None:
        """Raises StorageUnavailable when the database does not answer."""
        async with self.db.read() as tx:
            await Meta.ping(tx)


def prepare_data_dir(settings: Settings) -> None:
    """The data directory (0700 when made here) and the SQLite file, created 0600
    whatever the umask or the directory's mode: its WAL and SHM files take the
    database file's mode. A directory others can read is worth a warning."""
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(data_dir.stat().st_mode)
    if mode & 0o077:
        log.warning(
            "data directory %s is readable by others (mode %o); chmod 700 it",
            data_dir,
            mode,
        )
    for path in (settings.sqlite_path, *_sqlite_companions(settings.sqlite_path)):
        if path == settings.sqlite_path and not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        if path.exists() and stat.S_IMODE(path.stat().st_mode) != 0o600:
            path.chmod(0o600)


def _sqlite_companions(db: Path) -> tuple[Path, Path]:
    return db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")


@dataclass
class Admin:
    """What token, tenant, policy and audit administration needs: the store, and the
    integrity key only for the commands that write an authenticated row (`keyed`)."""

    db: Backend
    tokens: TokenService
    audit: AuditService
    keys: KeyService  # moves between providers open the key themselves
    integrity: Integrity | None = None

    @functools.cached_property
    def policies(self) -> PolicyService:
        """Made when asked: policies load the chain code (addresses in documents), which
        token and audit commands never need."""
        from chainkeys.policies.service import PolicyService

        return PolicyService(self.db, integrity=self.integrity)

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


async def _open_store(
    settings: Settings, unseal: bool, create: bool = False
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
                barrier.integrity = await open_integrity(db, barrier)
    except StorageUnavailable as exc:
        await db.close()
        raise StartupError(
            f"cannot open the database {display_url(settings.db_url)}: {storage_cause(exc)}"
        ) from None
    except BaseException:
        await db.close()
        raise
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
    db, barrier = await _open_store(settings, unseal=keyed, create=create)
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
    from chainkeys.policies.service import PolicyService
    from chainkeys.signing.service import SigningService
    from chainkeys.vault.derive import Cursors
    from chainkeys.wallets.multisig import WalletMultisigService
    from chainkeys.wallets.service import WalletService, derived_export

    db, barrier = await _open_store(settings, unseal=True, create=create)
    if barrier is None:
        raise StartupError("the barrier did not open")  # never: unseal=True opens it
    cursors = Cursors(barrier)
    accounts = AccountService(db, barrier, settings, cursors, derived_export)
    policies = PolicyService(db, settings.policy_refresh_seconds, barrier.integrity)
    approvals = ApprovalService(db, settings, cursors, barrier.integrity)
    tokens = TokenService(db, barrier.integrity)
    wallets = WalletService(db, barrier, settings, cursors, accounts)
    return Services(
        settings,
        db,
        barrier,
        accounts,
        tokens,
        AuditService(db, settings, cursors),
        KeyService(db, settings, barrier),
        policies,
        SigningService(db, barrier, accounts, policies, approvals, tokens),
        wallets,
        approvals,
        MultisigService(db, barrier),
        WalletMultisigService(db, barrier, wallets, accounts),
    )


# -- Shamir shares: a server that starts sealed --------------------------------------


@dataclass(frozen=True, slots=True)
class SealStatus:
    """What POST /sys/unseal answers: sealed or not, shares given, shares needed."""

    sealed: bool
    progress: int
    threshold: int


class SealedStore:
    """A server process whose master key waits for a quorum of Shamir shares.

    It holds the store (schema settled, no key), the shares given so far (in memory
    only: a restart forgets them, as it forgets the key) and nothing else. When the
    threshold-th share arrives the shares are combined, proven against the wrapped
    master key (a wrong set resets the progress) and the services open as at any
    start; the caller (api/sealing.py) then starts what runs beside requests.
    """

    def __init__(self, settings: Settings, db: Backend) -> None:
        self.settings = settings
        self.db = db
        self._given: dict[int, bytes] = {}  # index -> share value, of one set
        self._set_id: str | None = None
        self.threshold = 0

    def __repr__(self) -> str:
        return f"SealedStore(progress={len(self._given)}, threshold={self.threshold})"

    def status(self, sealed: bool = True) -> SealStatus:
        return SealStatus(sealed, len(self._given) if sealed else 0, self.threshold)

    async def share_set(self) -> ShareSet:
        """The store's current share set (read each time: a rekey may have replaced it)."""
        found = await share_set_of(MetaBlobs(self.db))
        if found is None:
            raise StartupError(
                f"the database {display_url(self.settings.db_url)} holds no Shamir share "
                "set (CHAINKEYS_MASTER_KEY_PROVIDER=shamir): create the store with "
                "`chainkeys init --shares 5 --threshold 3`"
            )
        self.threshold = found.threshold
        return found

    async def db_ping(self) -> None:
        async with self.db.read() as tx:
            await Meta.ping(tx)

    def forget(self) -> None:
        """Drop the shares given so far (a wrong set, a rekey, a seal)."""
        self._given.clear()
        self._set_id = None

    async def submit(self, text: str) -> Services | None:
        """Count one share; the services once it is the threshold-th.

        Raises:
            InvalidShare: malformed, mistyped, of another set, or an index given already.
            WrongShares: the quorum does not rebuild the unseal key (progress reset).
        """
        share = parse_share(text)
        share_set = await self.share_set()
        if self._set_id not in (None, share_set.set_id):
            self.forget()  # the store was rekeyed while shares were arriving
        check_set([share], share_set)
        if share.index in self._given:
            raise InvalidShare(
                f"share {share.index} was given already; the next operator's, please"
            )
        self._set_id = share_set.set_id
        self._given[share.index] = share.value
        if len(self._given) < share_set.threshold:
            return None
        shares = [Share(share_set.set_id, i, v) for i, v in self._given.items()]
        self.forget()
        key = combine(shares)
        blob = await MetaBlobs(self.db).get(SHAMIR_WRAPPED)
        if blob is None:
            raise StartupError("the Shamir-wrapped master key went missing")
        unwrap(blob, key)  # WrongShares: reset, said so
        return await open_services(self.settings, create=False, unsealer=GivenKey(key))

    async def close(self) -> None:
        self.forget()
        await self.db.close()


async def open_sealed(settings: Settings) -> SealedStore:
    """The store of a shamir server, with no key: it must exist and hold a share set
    (`chainkeys init --shares`), or the start is refused now rather than at unseal."""
    db, _ = await _open_store(settings, unseal=False)
    store = SealedStore(settings, db)
    try:
        await store.share_set()
    except BaseException:
        await db.close()
        raise
    return store


async def init_shamir(
    settings: Settings, shares: int, threshold: int
) -> tuple[Services, list[str]]:
    """A new store whose master key is wrapped by a new unseal key, and its shares as
    text (`chainkeys init --shares N --threshold K` prints them once)."""
    unseal = UnsealKey.new()
    share_set, made = split(unseal, shares, threshold)
    db, _ = await _open_store(settings, unseal=False, create=True)
    try:
        existing = await share_set_of(MetaBlobs(db))
    finally:
        await db.close()
    if existing is not None:
        raise StartupError(
            f"this store has its shares already (set {existing.set_id}, "
            f"{existing.threshold} of {existing.shares}): they were printed when "
            "it was created; `chainkeys operator rekey` makes new ones"
        )
    svc = await open_services(settings, create=True, unsealer=GivenKey(unseal, share_set))
    return svc, [s.text() for s in made]


async def rekey_shamir(
    settings: Settings, old: list[str], shares: int, threshold: int
) -> tuple[ShareSet, list[str]]:
    """New shares from a quorum of the old (`chainkeys operator rekey`): the same master
    key re-wrapped; servers already unsealed go on, the next unseal takes the new ones."""
    parsed = [parse_share(text) for text in old]
    db, _ = await _open_store(settings, unseal=False)
    try:
        share_set, made = await rekey(MetaBlobs(db), parsed, shares, threshold)
    finally:
        await db.close()
    return share_set, [s.text() for s in made]
