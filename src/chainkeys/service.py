"""Account and token rules: tenant scoping, uniqueness, what is revealed when.

The API and the CLI both call this module; neither touches the store or the
vault directly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chainkeys.chains.keys import generate_key
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import Account, ChainError, Family, Key, Options
from chainkeys.config import Settings
from chainkeys.errors import AccountNotFound, BadRequest, NotFound, StartupError
from chainkeys.store import migrate
from chainkeys.store.db import Database
from chainkeys.store.repositories import AccountRow, Accounts, Meta, Tenants, TokenRow
from chainkeys.vault import Context, SealError, Vault, provider_from_settings

CHECK_KEY = "master_key_check"
CHECK_CONTEXT = Context("-", "-", CHECK_KEY, purpose="check")
CURSOR_PREFIX = b"ck1:"
TOKEN_PREFIX = "ck_"


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
    extra: dict[str, str]


@dataclass(frozen=True, slots=True)
class Created:
    view: AccountView
    imported: bool
    private_key: str | None = field(default=None, repr=False)  # generated keys only, once


@dataclass(frozen=True, slots=True)
class Page:
    items: list[AccountView]
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

    async def create(self, tenant: Tenant, family: str, req: CreateRequest) -> Created:
        """Generate or import a key, seal it and store the account (409 if the name is taken)."""
        fam = family_of(family)
        with chain_errors():
            network = fam.network(req.network)
            key, options, source = self._key_for(fam, req, network)
            options = fam.check_options(options, key)
            account = fam.account(key, network, options)
        view = _view(fam.name, network.name, account)
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
            secret=self.vault.seal(key.secret, Context(tenant.id, fam.name, account.name)),
            key_id=self.vault.key_id,
            created_ms=now_ms(),
        )
        async with self.db.write() as tx:
            await Accounts.insert(tx, row)
        reveal = source == "generated" and self.settings.reveal_generated_keys
        private = fam.export_private_key(key, network) if reveal else None
        return Created(view=view, imported=source != "generated", private_key=private)

    def check_name(self, family: str, name: str) -> Family:
        fam = family_of(family)
        with chain_errors():
            fam.check_name(name)
        return fam

    async def get(self, tenant: Tenant, family: str, name: str) -> AccountView:
        fam = self.check_name(family, name)
        async with self.db.read() as tx:
            row = await Accounts.get(tx, tenant.id, fam.name, name)
        if row is None:
            raise AccountNotFound(f"no {fam.name} account named {name}")
        return _row_view(row.family, row.network, row.name, row.address, row.public_key, row.details)

    async def list(
        self, tenant: Tenant, family: str, limit: int | None, cursor: str | None
    ) -> Page:
        fam = family_of(family)
        s = self.settings
        if limit is None:
            limit = s.list_default_limit
        if not 1 <= limit <= s.list_max_limit:
            raise BadRequest(f"limit must be between 1 and {s.list_max_limit}", code="invalid_limit")
        after = decode_cursor(cursor)
        async with self.db.read() as tx:
            rows = await Accounts.page(tx, tenant.id, fam.name, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        items = [
            _row_view(fam.name, "", r.name, r.address, r.public_key, r.details) for r in rows
        ]
        return Page(items, encode_cursor(rows[-1].id) if more else None)

    async def delete(self, tenant: Tenant, family: str, name: str) -> None:
        fam = self.check_name(family, name)
        async with self.db.write() as tx:
            deleted = await Accounts.delete(tx, tenant.id, fam.name, name)
        if not deleted:
            raise AccountNotFound(f"no {fam.name} account named {name}")

    async def open_secret(self, tenant: Tenant, family: str, name: str) -> bytes:
        """The private key of a stored account (for checks and exports; never listed)."""
        fam = self.check_name(family, name)
        async with self.db.read() as tx:
            row = await Accounts.get(tx, tenant.id, fam.name, name)
        if row is None:
            raise AccountNotFound(f"no {fam.name} account named {name}")
        return self.vault.open(row.secret, row.key_id, Context(tenant.id, fam.name, name))


def _view(family: str, network: str, account: Account) -> AccountView:
    return AccountView(
        family, network, account.name, account.address, account.public_key, dict(account.extra)
    )


def _row_view(
    family: str, network: str, name: str, address: str, public_key: str, details: dict[str, Any]
) -> AccountView:
    return AccountView(family, network, name, address, public_key, details.get("extra", {}))


class TokenService:
    """Tenants and their tokens: random, shown once, stored as a hash."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def authenticate(self, token: str) -> Tenant | None:
        async with self.db.read() as tx:
            found = await Tenants.by_token_hash(tx, hash_token(token))
        return None if found is None else Tenant(*found)

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
        return TokenRow(token_id, tenant_id, tenant, label, ts, None), token

    async def list(self, tenant: str | None = None) -> list[TokenRow]:
        async with self.db.read() as tx:
            return await Tenants.list_tokens(tx, tenant)

    async def revoke(self, token_id: str) -> None:
        async with self.db.write() as tx:
            if not await Tenants.revoke_token(tx, token_id, now_ms()):
                raise NotFound(f"no live token with id {token_id}")

    async def issue_first(self) -> str | None:
        """On a store with no tokens at all, issue one for tenant `default`."""
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

    async def close(self) -> None:
        await self.db.close()

    async def db_ping(self) -> None:
        """Raises StorageUnavailable when the database does not answer."""
        async with self.db.read() as tx:
            await Meta.ping(tx)


async def open_vault(db: Database, settings: Settings) -> Vault:
    """Load the master key and prove it opens what the store holds.

    A store with sealed data and a missing or different key stops the start:
    making a new key would silently orphan every account.
    """
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
        sealed = check is not None or await Accounts.count(tx) > 0
    provider = provider_from_settings(settings)
    key = provider.load(create=not sealed)
    vault = Vault(key)
    if check is not None:
        blob, key_id = check
        try:
            vault.open(blob, key_id or "", CHECK_CONTEXT)
        except SealError:
            raise StartupError(
                f"the master key from {provider.description} (id {key.id}) does not open this "
                f"store, which was sealed with key id {key_id}; start with the key that sealed it"
            ) from None
    elif sealed:
        raise StartupError("the store holds sealed accounts but no master-key check record")
    else:
        async with db.write() as tx:
            if await Meta.get(tx, CHECK_KEY) is None:
                await Meta.insert(tx, CHECK_KEY, vault.seal(b"chainkeys", CHECK_CONTEXT), key.id)
    return vault


async def open_services(settings: Settings) -> Services:
    """Open the store (creating the schema on first start) and the vault."""
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    db = Database(settings.db_url, settings)
    try:
        await migrate.ensure_schema(db)
        vault = await open_vault(db, settings)
    except BaseException:
        await db.close()
        raise
    return Services(
        settings, db, vault, AccountService(db, vault, settings), TokenService(db)
    )
