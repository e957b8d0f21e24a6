"""The audit log's SQL: append events, page them (statements prebuilt at import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, String, and_, bindparam, case, func, insert, select, update

from chainkeys.store.backend import Transactions
from chainkeys.store.integrity import AUDIT_ROWS
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import (
    audit,
    meta,
)

_u = audit.c
AUDIT_COLUMNS = (
    "tenant_id",
    "action",
    "family",
    "account_name",
    "request_id",
    "outcome",
    "created_ms",
    "actor_token_id",
    "client_request_id",
    "details",
)
_INSERT_AUDIT = Prepared(insert(audit), (*AUDIT_COLUMNS, "mac"))
# a column's length, which PostgreSQL enforces and SQLite does not: a refusal of a
# request with a 200-character name is audited, its name cut to fit, on both engines
_LENGTHS = {
    c.name: c.type.length
    for c in audit.columns
    if c.name in AUDIT_COLUMNS and isinstance(c.type, String) and c.type.length is not None
}
_AUDIT_COLS = (
    _u.id,
    _u.tenant_id,
    _u.action,
    _u.family,
    _u.account_name,
    _u.request_id,
    _u.outcome,
    _u.created_ms,
    _u.actor_token_id,
    _u.client_request_id,
    _u.details,
)


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which events to read: one tenant's (None: every tenant, the operator's view),
    optionally only some families (a family-limited token sees only its families'
    events), one action, one family, one account, none older than `since_ms`."""

    tenant_id: str | None
    since_ms: int = 0
    families: frozenset[str] | None = None
    action: str | None = None
    family: str | None = None
    account: str | None = None
    outcome: str | None = None  # "ok", REFUSED (anything but ok) or one error code
    until_ms: int | None = None  # only events before this time


REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    tenant_id: str | None
    action: str
    outcome: str
    created_ms: int
    family: str | None = None
    account_name: str | None = None
    request_id: str | None = None
    actor_token_id: str | None = None
    client_request_id: str | None = None
    details: str | None = None  # JSON
    id: int | None = None

    def params(self) -> dict[str, Any]:
        """The row, each text cut to its column's length (a value the client chose,
        such as the name in a refused request's path, may be longer)."""
        row: dict[str, Any] = {
            "tenant_id": self.tenant_id,
            "action": self.action,
            "family": self.family,
            "account_name": self.account_name,
            "request_id": self.request_id,
            "outcome": self.outcome,
            "created_ms": self.created_ms,
            "actor_token_id": self.actor_token_id,
            "client_request_id": self.client_request_id,
            "details": self.details,
        }
        for column, length in _LENGTHS.items():
            value = row[column]
            if value is not None and len(value) > length:
                row[column] = value[:length]
        return row


def signed(tx: Tx, params: dict[str, Any]) -> dict[str, Any]:
    """An audit row's values with its MAC (store/integrity.py AUDIT_ROWS)."""
    params["mac"] = tx.signer.mac(AUDIT_ROWS, params) if tx.signer is not None else None
    return params


class Audit:
    """Append-only record of what was done; never holds a secret."""

    @staticmethod
    async def insert(tx: Tx, event: AuditEvent) -> None:
        """Append the event with its MAC (made by the transaction's gate: store/sql.py
        `Tx.signer`; NULL only where no barrier is open, which `audit verify` names)."""
        await tx.execute(_INSERT_AUDIT, signed(tx, event.params()))

    @staticmethod
    async def record(db: Transactions, event: AuditEvent) -> None:
        """`insert` as a write of its own (a refusal, a step done elsewhere): one
        statement, so no transaction around it (Backend.write's one_statement)."""
        async with db.write(one_statement=True) as tx:
            await tx.execute(_INSERT_AUDIT, signed(tx, event.params()))

    @staticmethod
    async def page(tx: Tx, q: AuditQuery, after: int, limit: int) -> list[AuditEvent]:
        """Up to `limit` events after row `after`, oldest first (the CLI's order)."""
        stmt = _where(q).where(_u.id > after).order_by(_u.id).limit(limit)
        return [AuditEvent(**r._mapping) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def newest(tx: Tx, q: AuditQuery, before: int | None, limit: int) -> list[AuditEvent]:
        """Up to `limit` events before row `before` (None: the newest), newest first."""
        stmt = _where(q)
        if before is not None:
            stmt = stmt.where(_u.id < before)
        stmt = stmt.order_by(_u.id.desc()).limit(limit)
        return [AuditEvent(**r._mapping) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def tally(
        tx: Tx, tenant_id: str, since_ms: int, families: frozenset[str] | None
    ) -> tuple[int, int]:
        """Signatures made and requests refused since `since_ms` (ix_audit_tenant_created:
        only the tenant's window is read)."""
        q = AuditQuery(tenant_id, since_ms, families)
        signed = case((and_(_u.action == "sign", _u.outcome == "ok"), 1), else_=0)
        refused = case((_u.outcome != "ok", 1), else_=0)
        row = (await tx.execute(_where(q, func.sum(signed), func.sum(refused)))).first()
        return int(row[0] or 0), int(row[1] or 0)


def _where(q: AuditQuery, *columns: Any) -> Select[Any]:
    stmt = select(*(columns or _AUDIT_COLS))
    if q.since_ms:
        stmt = stmt.where(_u.created_ms >= q.since_ms)
    if q.tenant_id is not None:
        stmt = stmt.where(_u.tenant_id == q.tenant_id)
    if q.families is not None:
        stmt = stmt.where(_u.family.in_(sorted(q.families)))
    if q.action is not None:
        stmt = stmt.where(_u.action == q.action)
    if q.family is not None:
        stmt = stmt.where(_u.family == q.family)
    if q.account is not None:
        stmt = stmt.where(_u.account_name == q.account)
    if q.outcome == REFUSED:
        stmt = stmt.where(_u.outcome != "ok")
    elif q.outcome is not None:
        stmt = stmt.where(_u.outcome == q.outcome)
    if q.until_ms is not None:
        stmt = stmt.where(_u.created_ms < q.until_ms)
    return stmt


# What an audit device ships: the row as stored, every column, its chain link included
# (NULL until the chaining round reaches it).
STORED_COLUMNS = ("id", *AUDIT_COLUMNS, "chain")
_STORED = select(*(_u[c] for c in STORED_COLUMNS))
_DEVICE_GET = Prepared(select(meta.c.value).where(meta.c.key == bindparam("key")))
_DEVICE_NEW = Prepared(insert(meta), ("key", "value"))
_DEVICE_SWAP = Prepared(  # (a bind parameter may not share an updated table's column name)
    update(meta)
    .where(meta.c.key == bindparam("record"), meta.c.value == bindparam("old"))
    .values(value=bindparam("new")),
    ("new", "record", "old"),
)


class Stored:
    """The audit table as the devices read it (audit/devices.py): whole rows by id, and
    each device's shipping state in one `meta` record (never sealed: it holds ids and
    times, no secret), changed only by compare-and-set."""

    @staticmethod
    async def after(tx: Tx, after_id: int, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows after row `after_id`, in id order."""
        stmt = _STORED.where(_u.id > after_id).order_by(_u.id).limit(limit)
        return [dict(r._mapping) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def of(tx: Tx, ids: list[int]) -> list[dict[str, Any]]:
        """The rows among `ids` that exist (a few hundred at most), in id order."""
        if not ids:
            return []
        stmt = _STORED.where(_u.id.in_(ids)).order_by(_u.id)
        return [dict(r._mapping) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def ids_between(
        tx: Tx, low: int, high: int, tenant_id: str | None, every_tenant: bool
    ) -> list[int]:
        """Every row id from `low` to `high` (one tenant's unless `every_tenant`)."""
        stmt = select(_u.id).where(_u.id >= low, _u.id <= high)
        if not every_tenant:
            stmt = stmt.where(
                _u.tenant_id.is_(None) if tenant_id is None else _u.tenant_id == tenant_id
            )
        return [int(r[0]) for r in (await tx.execute(stmt.order_by(_u.id))).all()]

    @staticmethod
    async def state(tx: Tx, key: str) -> bytes | None:
        row = (await tx.execute(_DEVICE_GET, {"key": key})).first()
        return None if row is None else bytes(row[0])

    @staticmethod
    async def swap(tx: Tx, key: str, old: bytes | None, new: bytes) -> bool:
        """Replace the state `old` by `new`; False when another process changed it first
        (or made it first, `old` None)."""
        if old is None:
            return await insert_new(tx, _DEVICE_NEW, {"key": key, "value": new})
        return bool(
            (await tx.execute(_DEVICE_SWAP, {"record": key, "old": old, "new": new})).rowcount
        )
