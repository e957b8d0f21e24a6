"""HD wallets: one sealed BIP39 phrase per wallet, accounts derived from it by path.

A wallet holds its phrase and passphrase sealed under the master key, bound to
its tenant and id (`Context(tenant, "wallet", id, "wallet")`); they are opened
only to derive, to show an extended public key and to export (under the same
rules as a key export). A derived account is an ordinary account: its key is
derived once, sealed like any other, and signs at the same cost. Next indices
come from a counter pinned by the tenant's head and moved under it, so concurrent
derivations on any number of replicas never share an index, and a counter a database
writer lowered or put back fails closed (counters.py).

Every wallet row is authenticated (store/integrity.py WALLETS): a row moved into
another tenant, renamed onto another wallet's name or un-exported by hand is refused
(`integrity_failure`), and a phrase copied in from another wallet does not open. The
seed fingerprints that keep one wallet per seed per tenant are keyed by the vault
(`Integrity.seed_key`): this package holds no key.
"""

from __future__ import annotations

import functools
import logging
import re
import secrets
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from chainkeys import paging
from chainkeys.accounts.families import chain_errors
from chainkeys.accounts.models import AccountView
from chainkeys.accounts.repository import Accounts
from chainkeys.accounts.service import AccountService
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains import hd
from chainkeys.chains.mnemonic import normalise_mnemonic, seed_from_mnemonic
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import BadRequest, ChainkeysError, Conflict
from chainkeys.freezes.service import frozen, holding
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import WALLETS
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.derive import Cursors
from chainkeys.vault.gate import Gate, opened
from chainkeys.vault.integrity import failed
from chainkeys.vault.seal import SealError
from chainkeys.wallets.counters import Chain
from chainkeys.wallets.derivation import (
    allocate,
    check,
    derive_keys,
    next_free,
    target,
    type_of,
)
from chainkeys.wallets.models import (
    DeriveRequest,
    WalletNotFound,
    WalletView,
    XpubAnswer,
    view_of,
)
from chainkeys.wallets.repository import WalletRow, Wallets, wallet_context

log = logging.getLogger("chainkeys.wallets")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# the same rule as a JSON Schema pattern, the id prefix excluded (api/wallet_schemas.py)
NAME_PATTERN: Final = rf"^(?!wal_){NAME.pattern}\Z"
ID_PREFIX: Final = "wal_"
MAX_PASSPHRASE: Final = 1024


class _Phrase(msgspec.Struct):
    mnemonic: str
    passphrase: str


class _NameOrSeedTaken(Exception):
    """The wallet's insert met a unique key: its name, or its seed."""


async def derived_export(
    gate: Gate | None, tx: Tx, who: Principal, wallet_id: str, account: str
) -> None:
    """A derived key was exported (accounts/service.py `export`, given this function and
    the gate at construction): it is its wallet's export too, in the same transaction:
    the wallet is marked exported for good and `wallet.export` is audited, naming the
    account."""
    row = await Wallets.get(tx, opened(gate), who.tenant_id, wallet_id)
    if row is not None and not row.exported:
        await Wallets.change(tx, opened(gate), row, exported=True)
    await Audit.insert(
        tx,
        audit_event(
            who, "wallet.export", "ok", account_name=wallet_id, details={"through": account}
        ),
    )
    log.warning(
        "a derived key of wallet %s was exported (account %s) by token %s",
        wallet_id,
        account,
        who.token_id,
    )


class WalletService:
    def __init__(
        self,
        db: Backend,
        barrier: Barrier,
        settings: Settings,
        cursors: Cursors,
        accounts: AccountService,
    ) -> None:
        self.db = db
        self.barrier = barrier
        self.settings = settings
        self.cursors = cursors
        self.accounts = accounts

    @property
    def _gate(self) -> Gate:
        return opened(self.barrier.integrity)

    # -- wallets -----------------------------------------------------------------------

    async def create(
        self,
        who: Principal,
        name: str | None = None,
        words: int | None = None,
        mnemonic: str | None = None,
        passphrase: str | None = None,
    ) -> WalletView:
        """Generate a phrase (`words`, default 24) or import one (with an optional BIP39
        passphrase); the phrase never leaves in the answer. Importing a seed the tenant
        already holds is a 409."""
        imported = mnemonic is not None
        action = "wallet.import" if imported else "wallet.create"
        try:
            return await self._create(who, name, words, mnemonic, passphrase)
        except ChainkeysError as exc:
            await self._audit(who, action, exc.code, {})
            raise

    async def _create(
        self,
        who: Principal,
        name: str | None,
        words: int | None,
        mnemonic: str | None,
        passphrase: str | None,
    ) -> WalletView:
        # words or mnemonic, a passphrase with a mnemonic: checked where the body is read
        # (api/wallet_schemas.py WalletCreate.together)
        if mnemonic is None:
            with chain_errors():
                phrase = hd.generate_mnemonic(24 if words is None else words)
        else:
            with chain_errors():
                phrase = normalise_mnemonic(mnemonic)
        if passphrase is not None and len(passphrase) > MAX_PASSPHRASE:
            raise BadRequest("passphrase is too long", code="invalid_input")
        with chain_errors():
            seed = hd.Seed(seed_from_mnemonic(phrase, passphrase or ""))
        wallet_id = ID_PREFIX + secrets.token_hex(12)
        name = self._name(name, wallet_id)
        secret = msgspec.json.encode(_Phrase(phrase, passphrase or ""))
        sealed = await self.barrier.seal(secret, wallet_context(who.tenant_id, wallet_id))
        seed_key = self._gate.seed_key(who.tenant_id, secret)
        row = WalletRow(
            wallet_id,
            who.tenant_id,
            name,
            seed.fingerprint,
            sealed.blob,
            sealed.key_id,
            now_ms(),
            seed_key=seed_key,
        )
        imported = mnemonic is not None
        try:
            async with self.db.write() as tx:
                if imported:  # wallets made before seed keys: their phrases decide
                    await self._refuse_duplicate(tx, who, row.fingerprint, secret)
                if not await Wallets.insert(tx, self._gate, row):
                    raise _NameOrSeedTaken
                action = "wallet.import" if imported else "wallet.create"
                await Audit.insert(
                    tx,
                    audit_event(who, action, "ok", account_name=wallet_id, details={"name": name}),
                )
        except _NameOrSeedTaken:
            async with self.db.read() as tx:
                held = await Wallets.with_seed_key(tx, self._gate, who.tenant_id, seed_key)
            if held is not None:
                state = " (deleted: restore it)" if held.deleted_ms else ""
                raise Conflict(
                    f"this tenant already holds this seed as wallet {held.id}{state}",
                    code="wallet_exists",
                ) from None
            raise Conflict(
                "a wallet of that name already exists in your tenant (a deleted "
                "one keeps its name until it is purged)",
                code="wallet_exists",
            ) from None
        return view_of(row)

    @staticmethod
    def _name(name: str | None, wallet_id: str) -> str:
        if name is None:
            return wallet_id
        if not NAME.fullmatch(name) or name.startswith(ID_PREFIX):
            raise BadRequest(
                "a wallet name is 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or "
                f"digit, not with {ID_PREFIX}",
                code="invalid_name",
            )
        return name

    async def _refuse_duplicate(
        self, tx: Any, who: Principal, fingerprint: str, secret: bytes
    ) -> None:
        """The same phrase and passphrase already held: the fingerprint narrows it down,
        the phrases themselves decide (a fingerprint is 32 bits)."""
        for other in await Wallets.with_fingerprint(tx, self._gate, who.tenant_id, fingerprint):
            if await self._plain(other) == secret:
                state = " (deleted: restore it)" if other.deleted_ms else ""
                raise Conflict(
                    f"this tenant already holds this seed as wallet {other.id}{state}",
                    code="wallet_exists",
                )

    async def page(
        self, who: Principal, limit: int | None, cursor: str | None
    ) -> tuple[list[WalletView], str | None]:
        w = paging.window(self.settings, self.cursors, f"wallets/{who.tenant_id}", limit, cursor)
        async with self.db.read() as tx:
            rows = await Wallets.page(tx, self._gate, who.tenant_id, w.after or 0, w.fetch)
        shown, next_cursor = w.page(rows, lambda r: r.seq)
        return [view_of(r) for r in shown], next_cursor

    async def derived(
        self, who: Principal, ref: str, limit: int | None, cursor: str | None
    ) -> tuple[list[Any], str | None]:
        """A page of the accounts derived from a wallet (of the families the token may
        use), in creation order: rows of id, family, network, name, address, details,
        created_ms."""
        row = await self._row(who, ref)
        w = paging.window(self.settings, self.cursors, f"wallet-accounts/{row.id}", limit, cursor)
        async with self.db.read() as tx:
            rows = await Accounts.of_wallet(
                tx, opened(self.barrier.integrity), who.tenant_id, row.id, w.after or 0, w.fetch
            )
        shown, next_cursor = w.page(rows, lambda r: int(r.id))
        return [r for r in shown if who.may_use(r.family)], next_cursor

    async def count(self, who: Principal) -> int:
        async with self.db.read() as tx:
            return await Wallets.count(tx, who.tenant_id)

    async def _row(self, who: Principal, ref: str) -> WalletRow:
        async with self.db.read() as tx:
            row = await Wallets.get(tx, self._gate, who.tenant_id, ref[:64])
        if row is None or row.deleted_ms is not None:
            raise WalletNotFound("no wallet by that id or name")
        return row

    async def opened(self, who: Principal, ref: str) -> tuple[WalletRow, hd.Seed]:
        """The wallet and its seed (opened: for deriving its keys, never shown)."""
        row = await self._row(who, ref)
        return row, await self._seed(row)

    async def get(self, who: Principal, ref: str) -> WalletView:
        return view_of(await self._row(who, ref))

    async def delete(self, who: Principal, ref: str) -> None:
        """Delete the seed (kept sealed for the retention period, restorable by the
        operator); accounts derived from it stay."""
        async with self.db.write() as tx:
            row = await Wallets.get(tx, self._gate, who.tenant_id, ref[:64])
            if row is None or row.deleted_ms is not None:
                raise WalletNotFound("no wallet by that id or name")
            await Wallets.change(tx, self._gate, row, deleted_ms=now_ms())
            await Audit.insert(tx, audit_event(who, "wallet.delete", "ok", account_name=row.id))

    async def restore(self, tenant_id: str, ref: str, operator: Principal) -> WalletView:
        async with self.db.write() as tx:
            row = await Wallets.get(tx, self._gate, tenant_id, ref[:64])
            if row is None or row.deleted_ms is None:
                raise WalletNotFound("no deleted wallet by that id or name")
            row = await Wallets.change(tx, self._gate, row, deleted_ms=None)
            await Audit.insert(
                tx, audit_event(operator, "wallet.restore", "ok", account_name=row.id)
            )
        return view_of(row)

    async def export(self, who: Principal, ref: str) -> tuple[WalletView, str, str]:
        """The phrase and passphrase (the caller checked the setting and the scope);
        audited, logged without them, and the wallet is marked exported for good."""
        row = await self._row(who, ref)
        found = await holding(self.db, who.tenant_id, None, (), any_account=True)
        if found is not None:  # its phrase gives the keys of every account derived from it
            error = frozen(found, "no wallet is exported while a freeze holds in the tenant")
            details = {"freeze": found.id, "reason": error.message}
            event = audit_event(
                who, "wallet.export", error.code, account_name=row.id, details=details
            )
            await Audit.record(self.db, event)
            raise error
        phrase = await self._phrase(row)
        async with self.db.write() as tx:
            now = await Wallets.get(tx, self._gate, who.tenant_id, row.id)
            if now is None or now.deleted_ms is not None:
                raise WalletNotFound("no wallet by that id or name")
            if not now.exported:
                await Wallets.change(tx, self._gate, now, exported=True)
            await Audit.insert(tx, audit_event(who, "wallet.export", "ok", account_name=row.id))
        log.warning("wallet phrase exported: wallet %s by token %s", row.id, who.token_id)
        view = WalletView(row.id, row.name, row.fingerprint, row.created_ms, True)
        return view, phrase.mnemonic, phrase.passphrase

    async def _plain(self, row: WalletRow) -> bytes:
        """The sealed phrase opened. Bound to tenant and id: one a database writer copied
        in from another wallet does not open (IntegrityFailure, never that phrase)."""
        try:
            return await self.barrier.open_async(
                row.secret, row.key_id, wallet_context(row.tenant_id, row.id)
            )
        except SealError:
            raise failed(WALLETS, f"the sealed phrase of wallet {row.id!r}") from None

    async def _phrase(self, row: WalletRow) -> _Phrase:
        return msgspec.json.decode(await self._plain(row), type=_Phrase)

    async def _seed(self, row: WalletRow) -> hd.Seed:
        phrase = await self._phrase(row)
        return hd.Seed(seed_from_mnemonic(phrase.mnemonic, phrase.passphrase))

    async def _audit(
        self, who: Principal, action: str, outcome: str, details: dict[str, Any]
    ) -> None:
        """The audit row of a refusal (its own transaction: the refused one rolled back)."""
        try:
            await Audit.record(self.db, audit_event(who, action, outcome, details=details))
        except ChainkeysError:
            log.error("the audit row of a refused %s could not be written", action)

    # -- derivation --------------------------------------------------------------------

    async def derive(self, who: Principal, ref: str, req: DeriveRequest) -> list[AccountView]:
        """Derive (and, unless `preview`, store) `count` accounts from index `index`, or
        from the chain's next index; a refusal is audited (`derive`, its code)."""
        try:
            return await self._derive(who, ref, req)
        except ChainkeysError as exc:
            await self.refused(who, exc, wallet=ref[:64], family=req.family[:32])
            raise

    async def refused(self, who: Principal, exc: ChainkeysError, **details: str) -> None:
        """Audit a derivation that was refused (`derive`, its code), a counter that fails
        its check included (multisig.py too)."""
        await self._audit(who, "derive", exc.code, dict(details))

    async def _derive(self, who: Principal, ref: str, req: DeriveRequest) -> list[AccountView]:
        fam, network, options = target(who, req.family, req.network, req.address_type, req.name)
        check(fam, network, options, req)
        row = await self._row(who, ref)
        seed = await self._seed(row)
        kind = type_of(options) or ""
        chain = Chain(who.tenant_id, row.id, fam.name, network.name, kind, req.account, req.change)
        derive_from = functools.partial(derive_keys, seed, row.id, fam, network, options, req)
        gate = self._gate
        if req.preview:
            shown = req.index
            if shown is None:
                shown = await next_free(self.db, gate, chain, 1)
            return [
                AccountView.of(fam.name, network.name, d.account, None, d.origin)
                for d in derive_from(shown)
            ]
        # The counter moves in the transaction that stores the accounts, under the
        # tenant's head (counters.py), so only a derivation that succeeds moves it. The
        # keys are derived before it, for the index the counter shows now, and again
        # inside only if another derivation took it first.
        first = req.index
        if first is None:
            first = await next_free(self.db, gate, chain, req.count)
        allocated = functools.partial(allocate, gate, chain, req.index, req.count)
        return await self.accounts.store_derived(
            who, fam, network, derive_from(first), allocate=allocated, rederive=derive_from
        )

    async def xpub(
        self,
        who: Principal,
        ref: str,
        family: str,
        network: str | None,
        address_type: str | None,
        account: int,
        fmt: str | None,
    ) -> XpubAnswer:
        fam, net, options = target(who, family, network, address_type)
        kind = type_of(options)
        with chain_errors():
            chosen = hd.check_format(fam, net, kind, fmt)
            path = hd.account_path(fam, net, options, account)
        seed = await self._seed(await self._row(who, ref))
        key = seed.xpub(path, chosen)
        descriptors: Sequence[str | None] = (None, None)
        if kind is not None:
            descriptors = tuple(hd.descriptor(seed, path, net, kind, c) for c in (0, 1))
        return XpubAnswer(key, descriptors[0], descriptors[1], hd.formats(fam, net, kind))

    async def purge_expired(self) -> int:
        """Forget deleted wallets once their retention period is over; accounts derived
        from them stay."""
        cutoff = now_ms() - self.settings.deleted_retention_days * 86_400_000
        async with self.db.write() as tx:
            return await Wallets.purge(tx, cutoff)
