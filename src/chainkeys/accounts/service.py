"""Account rules: tenant scoping, uniqueness, what is revealed when."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from chainkeys.accounts import idempotency as idem
from chainkeys.accounts.families import chain_errors, family_of
from chainkeys.accounts.idempotency_store import Idempotency
from chainkeys.accounts.lookup import AccountLookup
from chainkeys.accounts.models import (
    AccountView,
    Created,
    CreateRequest,
    Derivation,
    not_this_path,
)
from chainkeys.accounts.repository import AccountRow, Accounts, DeletedAccounts, DeletedRow
from chainkeys.audit.repository import Audit, AuditEvent
from chainkeys.audit.service import audit_event
from chainkeys.chains.hd import key_from_mnemonic
from chainkeys.chains.secp256k1 import generate_key, key_from_secret
from chainkeys.chains.spec import Family, Key, Network
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import (
    AccountExists,
    AccountNotFound,
    BadRequest,
    ChainkeysError,
    Conflict,
    Forbidden,
    NotFound,
)
from chainkeys.freezes.service import frozen, holding
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.repository import Tenants
from chainkeys.tokens.service import Principal
from chainkeys.vault.barrier import Barrier, Sealed
from chainkeys.vault.derive import Cursors
from chainkeys.vault.seal import Context

log = logging.getLogger("chainkeys.accounts")
DerivedExport = Callable[[Tx, Principal, str, str], Awaitable[None]]  # see `export`


class AccountService(AccountLookup):
    """Create, import, look up, list and delete accounts within one tenant (looking up
    and listing: `AccountLookup`, lookup.py)."""

    def __init__(
        self,
        db: Backend,
        barrier: Barrier,
        settings: Settings,
        cursors: Cursors,
        derived_export: DerivedExport,
    ) -> None:
        super().__init__(db, barrier, settings, cursors)
        self.derived_export = derived_export

    def _key_for(
        self, fam: Family[Any], req: CreateRequest, network: Network
    ) -> tuple[Key, Any, str]:
        """The key and the family's own options type for it, and where the key came from."""
        # private_key or mnemonic, etc.: checked as the body is read (schemas.CREATE_TOGETHER)
        given = req.options
        if req.mnemonic is not None:
            options = fam.options(given, None)  # the address type picks the derivation path
            key = key_from_mnemonic(
                fam, req.mnemonic, req.passphrase or "", req.account_index or 0, network, options
            )
            return key, options, "mnemonic"
        if req.private_key is not None:
            key = fam.parse_private_key(req.private_key, network)
            return key, fam.options(given, key), "private_key"
        key = generate_key()
        return key, fam.options(given, key), "generated"

    async def create(
        self, who: Principal, family: str, req: CreateRequest, idempotency_key: str | None = None
    ) -> Created:
        """Generate or import a key, seal it and store the account (AccountExists if taken).

        With an idempotency key, a repeat of the same request returns the first
        response (a generated private key included) instead of acting twice.
        """
        action = "import" if req.imports else "create"
        try:
            return await self._create(who, family, req, idempotency_key)
        except ChainkeysError as exc:
            await self._audit(audit_event(who, action, exc.code, family=family))
            raise

    async def _create(
        self, who: Principal, family: str, req: CreateRequest, idem_key: str | None
    ) -> Created:
        fam = family_of(family)
        fp = ""
        if idem_key is not None:
            idem_key = idem.hashed_key(idem_key)
            fp = idem.fingerprint(fam.name, req)
            async with self.db.read() as tx:
                replay = await idem.replay(tx, self.barrier, who.tenant_id, idem_key, fp)
            if replay is not None:
                return replay
        with chain_errors():
            network = fam.network(req.network)
            key, options, source = self._key_for(fam, req, network)
            account = fam.account(key, network, options)
        sealed = await self.barrier.seal(key.secret, Context(who.tenant_id, fam.name, account.name))
        row = AccountRow(
            tenant_id=who.tenant_id,
            family=fam.name,
            name=account.name,
            network=network.name,
            address=account.address,
            public_key=account.public_key,
            details={
                "extra": dict(account.extra),
                "address_type": account.address_type,
                "compressed": key.compressed,
                "source": source,
                "path": key.path,
            },
            secret=sealed.blob,
            key_id=sealed.key_id,
            created_ms=now_ms(),
        )
        reveal = source == "generated" and self.settings.reveal_generated_keys
        created = Created(
            view=AccountView.of(fam.name, network.name, account, row.created_ms),
            imported=source != "generated",
            private_key=fam.export_private_key(key, network) if reveal else None,
        )
        event = audit_event(
            who,
            "import" if created.imported else "create",
            "ok",
            family=fam.name,
            account_name=account.name,
        )
        ttl_ms = self.settings.idempotency_ttl_seconds * 1000
        record = None
        if idem_key is not None:
            record = await idem.record(self.barrier, who.tenant_id, idem_key, fp, created, ttl_ms)
        try:
            if record is None:
                await Accounts.create_audited(self.db, self._integrity, row, event)
            else:
                async with self.db.write() as tx:
                    await idem.remember(tx, who.tenant_id, idem_key or "", record)
                    await Accounts.insert_audited(tx, self._integrity, row, event)
        except idem.IdempotencyRace:
            async with self.db.read() as tx:
                replay = await idem.replay(tx, self.barrier, who.tenant_id, idem_key or "", fp)
            if replay is None:  # the other request's record expired in between
                raise idem.IdempotencyConflict("retry the request") from None
            return replay
        return created

    async def _audit(self, event: AuditEvent) -> None:
        """Record a failed attempt; a failure to record must not hide the original error."""
        with contextlib.suppress(ChainkeysError):
            await Audit.record(self.db, event)

    async def store_derived(
        self,
        who: Principal,
        fam: Family[Any],
        network: Network,
        derived: Sequence[Derivation],
        allocate: Callable[[Tx], Awaitable[int]] | None = None,
        rederive: Callable[[int], Sequence[Derivation]] | None = None,
    ) -> list[AccountView]:
        """Seal and store keys derived from a wallet, as ordinary accounts (audited as
        `derive`). `allocate` runs first in the same transaction (the wallet's index
        counter) and says the first index; if it is not the one `derived` starts at,
        `rederive` derives from it there. A path derived before answers its account
        again; an account of the same name that is not that path of that wallet is a
        409."""
        for _ in range(3):  # two replicas deriving one path at once: the loser reads it back
            try:
                return await self._store_derived(who, fam, network, derived, allocate, rederive)
            except AccountExists:
                continue
        return await self._store_derived(who, fam, network, derived, allocate, rederive)

    async def _seal_all(
        self, who: Principal, fam: Family[Any], derived: Sequence[Derivation]
    ) -> list[Sealed]:
        return [
            await self.barrier.seal(d.key.secret, Context(who.tenant_id, fam.name, d.account.name))
            for d in derived
        ]

    async def _store_derived(
        self,
        who: Principal,
        fam: Family[Any],
        network: Network,
        derived: Sequence[Derivation],
        allocate: Callable[[Tx], Awaitable[int]] | None,
        rederive: Callable[[int], Sequence[Derivation]] | None,
    ) -> list[AccountView]:
        views: list[AccountView] = []
        sealed = await self._seal_all(who, fam, derived)
        async with self.db.write() as tx:
            if allocate is not None:
                first = await allocate(tx)
                if rederive is not None and derived and first != derived[0].origin.index:
                    derived = rederive(first)  # another derivation took the guessed index
                    sealed = await self._seal_all(who, fam, derived)
            for d, s in zip(derived, sealed, strict=True):
                existing = await Accounts.get(
                    tx, self._integrity, who.tenant_id, fam.name, d.account.name
                )
                if existing is not None:
                    found = self.view_of(existing)
                    if found.origin != d.origin or found.network != network.name:
                        raise Conflict(not_this_path(found, d, network), code="account_exists")
                    views.append(found)
                    continue
                row = AccountRow(
                    tenant_id=who.tenant_id,
                    family=fam.name,
                    name=d.account.name,
                    network=network.name,
                    address=d.account.address,
                    public_key=d.account.public_key,
                    details={
                        "extra": dict(d.account.extra),
                        "address_type": d.account.address_type,
                        "compressed": True,
                        "source": "derived",
                        "path": d.origin.path,
                        "wallet": d.origin.wallet,
                        "index": d.origin.index,
                    },
                    secret=s.blob,
                    key_id=s.key_id,
                    created_ms=now_ms(),
                )
                await Accounts.insert(tx, self._integrity, row)
                details = {"wallet": d.origin.wallet, "path": d.origin.path}
                event = audit_event(
                    who, "derive", "ok", family=fam.name, account_name=row.name, details=details
                )
                await Audit.insert(tx, event)
                views.append(self.view_of(row))
        return views

    async def export(
        self, who: Principal, family: str, name: str
    ) -> tuple[AccountView, str, str | None, dict[str, str]]:
        """The account, its private key in the family's import form, and its BIP32 path
        when it came from a mnemonic. Audited and logged (never the key).

        A key derived from a wallet is a non-hardened child: with the wallet's account
        xpub it gives the account-level private key and every other index (BIP32), so
        its export is its wallet's export: it needs a token not limited to families, and
        `derived_export` (given at construction) marks the wallet exported, audited too."""
        row = await self.row(who, family, name)
        if row.details.get("multisig"):
            await self._audit(
                audit_event(
                    who, "export", "multisig_no_key", family=row.family, account_name=row.name
                )
            )
            raise BadRequest(
                "a multisig account has no key of its own: its keys are its member accounts'",
                code="multisig_no_key",
            )
        wallet = row.details.get("wallet")
        if wallet and who.families is not None:
            await self._audit(
                audit_event(who, "export", Forbidden.code, family=row.family, account_name=row.name)
            )
            raise Forbidden(
                "this key was derived from a wallet: with the wallet's xpub it gives every "
                "key of its account (BIP32), so exporting it is the wallet's export and "
                "needs a token not limited to families"
            )
        # a derived key gives its wallet's every key: any freeze in the tenant stops it
        found = await holding(self.db, who.tenant_id, row.family, (row.name,), bool(wallet))
        if found is not None:
            error = frozen(found, "nothing was exported")
            details = {"freeze": found.id, "reason": error.message}
            await self._audit(
                audit_event(
                    who,
                    "export",
                    error.code,
                    family=row.family,
                    account_name=row.name,
                    details=details,
                )
            )
            raise error
        fam = family_of(row.family)
        network = fam.network(row.network)
        await self.barrier.ensure(row.key_id)
        key = key_from_secret(self.open_key(row), compressed=row.details.get("compressed", True))
        exported = fam.export_private_key(key, network)
        event = audit_event(who, "export", "ok", family=row.family, account_name=row.name)
        async with self.db.write() as tx:
            await Audit.insert(tx, event)
            if wallet:
                await self.derived_export(tx, who, str(wallet), row.name)
        log.warning(
            "private key exported: %s account %s by token %s", row.family, row.name, who.token_id
        )
        return (
            self.view_of(row),
            exported,
            row.details.get("path"),
            dict(fam.export_other_forms(key)),
        )

    async def open_secret(self, who: Principal, family: str, name: str) -> bytes:
        """The private key of a stored account (for checks and exports; never listed)."""
        row = await self.row(who, family, name)
        await self.barrier.ensure(row.key_id)
        return self.open_key(row)

    def open_key(self, row: AccountRow) -> bytes:
        """The private key of a stored account (only after every check has passed; the
        caller made sure the barrier holds its key: `barrier.ensure`)."""
        context = Context(row.tenant_id, row.family, row.name)
        return self.barrier.open(row.secret, row.key_id, context)

    async def delete(self, who: Principal, family: str, name: str) -> None:
        """Delete (retained, sealed, for the retention period; 0: erased at once). Every
        idempotent replay of the account ends with it."""
        try:
            fam, name = self.lookup_name(family, name)
        except AccountNotFound:
            await self._audit(
                audit_event(who, "delete", AccountNotFound.code, family=family, account_name=name)
            )
            raise
        retain = now_ms() if self.settings.deleted_retention_days else None
        async with self.db.write() as tx:
            deleted = await Accounts.delete(tx, who.tenant_id, fam.name, name, retain)
            if deleted:
                await Idempotency.forget_account(tx, who.tenant_id, fam.name, name)
                event = audit_event(who, "delete", "ok", family=fam.name, account_name=name)
                await Audit.insert(tx, event)
        if not deleted:
            await self._audit(
                audit_event(who, "delete", AccountNotFound.code, family=fam.name, account_name=name)
            )
            raise AccountNotFound(f"no {fam.name} account by that name")

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
            tenant_id = await Tenants.id_by_name(tx, tenant_name, self._integrity)
            if tenant_id is None:
                raise NotFound(f"no tenant named {tenant_name}")
            found = await DeletedAccounts.latest(tx, self._integrity, tenant_id, fam.name, name)
            if found is None:
                raise AccountNotFound(f"no deleted {fam.name} account by that name to restore")
            row = found.account
            await Accounts.insert(
                tx, self._integrity, row
            )  # AccountExists if the name was taken again since
            await DeletedAccounts.forget(tx, found.id)
            operator = Principal(tenant_id, tenant_name, "")
            event = audit_event(operator, "restore", "ok", family=fam.name, account_name=name)
            await Audit.insert(tx, event)
        return self.view_of(row)

    async def deleted(self, tenant_name: str | None, limit: int = 1000) -> Sequence[DeletedRow]:
        async with self.db.read() as tx:
            tenant_id = None
            if tenant_name is not None:
                tenant_id = await Tenants.id_by_name(tx, tenant_name, self._integrity)
                if tenant_id is None:
                    raise NotFound(f"no tenant named {tenant_name}")
            return await DeletedAccounts.recent(tx, tenant_id, limit)
