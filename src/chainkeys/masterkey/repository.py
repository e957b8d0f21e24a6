"""What master-key handling reads and writes: the meta records, every key id in use,
and the sealed rows rotation re-seals."""

from __future__ import annotations

from dataclasses import astuple, dataclass

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
    key_ring,
    key_users,
    meta,
    wallets,
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
    select(wallets.c.key_id).distinct(),
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


@dataclass(frozen=True, slots=True)
class RingEntry:
    """A master key a rotation introduced, sealed under the key current before it."""

    key_id: str
    wrapped: bytes
    wrapped_by: str
    created_ms: int


@dataclass(frozen=True, slots=True)
class KeyUser:
    """A running server process: which key it seals with, which it started from."""

    process: str
    host: str
    pid: int
    sealing_key_id: str
    root_key_id: str
    seen_ms: int


_r, _k = key_ring.c, key_users.c
_RING = Prepared(
    select(_r.key_id, _r.wrapped, _r.wrapped_by, _r.created_ms).order_by(_r.created_ms)
)
_RING_INSERT = Prepared(insert(key_ring), ("key_id", "wrapped", "wrapped_by", "created_ms"))
_RING_CLEAR = Prepared(delete(key_ring))
_BEAT = Prepared(
    update(key_users)
    .where(_k.process == bindparam("p"))
    .values(
        sealing_key_id=bindparam("sealing"), root_key_id=bindparam("root"), seen_ms=bindparam("t")
    )
)
_USER_INSERT = Prepared(
    insert(key_users), ("process", "host", "pid", "sealing_key_id", "root_key_id", "seen_ms")
)
_USER_DELETE = Prepared(delete(key_users).where(_k.process == bindparam("p")))
_USERS_LIVE = Prepared(
    select(_k.process, _k.host, _k.pid, _k.sealing_key_id, _k.root_key_id, _k.seen_ms)
    .where(_k.seen_ms >= bindparam("since"))
    .order_by(_k.host, _k.pid)
)
_USERS_EXPIRE = Prepared(delete(key_users).where(_k.seen_ms < bindparam("before")))


class Ring:
    """The key ring: read by every process every few seconds, written by rotation."""

    @staticmethod
    async def entries(tx: Tx) -> list[RingEntry]:
        rows = (await tx.execute(_RING)).all()
        return [RingEntry(r[0], bytes(r[1]), r[2], int(r[3])) for r in rows]

    @staticmethod
    async def insert(tx: Tx, entry: RingEntry) -> None:
        fields = ("key_id", "wrapped", "wrapped_by", "created_ms")
        params = dict(zip(fields, astuple(entry), strict=True))
        await tx.execute(_RING_INSERT, params)

    @staticmethod
    async def clear(tx: Tx) -> int:
        """Forget every entry (retirement: no retired key may unwrap a newer one)."""
        return int((await tx.execute(_RING_CLEAR)).rowcount or 0)


class KeyUsers:
    """The heartbeats of the processes that seal."""

    @staticmethod
    async def beat(tx: Tx, user: KeyUser) -> None:
        params = {"p": user.process, "sealing": user.sealing_key_id,
                  "root": user.root_key_id, "t": user.seen_ms}  # fmt: skip
        if not (await tx.execute(_BEAT, params)).rowcount:
            fields = ("process", "host", "pid", "sealing_key_id", "root_key_id", "seen_ms")
            await tx.execute(_USER_INSERT, dict(zip(fields, astuple(user), strict=True)))

    @staticmethod
    async def remove(tx: Tx, process: str) -> None:
        await tx.execute(_USER_DELETE, {"p": process})

    @staticmethod
    async def live(tx: Tx, since_ms: int) -> list[KeyUser]:
        rows = (await tx.execute(_USERS_LIVE, {"since": since_ms})).all()
        return [KeyUser(r[0], r[1], int(r[2]), r[3], r[4], int(r[5])) for r in rows]

    @staticmethod
    async def expire(tx: Tx, before_ms: int) -> None:
        """Drop heartbeats of processes long gone (they stopped without saying so)."""
        await tx.execute(_USERS_EXPIRE, {"before": before_ms})
