"""What the barrier reads and writes: the store's master keys and their ring, the
processes that seal, and small service-wide records (`meta`: the check record, an
HSM-wrapped key).

The master keys, the ring and the heartbeats are authenticated (store/integrity.py):
each row carries a MAC under the integrity key, and every term and ring entry is
pinned by the ring's head (vault/heads.py, tenant id None), so a term un-retired,
edited, inserted or put back from an older copy fails closed where it is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any

from sqlalchemy import bindparam, delete, insert, literal, select, update

from chainkeys.errors import IntegrityFailure
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import KEY_RING, KEY_USERS, MASTER_KEYS, Authenticated
from chainkeys.store.sealed import CHECK_RECORD
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import key_ring, key_users, master_keys, meta
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded
from chainkeys.vault.integrity import failed
from chainkeys.vault.pinned import RING_PINNED

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
    authentic: bool | None = None  # its MAC checked (None: read without the key)

    def names(self, key_id: str) -> bool:
        """Whether this process uses or ever used `key_id` (it may still hold a value it
        sealed with it and has not committed yet)."""
        used = set(filter(None, self.used_key_ids.split(",")))
        return key_id in {self.sealing_key_id, self.root_key_id} | used


Row = dict[str, Any]
_m, _r, _k = master_keys.c, key_ring.c, key_users.c
_TERM_FIELDS = ("key_id", "created_ms", "retired_ms", "destroyed_ms")
_TERMS = Prepared(select(*(_m[f] for f in _TERM_FIELDS), _m.mac).order_by(_m.created_ms))
_TERM_INSERT = Prepared(insert(master_keys), (*_TERM_FIELDS, "mac"))
_TERM_SET = Prepared(
    update(master_keys)
    .where(_m.key_id == bindparam("k"), _m.mac == bindparam("old"))
    .values(
        retired_ms=bindparam("retired"), destroyed_ms=bindparam("destroyed"), mac=bindparam("mac")
    )
)
_RING_FIELDS = ("key_id", "wrapped_by", "wrapped", "created_ms")
_RING = Prepared(select(*(_r[f] for f in _RING_FIELDS), _r.mac).order_by(_r.created_ms))
_RING_INSERT = Prepared(insert(key_ring), (*_RING_FIELDS, "mac"))
_RING_DELETE = Prepared(
    delete(key_ring).where(_r.key_id == bindparam("k"), _r.wrapped_by == bindparam("by"))
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
_BEAT = Prepared(
    update(key_users)
    .where(_k.process == bindparam("p"))
    .values(**{f: bindparam(f) for f in _USER_FIELDS[1:]}, mac=bindparam("mac"))
)
_USER_INSERT = Prepared(insert(key_users), (*_USER_FIELDS, "mac"))
_USER_DELETE = Prepared(delete(key_users).where(_k.process == bindparam("p")))
_USERS = Prepared(select(*(_k[f] for f in _USER_FIELDS), _k.mac).order_by(_k.host, _k.pid))


def _term(row: Row) -> Term:
    return Term(row["key_id"], int(row["created_ms"]), row["retired_ms"], row["destroyed_ms"])


def _entry(row: Row) -> RingEntry:
    return RingEntry(
        row["key_id"], row["wrapped_by"], bytes(row["wrapped"]), int(row["created_ms"])
    )


_term_ident, _entry_ident = (p.ident for p in RING_PINNED)  # the members of the head


async def _rows(tx: Tx, stmt: Prepared) -> list[Row]:
    return [dict(r._mapping) for r in (await tx.execute(stmt)).all()]


async def _authentic(
    tx: Tx, gate: Gate, entry: Authenticated, stmt: Prepared, ident: Callable[[Row], str]
) -> list[Row]:
    """Every row of a ring table, each with its valid MAC and all of them exactly what
    the ring's head pins (IntegrityFailure naming the first that is not: a row edited or
    inserted fails its MAC, one put back from an older copy or removed fails the head)."""
    name = str(entry.table.name)
    found: list[Row] = []

    async def load() -> list[Loaded]:
        found[:] = await _rows(tx, stmt)
        return [((ident(r), str(r["mac"])), gate.valid(entry, r)) for r in found]

    await gate.heads.check(tx, None, name, load, f"the rows of {name}")
    for row in found:
        if not gate.valid(entry, row):
            raise failed(entry, f"the {entry.record} {ident(row)} (its row in {name})")
    return found


class Keyring:
    """The store's master keys (ids and dates, never a key) and the keys wrapped under
    one another: read authenticated (the gate) or, only before the gate is open (the
    barrier opens the integrity key with what the ring gives), as they are."""

    @staticmethod
    async def read(tx: Tx, gate: Gate) -> tuple[list[RingEntry], list[Term]]:
        entries = await _authentic(tx, gate, KEY_RING, _RING, _entry_ident)
        terms = await _authentic(tx, gate, MASTER_KEYS, _TERMS, _term_ident)
        return [_entry(r) for r in entries], [_term(r) for r in terms]

    @staticmethod
    async def unverified(tx: Tx) -> tuple[list[RingEntry], list[Term]]:
        """As the database holds them: for opening the barrier (whose view is checked
        once the gate is open, before it seals anything: vault/adoption.py) and for
        showing them to an operator who opened no key."""
        return [_entry(r) for r in await _rows(tx, _RING)], [
            _term(r) for r in await _rows(tx, _TERMS)
        ]

    @staticmethod
    async def add_term(tx: Tx, gate: Gate, key_id: str, created_ms: int) -> None:
        """A new term (once: a term the ring holds already stays as it is)."""
        if any(r["key_id"] == key_id for r in await _rows(tx, _TERMS)):
            return
        row: Row = {"key_id": key_id, "created_ms": created_ms, "retired_ms": None}
        row["destroyed_ms"] = None
        await _insert(tx, gate, MASTER_KEYS, _TERM_INSERT, row, _term_ident)

    @staticmethod
    async def retire_all_but(tx: Tx, gate: Gate, current: str, at_ms: int) -> int:
        """Every term but `current` stops sealing (those not retired yet, from now)."""
        return await _set_terms(
            tx,
            gate,
            lambda r: r["key_id"] != current and r["retired_ms"] is None,
            "retired_ms",
            at_ms,
        )

    @staticmethod
    async def destroyed(tx: Tx, gate: Gate, key_id: str, at_ms: int) -> None:
        await _set_terms(tx, gate, lambda r: r["key_id"] == key_id, "destroyed_ms", at_ms)

    @staticmethod
    async def insert(tx: Tx, gate: Gate, entry: RingEntry) -> None:
        row = dict(zip(_RING_FIELDS, astuple(entry), strict=True))
        await _insert(tx, gate, KEY_RING, _RING_INSERT, row, _entry_ident)

    @staticmethod
    async def drop_wrapped_by(tx: Tx, gate: Gate, key_id: str) -> int:
        """Forget what `key_id` wraps (it is retired: it must unlock nothing)."""
        return await _drop(tx, gate, lambda r: r["wrapped_by"] == key_id)

    @staticmethod
    async def drop_key(tx: Tx, gate: Gate, key_id: str) -> int:
        """Forget `key_id` wherever it is wrapped or wraps (it is destroyed)."""
        return await _drop(tx, gate, lambda r: key_id in (r["key_id"], r["wrapped_by"]))


async def _insert(
    tx: Tx, gate: Gate, entry: Authenticated, stmt: Prepared, row: Row, ident: Callable[[Row], str]
) -> None:
    mac = gate.mac(entry, row)
    await tx.execute(stmt, {**row, "mac": mac})
    await gate.heads.change(tx, None, str(entry.table.name), added=[(ident(row), mac)])


async def _set_terms(
    tx: Tx, gate: Gate, which: Callable[[Row], bool], column: str, at_ms: int
) -> int:
    """Set `column` (retired_ms or destroyed_ms) on the terms `which` picks, each MACed
    again, the head moved once."""
    removed, added = [], []
    for row in await _authentic(tx, gate, MASTER_KEYS, _TERMS, _term_ident):
        if not which(row):
            continue
        new = {**row, column: at_ms}
        new["mac"] = gate.mac(MASTER_KEYS, new)
        params = {"retired": new["retired_ms"], "destroyed": new["destroyed_ms"]}
        params |= {"mac": new["mac"], "k": row["key_id"], "old": row["mac"]}
        if (await tx.execute(_TERM_SET, params)).rowcount != 1:
            raise IntegrityFailure(f"master key {row['key_id']}'s row moved under its lock")
        removed.append((_term_ident(row), str(row["mac"])))
        added.append((_term_ident(new), new["mac"]))
    if removed:
        await gate.heads.change(tx, None, "master_keys", removed, added)
    return len(removed)


async def _drop(tx: Tx, gate: Gate, which: Callable[[Row], bool]) -> int:
    gone = [r for r in await _authentic(tx, gate, KEY_RING, _RING, _entry_ident) if which(r)]
    for row in gone:
        await tx.execute(_RING_DELETE, {"k": row["key_id"], "by": row["wrapped_by"]})
    if gone:
        removed = [(_entry_ident(r), str(r["mac"])) for r in gone]
        await gate.heads.change(tx, None, "key_ring", removed)
    return len(gone)


class KeyUsers:
    """The heartbeats of the processes that seal, each MACed by the process that wrote
    it (store/integrity.py KEY_USERS says which columns decide)."""

    @staticmethod
    async def beat(tx: Tx, gate: Gate, user: KeyUser) -> None:
        row = {f: getattr(user, f) for f in _USER_FIELDS}
        mac = gate.mac(KEY_USERS, row)
        params = {"p": user.process, **{f: row[f] for f in _USER_FIELDS[1:]}, "mac": mac}
        if not (await tx.execute(_BEAT, params)).rowcount:
            await tx.execute(_USER_INSERT, {**row, "mac": mac})

    @staticmethod
    async def remove(tx: Tx, process: str) -> None:
        await tx.execute(_USER_DELETE, {"p": process})

    @staticmethod
    async def all(tx: Tx, gate: Gate | None) -> list[KeyUser]:
        """Every heartbeat, however old (a stopped process is unknown, not gone), each
        with whether its MAC holds (None without the key: for showing only)."""
        return [
            KeyUser(
                r["process"],
                r["host"],
                int(r["pid"]),
                r["sealing_key_id"],
                r["root_key_id"],
                int(r["seen_ms"]),
                r["used_key_ids"] or "",
                None if gate is None else gate.valid(KEY_USERS, r),
            )
            for r in await _rows(tx, _USERS)
        ]


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
