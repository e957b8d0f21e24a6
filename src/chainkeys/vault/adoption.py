"""Adoption is explicit: a store is born with its integrity key, and nothing adopts itself.

An earlier release adopted at start whatever it found: a store without a key record
got a new key and every row MACed, so a database writer who deleted the record,
cleared the MACs and inserted a token row of their own was adopted with it. Now:

- a store is *born* with its record (format 3) on the first start that finds no rows;
- a store whose record is missing while it holds rows, whose record is of an older
  format (any older backup holds one), or whose record does not name a table that
  holds rows, does not start: the operator runs `chainkeys integrity adopt`, which
  shows what it would adopt (every row without a valid MAC by name), adopts it in one
  transaction, rebuilds the heads (vault/heads.py) and audits what it did.

Adopting also re-keys what a store from before keyed otherwise: token digests held as
a bare sha256, and wallets' seed fingerprints, made under a random key of their own
(the `wallet_seed_key` record, deleted here) before the vault derived theirs from the
integrity key (`Integrity.seed_key`).
"""

from __future__ import annotations

import logging
import secrets
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import func, select, update

from chainkeys.errors import IntegrityFailure, StartupError
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import (
    AUDIT_ROWS,
    HEADS,
    KEY_RING,
    KEY_USERS,
    MASTER_KEYS,
    REGISTRY,
    TENANTS,
    TOKENS,
    WALLETS,
    Authenticated,
)
from chainkeys.store.sealed import REGISTRY as SEALED
from chainkeys.store.sql import Tx
from chainkeys.store.tables import audit, integrity_heads, wallets, webhook_outbox
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import MOD, RING, RING_SETS, SETS, Head, tenant_scope
from chainkeys.vault.integrity import (
    CONTEXT,
    FORMAT,
    RECORD,
    ROTATED,
    Integrity,
    Record,
    generation,
    read_record,
)
from chainkeys.vault.pinned import PINNED, members, ring_members, rows
from chainkeys.vault.repository import Meta
from chainkeys.vault.seal import Context, SealError

log = logging.getLogger("chainkeys.vault")
# The barrier's own bookkeeping: the ring and the heartbeats.
BARRIER = (MASTER_KEYS.table, KEY_RING.table, KEY_USERS.table)
# Tables whose rows mean the store holds data (the barrier's own bookkeeping does not
# count: a new store is born with an empty ring, `_born` checks it).
HOLDING = (
    *(entry.table for entry in REGISTRY if entry.table not in BARRIER),
    audit,
    webhook_outbox,
)
OLD_SEED_RECORD = "wallet_seed_key"  # meta: the seed fingerprints' own key, before
ADOPT = "`chainkeys integrity adopt` (it shows what it would adopt first)"


async def held(tx: Tx, tables: Any = HOLDING) -> dict[str, int]:
    """Rows per table, for the tables that hold any."""
    counts = {}
    for table in tables:
        n = int((await tx.execute(select(func.count()).select_from(table))).scalar_one())
        if n:
            counts[table.name] = n
    return counts


def said(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} in {t}" for t, n in counts.items())


async def read(db: Backend, barrier: Any) -> Record | None:
    async with db.read() as tx:
        found = await Meta.get(tx, RECORD)
    if found is None:
        return None
    blob, key_id = found
    return read_record(await barrier.open_async(blob, key_id or "", CONTEXT))


async def open_integrity(db: Backend, barrier: Any) -> Gate:
    """This store's integrity key at start (under the start-up lock): made with the
    store when it holds nothing yet, else read from its record; refused (StartupError,
    naming why and what to run) whenever adopting would be needed."""
    record = await read(db, barrier)
    if record is None:
        async with db.read() as tx:
            counts = await held(tx)
        if counts:
            raise StartupError(
                f"this store holds rows ({said(counts)}) but no integrity record: it was "
                "stripped by someone without the master key, or it predates integrity. "
                f"Nothing was adopted. If you trust its rows, run {ADOPT}; else restore a "
                "backup"
            )
        return await _born(db, barrier)
    if record.format < FORMAT:
        raise StartupError(
            f"the integrity record is of format {record.format}; this release trusts "
            f"only format {FORMAT} (an older record put back from a backup reads the "
            f"same). If this store was upgraded from an earlier release, run {ADOPT}"
        )
    await _not_behind_rows(db, record)
    missing = [e.table for e in REGISTRY if e.table.name not in record.adopted]
    if missing:
        async with db.read() as tx:
            counts = await held(tx, missing)
        if counts:
            raise StartupError(
                f"rows of tables this store never authenticated are here ({said(counts)}): "
                f"run {ADOPT}"
            )
    gate = Gate.of(record)
    if MASTER_KEYS.table in missing:  # (and empty, else refused above): the ring's head
        async with db.write() as tx:
            await gate.heads.born(tx, None)
    await _trust(barrier, gate)  # before anything is sealed with what the ring says
    if missing:
        record = replace(record, adopted=_everything())
        sealed = await barrier.seal(record.encode(), CONTEXT)
        async with db.write() as tx:  # empty tables: nothing to adopt, named from now on
            await Meta.put(tx, RECORD, sealed.blob, sealed.key_id)
    return gate


async def _not_behind_rows(db: Backend, record: Record) -> None:
    """Refuse a record older than the heads: one put back from before a rotation (its
    seal is genuine) does not know the generation the heads were MACed under since,
    and would otherwise take back a MAC key that was retired."""
    async with db.read() as tx:
        macs = [r[0] for r in (await tx.execute(select(integrity_heads.c.mac))).all()]
    unknown = sorted({g for g in map(generation, macs) if g is not None} - set(record.macs))
    if unknown:
        raise StartupError(
            f"the integrity record knows MAC key generations {sorted(record.macs)}, but "
            f"the heads were MACed under generation {unknown[-1]}: the record was put back "
            "from before a rotation (`chainkeys integrity rotate`) by someone without the "
            "master key. Nothing was started: restore the record, or a backup"
        )


async def inspecting(db: Backend, barrier: Any) -> Gate:
    """The integrity key for `integrity verify`, the ring not trusted yet: verify only
    reads, and names what fails (a failing ring among the rest) where a start would
    stop at the first; it seals nothing."""
    record = await read(db, barrier)
    if record is None:
        raise StartupError(f"this store has no integrity record: see {ADOPT}")
    return Gate.of(record)


async def _trust(barrier: Any, gate: Gate) -> None:
    """The ring read through the gate from now on; StartupError naming why it fails (a
    term un-retired, edited, inserted, put back or removed: the process would seal with
    a key a database writer chose)."""
    try:
        await barrier.trust(gate)
    except IntegrityFailure as exc:
        raise StartupError(
            f"the master-key ring failed its integrity check: {exc.message}. Nothing was "
            "sealed with it. Restore master_keys and key_ring from a backup you trust (or "
            f"if you trust them as they are, run {ADOPT})"
        ) from None


def _everything() -> frozenset[str]:
    return frozenset(str(entry.table.name) for entry in REGISTRY)


async def _born(db: Backend, barrier: Any) -> Gate:
    """A new store: its record, and the ring's head with every set empty. A ring that
    holds rows already was not written by this start: it is not adopted here."""
    async with db.read() as tx:
        ring = await held(tx, BARRIER[:2])
    if ring:
        raise StartupError(
            f"this store holds master keys ({said(ring)}) but no integrity record: they "
            f"were written by someone without the master key, or predate integrity. Run "
            f"{ADOPT} if you trust them; else restore a backup"
        )
    record = Record(secrets.token_bytes(32), FORMAT, _everything(), "born")
    gate = Gate.of(record)
    sealed = await barrier.seal(record.encode(), CONTEXT)  # (the root key: no term yet)
    async with db.write() as tx:
        if not await Meta.insert_new(tx, RECORD, sealed.blob, sealed.key_id):
            raise StartupError("the integrity record appeared during start-up; start again")
        await gate.heads.born(tx, None)
    log.info("integrity: a new store, born with its integrity key")
    await _trust(barrier, gate)  # its first term
    return gate


@dataclass
class Plan:
    """What `integrity adopt` found: rows per table, and those without a valid MAC."""

    record: str  # "missing", "format N", "current"
    rows: dict[str, int] = field(default_factory=dict)
    unauthenticated: dict[str, list[str]] = field(default_factory=dict)

    @property
    def doubtful(self) -> int:
        return sum(len(v) for v in self.unauthenticated.values())


def describe(entry: Authenticated, row: Mapping[str, Any]) -> str:
    """A row named for the operator (never a secret: token digests are not shown)."""
    if entry is TOKENS:
        return (
            f"token {row['id']} of tenant {row['tenant_id']} (label {row['label']!r}, "
            f"scopes {row['scopes']})"
        )
    if entry is MASTER_KEYS:  # what decides which key seals, shown to the one who adopts
        states = [f"{s} {row[s + '_ms']}" for s in ("retired", "destroyed") if row[s + "_ms"]]
        return f"master key {row['key_id']} ({', '.join(states) or 'not retired'})"
    keys = [c.name for c in entry.table.primary_key.columns]
    return f"{entry.table.name} " + ", ".join(f"{k}={row[k]!r}" for k in keys)


async def plan(db: Backend, barrier: Any) -> tuple[Plan, bytes | None]:
    """What adopting would do, and the key it would keep (None: a new one)."""
    record = await read(db, barrier)
    key = record.key if record is not None else None
    found = Plan("missing" if record is None else f"format {record.format}")
    if record is not None and record.format == FORMAT:
        found.record = "current"
    integrity = Integrity.of(record) if record is not None else None
    async with db.read() as tx:
        for entry in REGISTRY:
            if entry is HEADS:
                continue  # rebuilt from the rows
            table_rows = await rows(tx, entry)
            if table_rows:
                found.rows[entry.table.name] = len(table_rows)
            for row in table_rows:
                if integrity is None or not integrity.valid(entry, row):
                    found.unauthenticated.setdefault(entry.table.name, []).append(
                        describe(entry, row)
                    )
    return found, key


async def adopt(db: Backend, barrier: Any, audit_event: Any) -> Plan:
    """Adopt every row as it is, in one transaction: MACs made (token digests of a store
    without a record re-keyed from their bare sha256), the record written at format 3
    (a rotated one keeps its MAC keys), every tenant's head rebuilt, and
    `audit_event(details)` written with it."""
    found, key = await plan(db, barrier)
    bare = key is None  # no record: token digests are the bare sha256 of before
    key = key or secrets.token_bytes(32)
    record = Record(key, FORMAT, _everything(), "adopted")
    kept = None if bare else await read(db, barrier)
    if kept is not None and kept.format >= ROTATED:  # keeps its MAC keys: the first is
        record = replace(kept, adopted=_everything(), origin="adopted")  # retired
    integrity = Integrity.of(record)
    sealed = await barrier.seal(record.encode(), CONTEXT)
    db.signer = integrity  # the adoption's own audit row carries its MAC
    async with db.write() as tx:
        for entry in REGISTRY:
            if entry is WALLETS:
                await _rekey_seeds(tx, barrier, integrity)
            if entry is not HEADS:
                await _mac_all(tx, integrity, entry, bare)
        await _mac_audit(tx, integrity)
        await rebuild_heads(tx, integrity)
        await Meta.put(tx, RECORD, sealed.blob, sealed.key_id)
        await audit_event(
            tx,
            {
                "record": found.record,
                "rows": found.rows,
                "unauthenticated": {t: len(v) for t, v in found.unauthenticated.items()},
            },
        )
    log.warning(
        "integrity: the store was adopted by the operator (record %s; %d rows had no valid MAC)",
        found.record,
        found.doubtful,
    )
    return found


async def _mac_all(tx: Tx, integrity: Integrity, entry: Authenticated, bare: bool) -> None:
    table = entry.table
    keys = [c.name for c in table.primary_key.columns]
    for found in await rows(tx, entry):
        row = dict(found)
        values: dict[str, Any] = {}
        if entry is TOKENS and bare and not integrity.valid(entry, row):
            values["token_hash"] = row["token_hash"] = integrity.keyed_digest(
                bytes.fromhex(row["token_hash"])
            )
        values["mac"] = integrity.mac(entry, row)
        if values["mac"] == row.get("mac") and len(values) == 1:
            continue
        where = [table.c[k] == row[k] for k in keys]
        await tx.execute(update(table).where(*where).values(**values))


async def _rekey_seeds(tx: Tx, barrier: Any, integrity: Integrity) -> None:
    """Each wallet's seed fingerprint made again from its phrase, opened through the
    barrier, under the key the vault derives for them; the old key's record deleted.
    A phrase that does not open keeps no fingerprint (NULL: an import then compares the
    phrases themselves, and this one fails there as it would anywhere)."""
    [column] = [c for c in SEALED if c.table is wallets]
    for row in await rows(tx, WALLETS):
        purpose, tenant, family, name = column.aad(row)
        context = Context(tenant, family, name, purpose)
        try:
            plain = await barrier.open_async(bytes(row["secret"]), str(row["key_id"]), context)
        except SealError:
            log.error("integrity adopt: the phrase of wallet %s does not open", row["id"])
            seed_key = None
        else:
            seed_key = integrity.seed_key(str(row["tenant_id"]), plain)
        if seed_key != row["seed_key"]:
            stmt = update(wallets).where(wallets.c.seq == row["seq"]).values(seed_key=seed_key)
            await tx.execute(stmt)
    await Meta.delete(tx, OLD_SEED_RECORD)


async def _mac_audit(tx: Tx, integrity: Integrity) -> None:
    """A MAC on each audit row that has none (a store from before they were made at
    insert): the chain, which does not cover the MAC, stays as it is."""
    columns = [c for c in AUDIT_ROWS.covered]
    while True:
        stmt = select(audit.c.id, *(audit.c[c] for c in columns)).where(audit.c.mac.is_(None))
        found = (await tx.execute(stmt.limit(1000))).all()
        for r in found:
            row = dict(r._mapping)
            mac = integrity.mac(AUDIT_ROWS, row)
            await tx.execute(update(audit).where(audit.c.id == row["id"]).values(mac=mac))
        if len(found) < 1000:
            return


async def expected_heads(tx: Tx, integrity: Integrity) -> dict[str, Head]:
    """Every tenant's head, and the ring's, as the rows say they should be (MACs
    assumed checked)."""
    sets: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(dict)
    for tenant in await rows(tx, TENANTS):
        sets[str(tenant["id"])] = {}
    for pinned in PINNED:
        for tenant_id, found in (await members(tx, pinned)).items():
            sets[tenant_id][pinned.name] = found
    heads = {}
    for tenant_id, by_set in sets.items():
        digests = {}
        for name in SETS:
            found = by_set.get(name, [])
            if found:
                digest = sum(integrity.element(name, i, m) for i, m in found) % MOD
                digests[name] = (len(found), digest)
        heads[tenant_scope(tenant_id)] = Head(tenant_scope(tenant_id), 1, digests)
    ring = await ring_members(tx)
    digests = {
        name: (len(ring[name]), sum(integrity.element(name, i, m) for i, m in ring[name]) % MOD)
        for name in RING_SETS
        if ring[name]
    }
    heads[RING] = Head(RING, 1, digests)
    return heads


async def rebuild_heads(tx: Tx, integrity: Integrity) -> None:
    """Every tenant's head (and the ring's) made again from the rows, at a version above
    any before."""
    old = {str(r["scope"]): int(r["version"]) for r in await rows(tx, HEADS)}
    await tx.execute(integrity_heads.delete())
    for scope, head in (await expected_heads(tx, integrity)).items():
        version = old.get(scope, 0) + 1
        values = Head(scope, version, head.sets).values()
        await tx.execute(
            integrity_heads.insert().values(**values, mac=integrity.mac(HEADS, values))
        )
