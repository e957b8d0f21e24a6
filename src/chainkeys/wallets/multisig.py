"""HD multisig from a wallet (BIP48: the families whose multisig forms have `hd_types`,
Litecoin): one m-of-n address per index.

The wallet's own member key is its BIP48 key, m/48'/coin'/account'/script' (2' for
P2WSH, 1' for P2SH-P2WSH), as Sparrow, Electrum and Core derive a multisig
co-signer's key; the others are extended public keys handed over by the other
co-signers. The receive chain's index i is `sortedmulti(m, own/0/i, other/0/i, …)`,
the ranged descriptor every wallet imports to watch the same addresses.

Deriving index i stores two accounts in one transaction with the index taken from
the counter: the wallet's member key at …/0/i (an ordinary derived account, sealed
like any other) and the multisig account of that index, whose held member it is. So
`sign-psbt` on the multisig signs with the wallet's key, under the tenant's policy
and approvals, and nothing is stored for an index the counter did not give.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys.accounts.families import chain_errors, family_of
from chainkeys.accounts.models import Derivation, Origin
from chainkeys.accounts.multisig import MultisigView, record, view_of
from chainkeys.accounts.repository import AccountRow, Accounts
from chainkeys.accounts.service import AccountService
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains import hd
from chainkeys.chains.registry import FAMILIES as REGISTRY
from chainkeys.chains.spec import Family, MultisigForms, ThresholdKey
from chainkeys.chains.tx.threshold import INVALID, MAX_KEYS
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, ChainkeysError, Conflict, Forbidden, NotFound
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.gate import opened
from chainkeys.vault.seal import Context
from chainkeys.wallets.counters import Chain
from chainkeys.wallets.derivation import allocate as take
from chainkeys.wallets.derivation import next_free
from chainkeys.wallets.repository import WalletMultisigRow, WalletMultisigs
from chainkeys.wallets.service import WalletService

# the families a wallet makes HD multisigs on: those whose multisig forms have BIP48 types
FAMILIES: Final = tuple(
    name for name, fam in REGISTRY.items() if fam.multisig is not None and fam.multisig.hd_types
)
MAX_COUNT: Final = 100


def _hd(fam: Family[Any]) -> tuple[MultisigForms, Callable[[int, Sequence[str], str], str]]:
    """The family's multisig forms and its HD multisig's descriptor (FAMILIES have them)."""
    forms = fam.multisig
    if forms is None or forms.hd_descriptor is None or not forms.hd_types:
        raise BadRequest(f"an HD multisig is made on {', '.join(FAMILIES)}", code=INVALID)
    return forms, forms.hd_descriptor


class MultisigNotFound(NotFound):
    code, message = "multisig_not_found", "no such multisig of this wallet"


@dataclass(frozen=True, slots=True)
class WalletMultisigView:
    row: WalletMultisigRow
    path: str  # the wallet's own member key
    own_key: str  # [origin]xpub… of it


class WalletMultisigService:
    def __init__(
        self, db: Backend, barrier: Barrier, wallets: WalletService, accounts: AccountService
    ) -> None:
        self.db = db
        self.barrier = barrier
        self.wallets = wallets
        self.accounts = accounts

    async def create(
        self,
        who: Principal,
        ref: str,
        family: str,
        network_name: str | None,
        address_type: str | None,
        threshold: int,
        xpubs: Sequence[str],
        account: int,
    ) -> WalletMultisigView:
        """Register the m-of-n HD multisig of this wallet's BIP48 key and `xpubs`."""
        if family not in FAMILIES:
            raise BadRequest(f"an HD multisig is made on {', '.join(FAMILIES)}", code=INVALID)
        if not who.may_use(family):
            raise Forbidden(f"this token may not use {family} accounts")
        fam = family_of(family)
        forms, descriptor_of = _hd(fam)
        kind = address_type or forms.hd_types[0]
        with chain_errors():
            network = fam.network(network_name)
            if kind not in forms.hd_types:
                raise BadRequest(f"address_type is {' or '.join(forms.hd_types)}", code=INVALID)
            path = hd.multisig_path(network, account, kind)
            others = [hd.parse_xpub(x, network.testnet) for x in xpubs]
        if not 1 <= len(others) < MAX_KEYS:
            raise BadRequest(
                f"xpubs holds the other 1 to {MAX_KEYS - 1} members' keys", code=INVALID
            )
        if not 1 <= threshold <= len(others) + 1:
            raise BadRequest(f"threshold is from 1 to {len(others) + 1}", code=INVALID)
        wallet, seed = await self.wallets.opened(who, ref)
        own = hd.own_node(seed, path, network.testnet)
        keys = [own.public, *(o.public for o in others)]
        if len(set(keys)) != len(keys):
            raise BadRequest(
                "the same extended key is listed twice (or is this wallet's own)", code=INVALID
            )
        descriptor = descriptor_of(threshold, [n.descriptor_key() for n in (own, *others)], kind)
        row = WalletMultisigRow(
            id="wms_" + secrets.token_hex(6),
            tenant_id=who.tenant_id,
            wallet_id=wallet.id,
            family=family,
            network=network.name,
            address_type=kind,
            threshold=threshold,
            account=account,
            xpubs=[x.strip() for x in xpubs],
            descriptor=descriptor,
            created_ms=now_ms(),
        )
        details = {
            "wallet": wallet.id,
            "multisig": row.id,
            "threshold": threshold,
            "members": len(keys),
        }
        async with self.db.write() as tx:
            await WalletMultisigs.insert(tx, opened(self.barrier.integrity), row)
            await Audit.insert(
                tx, audit_event(who, "wallet.multisig", "ok", family=family, details=details)
            )
        return WalletMultisigView(row, path, own.descriptor_key())

    async def get(self, who: Principal, ref: str, ms_id: str) -> WalletMultisigView:
        wallet, seed = await self.wallets.opened(who, ref)
        return self._view(seed, await self._row(who, wallet.id, ms_id))

    async def _row(self, who: Principal, wallet_id: str, ms_id: str) -> WalletMultisigRow:
        async with self.db.read() as tx:
            row = await WalletMultisigs.get(
                tx, opened(self.barrier.integrity), who.tenant_id, wallet_id, ms_id[:32]
            )
        if row is None:
            raise MultisigNotFound()
        if not who.may_use(row.family):
            raise Forbidden(f"this token may not use {row.family} accounts")
        return row

    async def derive(
        self, who: Principal, ref: str, ms_id: str, index: int | None, count: int, preview: bool
    ) -> list[MultisigView]:
        """The multisig accounts of `count` indices from `index` (or the next ones); stored
        unless `preview`, each with the wallet's member key of its index; a refusal is
        audited (`derive`, its code)."""
        try:
            return await self._derive(who, ref, ms_id, index, count, preview)
        except ChainkeysError as exc:
            await self.wallets.refused(who, exc, wallet=ref[:64], multisig=ms_id[:32])
            raise

    async def _derive(
        self, who: Principal, ref: str, ms_id: str, index: int | None, count: int, preview: bool
    ) -> list[MultisigView]:
        if not 1 <= count <= MAX_COUNT:
            raise BadRequest(f"count must be from 1 to {MAX_COUNT}", code="invalid_count")
        if index is not None and not 0 <= index <= hd.HARDENED - count:
            raise BadRequest("index is from 0 to 2^31-1", code="invalid_index")
        wallet, seed = await self.wallets.opened(who, ref)
        row = await self._row(who, wallet.id, ms_id)
        fam = family_of(row.family)
        forms, _ = _hd(fam)
        network = fam.network(row.network)
        path = hd.multisig_path(network, row.account, row.address_type)
        others = [hd.parse_xpub(x, network.testnet) for x in row.xpubs]
        chain = Chain(who.tenant_id, wallet.id, row.family, row.network, row.id, row.account, 0)
        options = fam.options({"address_type": "p2wpkh"}, None)

        derived: dict[int, list[Derivation]] = {}  # each index's keys derived once

        def members(first: int) -> list[Derivation]:
            if first in derived:
                return derived[first]
            out = derived[first] = []
            for i in range(first, first + count):
                with chain_errors():
                    key = seed.key(f"{path}/0/{i}")
                account = fam.account(key, network, options)
                out.append(Derivation(key, account, Origin(wallet.id, key.path or "", i)))
            return out

        def multisig_rows(derived: Sequence[Derivation]) -> list[tuple[AccountRow, ThresholdKey]]:
            rows = []
            for d in derived:
                with chain_errors():
                    keys = [d.key.public, *(o.derive(0, d.origin.index) for o in others)]
                    ms = forms.build(row.threshold, keys, row.address_type)
                    address = ms.address(network)
                rec = record(ms, {d.key.public.hex(): d.account.name})
                rows.append(
                    (
                        AccountRow(
                            tenant_id=who.tenant_id,
                            family=row.family,
                            name=address,
                            network=network.name,
                            address=address,
                            public_key="",
                            details={
                                "extra": {},
                                "address_type": ms.address_type,
                                "multisig": rec,
                                "hd": {
                                    "id": row.id,
                                    "path": d.origin.path,
                                    "index": d.origin.index,
                                },
                            },
                            secret=b"",
                            key_id="",
                            created_ms=now_ms(),
                        ),
                        ms,
                    )
                )
            return rows

        integrity = opened(self.barrier.integrity)
        first = index if index is not None else await next_free(self.db, integrity, chain, count)
        if preview:
            return [view_of(r) for r, _ in multisig_rows(members(first))]
        stored: list[AccountRow] = []

        async def allocate(tx: Tx) -> int:
            """Take the indices, and store their multisig accounts in the same
            transaction as the member keys (a retried transaction starts over)."""
            stored.clear()
            taken = await take(integrity, chain, index, count, tx)
            for r, _ in multisig_rows(members(taken)):
                found = await Accounts.get(tx, integrity, who.tenant_id, r.family, r.name)
                if found is not None:  # derived before: answered again, or not ours
                    if found.details.get("hd") != r.details["hd"]:
                        raise Conflict(
                            f"a {r.family} account {r.name} exists in your "
                            "tenant and is not this index of this multisig",
                            code="account_exists",
                        )
                    stored.append(found)
                    continue
                blob = msgspec.json.encode(r.details["multisig"])
                sealed = await self.barrier.seal(blob, Context(who.tenant_id, r.family, r.name))
                r = dataclasses.replace(r, secret=sealed.blob, key_id=sealed.key_id)
                await Accounts.insert(tx, integrity, r)
                await Audit.insert(
                    tx,
                    audit_event(
                        who,
                        "create",
                        "ok",
                        family=r.family,
                        account_name=r.name,
                        details={"multisig": row.id},
                    ),
                )
                stored.append(r)
            return taken

        await self.accounts.store_derived(
            who, fam, network, members(first), allocate=allocate, rederive=members
        )
        return [view_of(r) for r in stored]

    async def list(self, who: Principal, ref: str) -> list[WalletMultisigView]:
        """This wallet's HD multisigs of the families the token may use (the seed opened
        once, for the wallet's own member keys)."""
        wallet, seed = await self.wallets.opened(who, ref)
        async with self.db.read() as tx:
            rows = await WalletMultisigs.of_wallet(
                tx, opened(self.barrier.integrity), who.tenant_id, wallet.id
            )
        return [self._view(seed, r) for r in rows if who.may_use(r.family)]

    @staticmethod
    def _view(seed: hd.Seed, row: WalletMultisigRow) -> WalletMultisigView:
        network = family_of(row.family).network(row.network)
        path = hd.multisig_path(network, row.account, row.address_type)
        return WalletMultisigView(
            row, path, hd.own_node(seed, path, network.testnet).descriptor_key()
        )
