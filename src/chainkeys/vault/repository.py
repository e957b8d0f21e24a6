"""What the barrier reads and writes: the store's master keys and their ring, the
processes that seal, and small service-wide records (`meta`: the check record, an
HSM-wrapped key)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import astuple, dataclass

from sqlalchemy import bindparam, delete, insert, literal, or_, select, update

from chainkeys.store.backend import Backend
from chainkeys.store.sealed import CHECK_RECORD
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import key_ring, key_users, master_keys, meta

CHECK_KEY = CHECK_RECORD  # a value sealed at first start: proves a key opens the store

_PING = Prepared(select(literal(1)))
_GET_META = Prepared(select(meta.c.value, meta.c.key_id).where(meta.c.key == bindparam("key")))
_INSERT_META = Prepared(insert(meta), ("key", "value", "key_id"))
_DELETE_META = Prepared(delete(meta).where(meta.c.key == bindparam("key")))


class Meta:
    """Small service-wide records."""

    @staticmethod
    async def get(tx: Tx, key: str) -> tuple[bytes, str | None] | None:
        row = (await tx.execute(_GET_META, {"key": key})).first()
        return None if row is None else (bytes(row[0]), row[1])

    @staticmethod
    async def insert(tx: Tx, key: str, value: bytes, key_id: str | None) -> None:
        await tx.execute(_INSERT_META, {"key": key, "value": value, "key_id": key_id})

    @staticmethod
    async def insert_new(tx: Tx, key: str, value: bytes, key_id: str | None) -> bool:
        """False when the record exists already (another process made it first)."""
        return await insert_new(tx, _INSERT_META, {"key": key, "value": value, "key_id": key_id})

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
class Term:
    """A master key of this store (never its material): Vault's keyring term."""

    key_id: str
    created_ms: int
    retired_ms: int | None
    destroyed_ms: int | None


@dataclass(frozen=True, slots=True)
class RingEntry:
    """A master key sealed under another (`wrapped_by`)."""

    key_id: str
    wrapped_by: str
    wrapped: bytes
    created_ms: int


@dataclass(frozen=True, slots=True)
class KeyUser:
    """A server process as its last heartbeat described it."""

    process: str
    host: str
    pid: int
    sealing_key_id: str
    root_key_id: str
    seen_ms: int
    used_key_ids: str = ""  # comma-separated: every key it sealed with since it started

    def names(self, key_id: str) -> bool:
        """Whether this process uses or ever used `key_id` (it may still hold a value it
        sealed with it and has not committed yet)."""
        used = set(filter(None, self.used_key_ids.split(",")))
        return key_id in {self.sealing_key_id, self.root_key_id} | used


_m, _r, _k = master_keys.c, key_ring.c, key_users.c
_TERMS = Prepared(
    select(_m.key_id, _m.created_ms, _m.retired_ms, _m.destroyed_ms).order_by(_m.created_ms)
)
_TERM_INSERT = Prepared(insert(master_keys), ("key_id", "created_ms"))
_RETIRE = Prepared(
    update(master_keys)
    .where(_m.key_id != bindparam("current"), _m.retired_ms.is_(None))
    .values(retired_ms=bindparam("t"))
)
_DESTROYED = Prepared(
    update(master_keys).where(_m.key_id == bindparam("k")).values(destroyed_ms=bindparam("t"))
)
_RING = Prepared(
    select(_r.key_id, _r.wrapped_by, _r.wrapped, _r.created_ms).order_by(_r.created_ms)
)
_RING_INSERT = Prepared(insert(key_ring), ("key_id", "wrapped_by", "wrapped", "created_ms"))
_RING_DROP_BY = Prepared(delete(key_ring).where(_r.wrapped_by == bindparam("k")))
_RING_DROP_KEY = Prepared(
    delete(key_ring).where(or_(_r.key_id == bindparam("k"), _r.wrapped_by == bindparam("k")))
)
_BEAT = Prepared(
    update(key_users)
    .where(_k.process == bindparam("p"))
    .values(
        sealing_key_id=bindparam("sealing"),
        root_key_id=bindparam("root"),
        seen_ms=bindparam("t"),
        used_key_ids=bindparam("used"),
    )
)
_USER_FIELDS = (
    "process",
    "host",
    "pid",
    "sealing_key_id",
    "root_key_id",
    "seen_ms",
    "used_key_ids",
)
_USER_INSERT = Prepared(insert(key_users), _USER_FIELDS)
_USER_DELETE = Prepared(delete(key_users).where(_k.process == bindparam("p")))
_USERS = Prepared(select(*(_k[f] for f in _USER_FIELDS)).order_by(_k.host, _k.pid))


class Terms:
    """The store's master keys (ids and dates only)."""

    @staticmethod
    async def all(tx: Tx) -> list[Term]:
        rows = (await tx.execute(_TERMS)).all()
        return [Term(r[0], int(r[1]), r[2], r[3]) for r in rows]

    @staticmethod
    async def add(tx: Tx, key_id: str, created_ms: int, known: Iterable[Term]) -> None:
        if key_id not in {t.key_id for t in known}:
            await tx.execute(_TERM_INSERT, {"key_id": key_id, "created_ms": created_ms})

    @staticmethod
    async def retire_all_but(tx: Tx, current: str, at_ms: int) -> int:
        return int((await tx.execute(_RETIRE, {"current": current, "t": at_ms})).rowcount or 0)

    @staticmethod
    async def destroyed(tx: Tx, key_id: str, at_ms: int) -> None:
        await tx.execute(_DESTROYED, {"k": key_id, "t": at_ms})


class Ring:
    """Master keys wrapped by master keys."""

    @staticmethod
    async def entries(tx: Tx) -> list[RingEntry]:
        rows = (await tx.execute(_RING)).all()
        return [RingEntry(r[0], r[1], bytes(r[2]), int(r[3])) for r in rows]

    @staticmethod
    async def insert(tx: Tx, entry: RingEntry) -> None:
        fields = ("key_id", "wrapped_by", "wrapped", "created_ms")
        await tx.execute(_RING_INSERT, dict(zip(fields, astuple(entry), strict=True)))

    @staticmethod
    async def drop_wrapped_by(tx: Tx, key_id: str) -> int:
        """Forget what `key_id` wraps (it is retired: it must unlock nothing)."""
        return int((await tx.execute(_RING_DROP_BY, {"k": key_id})).rowcount or 0)

    @staticmethod
    async def drop_key(tx: Tx, key_id: str) -> int:
        """Forget `key_id` wherever it is wrapped or wraps (it is destroyed)."""
        return int((await tx.execute(_RING_DROP_KEY, {"k": key_id})).rowcount or 0)


class KeyUsers:
    """The heartbeats of the processes that seal."""

    @staticmethod
    async def beat(tx: Tx, user: KeyUser) -> None:
        params = {
            "p": user.process,
            "sealing": user.sealing_key_id,
            "root": user.root_key_id,
            "t": user.seen_ms,
            "used": user.used_key_ids,
        }
        if not (await tx.execute(_BEAT, params)).rowcount:
            await tx.execute(_USER_INSERT, dict(zip(_USER_FIELDS, astuple(user), strict=True)))

    @staticmethod
    async def remove(tx: Tx, process: str) -> None:
        await tx.execute(_USER_DELETE, {"p": process})

    @staticmethod
    async def all(tx: Tx) -> list[KeyUser]:
        """Every heartbeat, however old (a stopped process is unknown, not gone)."""
        rows = (await tx.execute(_USERS)).all()
        return [KeyUser(r[0], r[1], int(r[2]), r[3], r[4], int(r[5]), r[6] or "") for r in rows]


class MetaBlobs:
    """`providers.Blobs` in the `meta` table: blobs no master key sealed (key_id NULL)."""

    def __init__(self, db: Backend) -> None:
        self.db = db

    async def get(self, name: str) -> bytes | None:
        async with self.db.read() as tx:
            found = await Meta.get(tx, name)
        return found[0] if found is not None else None

    async def put(self, name: str, blob: bytes) -> None:
        async with self.db.write() as tx:
            await Meta.put(tx, name, blob, None)

    async def delete(self, name: str) -> None:
        async with self.db.write() as tx:
            await Meta.delete(tx, name)
