"""Wallet SQL: the sealed phrases, and the counters behind next-index derivation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, or_, select, update

from chainkeys.errors import Conflict
from chainkeys.store.integrity import WALLET_MULTISIGS
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import wallet_counters, wallet_multisigs, wallets
from chainkeys.vault.integrity import Integrity
from chainkeys.vault.seal import Context


@dataclass(frozen=True, slots=True)
class WalletRow:
    id: str
    tenant_id: str
    name: str
    fingerprint: str
    secret: bytes  # sealed {"mnemonic", "passphrase"}
    key_id: str
    created_ms: int
    exported: bool = False
    deleted_ms: int | None = None
    seq: int = 0
    seed_key: str | None = None  # keyed fingerprint of the seed (None: made before it)


@dataclass(frozen=True, slots=True)
class Chain:
    """What a next index counts within: one derivation chain of one wallet."""

    wallet_id: str
    family: str
    network: str
    address_type: str  # "" where the family has a single address type
    account: int
    change: int

    def params(self) -> dict[str, Any]:
        return {
            "wallet_id": self.wallet_id,
            "family": self.family,
            "network": self.network,
            "address_type": self.address_type,
            "account": self.account,
            "change": self.change,
        }


def wallet_context(tenant_id: str, wallet_id: str) -> Context:
    """What a wallet's sealed phrase is bound to (the AES-GCM associated data)."""
    return Context(tenant_id, "wallet", wallet_id, purpose="wallet")


_w, _c = wallets.c, wallet_counters.c
_COLUMNS = (
    _w.id,
    _w.tenant_id,
    _w.name,
    _w.fingerprint,
    _w.secret,
    _w.key_id,
    _w.created_ms,
    _w.exported,
    _w.deleted_ms,
    _w.seq,
    _w.seed_key,
)
_INSERT = Prepared(
    insert(wallets),
    (
        "id",
        "tenant_id",
        "name",
        "fingerprint",
        "secret",
        "key_id",
        "created_ms",
        "exported",
        "seed_key",
    ),
)
_GET = Prepared(
    select(*_COLUMNS).where(
        _w.tenant_id == bindparam("tenant_id"),
        or_(_w.id == bindparam("ref"), _w.name == bindparam("ref")),
    )
)
_BY_SEED_KEY = Prepared(
    select(*_COLUMNS).where(
        _w.tenant_id == bindparam("tenant_id"), _w.seed_key == bindparam("seed_key")
    )
)
_BY_FINGERPRINT = Prepared(
    select(*_COLUMNS).where(
        _w.tenant_id == bindparam("tenant_id"), _w.fingerprint == bindparam("fingerprint")
    )
)
_COUNT = Prepared(
    select(func.count())
    .select_from(wallets)
    .where(_w.tenant_id == bindparam("tenant_id"), _w.deleted_ms.is_(None))
)
_PAGE = Prepared(
    select(*_COLUMNS)
    .where(
        _w.tenant_id == bindparam("tenant_id"),
        _w.seq > bindparam("after"),
        _w.deleted_ms.is_(None),
    )
    .order_by(_w.seq)
    .limit(bindparam("limit"))
)
_SET_DELETED = Prepared(
    update(wallets).where(_w.seq == bindparam("seq")).values(deleted_ms=bindparam("deleted_ms"))
)
_PURGE = Prepared(delete(wallets).where(_w.deleted_ms < bindparam("cutoff")))
_SET_EXPORTED = Prepared(update(wallets).where(_w.seq == bindparam("seq")).values(exported=1))
_NOT_SEALED_BY = Prepared(
    select(*_COLUMNS)
    .where(_w.seq > bindparam("after"), _w.key_id != bindparam("current"))
    .order_by(_w.seq)
    .limit(bindparam("limit"))
)
_RESEAL = Prepared(
    update(wallets)
    .where(_w.seq == bindparam("seq"), _w.key_id == bindparam("old_key_id"))
    .values(secret=bindparam("new_secret"), key_id=bindparam("new_key_id"))
)
_CHAIN = (
    (_c.wallet_id == bindparam("wallet_id"))
    & (_c.family == bindparam("family"))
    & (_c.network == bindparam("network"))
    & (_c.address_type == bindparam("address_type"))
    & (_c.account == bindparam("account"))
    & (_c.change == bindparam("change"))
)
_NEXT = Prepared(select(_c.next_index).where(_CHAIN))
_INSERT_NEXT = Prepared(
    insert(wallet_counters),
    ("wallet_id", "family", "network", "address_type", "account", "change", "next_index"),
)
_TAKE_NEXT = Prepared(
    update(wallet_counters)
    .where(_CHAIN, _c.next_index <= bindparam("last_first"))
    .values(next_index=_c.next_index + bindparam("count"))
    .returning(_c.next_index)
)
_RAISE_NEXT = Prepared(
    update(wallet_counters)
    .where(_CHAIN, _c.next_index < bindparam("after"))
    .values(next_index=bindparam("after"))
)


def _row(r: Any) -> WalletRow:
    return WalletRow(
        r[0],
        r[1],
        r[2],
        r[3],
        bytes(r[4]),
        r[5],
        int(r[6]),
        bool(r[7]),
        None if r[8] is None else int(r[8]),
        int(r[9]),
        r[10],
    )


class Wallets:
    @staticmethod
    async def insert(tx: Tx, row: WalletRow) -> bool:
        """False when the name or the seed is taken in the tenant (the caller says which)."""
        params = {
            "id": row.id,
            "tenant_id": row.tenant_id,
            "name": row.name,
            "fingerprint": row.fingerprint,
            "secret": row.secret,
            "key_id": row.key_id,
            "created_ms": row.created_ms,
            "exported": 0,
            "seed_key": row.seed_key,
        }
        return await insert_new(tx, _INSERT, params)

    @staticmethod
    async def with_seed_key(tx: Tx, tenant_id: str, seed_key: str) -> WalletRow | None:
        found = (
            await tx.execute(_BY_SEED_KEY, {"tenant_id": tenant_id, "seed_key": seed_key})
        ).first()
        return None if found is None else _row(found)

    @staticmethod
    async def get(tx: Tx, tenant_id: str, ref: str) -> WalletRow | None:
        """By id or by name, deleted ones included (the caller decides)."""
        found = (await tx.execute(_GET, {"tenant_id": tenant_id, "ref": ref})).first()
        return None if found is None else _row(found)

    @staticmethod
    async def with_fingerprint(tx: Tx, tenant_id: str, fingerprint: str) -> list[WalletRow]:
        params = {"tenant_id": tenant_id, "fingerprint": fingerprint}
        return [_row(r) for r in (await tx.execute(_BY_FINGERPRINT, params)).all()]

    @staticmethod
    async def page(tx: Tx, tenant_id: str, after: int, limit: int) -> list[WalletRow]:
        params = {"tenant_id": tenant_id, "after": after, "limit": limit}
        return [_row(r) for r in (await tx.execute(_PAGE, params)).all()]

    @staticmethod
    async def count(tx: Tx, tenant_id: str) -> int:
        return int((await tx.execute(_COUNT, {"tenant_id": tenant_id})).scalar_one())

    @staticmethod
    async def set_deleted(tx: Tx, seq: int, deleted_ms: int | None) -> None:
        await tx.execute(_SET_DELETED, {"seq": seq, "deleted_ms": deleted_ms})

    @staticmethod
    async def purge(tx: Tx, cutoff_ms: int) -> int:
        """Forget wallets deleted before `cutoff_ms` (their counters stay: harmless)."""
        return int((await tx.execute(_PURGE, {"cutoff": cutoff_ms})).rowcount or 0)

    @staticmethod
    async def set_exported(tx: Tx, seq: int) -> None:
        await tx.execute(_SET_EXPORTED, {"seq": seq})

    @staticmethod
    async def not_sealed_by(tx: Tx, current: str, after: int, limit: int) -> list[WalletRow]:
        params = {"current": current, "after": after, "limit": limit}
        return [_row(r) for r in (await tx.execute(_NOT_SEALED_BY, params)).all()]

    @staticmethod
    async def reseal(tx: Tx, seq: int, old_key_id: str, secret: bytes, key_id: str) -> bool:
        params = {"seq": seq, "old_key_id": old_key_id, "new_secret": secret, "new_key_id": key_id}
        return bool((await tx.execute(_RESEAL, params)).rowcount)


class ChainFull(Conflict):
    code = "chain_full"


class Counters:
    """Next indices, moved by compare-and-set: two transactions that read the same value
    cannot both move it (the second's UPDATE matches no row and it tries again)."""

    @staticmethod
    async def next(tx: Tx, chain: Chain) -> int | None:
        found = (await tx.execute(_NEXT, chain.params())).first()
        return None if found is None else int(found[0])

    @staticmethod
    async def take(tx: Tx, chain: Chain, count: int, limit: int) -> int | None:
        """The first of `count` next indices, moving the counter past them in the
        caller's transaction (its row lock serialises takers: no retries). ChainFull
        when they would pass `limit` (nothing moves); None when another transaction
        created the counter at the same moment (the caller starts again)."""
        params = {**chain.params(), "count": count, "last_first": limit - count}
        taken = (await tx.execute(_TAKE_NEXT, params)).first()
        if taken is not None:
            return int(taken[0]) - count
        held = await Counters.next(tx, chain)
        if held is not None and held + count <= limit:
            return None  # another transaction created the counter after our update ran
        if held is not None or count > limit:
            raise ChainFull(
                f"this chain has {max(0, limit - (held or 0))} unused indices "
                f"below 2^31 ({count} asked); derive under another account "
                "number"
            )
        made = await insert_new(tx, _INSERT_NEXT, {**chain.params(), "next_index": count})
        return 0 if made else None

    @staticmethod
    async def raise_to(tx: Tx, chain: Chain, after: int) -> bool:
        """Move the counter to `after` if it is behind (an explicit index beyond it);
        False when another transaction created the counter at the same moment."""
        if (await tx.execute(_RAISE_NEXT, {**chain.params(), "after": after})).rowcount:
            return True
        if await Counters.next(tx, chain) is not None:
            return True
        return await insert_new(tx, _INSERT_NEXT, {**chain.params(), "next_index": after})


@dataclass(frozen=True, slots=True)
class WalletMultisigRow:
    """An HD multisig of a wallet (public data: nothing here is sealed)."""

    id: str
    tenant_id: str
    wallet_id: str
    family: str
    network: str
    address_type: str
    threshold: int
    account: int
    xpubs: list[str]  # the other members' extended public keys, as given
    descriptor: str
    created_ms: int


_m = wallet_multisigs.c
_MS_COLUMNS = (
    _m.id,
    _m.tenant_id,
    _m.wallet_id,
    _m.family,
    _m.network,
    _m.address_type,
    _m.threshold,
    _m.account,
    _m.xpubs,
    _m.descriptor,
    _m.created_ms,
    _m.mac,
)


def _multisig(integrity: Integrity, r: Any) -> WalletMultisigRow:
    """The row, if its MAC holds: its members and descriptor decide every address a new
    index derives, so a writer's co-signer key must never reach a derivation."""
    integrity.check(WALLET_MULTISIGS, r._mapping, f"the multisig registration {r.id!r}")
    return WalletMultisigRow(
        r.id,
        r.tenant_id,
        r.wallet_id,
        r.family,
        r.network,
        r.address_type,
        int(r.threshold),
        int(r.account),
        json.loads(r.xpubs),
        r.descriptor,
        int(r.created_ms),
    )


class WalletMultisigs:
    @staticmethod
    async def insert(tx: Tx, integrity: Integrity, row: WalletMultisigRow) -> None:
        values = {c.name: getattr(row, c.name) for c in _MS_COLUMNS if c.name != "mac"}
        values["xpubs"] = json.dumps(row.xpubs)
        values["mac"] = integrity.mac(WALLET_MULTISIGS, values)
        await tx.execute(insert(wallet_multisigs).values(**values))

    @staticmethod
    async def get(
        tx: Tx, integrity: Integrity, tenant_id: str, wallet_id: str, ms_id: str
    ) -> WalletMultisigRow | None:
        stmt = select(*_MS_COLUMNS).where(
            _m.tenant_id == tenant_id, _m.wallet_id == wallet_id, _m.id == ms_id
        )
        found = (await tx.execute(stmt)).first()
        return None if found is None else _multisig(integrity, found)

    @staticmethod
    async def wallet_of(tx: Tx, integrity: Integrity, tenant_id: str, ms_id: str) -> str | None:
        """The wallet an HD multisig registration derives from (its row checked)."""
        stmt = select(*_MS_COLUMNS).where(_m.tenant_id == tenant_id, _m.id == ms_id)
        found = (await tx.execute(stmt)).first()
        return None if found is None else _multisig(integrity, found).wallet_id

    @staticmethod
    async def of_wallet(
        tx: Tx, integrity: Integrity, tenant_id: str, wallet_id: str
    ) -> list[WalletMultisigRow]:
        stmt = (
            select(*_MS_COLUMNS)
            .where(_m.tenant_id == tenant_id, _m.wallet_id == wallet_id)
            .order_by(_m.seq)
            .limit(1000)
        )
        return [_multisig(integrity, r) for r in (await tx.execute(stmt)).all()]
