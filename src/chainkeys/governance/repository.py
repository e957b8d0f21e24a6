"""Governance SQL: a tenant's quorum and delay, its changes and their votes.

All three are authenticated rows (store/integrity.py GOVERNANCE, CHANGES,
CHANGE_VOTES), MACed here as they are written; the tenant's head pins its governance
row and its open changes (the `governance` and `changes` sets, vault/heads.py). So a
database writer who deletes the governance row (to file changes nobody must sign),
sets a change's state to `scheduled` or `applied`, edits its document or its
countdown, or puts back a copy from before it was cancelled is refused where the row
is used. Votes are not pinned: each carries its admin's signature of the change's
challenge, verified again when the votes are counted, so a vote row a writer makes
counts for nothing and one they delete only keeps a change from its quorum.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Final

from sqlalchemy import bindparam, insert, or_, select, update

from chainkeys.errors import IntegrityFailure
from chainkeys.store.integrity import CHANGE_VOTES, CHANGES, GOVERNANCE
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import change_votes, changes, governance
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded
from chainkeys.vault.integrity import failed

OPEN: Final = ("pending", "scheduled")  # the states the head pins (`changes` set)
MAX_OPEN: Final = 100  # open changes per tenant: what a check of the set reads stays small
DUE_BATCH: Final = 50  # scheduled changes a round of the due task takes at most


@dataclass(frozen=True, slots=True)
class GovernanceRow:
    tenant_id: str
    quorum: int
    delay_ms: int
    created_ms: int
    mac: str | None = None


@dataclass(frozen=True, slots=True)
class ChangeRow:
    id: str
    tenant_id: str
    kind: str
    document: str | None  # the kind's canonical document (policy: None clears it)
    base_version: int  # policy: the version the diff was made against (0: none, other kinds)
    digest: str
    diff: str  # JSON list of sentences
    loosens: bool
    quorum: int
    delay_ms: int
    created_ms: int
    created_by: str
    created_by_token_id: str
    state: str
    effective_ms: int | None = None
    ended_ms: int | None = None
    ended_by: str | None = None
    reason: str | None = None
    mac: str | None = None


@dataclass(frozen=True, slots=True)
class VoteRow:
    change_id: str
    voter: str  # the person (approvals/proofs.py `person` of the label)
    voter_label: str
    voter_token_id: str
    decision: str
    digest: str
    proof: str  # JSON: the credential and its signature or assertion
    created_ms: int
    mac: str | None = None


def _change(found: Any) -> ChangeRow:
    """A change as read: `loosens` a bool on each engine (SQLite's fast path gives 0/1,
    and the MAC covers the JSON value)."""
    row = ChangeRow(*found)
    return replace(row, loosens=bool(row.loosens))


def values(row: Any) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row)}


def _gate(tx: Tx) -> Gate:
    gate = tx.signer
    if not isinstance(gate, Gate):
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    return gate


_g, _c, _v = governance.c, changes.c, change_votes.c
_G_COLUMNS: Final = [f.name for f in fields(GovernanceRow)]
_C_COLUMNS: Final = [f.name for f in fields(ChangeRow)]
_V_COLUMNS: Final = [f.name for f in fields(VoteRow)]
_G_GET = Prepared(select(*(_g[n] for n in _G_COLUMNS)).where(_g.tenant_id == bindparam("t")))
_G_INSERT = Prepared(insert(governance), _G_COLUMNS)
_G_UPDATE = Prepared(
    update(governance)
    .where(_g.tenant_id == bindparam("old_tenant_id"), _g.mac == bindparam("old_mac"))
    .values(**{n: bindparam(n) for n in ("quorum", "delay_ms", "created_ms", "mac")})
)
_C_SELECT = select(*(_c[n] for n in _C_COLUMNS))
_C_INSERT = Prepared(insert(changes), _C_COLUMNS)
_C_GET = Prepared(_C_SELECT.where(_c.id == bindparam("id"), _c.tenant_id == bindparam("t")))
_C_OPEN = Prepared(
    _C_SELECT.where(
        _c.tenant_id == bindparam("t"), or_(*(_c.state == state for state in OPEN))
    ).order_by(_c.created_ms, _c.id)
)
_C_DUE = Prepared(
    select(_c.tenant_id, _c.id)
    .where(_c.state == "scheduled", _c.effective_ms <= bindparam("now"))
    .order_by(_c.effective_ms, _c.id)
    .limit(DUE_BATCH)
)
_MUTABLE: Final = ("state", "effective_ms", "ended_ms", "ended_by", "reason", "mac")
_C_MOVE = Prepared(
    update(changes)
    .where(_c.id == bindparam("old_id"), _c.state == bindparam("old_state"))
    .values(**{n: bindparam(n) for n in _MUTABLE})
)
_V_SELECT = select(*(_v[n] for n in _V_COLUMNS))
_V_INSERT = Prepared(insert(change_votes), _V_COLUMNS)
_V_OF = Prepared(_V_SELECT.where(_v.change_id == bindparam("id")).order_by(_v.created_ms))


REREADS = 3  # reads of a change that a concurrent commit moved on (`Changes.get`)


class Governance:
    @staticmethod
    async def get(tx: Tx, tenant_id: str) -> GovernanceRow | None:
        """The tenant's governance (None: not governed), authenticated and pinned: one
        deleted, edited or put back by a database writer raises IntegrityFailure."""
        gate = _gate(tx)
        found = (await tx.execute(_G_GET, {"t": tenant_id})).first()
        row = None if found is None else GovernanceRow(*found)

        async def load() -> list[Loaded]:
            if row is None:
                return []
            return [((row.tenant_id, str(row.mac)), gate.valid(GOVERNANCE, values(row)))]

        valid = await gate.heads.check(tx, tenant_id, "governance", load, "its governance")
        if row is not None and (row.tenant_id, str(row.mac)) not in valid:
            raise failed(GOVERNANCE, f"the governance of tenant {tenant_id}")
        return row

    @staticmethod
    async def insert(tx: Tx, row: GovernanceRow) -> GovernanceRow:
        gate = _gate(tx)
        row = replace(row, mac=gate.mac(GOVERNANCE, values(row)))
        await tx.execute(_G_INSERT, values(row))
        member = (row.tenant_id, str(row.mac))
        await gate.heads.change(tx, row.tenant_id, "governance", added=[member])
        return row

    @staticmethod
    async def replace(tx: Tx, row: GovernanceRow, new: GovernanceRow) -> GovernanceRow | None:
        """`row` (as read in `tx`) becomes `new`, a governed change of kind governance
        applying (compare-and-set on its MAC; the head's pin moves with it). None when
        another transaction replaced it first."""
        gate = _gate(tx)
        new = replace(new, tenant_id=row.tenant_id, mac=None)
        new = replace(new, mac=gate.mac(GOVERNANCE, values(new)))
        params = {n: getattr(new, n) for n in ("quorum", "delay_ms", "created_ms", "mac")}
        params.update(old_tenant_id=row.tenant_id, old_mac=row.mac)
        if not (await tx.execute(_G_UPDATE, params)).rowcount:
            return None
        await gate.heads.change(
            tx,
            row.tenant_id,
            "governance",
            removed=[(row.tenant_id, str(row.mac))],
            added=[(new.tenant_id, str(new.mac))],
        )
        return new


class Changes:
    @staticmethod
    async def insert(tx: Tx, row: ChangeRow) -> ChangeRow:
        gate = _gate(tx)
        row = replace(row, mac=gate.mac(CHANGES, values(row)))
        await tx.execute(_C_INSERT, values(row))
        await gate.heads.change(tx, row.tenant_id, "changes", added=[(row.id, str(row.mac))])
        return row

    @staticmethod
    async def open(tx: Tx, tenant_id: str) -> list[ChangeRow]:
        """The tenant's open changes (pending, scheduled), each authenticated; the set is
        checked against the head (IntegrityFailure when one was put back or removed)."""
        gate = _gate(tx)
        rows: list[ChangeRow] = []

        async def load() -> list[Loaded]:
            rows.clear()
            rows.extend(_change(r) for r in (await tx.execute(_C_OPEN, {"t": tenant_id})).all())
            return [((r.id, str(r.mac)), gate.valid(CHANGES, values(r))) for r in rows]

        valid = await gate.heads.check(tx, tenant_id, "changes", load, "the tenant's changes")
        return [r for r in rows if (r.id, str(r.mac)) in valid]

    @staticmethod
    async def listed(tx: Tx, tenant_id: str, state: str | None, limit: int) -> list[ChangeRow]:
        """The tenant's changes, newest first (of one state): those failing their MAC
        are logged, counted and left out."""
        stmt = _C_SELECT.where(_c.tenant_id == tenant_id)
        if state is not None:
            stmt = stmt.where(_c.state == state)
        found = (await tx.execute(stmt.order_by(_c.created_ms.desc(), _c.id).limit(limit))).all()
        gate, out = _gate(tx), []
        for r in found:
            row = _change(r)
            if gate.valid(CHANGES, values(row)):
                out.append(row)
            else:
                failed(CHANGES, f"change {row.id}")
        return out

    @staticmethod
    async def get(tx: Tx, tenant_id: str, change_id: str) -> ChangeRow | None:
        """One change, authenticated; an open one must be the copy the head pins. Outside
        a write transaction the row and the head are read by separate statements: a row
        that a change (the due round applying it, a vote) moved on in between is read
        again, a few times, before it is called a stale copy."""
        gate = _gate(tx)

        async def load() -> list[Loaded]:
            found = (await tx.execute(_C_OPEN, {"t": tenant_id})).all()
            rows = [_change(r) for r in found]
            return [((r.id, str(r.mac)), gate.valid(CHANGES, values(r))) for r in rows]

        for attempt in range(REREADS):
            found = (await tx.execute(_C_GET, {"id": change_id, "t": tenant_id})).first()
            if found is None:
                return None
            row = _change(found)
            gate.check(CHANGES, values(row), f"change {row.id}")
            if row.state not in OPEN:
                return row
            member, what = (row.id, str(row.mac)), f"change {row.id}"
            if tx.writing or attempt == REREADS - 1:
                await gate.heads.current(tx, tenant_id, "changes", member, load, what)
                return row
            if await gate.heads.holds(tx, tenant_id, "changes", member, load, what):
                return row
        return None  # (not reached: the last attempt returns or raises)

    @staticmethod
    async def due(tx: Tx, now: int) -> list[tuple[str, str]]:
        """(tenant id, change id) of scheduled changes whose time has come, oldest first
        (each is read again, authenticated, in the transaction that applies it)."""
        rows = (await tx.execute(_C_DUE, {"now": now})).all()
        return [(str(r[0]), str(r[1])) for r in rows]

    @staticmethod
    async def move(tx: Tx, row: ChangeRow, new: ChangeRow) -> ChangeRow | None:
        """`row` becomes `new` (state and what comes with it) if it is still in its state
        (compare-and-set); None when another transaction moved it first."""
        gate = _gate(tx)
        new = replace(new, mac=gate.mac(CHANGES, values(new)))
        params = {n: getattr(new, n) for n in _MUTABLE}
        params.update(old_id=row.id, old_state=row.state)
        if not (await tx.execute(_C_MOVE, params)).rowcount:
            return None
        removed = [(row.id, str(row.mac))] if row.state in OPEN else []
        added = [(new.id, str(new.mac))] if new.state in OPEN else []
        await gate.heads.change(tx, row.tenant_id, "changes", removed=removed, added=added)
        return new


class Votes:
    @staticmethod
    async def add(tx: Tx, vote: VoteRow) -> bool:
        """False when this person voted on this change already."""
        vote = replace(vote, mac=_gate(tx).mac(CHANGE_VOTES, values(vote)))
        return await insert_new(tx, _V_INSERT, values(vote))

    @staticmethod
    async def of(tx: Tx, change_id: str) -> list[VoteRow]:
        """A change's votes, oldest first; one failing its MAC is logged and left out."""
        gate, out = _gate(tx), []
        for r in (await tx.execute(_V_OF, {"id": change_id})).all():
            vote = VoteRow(*r)
            if gate.valid(CHANGE_VOTES, values(vote)):
                out.append(vote)
            else:
                failed(CHANGE_VOTES, f"a vote on change {change_id}")
        return out
