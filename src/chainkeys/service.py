"""Account and token rules: tenant scoping, uniqueness, what is revealed when.

The API and the CLI both call this module; neither touches the store or the
vault directly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import math
import re
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from chainkeys import logs
from chainkeys.chains.keys import generate_key
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import Account, ChainError, Family, Key, Options
from chainkeys.config import Settings
from chainkeys.errors import (
    AccountNotFound,
    BadRequest,
    ChainkeysError,
    Conflict,
    NotFound,
    StartupError,
)
from chainkeys.store import migrate
from chainkeys.store.db import Database
from chainkeys.store.repositories import (
    SEALED_TABLES,
    AccountRow,
    Accounts,
    Audit,
    AuditEvent,
    DeletedAccounts,
    DeletedRow,
    Idempotency,
    IdempotencyRecord,
    ListedAccount,
    Meta,
    Tenants,
    TokenRow,
)
from chainkeys.vault import Context, SealError, Vault, provider_from_settings

CHECK_KEY = "master_key_check"
CHECK_CONTEXT = Context("-", "-", CHECK_KEY, purpose="check")
CURSOR_PREFIX = b"ck1:"
TOKEN_PREFIX = "ck_"  # noqa: S105 - a prefix, not a secret
IDEMPOTENCY_KEY_MAX = 255
# Every family's names are ASCII letters and digits with inner dots (EOS), at most 100.
PLAUSIBLE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.]{0,98}[A-Za-z0-9])?")


def now_ms() -> int:
    return int(time.time() * 1000)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@contextlib.contextmanager
def chain_errors() -> Iterator[None]:
    """A chain's refusal becomes a 400 with the chain's own message and code."""
    try:
        yield
    except ChainError as exc:
        raise BadRequest(exc.message, code=exc.code) from None


def family_of(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise NotFound(f"unknown chain family {name!r}") from None


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    name: str
    token_id: str


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """What a caller may send to create or import an account."""

    network: str | None = None
    private_key: str | None = field(default=None, repr=False)
    mnemonic: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    account_index: int | None = None
    address_type: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class AccountView:
    """The public face of a stored account."""

    family: str
    network: str
    name: str
    address: str
    public_key: str
    extra: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Created:
    view: AccountView
    imported: bool
    private_key: str | None = field(default=None, repr=False)  # generated keys only, once
    replayed: bool = False  # the stored first response of an Idempotency-Key


class IdempotencyConflict(Conflict):
    code = "idempotency_key_reused"
    message = "this Idempotency-Key was used with a different request"


class _IdempotencyRace(Exception):
    """Another request with the same key committed first."""


def audit_event(tenant: Tenant | None, action: str, outcome: str, **fields: Any) -> AuditEvent:
    return AuditEvent(
        tenant_id=tenant.id if tenant else None,
        action=action,
        outcome=outcome,
        created_ms=now_ms(),
        request_id=logs.request_id.get(),
        **fields,
    )


def check_idempotency_key(key: str) -> str:
    if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX or not all(33 <= ord(c) <= 126 for c in key):
        raise BadRequest(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} visible ASCII characters",
            code="invalid_idempotency_key",
        )
    return key


def fingerprint(family: str, req: CreateRequest) -> str:
    """Same family and same fields (however the JSON was spelled) → same fingerprint."""
    return hashlib.sha256(family.encode() + b"\x00" + msgspec.json.encode(req)).hexdigest()


@dataclass(frozen=True, slots=True)
class Page:
    items: Sequence[ListedAccount]  # rows as read: id, name, address, public_key
    next_cursor: str | None


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(CURSOR_PREFIX + str(last_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    digits = raw[len(CURSOR_PREFIX) :]
    if not raw.startswith(CURSOR_PREFIX) or not digits.isdigit() or len(digits) > 19:
        raise BadRequest("cursor is not one this service returned", code="invalid_cursor")
    return int(digits)


class AccountService:
    """Create, import, look up, list and delete accounts within one tenant."""

    def __init__(self, db: Database, vault: Vault, settings: Settings) -> None:
        self.db = db
        self.vault = vault
        self.settings = settings

    def _key_for(self, fam: Family, req: CreateRequest, network: Any) -> tuple[Key, Options, str]:
        if req.private_key is not None and req.mnemonic is not None:
            raise BadRequest("send private_key or mnemonic, not both", code="invalid_input")
        if req.mnemonic is None and (req.passphrase is not None or req.account_index is not None):
            raise BadRequest("passphrase and account_index go with mnemonic", code="invalid_input")
        options = Options(address_type=req.address_type, name=req.name)
        if req.private_key is not None:
            return fam.parse_private_key(req.private_key, network), options, "private_key"
        if req.mnemonic is not None:
            options = fam.check_options(options, None)
            key = fam.key_from_mnemonic(
                req.mnemonic, req.passphrase or "", req.account_index or 0, network, options
            )
            return key, options, "mnemonic"
        return generate_key(), options, "generated"

    async def create(
        self, tenant: Tenant, family: str, req: CreateRequest, idempotency_key: str | None = None
    ) -> Created:
        """Generate or import a key, seal it and store the account (409 if the name is taken).

        With an idempotency key, a repeat of the same request returns the first
        response (a generated private key included) instead of acting twice.
        """
        action = "import" if req.private_key is not None or req.mnemonic is not None else "create"
        try:
            return await self._create(tenant, family, req, idempotency_key)
        except ChainkeysError as exc:
            await self._audit(audit_event(tenant, action, exc.code, family=family))
            raise

    async def _create(
        self, tenant: Tenant, family: str, req: CreateRequest, idem_key: str | None
    ) -> Created:
        fam = family_of(family)
        fp = ""
        if idem_key is not None:
            # Stored hashed: a copy of the database must not tell anyone which
            # key would replay a response that holds a one-time private key.
            idem_key = hash_token(check_idempotency_key(idem_key))
            fp = fingerprint(fam.name, req)
            replay = await self._replay(tenant, idem_key, fp)
            if replay is not None:
                return replay
        with chain_errors():
            network = fam.network(req.network)
            key, options, source = self._key_for(fam, req, network)
            options = fam.check_options(options, key)
            account = fam.account(key, network, options)
        context = Context(tenant.id, fam.name, account.name)
        row = AccountRow(
            tenant_id=tenant.id,
            family=fam.name,
            name=account.name,
            network=network.name,
            address=account.address,
            public_key=account.public_key,
            details={
                "extra": dict(account.extra),
                "address_type": options.address_type,
                "compressed": key.compressed,
                "source": source,
                "path": key.path,
            },
            secret=self.vault.seal(key.secret, context),
            key_id=self.vault.key_id,
            created_ms=now_ms(),
        )
        reveal = source == "generated" and self.settings.reveal_generated_keys
        created = Created(
            view=_view(fam.name, network.name, account),
            imported=source != "generated",
            private_key=fam.export_private_key(key, network) if reveal else None,
        )
        event = audit_event(tenant, "import" if created.imported else "create", "ok",
                            family=fam.name, account_name=account.name)  # fmt: skip
        try:
            async with self.db.write(one_statement=idem_key is None) as tx:
                if idem_key is not None:
                    await self._remember(tx, tenant, idem_key, fp, created)
                await Accounts.insert_audited(tx, row, event)
        except _IdempotencyRace:
            replay = await self._replay(tenant, idem_key or "", fp)
            if replay is None:  # the other request's record expired in between
                raise IdempotencyConflict("retry the request") from None
            return replay
        return created

    def _idem_context(self, tenant: Tenant, key: str) -> Context:
        return Context(tenant.id, "-", key, purpose="idempotency")

    async def _replay(self, tenant: Tenant, key: str, fp: str) -> Created | None:
        async with self.db.read() as tx:
            record = await Idempotency.get(tx, tenant.id, key)
        if record is None or record.expires_ms <= now_ms():
            return None
        if record.fingerprint != fp:
            raise IdempotencyConflict()
        plain = self.vault.open(record.response, record.key_id, self._idem_context(tenant, key))
        stored = msgspec.json.decode(plain, type=Created)
        return Created(stored.view, stored.imported, stored.private_key, replayed=True)

    async def _remember(self, tx: Any, tenant: Tenant, key: str, fp: str, created: Created) -> None:
        # An expired record of the same key is replaced, not replayed.
        await Idempotency.delete_expired(tx, tenant.id, key, now_ms())
        sealed = self.vault.seal(msgspec.json.encode(created), self._idem_context(tenant, key))
        ttl_ms = self.settings.idempotency_ttl_seconds * 1000
        record = IdempotencyRecord(fp, sealed, self.vault.key_id, now_ms() + ttl_ms)
        if not await Idempotency.insert(tx, tenant.id, key, record):
            raise _IdempotencyRace()

    async def _audit(self, event: AuditEvent) -> None:
        """Record a failed attempt; a failure to record must not hide the original error."""
        with contextlib.suppress(ChainkeysError):
            async with self.db.write() as tx:
                await Audit.insert(tx, event)

    def check_name(self, family: str, name: str) -> tuple[Family, str]:
        """The family and the canonical name (bech32 is case-insensitive), before any I/O."""
        fam = family_of(family)
        with chain_errors():
            return fam, fam.check_name(name)

    async def _find(
        self, tenant: Tenant, family: str, name: str, fetch: Fetch = Accounts.get
    ) -> Any:
        """Look a name up; the family's full check runs first only when the name is
        not plausible, and otherwise only on a miss, to say why (a checksum costs
        more than the lookup, and stored names are canonical and valid)."""
        fam = family_of(family)
        if PLAUSIBLE_NAME.fullmatch(name) is None:
            fam, name = self.check_name(family, name)  # 400 before any storage work
        async with self.db.read() as tx:
            row = await fetch(tx, tenant.id, fam.name, name)
            if row is None:
                _, canonical = self.check_name(family, name)  # 400 if malformed
                if canonical != name:
                    row = await fetch(tx, tenant.id, fam.name, canonical)
        if row is None:
            raise AccountNotFound(f"no {fam.name} account named {name}")
        return row

    async def get(self, tenant: Tenant, family: str, name: str) -> AccountView:
        row = await self._find(tenant, family, name, Accounts.view)
        extra = orjson.loads(row.details).get("extra", {})
        return AccountView(row.family, row.network, row.name, row.address, row.public_key, extra)

    async def list(
        self, tenant: Tenant, family: str, limit: int | None, cursor: str | None
    ) -> Page:
        fam = family_of(family)
        s = self.settings
        if limit is None:
            limit = s.list_default_limit
        if not 1 <= limit <= s.list_max_limit:
            raise BadRequest(
                f"limit must be between 1 and {s.list_max_limit}", code="invalid_limit"
            )
        after = decode_cursor(cursor)
        async with self.db.read() as tx:
            rows = await Accounts.page(tx, tenant.id, fam.name, after, limit + 1)
        if len(rows) > limit:
            return Page(rows[:limit], encode_cursor(rows[limit - 1].id))
        return Page(rows, None)

    async def delete(self, tenant: Tenant, family: str, name: str) -> None:
        fam, name = self.check_name(family, name)
        retain = now_ms() if self.settings.deleted_retention_days else None
        async with self.db.write() as tx:
            deleted = await Accounts.delete(tx, tenant.id, fam.name, name, retain)
            if deleted:
                event = audit_event(tenant, "delete", "ok", family=fam.name, account_name=name)
                await Audit.insert(tx, event)
        if not deleted:
            await self._audit(audit_event(tenant, "delete", AccountNotFound.code,
                                          family=fam.name, account_name=name))  # fmt: skip
            raise AccountNotFound(f"no {fam.name} account named {name}")

    async def purge_expired(self) -> int:
        """Forget expired idempotency records (they hold one-time keys) and, past the
        retention period, deleted accounts."""
        retention_ms = self.settings.deleted_retention_days * 86_400_000
        async with self.db.write() as tx:
            done = await Idempotency.purge(tx, now_ms())
            return done + await DeletedAccounts.purge(tx, now_ms() - retention_ms)

    async def restore(self, tenant_name: str, family: str, name: str) -> AccountView:
        """Operator recovery: bring back the latest deleted account of that name."""
        fam, name = self.check_name(family, name)
        async with self.db.write() as tx:
            tenant_id = await Tenants.id_by_name(tx, tenant_name)
            if tenant_id is None:
                raise NotFound(f"no tenant named {tenant_name}")
            found = await DeletedAccounts.latest(tx, tenant_id, fam.name, name)
            if found is None:
                raise AccountNotFound(f"no deleted {fam.name} account named {name} to restore")
            row = found.account
            await Accounts.insert(tx, row)  # 409 if the name was taken again since
            await DeletedAccounts.forget(tx, found.id)
            event = audit_event(
                Tenant(tenant_id, tenant_name, ""),
                "restore",
                "ok",
                family=fam.name,
                account_name=name,
            )
            await Audit.insert(tx, event)
        return _row_view(
            row.family, row.network, row.name, row.address, row.public_key, row.details
        )

    async def deleted(self, tenant_name: str | None, limit: int = 1000) -> Sequence[DeletedRow]:
        async with self.db.read() as tx:
            tenant_id = None
            if tenant_name is not None:
                tenant_id = await Tenants.id_by_name(tx, tenant_name)
                if tenant_id is None:
                    raise NotFound(f"no tenant named {tenant_name}")
            return await DeletedAccounts.recent(tx, tenant_id, limit)

    async def open_secret(self, tenant: Tenant, family: str, name: str) -> bytes:
        """The private key of a stored account (for checks and exports; never listed)."""
        row = await self._find(tenant, family, name)
        return self.vault.open(row.secret, row.key_id, Context(tenant.id, row.family, row.name))


def _view(family: str, network: str, account: Account) -> AccountView:
    return AccountView(
        family, network, account.name, account.address, account.public_key, dict(account.extra)
    )


Fetch = Callable[[Any, str, str, str], Awaitable[Any]]


def _row_view(
    family: str, network: str, name: str, address: str, public_key: str, details: dict[str, Any]
) -> AccountView:
    return AccountView(family, network, name, address, public_key, details.get("extra", {}))


class TokenService:
    """Tenants and their tokens: random, shown once, stored as a hash."""

    SEEN_MAX = 4096  # live tokens remembered while the SQLite file is unchanged

    def __init__(self, db: Database) -> None:
        self.db = db
        self._seen: dict[str, Tenant] = {}  # token hash -> tenant, for self._version only
        self._version = -1
        self._checked = -math.inf  # perf_counter() when self._version was read

    async def authenticate(self, token: str, arrived: float | None = None) -> Tenant | None:
        """The tenant of a live token, or None.

        On SQLite a live token's tenant is remembered until the next commit by
        any other connection or process (`PRAGMA data_version`): a revocation is
        such a commit. The version is read again for every request that arrived
        (`arrived`, a `time.perf_counter()`) after it was last read, so a
        revocation counts for every request that arrives after it commits;
        requests that arrived together share one read. Unknown tokens are never
        remembered.
        """
        digest = hash_token(token)
        version = -1
        if self.db.is_sqlite:
            if arrived is None or arrived >= self._checked:
                checked = time.perf_counter()
                version = self.db.data_version()
                self._checked = checked
                if version != self._version:
                    self._seen.clear()
                    self._version = version
            version = self._version
            seen = self._seen.get(digest)
            if seen is not None:
                return seen
        async with self.db.read() as tx:
            found = await Tenants.by_token_hash(tx, digest)
        if found is None:
            return None
        tenant = Tenant(*found)
        if version >= 0 and version == self._version and len(self._seen) < self.SEEN_MAX:
            self._seen[digest] = tenant
        return tenant

    async def create(self, tenant: str, label: str = "") -> tuple[TokenRow, str]:
        """Issue a token (creating the tenant if new); returns the row and the token."""
        tenant = tenant.strip()
        if not tenant or len(tenant) > 64:
            raise BadRequest("a tenant name is 1 to 64 characters", code="invalid_tenant")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id, ts = uuid.uuid4().hex, now_ms()
        async with self.db.write() as tx:
            tenant_id = await Tenants.id_by_name(tx, tenant)
            if tenant_id is None:
                tenant_id = uuid.uuid4().hex
                await Tenants.insert(tx, tenant_id, tenant, ts)
            await Tenants.insert_token(tx, token_id, tenant_id, label, hash_token(token), ts)
            owner = Tenant(tenant_id, tenant, token_id)
            await Audit.insert(tx, audit_event(owner, "token.create", "ok", account_name=token_id))
        return TokenRow(token_id, tenant_id, tenant, label, ts, None), token

    async def list(self, tenant: str | None = None) -> list[TokenRow]:
        async with self.db.read() as tx:
            return await Tenants.list_tokens(tx, tenant)

    async def revoke(self, token_id: str) -> None:
        async with self.db.write() as tx:
            tenant_id = await Tenants.revoke_token(tx, token_id, now_ms())
            if tenant_id is None:
                raise NotFound(f"no live token with id {token_id}")
            owner = Tenant(tenant_id, "", token_id)
            await Audit.insert(tx, audit_event(owner, "token.revoke", "ok", account_name=token_id))

    async def issue_first(self) -> str | None:
        """On a store with no tokens at all, issue one for tenant `default` (once, ever)."""
        async with self.db.startup_lock():
            async with self.db.read() as tx:
                if await Tenants.count_tokens(tx):
                    return None
            _, token = await self.create("default", "first start")
        return token


@dataclass
class Services:
    """Everything a running chainkeys holds; built once per process."""

    settings: Settings
    db: Database
    vault: Vault
    accounts: AccountService
    tokens: TokenService
    audit: AuditService
    keys: KeyService

    async def close(self) -> None:
        await self.db.close()

    async def db_ping(self) -> None:
        """Raises StorageUnavailable when the database does not answer."""
        async with self.db.read() as tx:
            await Meta.ping(tx)


async def open_vault(db: Database, settings: Settings) -> Vault:
    """Load the master key(s) and prove they open what the store holds.

    A store with sealed data and a missing or different key stops the start:
    making a new key would silently orphan every account.
    """
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
        sealed = check is not None or await Accounts.count(tx) > 0
        used = await Meta.key_ids(tx) if sealed else set()
    provider = provider_from_settings(settings)
    key = provider.load(create=not sealed)
    vault = Vault(key, provider.others())
    missing = sorted(k for k in used if not vault.holds(k))
    if missing:
        raise StartupError(
            f"the master key from {provider.description} (id {key.id}) does not open this "
            f"store: it holds secrets sealed with key id {', '.join(missing)}; "
            "start with the key that sealed them"
        )
    if check is not None:
        blob, key_id = check
        try:
            vault.open(blob, key_id or "", CHECK_CONTEXT)
        except SealError:
            raise StartupError(
                f"the master key from {provider.description} (id {key.id}) does not open this "
                f"store: its check record (key id {key_id}) fails to open; the key file or "
                "the database has been altered"
            ) from None
    elif sealed:
        raise StartupError("the store holds sealed accounts but no master-key check record")
    else:
        async with db.write() as tx:
            if await Meta.get(tx, CHECK_KEY) is None:
                await Meta.insert(tx, CHECK_KEY, vault.seal(b"chainkeys", CHECK_CONTEXT), key.id)
    return vault


@dataclass(frozen=True, slots=True)
class RotationReport:
    new_key_id: str
    accounts: int
    records: int
    retired_key_file: str | None


class KeyService:
    """Master-key rotation: re-seal every secret under the new key, resumably."""

    BATCH = 500

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    async def rotate(self) -> RotationReport:
        """Re-seal what another key sealed; each batch commits on its own.

        With the key file, a `.next` key is made (or reused, when resuming) and
        promoted once nothing is sealed by the old key. With CHAINKEYS_MASTER_KEY,
        the new key is that variable and the old ones are in
        CHAINKEYS_PREVIOUS_MASTER_KEYS. Interrupted at any point, every secret
        still opens with the keys held, and running it again finishes the job.
        """
        from chainkeys.vault import FileKeyProvider

        provider = provider_from_settings(self.settings)
        old: Any = None
        if isinstance(provider, FileKeyProvider):
            old = provider.load(create=False)
            new = provider.begin_rotation()
            vault = Vault(new, [old, *provider.others()])
        else:
            vault = Vault(provider.load(create=False), provider.others())
        accounts = await self._reseal_accounts(vault)
        records = await self._reseal_records(vault)
        async with self.db.read() as tx:
            left = (await Meta.key_ids(tx)) - {vault.key_id}
        if left:
            raise StartupError(f"secrets sealed with key id {', '.join(sorted(left))} remain")
        retired = None
        if old is not None and old.id != vault.key_id:
            retired = str(provider.finish_rotation(old))  # type: ignore[attr-defined]
        async with self.db.write() as tx:
            await Audit.insert(tx, audit_event(None, "key.rotate", "ok", account_name=vault.key_id))
        return RotationReport(vault.key_id, accounts, records, retired)

    async def _reseal_accounts(self, vault: Vault) -> int:
        """Live and retained-after-delete accounts, a batch per transaction."""
        done = 0
        for table in SEALED_TABLES:
            after = 0
            while True:
                async with self.db.read() as tx:
                    rows = await table.not_sealed_by(tx, vault.key_id, after, self.BATCH)
                if not rows:
                    break
                async with self.db.write() as tx:
                    for row in rows:
                        assert row.id is not None
                        context = Context(row.tenant_id, row.family, row.name)
                        sealed = vault.seal(vault.open(row.secret, row.key_id, context), context)
                        done += await table.reseal(tx, row.id, row.key_id, sealed, vault.key_id)
                after = rows[-1].id or after
        return done

    async def _reseal_records(self, vault: Vault) -> int:
        done = 0
        async with self.db.write() as tx:
            for key, value, key_id in await Meta.all(tx):
                if key_id and key_id != vault.key_id:
                    context = CHECK_CONTEXT if key == CHECK_KEY else Context("-", "-", key, "meta")
                    sealed = vault.seal(vault.open(value, key_id, context), context)
                    done += await Meta.reseal(tx, key, key_id, sealed, vault.key_id)
        while True:
            async with self.db.read() as tx:
                rows = await Idempotency.not_sealed_by(tx, vault.key_id, self.BATCH)
            if not rows:
                return done
            async with self.db.write() as tx:
                for tenant_id, key, blob, key_id in rows:
                    context = Context(tenant_id, "-", key, purpose="idempotency")
                    sealed = vault.seal(vault.open(blob, key_id, context), context)
                    done += await Idempotency.reseal(
                        tx, tenant_id, key, key_id, sealed, vault.key_id
                    )

    async def retire(self) -> list[str]:
        """Delete retired key files once nothing in the store needs them."""
        from chainkeys.vault import FileKeyProvider

        provider = provider_from_settings(self.settings)
        if not isinstance(provider, FileKeyProvider):
            raise BadRequest(
                "with CHAINKEYS_MASTER_KEY, retire by unsetting CHAINKEYS_PREVIOUS_MASTER_KEYS"
            )
        current = provider.load(create=False)
        async with self.db.read() as tx:
            used = await Meta.key_ids(tx)
        if used - {current.id}:
            raise Conflict(
                "some secrets are still sealed by an older key: run `chainkeys key rotate`"
            )
        return [str(p) for p in provider.retire()]


class AuditService:
    """Reads the audit log (the API gives a tenant only its own events)."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    async def page(
        self, tenant_id: str | None, since_ms: int, limit: int | None, cursor: str | None
    ) -> tuple[list[AuditEvent], str | None]:
        limit = self.settings.list_default_limit if limit is None else limit
        if not 1 <= limit <= self.settings.list_max_limit:
            raise BadRequest(
                f"limit must be between 1 and {self.settings.list_max_limit}", code="invalid_limit"
            )
        async with self.db.read() as tx:
            events = await Audit.page(tx, tenant_id, since_ms, decode_cursor(cursor), limit + 1)
        more = len(events) > limit
        events = events[:limit]
        return events, (encode_cursor(events[-1].id or 0) if more else None)

    async def tenant_id(self, name: str) -> str:
        async with self.db.read() as tx:
            found = await Tenants.id_by_name(tx, name)
        if found is None:
            raise NotFound(f"no tenant named {name}")
        return found


async def open_services(settings: Settings) -> Services:
    """Open the store (creating the schema on first start) and the vault."""
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = Database(settings.db_url, settings)
    try:
        async with db.startup_lock():
            await migrate.ensure_schema(db)
            vault = await open_vault(db, settings)
    except BaseException:
        await db.close()
        raise
    return Services(
        settings,
        db,
        vault,
        AccountService(db, vault, settings),
        TokenService(db),
        AuditService(db, settings),
        KeyService(db, settings),
    )
