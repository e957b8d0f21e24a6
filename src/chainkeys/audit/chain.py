"""The audit log chained, so a database writer cannot edit, delete or reorder it unseen.

Each row carries a MAC made by the statement that inserts it (store/integrity.py
AUDIT_ROWS): an edit is seen at once, before the row is linked. The chain catches
the rest: each row's `chain` is HMAC(integrity key, the tenant's previous link || the
row's id and every column), and `audit_heads` keeps each tenant's newest link (the
head, itself MACed), so `verify` walking a tenant's rows in id order names the
first row where the chain breaks: an edited row fails its own link, a deleted or
moved one fails the next row's, a deleted tail leaves a head that no row matches.
A global cursor head (`*`) counts every chained row: a tenant whose rows and head
were both deleted leaves the count short, and the store's integrity head holds the
same count (vault/heads.py), so deleting the whole log and every head is seen too.

Why a chaining round and not a link at insert: a link at insert needs the tenant's
previous link inside every writing transaction, which serializes a tenant's every
signature on one row lock across replicas. So requests write rows with their MAC; a
supervised round (`api/background.py`, every few seconds) links them in commit
order, a batch per write transaction, under the `audit-chain` scope so replicas take
turns. Commit order, on the database's own counter, never a clock: on PostgreSQL a
lower id can commit after a higher one, so a row is linked only once every
transaction running when it was inserted has ended (its `horizon`, the next
transaction id of that moment, is at or below the oldest one still running:
`CommitHorizon`); SQLite has one writer, and the round links what it sees. No
timestamp decides anything, so a row a writer dates into the future stalls nothing.
A row that appears below the cursor later, unlinked, was inserted after the fact,
and `verify` names it.

What this leaves (docs/security.md): the whole database rolled back to an older
copy; the checkpoints of audit/checkpoints.py catch that where a file audit device is
configured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import bindparam, delete, insert, select, update

from chainkeys.audit.repository import AUDIT_COLUMNS
from chainkeys.clock import monotonic
from chainkeys.errors import IntegrityFailure
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import AUDIT_HEADS, AUDIT_ROWS, Authenticated
from chainkeys.store.sql import COMMIT_HORIZON, Prepared, Tx
from chainkeys.store.tables import audit, audit_heads, tenants
from chainkeys.vault.integrity import Integrity

BATCH: Final = 500  # rows linked per write transaction (SQLite's writer is held for it)
CURSOR: Final = "*"  # the head that counts every linked row, of every tenant
_u = audit.c
_h = audit_heads.c
ROW_COLUMNS: Final = ("id", *AUDIT_COLUMNS)
# What a link covers: the previous link and the row, bound to the record "audit link"
# (not the row's MAC, which covers the same columns: `integrity adopt` may add one to
# a row linked before MACs existed).
LINK = Authenticated(audit, "audit link", ("prev", *ROW_COLUMNS), {})
# Events a process without the gate writes (a key move runs before any barrier opens
# on the new provider): they carry no MAC; the chain alone authenticates them.
UNSIGNED: Final = frozenset({"key.move"})
_SET_CHAIN = Prepared(
    update(audit).where(_u.id == bindparam("row_id")).values(chain=bindparam("link")),
    ("link", "row_id"),
)


def tenant_key(tenant_id: str | None) -> str:
    """A tenant's head key: "t" + its id, or "-" for events of no tenant (the
    operator's); neither can be the cursor's "*"."""
    return "-" if tenant_id is None else "t" + tenant_id


@dataclass(frozen=True, slots=True)
class Head:
    tenant_key: str
    last_id: int
    rows: int
    chain: str

    def values(self) -> dict[str, Any]:
        return {
            "tenant_key": self.tenant_key,
            "last_id": self.last_id,
            "rows": self.rows,
            "chain": self.chain,
        }


async def _heads(tx: Tx, integrity: Integrity) -> dict[str, Head]:
    """Every head, each checked: a head that fails its MAC is never built on."""
    found: dict[str, Head] = {}
    for row in (await tx.execute(select(audit_heads))).all():
        values = dict(row._mapping)
        integrity.check(AUDIT_HEADS, values, f"the audit head {values['tenant_key']!r}")
        values.pop("mac")
        found[values["tenant_key"]] = Head(**values)
    return found


def _authentic(integrity: Integrity, row: Mapping[str, Any]) -> bool:
    """The row's MAC is valid (or it is an event written without the gate, UNSIGNED)."""
    if row["mac"] is None:
        return row["action"] in UNSIGNED and row["tenant_id"] is None
    return integrity.valid(AUDIT_ROWS, row)


def link(integrity: Integrity, prev: str, row: Mapping[str, Any]) -> str:
    return integrity.mac(LINK, {"prev": prev, **row})


async def chain_round(db: Backend, integrity: Integrity) -> int:
    """Link the committed rows not yet linked, a batch per transaction; how many."""
    total = 0
    while True:
        async with db.read() as tx:  # nothing to do is the common case: no write lock
            cursor = (await tx.execute(select(_h.last_id).where(_h.tenant_key == CURSOR))).first()
            after = cursor[0] if cursor is not None else 0
            waiting = (await tx.execute(select(_u.id).where(_u.id > after).limit(1))).first()
        if waiting is None:
            return total
        linked = await _link_batch(db, integrity)
        total += linked
        if linked < BATCH:
            return total


async def link_committed(db: Backend, integrity: Integrity, patience_s: float = 30.0) -> int:
    """Rounds until no row waits above the cursor (or `patience_s` passed: a
    transaction elsewhere still running keeps newer rows waiting); how many linked.
    What `chainkeys audit verify` runs first, so it checks the newest rows linked."""
    total, started = 0, monotonic()
    while True:
        total += await chain_round(db, integrity)
        async with db.read() as tx:
            cursor = (await tx.execute(select(_h.last_id).where(_h.tenant_key == CURSOR))).first()
            after = cursor[0] if cursor is not None else 0
            waiting = (await tx.execute(select(_u.id).where(_u.id > after).limit(1))).first()
        if waiting is None or monotonic() - started > patience_s:
            return total
        await asyncio.sleep(0.05)


def _committed(row: Mapping[str, Any], oldest: int | None, following: int | None) -> bool:
    """Whether every transaction running when `row` was inserted has ended (PostgreSQL;
    on SQLite, which has one writer, what the round sees is committed). A horizon past
    the next transaction id was written by hand: not a reason to wait."""
    horizon = row["horizon"]
    if horizon is None or oldest is None:
        return True
    return bool(horizon <= oldest or (following is not None and horizon > following))


async def _link_batch(db: Backend, integrity: Integrity) -> int:
    async with db.write() as tx:
        await tx.serialize("audit-chain")
        heads = await _heads(tx, integrity)
        cursor = heads.get(CURSOR, Head(CURSOR, 0, 0, ""))
        oldest, following = (await tx.execute(COMMIT_HORIZON)).all()[0]
        columns = (*(_u[c] for c in ROW_COLUMNS), _u.mac, _u.horizon)
        stmt = select(*columns).where(_u.id > cursor.last_id)
        rows = (await tx.execute(stmt.order_by(_u.id).limit(BATCH))).all()
        changed: dict[str, Head] = {}
        links: list[tuple[int, str]] = []
        for found in rows:
            row = dict(found._mapping)
            if not _committed(row, oldest, following):  # in id order: nothing past it
                break
            key = tenant_key(row["tenant_id"])
            head = changed.get(key) or heads.get(key) or Head(key, 0, 0, "")
            chain = link(integrity, head.chain, row)
            links.append((row["id"], chain))
            changed[key] = Head(key, row["id"], head.rows + 1, chain)
        for row_id, chain in links:
            await tx.execute(_SET_CHAIN, {"link": chain, "row_id": row_id})
        if links:
            changed[CURSOR] = Head(CURSOR, links[-1][0], cursor.rows + len(links), "")
            for head in changed.values():
                values_ = head.values()
                await tx.execute(delete(audit_heads).where(_h.tenant_key == head.tenant_key))
                mac = integrity.mac(AUDIT_HEADS, values_)
                await tx.execute(insert(audit_heads).values(**values_, mac=mac))
        return len(links)


@dataclass(frozen=True, slots=True)
class Break:
    row_id: int | None
    tenant_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    rows: int  # linked rows checked
    unlinked: int  # rows newer than the cursor, not yet linked (not a break)
    broken: Break | None

    @property
    def ok(self) -> bool:
        return self.broken is None


PAGE: Final = 5_000


async def verify(
    db: Backend, integrity: Integrity, tenant: str | None = None, *, all_tenants: bool = True
) -> Verdict:
    """Walk the chain of one tenant (`tenant`, with `all_tenants` False) or of every
    tenant and the operator's events; the first break, if any."""
    async with db.read() as tx:
        try:
            heads = await _heads(tx, integrity)
        except IntegrityFailure as exc:
            return Verdict(0, 0, Break(None, None, str(exc)))
        # every tenant was made by an audited token.create: one with no row at all had
        # its log wiped (with its head, or the whole table and every head)
        made = {str(r[0]) for r in (await tx.execute(select(tenants.c.id))).all()}
        if all_tenants:
            chained: list[str | None] = [
                r[0] for r in (await tx.execute(select(_u.tenant_id).distinct())).all()
            ]
            known = {tenant_key(t) for t in chained}
            chained += [
                None if k == "-" else k[1:] for k in heads if k != CURSOR and k not in known
            ]
            chained += sorted(made - {t for t in chained if t is not None})
        else:
            chained = [tenant]
    cursor = heads.get(CURSOR, Head(CURSOR, 0, 0, ""))
    rows = unlinked = 0
    for t in sorted(set(chained), key=lambda t: (t is not None, t or "")):
        checked, waiting, broken = await _walk(db, integrity, t, heads, cursor.last_id)
        rows += checked
        unlinked += waiting
        if broken is not None:
            return Verdict(rows, unlinked, broken)
        if t in made and not checked + waiting:
            wiped = f"the log of a whole tenant ({t}) was wiped: it exists, no row of it is here"
            return Verdict(rows, unlinked, Break(None, t, wiped))
    if all_tenants and rows != cursor.rows:
        return Verdict(
            rows,
            unlinked,
            Break(
                None,
                None,
                f"{cursor.rows} rows were linked in all but {rows} are here: the rows "
                "and head of a whole tenant were deleted",
            ),
        )
    return Verdict(rows, unlinked, None)


async def _walk(
    db: Backend,
    integrity: Integrity,
    tenant: str | None,
    heads: dict[str, Head],
    linked_through: int,
) -> tuple[int, int, Break | None]:
    key = tenant_key(tenant)
    head = heads.get(key)
    prev, last, rows, waiting = "", 0, 0, 0
    after: int | None = None  # no lower bound: a forged row may have any id
    who = _u.tenant_id.is_(None) if tenant is None else _u.tenant_id == tenant
    while True:
        async with db.read() as tx:
            stmt = select(*(_u[c] for c in ROW_COLUMNS), _u.mac, _u.chain).where(who)
            if after is not None:
                stmt = stmt.where(_u.id > after)
            page = (await tx.execute(stmt.order_by(_u.id).limit(PAGE))).all()
        for found in page:
            row = dict(found._mapping)
            after = row["id"]
            if not _authentic(integrity, row):
                return (
                    rows,
                    waiting,
                    Break(
                        row["id"],
                        tenant,
                        f"row {row['id']} fails its MAC: it was edited, or written by someone "
                        "without the master key",
                    ),
                )
            if row["chain"] is None:
                if row["id"] <= linked_through:
                    return (
                        rows,
                        waiting,
                        Break(
                            row["id"],
                            tenant,
                            (
                                f"row {row['id']} is not in the chain: it was inserted after "
                                "the rows "
                                "around it were linked"
                            ),
                        ),
                    )
                waiting += 1
                continue
            if waiting:
                return (
                    rows,
                    waiting,
                    Break(
                        row["id"],
                        tenant,
                        (f"row {row['id']} is linked after unlinked rows: the chain was edited"),
                    ),
                )
            # under the key generation the link names (a rotation links again: rotation.py)
            if not integrity.valid(LINK, {"prev": prev, **row, "mac": row["chain"]}):
                return (
                    rows,
                    waiting,
                    Break(
                        row["id"],
                        tenant,
                        (
                            f"row {row['id']} fails its link: it was edited, or a row before it "
                            "was deleted or moved"
                        ),
                    ),
                )
            prev, last, rows = row["chain"], row["id"], rows + 1
        if len(page) < PAGE:
            break
    who_text = f"tenant {tenant!r}" if tenant is not None else "the operator's events"
    if head is None:
        if rows:
            return rows, waiting, Break(last, tenant, f"{who_text} has linked rows but no head")
        return rows, waiting, None
    if (head.last_id, head.rows, head.chain) != (last, rows, prev):
        return (
            rows,
            waiting,
            Break(
                last or None,
                tenant,
                (
                    f"{who_text}'s chain ends at row {last or 'none'} ({rows} rows) but its head "
                    f"says row {head.last_id} ({head.rows} rows): rows after it were deleted"
                ),
            ),
        )
    return rows, waiting, None
