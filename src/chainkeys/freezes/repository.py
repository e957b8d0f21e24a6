"""Freeze SQL: insert, the tenant's active freezes, one by id, lift (compare-and-set)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from sqlalchemy import bindparam, insert, or_, select, update

from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import freezes

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
_ACTIVE = Prepared(
    _SELECT.where(
        _f.tenant_id == bindparam("tenant_id"),
        _f.lifted_ms.is_(None),
        or_(_f.until_ms.is_(None), _f.until_ms > bindparam("now")),
    )
    .order_by(_f.created_ms, _f.id)
    .limit(MAX_ACTIVE + 1)
)
_BY_ID = Prepared(_SELECT.where(_f.id == bindparam("id"), _f.tenant_id == bindparam("tenant_id")))
# A no-op in-place change: a freeze's INSERT also "changes" its table, so this process's
# own caches of freezes (store/cache.py, which keep values across an own commit that only
# adds rows) drop what they held with that commit.
_TOUCH = Prepared(update(freezes).where(_f.id == bindparam("id")).values(created_ms=_f.created_ms))
_LIFT = Prepared(
    update(freezes)
    .where(_f.id == bindparam("id"), _f.lifted_ms.is_(None))
    .values(lifted_ms=bindparam("at"))
)


def _row(r: Any) -> FreezeRow:
    return FreezeRow(*r)


class Freezes:
    @staticmethod
    async def insert(tx: Tx, row: FreezeRow) -> None:
        await tx.execute(_INSERT, {n: getattr(row, n) for n in _COLUMNS})
        await tx.execute(_TOUCH, {"id": row.id})

    @staticmethod
    async def active(tx: Tx, tenant_id: str, now: int) -> list[FreezeRow]:
        """The tenant's freezes holding at `now` (at most MAX_ACTIVE + 1), oldest first."""
        rows = (await tx.execute(_ACTIVE, {"tenant_id": tenant_id, "now": now})).all()
        return [_row(r) for r in rows]

    @staticmethod
    async def get(tx: Tx, tenant_id: str, freeze_id: str) -> FreezeRow | None:
        found = (await tx.execute(_BY_ID, {"id": freeze_id, "tenant_id": tenant_id})).first()
        return None if found is None else _row(found)

    @staticmethod
    async def lift(tx: Tx, freeze_id: str, at: int) -> bool:
        """Set `lifted_ms` if it is not lifted yet (one of racing lifts wins)."""
        return bool((await tx.execute(_LIFT, {"id": freeze_id, "at": at})).rowcount)
