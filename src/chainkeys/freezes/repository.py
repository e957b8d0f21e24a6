"""Freeze SQL: insert, the tenant's active freezes, one by id, lift (compare-and-set).

Freezes are authenticated rows (store/integrity.py FREEZES) whose unlifted ones the
tenant's head pins (the `freezes` set, vault/heads.py): a database writer who deletes
a freeze, lifts it or moves its end to the past to sign during an emergency makes
every check of the tenant's freezes fail closed (IntegrityFailure: nothing signs).
The gate comes with the transaction (`Tx.signer`): every process that serves has it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from sqlalchemy import bindparam, insert, select, update

from chainkeys.errors import IntegrityFailure
from chainkeys.store.integrity import FREEZES
from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import freezes
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded

MAX_ACTIVE: Final = 100  # active freezes per tenant: what a check reads stays bounded


@dataclass(frozen=True, slots=True)
class FreezeRow:
    id: str
    tenant_id: str
    family: str | None  # None (with account_name): the whole tenant
    account_name: str | None
    reason: str
    created_ms: int
    until_ms: int | None  # None: until lifted
    created_by: str  # the person: the token's label
    created_by_token_id: str
    lifted_ms: int | None = None
    mac: str | None = None  # store/integrity.py FREEZES

    @property
    def account(self) -> str | None:
        """`family/name`, or None for a freeze of the whole tenant."""
        return f"{self.family}/{self.account_name}" if self.account_name is not None else None

    def covers(self, family: str | None, names: tuple[str, ...]) -> bool:
        """Whether it holds over any of `names` of `family` (a tenant freeze: all)."""
        return self.account_name is None or (self.family == family and self.account_name in names)


_f = freezes.c
_COLUMNS: Final = [f.name for f in fields(FreezeRow)]
_SELECT = select(*(_f[n] for n in _COLUMNS))
_INSERT = Prepared(insert(freezes), _COLUMNS)
_UNLIFTED = Prepared(  # the `freezes` set (its head pins them), ended by time or not
    _SELECT.where(_f.tenant_id == bindparam("tenant_id"), _f.lifted_ms.is_(None)).order_by(
        _f.created_ms, _f.id
    )
)
_BY_ID = Prepared(_SELECT.where(_f.id == bindparam("id"), _f.tenant_id == bindparam("tenant_id")))
# A no-op in-place change: a freeze's INSERT also "changes" its table, so this process's
# own caches of freezes (store/cache.py, which keep values across an own commit that only
# adds rows) drop what they held with that commit.
_TOUCH = Prepared(update(freezes).where(_f.id == bindparam("id")).values(created_ms=_f.created_ms))
_LIFT = Prepared(
    update(freezes)
    .where(_f.id == bindparam("id"), _f.lifted_ms.is_(None))
    .values(lifted_ms=bindparam("at"), mac=bindparam("mac"))
)


def _row(r: Any) -> FreezeRow:
    return FreezeRow(*r)


def _values(row: FreezeRow) -> dict[str, Any]:
    return {n: getattr(row, n) for n in _COLUMNS}


def _gate(tx: Tx) -> Gate:
    gate = tx.signer
    if not isinstance(gate, Gate):
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    return gate


class Freezes:
    @staticmethod
    async def insert(tx: Tx, row: FreezeRow) -> None:
        gate = _gate(tx)
        values = _values(row)
        values["mac"] = gate.mac(FREEZES, values)
        await tx.execute(_INSERT, values)
        await tx.execute(_TOUCH, {"id": row.id})
        await gate.heads.change(tx, row.tenant_id, "freezes", added=[(row.id, values["mac"])])

    @staticmethod
    async def active(tx: Tx, tenant_id: str, now: int) -> list[FreezeRow]:
        """The tenant's freezes holding at `now`, oldest first; IntegrityFailure when its
        unlifted freezes are not what its head pins (one deleted, lifted or put back)."""
        gate = _gate(tx)
        rows: list[FreezeRow] = []

        async def load() -> list[Loaded]:
            rows.clear()
            rows.extend(
                _row(r) for r in (await tx.execute(_UNLIFTED, {"tenant_id": tenant_id})).all()
            )
            return [((r.id, str(r.mac)), gate.valid(FREEZES, _values(r))) for r in rows]

        valid = await gate.heads.check(tx, tenant_id, "freezes", load, "the tenant's freezes")
        return [
            r
            for r in rows
            if (r.id, str(r.mac)) in valid and (r.until_ms is None or r.until_ms > now)
        ]

    @staticmethod
    async def get(tx: Tx, tenant_id: str, freeze_id: str) -> FreezeRow | None:
        found = (await tx.execute(_BY_ID, {"id": freeze_id, "tenant_id": tenant_id})).first()
        if found is None:
            return None
        row = _row(found)
        _gate(tx).check(FREEZES, _values(row), f"freeze {row.id}")
        return row

    @staticmethod
    async def lift(tx: Tx, row: FreezeRow, at: int) -> bool:
        """Set `lifted_ms` if it is not lifted yet (one of racing lifts wins)."""
        gate = _gate(tx)
        mac = gate.mac(FREEZES, {**_values(row), "lifted_ms": at})
        params = {"id": row.id, "at": at, "mac": mac}
        if not (await tx.execute(_LIFT, params)).rowcount:
            return False
        removed = [(row.id, str(row.mac))]
        await gate.heads.change(tx, row.tenant_id, "freezes", removed=removed)
        return True
