"""Wallet SQL: the sealed phrases and HD multisig registrations, each row authenticated
(store/integrity.py WALLETS, WALLET_MULTISIGS); the counters are in counters.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, or_, select, update

from chainkeys.errors import Conflict
from chainkeys.store.integrity import WALLET_MULTISIGS, WALLETS
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import wallet_multisigs, wallets
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
    mac: str | None = None  # as read (store/integrity.py WALLETS)

    def covered(self) -> dict[str, Any]:
        """The row by column name, as its MAC covers it (and as the table stores it)."""
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "created_ms": self.created_ms,
            "exported": int(self.exported),
            "deleted_ms": self.deleted_ms,
            "seed_key": self.seed_key,
        }


def wallet_context(tenant_id: str, wallet_id: str) -> Context:
    """What a wallet's sealed phrase is bound to (the AES-GCM associated data)."""
    return Context(tenant_id, "wallet", wallet_id, purpose="wallet")


_w = wallets.c
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
    _w.mac,
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
        "deleted_ms",
        "seed_key",
        "mac",
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
# what the overview shows (a number for people: no row of it is used)
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
_CHANGE = Prepared(  # the row as read (its MAC), and nothing else, is changed
    update(wallets)
    .where(_w.seq == bindparam("seq"), _w.mac == bindparam("old_mac"))
    .values(
        deleted_ms=bindparam("deleted_ms"), exported=bindparam("exported"), mac=bindparam("mac")
    )
)
_PURGE = Prepared(delete(wallets).where(_w.deleted_ms < bindparam("cutoff")))


def _row(gate: Integrity, r: Any) -> WalletRow:
    """The row, if its MAC holds: its tenant and name decide whose phrase a reference
    opens (IntegrityFailure otherwise: logged, counted, never used)."""
    gate.check(WALLETS, r._mapping, f"the wallet {r.id!r}")
    return WalletRow(
        r.id,
        r.tenant_id,
        r.name,
        r.fingerprint,
        bytes(r.secret),
        r.key_id,
        int(r.created_ms),
        bool(r.exported),
        None if r.deleted_ms is None else int(r.deleted_ms),
        int(r.seq),
        r.seed_key,
        r.mac,
    )


class Wallets:
    """Wallet rows, each authenticated when read and MACed again when changed."""

    @staticmethod
    async def insert(tx: Tx, gate: Integrity, row: WalletRow) -> bool:
        """False when the name or the seed is taken in the tenant (the caller says which)."""
        values = row.covered()
        params = {**values, "secret": row.secret, "key_id": row.key_id}
        return await insert_new(tx, _INSERT, {**params, "mac": gate.mac(WALLETS, values)})

    @staticmethod
    async def with_seed_key(
        tx: Tx, gate: Integrity, tenant_id: str, seed_key: str
    ) -> WalletRow | None:
        params = {"tenant_id": tenant_id, "seed_key": seed_key}
        found = (await tx.execute(_BY_SEED_KEY, params)).first()
        return None if found is None else _row(gate, found)

    @staticmethod
    async def get(tx: Tx, gate: Integrity, tenant_id: str, ref: str) -> WalletRow | None:
        """By id or by name, deleted ones included (the caller decides)."""
        found = (await tx.execute(_GET, {"tenant_id": tenant_id, "ref": ref})).first()
        return None if found is None else _row(gate, found)

    @staticmethod
    async def with_fingerprint(
        tx: Tx, gate: Integrity, tenant_id: str, fingerprint: str
    ) -> list[WalletRow]:
        params = {"tenant_id": tenant_id, "fingerprint": fingerprint}
        return [_row(gate, r) for r in (await tx.execute(_BY_FINGERPRINT, params)).all()]

    @staticmethod
    async def page(
        tx: Tx, gate: Integrity, tenant_id: str, after: int, limit: int
    ) -> list[WalletRow]:
        params = {"tenant_id": tenant_id, "after": after, "limit": limit}
        return [_row(gate, r) for r in (await tx.execute(_PAGE, params)).all()]

    @staticmethod
    async def count(tx: Tx, tenant_id: str) -> int:
        return int((await tx.execute(_COUNT, {"tenant_id": tenant_id})).scalar_one())

    @staticmethod
    async def change(tx: Tx, gate: Integrity, row: WalletRow, **changes: Any) -> WalletRow:
        """`row` (as read in this transaction) with `deleted_ms` or `exported` changed,
        and its MAC made again."""
        new = replace(row, **changes)
        values = new.covered()
        mac = gate.mac(WALLETS, values)
        params = {**values, "seq": row.seq, "old_mac": row.mac, "mac": mac}
        if (await tx.execute(_CHANGE, params)).rowcount != 1:
            raise Conflict("the wallet changed meanwhile; try again", code="busy")
        return replace(new, mac=mac)

    @staticmethod
    async def purge(tx: Tx, cutoff_ms: int) -> int:
        """Forget wallets deleted before `cutoff_ms` (their counters stay: harmless)."""
        return int((await tx.execute(_PURGE, {"cutoff": cutoff_ms})).rowcount or 0)


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
