"""`chainkeys integrity rotate`: a new MAC key, every authenticated row MACed again.

The store key (token digests, set elements) stays: vault/integrity.py says why. A
rotation moves through steps the sealed record itself remembers, so an interrupted
one is finished by running the command again:

1. a new generation joins the record, verify-only (the record lists both keys);
2. it becomes the writing one (every holder of this process's gate learns it at once);
3. every authenticated row not MACed under it is MACed again, a batch per write
   transaction, each update conditional on the MAC it read (a row its writer changed
   meanwhile already carries a MAC of the new generation); a row in one of its
   tenant's pinned sets changes that tenant's head in the same transaction (a master
   key or ring entry, the ring's head: it pins every one of them), so the store
   verifies clean between any two batches; then the heads, and the audit log's
   MACs, chain and heads (`Rekeyer`, given by the caller: audit/ sits above vault/);
4. the old generation leaves the record: a MAC under it is refused from then on.

This first step is offline: the command refuses while any other process has a live
heartbeat (`key_users`, the master-key rotation's), because a running process holds
the record it read at start and would go on writing MACs of the old generation,
which step 4 makes invalid. It also refuses a store that does not verify clean: a
rotation MACs again what it is given, and must not launder a row a writer put back.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sqlalchemy import select, update

from chainkeys.errors import Conflict
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import HEADS, REGISTRY, Authenticated
from chainkeys.store.sql import Tx
from chainkeys.store.tables import integrity_heads
from chainkeys.vault.adoption import read
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import RING, head_lock
from chainkeys.vault.integrity import CONTEXT, FORMAT, RECORD, ROTATED, Record
from chainkeys.vault.pinned import PINNED, RING_PINNED, Pinned, Row
from chainkeys.vault.repository import Meta
from chainkeys.vault.verify import verify_store

log = logging.getLogger("chainkeys.vault")
BATCH: Final = 500  # rows MACed again per write transaction
# The audit log's part (audit/rekey.py): MACs again its rows, chain and heads; counts.
Rekeyer = Callable[[Backend, Gate], Awaitable[dict[str, int]]]
Recorder = Callable[[Tx, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Set:
    """A pinned set and whose head pins a row of it: its tenant's, or the ring's (None:
    the master keys belong to no tenant)."""

    pinned: Pinned
    whose: Callable[[Row], str | None]


def _tenant(row: Row) -> str | None:
    return str(row["tenant_id"])


def _ring(row: Row) -> str | None:
    return None


# Each pinned table's set, by table name (a table is in one set at most).
_SETS: Final = {
    **{p.entry.table.name: _Set(p, _tenant) for p in PINNED},
    **{p.entry.table.name: _Set(p, _ring) for p in RING_PINNED},
}


@dataclass
class Rotated:
    """What a rotation did: the generations, rows MACed again per table, and whether
    it resumed one left unfinished."""

    old: list[int]
    new: int
    resumed: bool
    counts: dict[str, int] = field(default_factory=dict)


async def _write_record(db: Backend, barrier: Any, gate: Gate, record: Record) -> None:
    sealed = await barrier.seal(record.encode(), CONTEXT)
    async with db.write() as tx:
        await Meta.put(tx, RECORD, sealed.blob, sealed.key_id)
    gate.learn(record.key, record.macs, record.writing)


async def rotate(
    db: Backend,
    barrier: Any,
    gate: Gate,
    live: Callable[[], Awaitable[list[str]]],
    rekey_audit: Rekeyer,
    record_event: Recorder,
) -> Rotated:
    """Rotate the MAC key, or finish a rotation left unfinished (module docstring).

    `live` names the other processes with a live heartbeat (the rotation refuses while
    any does); `record_event(tx, details)` writes the `integrity.rotate` audit event."""
    record = await read(db, barrier)
    if record is None or record.format < FORMAT:
        raise Conflict(
            "this store has no current integrity record: run `chainkeys integrity adopt`"
        )
    running = await live()
    if running:
        raise Conflict(
            f"{len(running)} process(es) are running ({', '.join(running[:5])}): a running "
            "process keeps the MAC key it read at start. Stop every server, then run "
            "`chainkeys integrity rotate` again; nothing was changed"
        )
    gate.learn(record.key, record.macs, record.writing)
    report = await verify_store(db, gate, full=True)
    if not report.ok:
        raise Conflict(
            f"the store does not verify ({len(report.failures)} failures, first: "
            f"{report.failures[0]}): run `chainkeys integrity verify`; a rotation would "
            "MAC those rows again as trusted, so nothing was changed"
        )
    resumed = len(record.macs) > 1
    if not resumed:  # step 1: the new key, verify-only
        new = max(record.macs) + 1
        record = replace(
            record,
            format=ROTATED,
            macs={**record.macs, new: secrets.token_bytes(32)},
        )
        await _write_record(db, barrier, gate, record)
    new = max(record.macs)
    old = sorted(g for g in record.macs if g != new)
    if record.writing != new:  # step 2: it writes
        record = replace(record, writing=new)
        await _write_record(db, barrier, gate, record)
    counts = await remac_rows(db, gate)  # step 3
    counts.update(await rekey_audit(db, gate))
    left = await verify_store(db, gate, full=True)
    if not left.ok:
        raise Conflict(
            f"after MACing again the store does not verify ({left.failures[0]}): the old "
            "key was kept; run `chainkeys integrity verify`, then rotate again"
        )
    retired = replace(record, macs={new: record.macs[new]})  # step 4
    sealed = await barrier.seal(retired.encode(), CONTEXT)
    done = Rotated(old, new, resumed, counts)
    async with db.write() as tx:
        await Meta.put(tx, RECORD, sealed.blob, sealed.key_id)
        await record_event(tx, {"retired": old, "writing": new, "resumed": resumed, "rows": counts})
    gate.learn(retired.key, retired.macs, retired.writing)
    log.warning(
        "integrity: MAC key rotated to generation %d (%d rows MACed again); generations %s retired",
        new,
        sum(counts.values()),
        old,
    )
    return done


async def remac_rows(db: Backend, gate: Gate) -> dict[str, int]:
    """Every registered row not under the writing generation MACed again, then every
    head; rows per table."""
    counts: dict[str, int] = {}
    for entry in REGISTRY:
        if entry is HEADS:
            continue
        n = await _remac_table(db, gate, entry, _SETS.get(entry.table.name))
        if n:
            counts[entry.table.name] = counts.get(entry.table.name, 0) + n
    n = await _remac_heads(db, gate)
    if n:
        counts[HEADS.table.name] = n
    return counts


def _stale(gate: Gate, entry: Authenticated, skipped: int) -> Any:
    mac = entry.table.c.mac
    return select(entry.table).where(mac.notlike(f"v{gate.writing}:%")).limit(BATCH + skipped)


def _where(entry: Authenticated, row: Row) -> list[Any]:
    keys = [c.name for c in entry.table.primary_key.columns]
    return [entry.table.c[k] == row[k] for k in keys] + [entry.table.c.mac == row["mac"]]


async def _latest(tx: Tx, pinned: Pinned, tenant: str) -> Any:
    """The tenant's highest value of a `latest` set's column (its one member)."""
    table = pinned.entry.table
    column = table.c[pinned.latest or ""]
    stmt = select(column).where(table.c.tenant_id == tenant).order_by(column.desc()).limit(1)
    found = (await tx.execute(stmt)).first()
    return None if found is None else found[0]


async def _member(tx: Tx, pinned: Pinned, row: Row) -> bool:
    if not pinned.live(row):
        return False
    if pinned.latest is None:
        return True
    return bool(row[pinned.latest] == await _latest(tx, pinned, str(row["tenant_id"])))


async def _remac_table(db: Backend, gate: Gate, entry: Authenticated, pinned: _Set | None) -> int:
    """One table's rows MACed again, a batch per transaction; a row that fails its MAC
    (written since the check by someone without the key) is left as it is: refused."""
    done = 0
    bad: set[tuple[Any, ...]] = set()
    keys = [c.name for c in entry.table.primary_key.columns]
    while True:
        changed = 0
        async with db.write() as tx:
            found = [
                dict(r._mapping) for r in (await tx.execute(_stale(gate, entry, len(bad)))).all()
            ]
            for row in found:
                ident = tuple(row[k] for k in keys)
                if ident in bad or not gate.valid(entry, row):
                    bad.add(ident)
                    continue
                new = gate.mac(entry, row)
                result = await tx.execute(
                    update(entry.table).where(*_where(entry, row)).values(mac=new)
                )
                if result.rowcount != 1:
                    continue  # changed meanwhile: its writer MACed it under the new key
                changed += 1
                if pinned is not None and await _member(tx, pinned.pinned, row):
                    member = pinned.pinned.ident(row)
                    await gate.heads.change(
                        tx,
                        pinned.whose(row),
                        pinned.pinned.name,
                        removed=[(member, str(row["mac"]))],
                        added=[(member, new)],
                    )
        done += changed
        if not changed:
            return done


async def _remac_heads(db: Backend, gate: Gate) -> int:
    """Each head not MACed under the writing generation MACed again, as it is (its
    version and sums unchanged), under its own lock (its tenant's, or the ring's)."""
    done = 0
    while True:
        async with db.write() as tx:
            stmt = select(integrity_heads).where(
                integrity_heads.c.mac.notlike(f"v{gate.writing}:%")
            )
            found = [dict(r._mapping) for r in (await tx.execute(stmt.limit(BATCH))).all()]
            changed = 0
            for row in found:
                if not gate.valid(HEADS, row):
                    continue
                scope = str(row["scope"])
                if scope == RING or scope.startswith("t"):
                    await tx.serialize(head_lock(scope))
                where = _where(HEADS, row)
                new = gate.mac(HEADS, row)
                result = await tx.execute(update(integrity_heads).where(*where).values(mac=new))
                changed += result.rowcount
        done += changed
        if not changed:
            return done
