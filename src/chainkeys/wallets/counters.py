"""The next-index counters of wallets' chains: authenticated rows pinned by the tenant's head.

A counter says which index of a chain derive-next hands out next. A database writer
who lowers one, deletes it, or puts it back from an older copy would have the same
index, and so the same address, handed out again (to a second customer as a deposit
address, say). So each counter row carries a MAC (store/integrity.py WALLET_COUNTERS:
its chain, its tenant and its value) and the tenant's head pins every counter of the
tenant (the `counters` set, vault/heads.py): a counter is used only when its row is
the member the head pins, and a chain with no row only when the head pins none for
it. Anything else fails closed (IntegrityFailure: logged, counted, the derivation
refused and audited), never an index given twice.

Counters move in the transaction that stores the derived accounts, under the tenant's
head scope (`head/<tenant>`, taken first): the derivations of one tenant are
serialised on every replica, as every change to its head already is, so two of them
never read the same value and a counter is never created twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select, update

from chainkeys.errors import Conflict, IntegrityFailure
from chainkeys.store.integrity import WALLET_COUNTERS
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import wallet_counters
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded, Member
from chainkeys.vault.integrity import failed
from chainkeys.vault.pinned import counter_ident

SET = "counters"  # the tenant's pinned set (vault/heads.py)
REREADS = 5  # reads of a row outside a write transaction that a commit moved meanwhile


class ChainFull(Conflict):
    code = "chain_full"


@dataclass(frozen=True, slots=True)
class Chain:
    """What a next index counts within: one derivation chain of one wallet (an HD
    multisig's chain names the registration as its address type)."""

    tenant_id: str
    wallet_id: str
    family: str
    network: str
    address_type: str  # "" where the family has a single address type
    account: int
    change: int

    def key(self) -> dict[str, Any]:
        """The row's primary key, by column name."""
        return {
            "wallet_id": self.wallet_id,
            "family": self.family,
            "network": self.network,
            "address_type": self.address_type,
            "account": self.account,
            "change": self.change,
        }

    def values(self, next_index: int) -> dict[str, Any]:
        """The row with `next_index`, by column name (what its MAC covers)."""
        return {**self.key(), "tenant_id": self.tenant_id, "next_index": next_index}

    @property
    def ident(self) -> str:
        return counter_ident(self.key())

    def __str__(self) -> str:
        return f"the next-index counter of wallet {self.wallet_id} ({self.ident})"


_c = wallet_counters.c
_KEY = (
    (_c.wallet_id == bindparam("wallet_id"))
    & (_c.family == bindparam("family"))
    & (_c.network == bindparam("network"))
    & (_c.address_type == bindparam("address_type"))
    & (_c.account == bindparam("account"))
    & (_c.change == bindparam("change"))
)
_COLUMNS = (
    _c.wallet_id,
    _c.tenant_id,
    _c.family,
    _c.network,
    _c.address_type,
    _c.account,
    _c.change,
    _c.next_index,
    _c.mac,
)
_GET = Prepared(select(*_COLUMNS).where(_KEY))
_OF_TENANT = Prepared(select(*_COLUMNS).where(_c.tenant_id == bindparam("tenant_id")))
_INSERT = Prepared(
    insert(wallet_counters),
    (
        "wallet_id",
        "tenant_id",
        "family",
        "network",
        "address_type",
        "account",
        "change",
        "next_index",
        "mac",
    ),
)
_MOVE = Prepared(
    update(wallet_counters)
    .where(_KEY, _c.mac == bindparam("old_mac"))
    .values(next_index=bindparam("next_index"), mac=bindparam("mac"))
)


class Counters:
    """A tenant's counters, each read and moved only as its head pins it."""

    def __init__(self, tx: Tx, gate: Gate, chain: Chain) -> None:
        self.tx = tx
        self.gate = gate
        self.chain = chain

    async def _load(self) -> list[Loaded]:
        """Every counter of the tenant, each with whether its MAC holds (the set)."""
        found = (await self.tx.execute(_OF_TENANT, {"tenant_id": self.chain.tenant_id})).all()
        return [
            ((counter_ident(r._mapping), str(r.mac)), self.gate.valid(WALLET_COUNTERS, r._mapping))
            for r in found
        ]

    async def _read(self) -> tuple[Member, int] | None:
        """The chain's row as its member and value, None when it has none;
        IntegrityFailure when the row fails its MAC."""
        row = (await self.tx.execute(_GET, self.chain.key())).first()
        if row is None:
            return None
        if row.tenant_id != self.chain.tenant_id:  # another tenant's chain id (by hand)
            raise failed(WALLET_COUNTERS, str(self.chain))
        self.gate.check(WALLET_COUNTERS, row._mapping, str(self.chain))
        return (self.chain.ident, str(row.mac)), int(row.next_index)

    async def current(self) -> int:
        """The chain's next index as the tenant's head pins it (0: none derived yet);
        IntegrityFailure for a counter lowered, deleted, inserted or put back."""
        found = await self._pinned()
        return 0 if found is None else found[1]

    async def _pinned(self) -> tuple[Member, int] | None:
        heads, ident = self.gate.heads, self.chain.ident
        for _ in range(1 if self.tx.writing else REREADS):
            read = await self._read()
            members = await heads.verified(
                self.tx, self.chain.tenant_id, SET, self._load, "the wallet counters"
            )
            if read is None and not any(i == ident for i, _ in members):
                return None
            if read is not None and read[0] in members:
                return read
            # outside a write transaction, a derivation may have committed between the
            # row's read and the head's: read both again before calling it a failure
        raise failed(WALLET_COUNTERS, f"{self.chain}: not the copy the tenant's head pins")

    async def take(self, index: int | None, count: int, limit: int) -> int:
        """In the caller's write transaction: the first of `count` indices, from `index`
        or (None) from the counter, which moves past them (derive-next), or past an
        explicit index beyond it while that stays below `limit` (a derivation at the
        top of the range never leaves derive-next without an index). ChainFull when
        derive-next would pass `limit` (nothing moves)."""
        await self.tx.serialize("head/" + self.chain.tenant_id)
        found = await self._pinned()
        held = 0 if found is None else found[1]
        if index is None:
            if held + count > limit:
                raise ChainFull(
                    f"this chain has {max(0, limit - held)} unused indices below 2^31 "
                    f"({count} asked); derive under another account number"
                )
            first, after = held, held + count
        else:
            first, after = index, index + count
            if after <= held or after > limit - 1:
                return first  # behind the counter, or at the top: the counter stays
        await self._move(found, after)
        return first

    async def _move(self, found: tuple[Member, int] | None, after: int) -> None:
        values = self.chain.values(after)
        mac = self.gate.mac(WALLET_COUNTERS, values)
        if found is None:
            if not await insert_new(self.tx, _INSERT, {**values, "mac": mac}):
                raise failed(WALLET_COUNTERS, f"{self.chain}: a row the head does not pin")
            removed: list[Member] = []
        else:
            params = {**values, "mac": mac, "old_mac": found[0][1]}
            if (await self.tx.execute(_MOVE, params)).rowcount != 1:  # never under the scope
                raise IntegrityFailure(f"{self.chain} moved under its lock; nothing was done")
            removed = [found[0]]
        await self.gate.heads.change(
            self.tx, self.chain.tenant_id, SET, removed=removed, added=[(self.chain.ident, mac)]
        )
