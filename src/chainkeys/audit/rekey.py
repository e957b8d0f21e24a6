"""The audit log's part of `chainkeys integrity rotate` (vault/rotation.py): its rows'
MACs, its chain and heads, and the devices' cursors, made again under the writing
MAC key generation.

The chain is linked again whole, one tenant per write transaction under the
`audit-chain` scope (the chaining round's): each link covers the one before, so a new
key changes every link after the first. Each old link is checked (under the
generation it names) before its row is linked again, and the tenant's head must
match the old chain's end: a rotation never turns a broken chain into a sound one.
Linking again is idempotent, so an interrupted rotation links again from the start.
"""

from __future__ import annotations

from typing import Final

import msgspec
from sqlalchemy import and_, select, update

from chainkeys.audit.chain import CURSOR, LINK, ROW_COLUMNS, link, verify
from chainkeys.audit.repository import Stored
from chainkeys.audit.shipping import State, cursor_of
from chainkeys.errors import Conflict
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import AUDIT_HEADS, AUDIT_ROWS, DEVICE_CURSORS
from chainkeys.store.sql import Tx
from chainkeys.store.tables import audit, audit_heads, meta
from chainkeys.vault.integrity import Integrity

BATCH: Final = 1000  # audit rows MACed again per write transaction
_u = audit.c
_h = audit_heads.c


async def rekey_audit(db: Backend, gate: Integrity) -> dict[str, int]:
    """The audit log under the writing generation; counts per part."""
    verdict = await verify(db, gate)
    if verdict.broken is not None:
        raise Conflict(
            f"the audit chain breaks ({verdict.broken.reason}): run `chainkeys audit verify`; "
            "a rotation would link the broken rows again as sound, so the old key was kept"
        )
    counts = {
        "audit": await _remac_rows(db, gate),
        "audit links": await _relink(db, gate),
        "audit device cursors": await _remac_cursors(db, gate),
    }
    return {k: v for k, v in counts.items() if v}


async def _remac_rows(db: Backend, gate: Integrity) -> int:
    """Each audit row's MAC (those without one, written without the gate, stay so)."""
    done, after = 0, 0
    stale = _u.mac.notlike(f"v{gate.writing}:%")
    while True:
        async with db.write() as tx:
            stmt = select(_u.id, *(_u[c] for c in AUDIT_ROWS.covered), _u.mac)
            found = (
                await tx.execute(stmt.where(_u.id > after, stale).order_by(_u.id).limit(BATCH))
            ).all()
            for r in found:
                row = dict(r._mapping)
                after = row["id"]
                if gate.valid(AUDIT_ROWS, row):
                    new = gate.mac(AUDIT_ROWS, row)
                    where = and_(_u.id == row["id"], _u.mac == row["mac"])
                    done += (await tx.execute(update(audit).where(where).values(mac=new))).rowcount
        if len(found) < BATCH:
            return done


async def _relink(db: Backend, gate: Integrity) -> int:
    """Every tenant's chain linked again, a tenant per transaction; links changed."""
    async with db.read() as tx:
        keys = [str(r[0]) for r in (await tx.execute(select(_h.tenant_key))).all()]
    done = 0
    for key in sorted(keys):
        async with db.write() as tx:
            await tx.serialize("audit-chain")
            done += await _relink_one(tx, gate, key)
    return done


async def _relink_one(tx: Tx, gate: Integrity, key: str) -> int:
    found = (await tx.execute(select(audit_heads).where(_h.tenant_key == key))).first()
    if found is None:
        return 0
    head = dict(found._mapping)
    gate.check(AUDIT_HEADS, head, f"the audit head {key!r}")
    changed, old_prev, new_prev = 0, "", ""
    if key != CURSOR:
        who = _u.tenant_id.is_(None) if key == "-" else _u.tenant_id == key[1:]
        stmt = select(*(_u[c] for c in ROW_COLUMNS), _u.chain).where(who, _u.chain.isnot(None))
        for r in (await tx.execute(stmt.order_by(_u.id))).all():
            row = dict(r._mapping)
            if not gate.valid(LINK, {"prev": old_prev, **row, "mac": row["chain"]}):
                raise Conflict(f"audit row {row['id']} fails its link: the old key was kept")
            new = link(gate, new_prev, row)
            if new != row["chain"]:
                await tx.execute(update(audit).where(_u.id == row["id"]).values(chain=new))
                changed += 1
            old_prev, new_prev = row["chain"], new
        if head["chain"] != old_prev:
            raise Conflict(f"the audit head {key!r} is not its chain's end: the old key was kept")
    values = {**head, "chain": new_prev}
    values["mac"] = gate.mac(AUDIT_HEADS, values)
    if values != head:
        await tx.execute(update(audit_heads).where(_h.tenant_key == key).values(**values))
    return changed


async def _remac_cursors(db: Backend, gate: Integrity) -> int:
    """Each audit device's cursor (a `meta` record holding its MAC) MACed again."""
    done = 0
    async with db.write() as tx:
        for key in await _device_keys(tx):
            raw = await Stored.state(tx, key)
            if raw is None:
                continue
            state = msgspec.json.decode(raw, type=State)
            values = {**cursor_of(key, state), "mac": state.mac}
            if gate.current(state.mac) or not gate.valid(DEVICE_CURSORS, values):
                continue
            new = msgspec.structs.replace(state, mac=gate.mac(DEVICE_CURSORS, values))
            done += await Stored.swap(tx, key, raw, msgspec.json.encode(new))
    return done


async def _device_keys(tx: Tx) -> list[str]:
    """The devices' cursor records (audit/shipping.py names them "audit.device.…")."""
    stmt = select(meta.c.key).where(meta.c.key.like("audit.device.%"))
    return [str(r[0]) for r in (await tx.execute(stmt)).all()]
