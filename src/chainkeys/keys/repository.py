"""What master-key handling reads and writes: the meta records, every key id in use,
and the sealed rows rotation re-seals."""

from __future__ import annotations

from sqlalchemy import (
    Table,
    bindparam,
    delete,
    insert,
    literal,
    select,
    union,
    update,
)

from chainkeys.accounts.repository import AccountRow, _row_to_account
from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import (
    accounts,
    deleted_accounts,
    idempotency,
    meta,
)
from chainkeys.vault import Context

CHECK_KEY = "master_key_check"  # a value sealed at first start: proves a key opens the store
CHECK_CONTEXT = Context("-", "-", CHECK_KEY, purpose="check")

_PING = Prepared(select(literal(1)))
_META_ALL = select(meta.c.key, meta.c.value, meta.c.key_id)
_RESEAL_META = Prepared(
    update(meta)
    .where(meta.c.key == bindparam("row_key"), meta.c.key_id == bindparam("old_key_id"))
    .values(value=bindparam("new_value"), key_id=bindparam("new_key_id"))
)

_KEY_IDS = union(
    select(accounts.c.key_id).distinct(),
    select(deleted_accounts.c.key_id).distinct(),
    select(meta.c.key_id).where(meta.c.key_id.is_not(None)).distinct(),
    select(idempotency.c.key_id).distinct(),
)
_GET_META = Prepared(select(meta.c.value, meta.c.key_id).where(meta.c.key == bindparam("key")))
_INSERT_META = Prepared(insert(meta), ("key", "value", "key_id"))
_DELETE_META = Prepared(delete(meta).where(meta.c.key == bindparam("key")))


class SealedRows:
    """Rotation's view of a table of sealed accounts (live or retained after delete)."""

    def __init__(self, table: Table) -> None:
        c = table.c
        self._page = Prepared(
            select(table)
            .where(c.id > bindparam("after"), c.key_id != bindparam("current"))
            .order_by(c.id)
            .limit(bindparam("limit"))
        )
        self._reseal = Prepared(
            update(table)
            .where(c.id == bindparam("row_id"), c.key_id == bindparam("old_key_id"))
            .values(secret=bindparam("new_secret"), key_id=bindparam("new_key_id"))
        )

    async def not_sealed_by(self, tx: Tx, current: str, after: int, limit: int) -> list[AccountRow]:
        """Rows sealed by another key than `current`, in id order."""
        params = {"current": current, "after": after, "limit": limit}
        return [_row_to_account(r) for r in (await tx.execute(self._page, params)).all()]

    async def reseal(
        self, tx: Tx, row_id: int, old_key_id: str, secret: bytes, key_id: str
    ) -> bool:
        params = {
            "row_id": row_id,
            "old_key_id": old_key_id,
            "new_secret": secret,
            "new_key_id": key_id,
        }
        return bool((await tx.execute(self._reseal, params)).rowcount)


SEALED_TABLES = (SealedRows(accounts), SealedRows(deleted_accounts))


class Meta:
    """Small service-wide records (the master-key check value)."""

    @staticmethod
    async def all(tx: Tx) -> list[tuple[str, bytes, str | None]]:
        return [(r[0], bytes(r[1]), r[2]) for r in (await tx.execute(_META_ALL)).all()]

    @staticmethod
    async def reseal(tx: Tx, key: str, old_key_id: str, value: bytes, key_id: str) -> bool:
        params = {
            "row_key": key,
            "old_key_id": old_key_id,
            "new_value": value,
            "new_key_id": key_id,
        }
        return bool((await tx.execute(_RESEAL_META, params)).rowcount)

    @staticmethod
    async def key_ids(tx: Tx) -> set[str]:
        """Every master-key id that sealed something in this store."""
        return {r[0] for r in (await tx.execute(_KEY_IDS)).all()}

    @staticmethod
    async def get(tx: Tx, key: str) -> tuple[bytes, str | None] | None:
        row = (await tx.execute(_GET_META, {"key": key})).first()
        return None if row is None else (bytes(row[0]), row[1])

    @staticmethod
    async def insert(tx: Tx, key: str, value: bytes, key_id: str | None) -> None:
        await tx.execute(_INSERT_META, {"key": key, "value": value, "key_id": key_id})

    @staticmethod
    async def delete(tx: Tx, key: str) -> None:
        await tx.execute(_DELETE_META, {"key": key})

    @staticmethod
    async def put(tx: Tx, key: str, value: bytes, key_id: str | None) -> None:
        """Insert or replace (the caller's transaction makes it one step)."""
        await Meta.delete(tx, key)
        await Meta.insert(tx, key, value, key_id)

    @staticmethod
    async def ping(tx: Tx) -> None:
        await tx.execute(_PING)
