"""The registry of sealed columns: every place a secret lies sealed under a master key.

Next to `tables.py` on purpose: a table that gains a sealed column gains an entry
here, and `tests/store/test_sealed.py` fails while it has not (every `key_id`
column and every binary column is accounted for). What reads it: rotation (what
to re-seal), retire's and destroy's checks (which key ids are still in use), start-up
(every key id in use must be held) and `db copy` (every seal must open in the
target). None of them keeps a list of its own.

Each entry says how its rows' associated data is made (purpose, tenant, family,
name: the parts of `vault.Context`), as strings from the row; the store knows no
key and opens nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    func,
    literal,
    select,
    true,
    union,
    update,
)

from chainkeys.store.sql import Tx
from chainkeys.store.tables import accounts, deleted_accounts, idempotency, meta, wallets

CHECK_RECORD = "master_key_check"  # the meta record that proves a key opens the store
Aad = tuple[str, str, str, str]  # purpose, tenant, family, name


@dataclass(frozen=True, slots=True)
class SealedColumn:
    """One sealed column: its blob, the id of the key that sealed it, and its binding."""

    table: Table
    blob: str
    key_id: str
    aad: Callable[[Mapping[str, Any]], Aad]
    only: Callable[[Table], ColumnElement[bool]] = lambda t: true()  # rows that are sealed

    @property
    def name(self) -> str:
        return f"{self.table.name}.{self.blob}"

    def sealed_rows(self) -> ColumnElement[bool]:
        return and_(self.only(self.table), self.table.c[self.key_id].is_not(None))


def _account(r: Mapping[str, Any]) -> Aad:
    return ("account", r["tenant_id"], r["family"], r["name"])


def _meta(r: Mapping[str, Any]) -> Aad:
    purpose = "check" if r["key"] == CHECK_RECORD else "meta"
    return (purpose, "-", "-", r["key"])


def _wallet(r: Mapping[str, Any]) -> Aad:
    return ("wallet", r["tenant_id"], "wallet", r["id"])


def _idempotency(r: Mapping[str, Any]) -> Aad:
    return ("idempotency", r["tenant_id"], "-", r["key"])


REGISTRY: tuple[SealedColumn, ...] = (
    SealedColumn(accounts, "secret", "key_id", _account),
    SealedColumn(deleted_accounts, "secret", "key_id", _account),
    SealedColumn(wallets, "secret", "key_id", _wallet),
    SealedColumn(idempotency, "response", "key_id", _idempotency),
    # meta also holds blobs no master key sealed (an HSM-wrapped key): key_id NULL
    SealedColumn(meta, "value", "key_id", _meta),
)
# Binary columns that are not sealed by a master key, and why (the registry's test
# reads this too: a new binary column must be put in one list or the other).
NOT_SEALED = {
    "key_ring.wrapped": "master keys wrapped by other master keys: the barrier's own ring",
    "key_ring.key_id": "the id of the key wrapped in the row, not of a key that sealed it",
    "master_keys.key_id": "the store's master keys themselves (ids and dates, no key)",
}


@dataclass(frozen=True, slots=True)
class SealedRow:
    """A sealed value as rotation and checks see it (no key, nothing opened)."""

    column: SealedColumn
    pk: tuple[Any, ...]
    blob: bytes
    key_id: str
    aad: Aad


def row_of(col: SealedColumn, mapping: Mapping[str, Any]) -> SealedRow:
    """A selected row of `col`'s table as a sealed value."""
    pk = tuple(mapping[c.name] for c in col.table.primary_key.columns)
    return SealedRow(col, pk, bytes(mapping[col.blob]), str(mapping[col.key_id]), col.aad(mapping))


def select_sealed(col: SealedColumn) -> Select[Any]:
    """Every sealed value of a column, in primary-key order."""
    return select(col.table).where(col.sealed_rows()).order_by(*col.table.primary_key.columns)


def _page(col: SealedColumn, current: str, limit: int) -> Select[Any]:
    t = col.table
    return (
        select(t)
        .where(col.sealed_rows(), t.c[col.key_id] != current)
        .order_by(*t.primary_key.columns)
        .limit(limit)
    )


class SealedColumns:
    """Queries over every registered column at once."""

    @staticmethod
    async def key_ids(tx: Tx) -> set[str]:
        """Every master-key id that sealed something in this store."""
        parts = [select(c.table.c[c.key_id]).where(c.sealed_rows()).distinct() for c in REGISTRY]
        return {r[0] for r in (await tx.execute(union(*parts))).all()}

    @staticmethod
    async def count_by(tx: Tx, key_id: str) -> dict[str, int]:
        """How many values each column holds sealed by `key_id` (columns with none left out)."""
        found = {}
        for c in REGISTRY:
            stmt = (
                select(func.count())
                .select_from(c.table)
                .where(c.sealed_rows(), c.table.c[c.key_id] == literal(key_id))
            )
            n = int((await tx.execute(stmt)).scalar_one())
            if n:
                found[c.name] = n
        return found

    @staticmethod
    async def not_sealed_by(tx: Tx, col: SealedColumn, current: str, limit: int) -> list[SealedRow]:
        """Up to `limit` values of `col` sealed by another key than `current`; re-sealed
        rows leave this set, so calling again until it is empty visits each once."""
        rows = (await tx.execute(_page(col, current, limit))).all()
        return [row_of(col, r._mapping) for r in rows]

    @staticmethod
    async def reseal(tx: Tx, row: SealedRow, blob: bytes, key_id: str) -> bool:
        """Replace a value, only if it is still the very value read: the same blob under
        the same key. (The key id alone would not do: a process that has not switched
        yet may have written a newer value under the same old key meanwhile, and
        re-sealing the one read would put the older value back.)"""
        t, col = row.column.table, row.column
        keys = [c == bindparam(f"pk_{c.name}") for c in t.primary_key.columns]
        same = [t.c[col.key_id] == bindparam("old_key_id"), t.c[col.blob] == bindparam("old_blob")]
        stmt = (
            update(t)
            .where(*keys, *same)
            .values({col.blob: bindparam("new_blob"), col.key_id: bindparam("new_key_id")})
        )
        params = {f"pk_{c.name}": v for c, v in zip(t.primary_key.columns, row.pk, strict=True)}
        params.update(old_key_id=row.key_id, old_blob=row.blob, new_blob=blob, new_key_id=key_id)
        return bool((await tx.execute(stmt, params)).rowcount)
