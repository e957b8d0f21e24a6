"""The master-key ring authenticated (store/integrity.py MASTER_KEYS, KEY_RING,
KEY_USERS; vault/repository.py `Keyring`), on both engines.

A database writer without the master key edits the ring of a store that rotated and
retired its first key: un-retires the old key (and makes it the newest, so it would
seal), edits or inserts a term, puts back a term or a ring entry from before the
retire, or removes a term. Each is refused where it would be used: the start stops
naming why, the refusal is audited (`key.ring`), `chainkeys integrity verify` names
it, and the store starts again once the rows are restored. A running server that
reads such a ring refuses to seal (`integrity_failure`) over real HTTP, and seals
again once the rows are restored. Heartbeats that fail their MAC block a retire until
named with --gone. A store from before the ring's MACs starts only once adopted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, insert, select, update
from tests.conftest import (
    BACKENDS,
    Server,
    chainkeys_cli,
    own_server,
)
from tests.integrity.stores import as_writer as _sync
from tests.integrity.stores import cli_env as _env
from tests.integrity.stores import own_store

from chainkeys.bootstrap import open_services, open_unadopted
from chainkeys.config import Settings
from chainkeys.errors import IntegrityFailure, StartupError
from chainkeys.store import migrate
from chainkeys.store.tables import audit, integrity_heads, key_ring, key_users, master_keys, meta
from chainkeys.vault.integrity import CONTEXT, RECORD, Record, read_record

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
Row = dict[str, Any]


@pytest.fixture
def settings(backend: str, tmp_path: Path) -> Iterator[Settings]:
    """A key file (rotation makes the next one beside it), on a fresh store."""
    with own_store(backend, tmp_path / "data", master_key=None) as made:
        yield made


def _rows(settings: Settings, table: Any) -> list[Row]:
    return list(
        _sync(settings, lambda c: [dict(r._mapping) for r in c.execute(select(table)).all()])
    )


@dataclass
class Rotated:
    old: str
    new: str
    before: list[Row]  # master_keys after the rotation, before the retire
    ring_before: list[Row]  # key_ring then: the new key wrapped under the old among it
    terms: list[Row]  # master_keys as the retire left them
    ring: list[Row]


def _rotated_and_retired(settings: Settings) -> Rotated:
    async def rotate() -> tuple[str, str]:
        svc = await open_services(settings)
        try:
            old = svc.barrier.key_id
            report = await svc.keys.rotate(wait_seconds=30)
            return old, report.new_key_id
        finally:
            await svc.close()

    async def retire() -> None:
        svc = await open_services(settings)
        try:
            await svc.keys.retire()
        finally:
            await svc.close()

    old, new = asyncio.run(rotate())
    before, ring_before = _rows(settings, master_keys), _rows(settings, key_ring)
    asyncio.run(retire())
    terms, ring = _rows(settings, master_keys), _rows(settings, key_ring)
    assert [t["key_id"] for t in terms if t["retired_ms"] is not None] == [old]
    assert {(e["key_id"], e["wrapped_by"]) for e in ring} == {(old, new)}
    return Rotated(old, new, before, ring_before, terms, ring)


def _starts(settings: Settings) -> str:
    """The store starts; the key it seals with."""

    async def start() -> str:
        svc = await open_services(settings)
        try:
            return svc.barrier.key_id
        finally:
            await svc.close()

    return asyncio.run(start())


def _refusals(settings: Settings) -> list[str]:
    stmt = select(audit.c.details).where(audit.c.action == "key.ring", audit.c.outcome == "refused")
    return [
        json.loads(d)["reason"] for d in _sync(settings, lambda c: c.execute(stmt).scalars().all())
    ]


def _term(r: Rotated, key_id: str, rows: list[Row] | None = None) -> Row:
    return next(t for t in (rows or r.terms) if t["key_id"] == key_id)


def _set_term(row: Row) -> Callable[[Any], None]:
    def run(c: Any) -> None:
        values = {k: v for k, v in row.items() if k != "key_id"}
        c.execute(update(master_keys).where(master_keys.c.key_id == row["key_id"]).values(values))

    return run


def _unretire(r: Rotated) -> Callable[[Any], None]:
    """The old key made the one that seals: not retired, and the newest."""
    newest = _term(r, r.new)["created_ms"]
    return _set_term({**_term(r, r.old), "retired_ms": None, "created_ms": newest + 1})


def _backdate(r: Rotated) -> Callable[[Any], None]:
    return _set_term({**_term(r, r.new), "created_ms": 1})


def _insert_term(r: Rotated) -> Callable[[Any], None]:
    forged = {**_term(r, r.new), "key_id": "f" * 16, "created_ms": _term(r, r.new)["created_ms"]}
    return lambda c: c.execute(insert(master_keys).values(forged))


def _put_back_term(r: Rotated) -> Callable[[Any], None]:
    """The old term as it was before the retire, with the MAC it carried then."""
    return _set_term(_term(r, r.old, r.before))


def _put_back_entry(r: Rotated) -> Callable[[Any], None]:
    """The new key wrapped under the old one, deleted by the retire, put back: a thief
    of the old key file would learn the current key from it."""
    [entry] = [e for e in r.ring_before if e["wrapped_by"] == r.old]
    return lambda c: c.execute(insert(key_ring).values(entry))


def _remove_term(r: Rotated) -> Callable[[Any], None]:
    return lambda c: c.execute(delete(master_keys).where(master_keys.c.key_id == r.old))


def _restore(r: Rotated) -> Callable[[Any], None]:
    def run(c: Any) -> None:
        c.execute(delete(master_keys))
        c.execute(delete(key_ring))
        c.execute(insert(master_keys), r.terms)
        c.execute(insert(key_ring), r.ring)

    return run


# (what the writer does, what the start's refusal says, what verify says)
TAMPERING: dict[str, tuple[Callable[[Rotated], Callable[[Any], None]], str, str]] = {
    "un-retired": (_unretire, "master key {old}", "master key {old} (not retired) fails its MAC"),
    "edited": (_backdate, "master key {new}", "master key {new} (not retired) fails its MAC"),
    "inserted": (_insert_term, "master key ffff", "master key ffffffffffffffff"),
    "put back": (_put_back_term, "not the latest", "its master_keys are not what its head pins"),
    "entry put back": (_put_back_entry, "not the latest", "its key_ring are not what"),
    "removed": (_remove_term, "not the latest", "its master_keys are not what its head pins"),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_a_ring_edited_by_a_database_writer_stops_the_start_saying_why(
    settings: Settings, case: str
) -> None:
    r = _rotated_and_retired(settings)
    assert _starts(settings) == r.new
    tamper, refused, named = TAMPERING[case]
    _sync(settings, tamper(r))

    with pytest.raises(StartupError) as caught:
        _starts(settings)
    said = caught.value.message
    assert "master-key ring failed its integrity check" in said, said
    assert refused.format(old=r.old, new=r.new) in said, said
    assert "Nothing was sealed" in said
    assert [w for w in _refusals(settings) if refused.format(old=r.old, new=r.new) in w]

    verify = chainkeys_cli("integrity", "verify", env=_env(settings))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert named.format(old=r.old, new=r.new) in verify.stdout, verify.stdout

    _sync(settings, _restore(r))  # the operator restores the rows: it starts again
    assert _starts(settings) == r.new
    verify = chainkeys_cli("integrity", "verify", env=_env(settings))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "the master-key ring's head (2 master keys)" in verify.stdout


@pytest.fixture
def srv(backend: str, tmp_path: Path) -> Iterator[Server]:
    with own_server(backend, tmp_path / "srv", master_key=None) as s:
        yield s


def test_a_running_server_seals_nothing_with_an_unretired_key(srv: Server) -> None:
    """Over HTTP: a server that reads an un-retired key refuses every create (a seal),
    audited once, and creates again once the row is restored; signing goes on (it opens
    with the keys it holds, it seals nothing)."""
    svc = srv.services
    assert svc is not None
    with srv.client(srv.new_token()) as client:
        made = client.post("/cosmos", json={})
        assert made.status_code == 200, made.text
        address = made.json()["data"]["data"]["address"]
        old = svc.barrier.key_id
        new = srv.call(svc.keys.rotate(wait_seconds=30)).new_key_id
        srv.call(svc.keys.retire())
        [honest] = [t for t in _rows(srv.settings, master_keys) if t["key_id"] == old]
        newest = max(t["created_ms"] for t in _rows(srv.settings, master_keys))
        unretired = {"retired_ms": None, "created_ms": newest + 1}
        _sync(srv.settings, _set_term({**honest, **unretired}))

        with pytest.raises(IntegrityFailure):
            srv.call(svc.barrier.learn())  # the ring's refresh round, as it runs every 2 s
        refused = client.post("/cosmos", json={})
        assert refused.status_code == 500, refused.text
        assert refused.json()["code"] == "integrity_failure"
        assert "master-key ring" in refused.json()["message"]
        assert svc.barrier.key_id == new  # never switched to the old key
        listed = client.get("/cosmos").json()["data"]["data"]["keys"]
        assert [k["address"] for k in listed] == [address]  # nothing was made
        with pytest.raises(IntegrityFailure):
            srv.call(svc.barrier.learn())  # the next round: refused again, audited once
        assert len([w for w in _refusals(srv.settings) if f"master key {old}" in w]) == 1

        _sync(srv.settings, _set_term(honest))
        srv.call(svc.barrier.learn())
        again = client.post("/cosmos", json={})
        assert again.status_code == 200, again.text


def test_a_forged_heartbeat_blocks_retire_until_named_gone(settings: Settings) -> None:
    """A heartbeat inserted or edited by a writer (it would say a process seals with the
    current key, or name none) fails its MAC: retire refuses, audited, naming it; the
    operator who knows no such process runs names it with --gone."""

    async def work() -> None:
        svc = await open_services(settings)
        try:
            await svc.barrier.beat()
            await svc.keys.rotate(wait_seconds=30)  # (it leaves when done)
            await svc.barrier.beat()  # this process's heartbeat, MACed
            forged: Row = {
                "process": "f" * 32,
                "host": "elsewhere",
                "pid": 1,
                "sealing_key_id": svc.barrier.key_id,
                "root_key_id": svc.barrier.key_id,
                "seen_ms": 1,
                "used_key_ids": "",
                "mac": "v1:" + "0" * 64,
            }
            async with svc.db.write() as tx:
                await tx.execute(insert(key_users).values(forged))
                mine = key_users.c.process == svc.barrier.process
                await tx.execute(update(key_users).where(mine).values(root_key_id="0" * 16))
            with pytest.raises(IntegrityFailure) as caught:
                await svc.keys.retire()
            said = caught.value.message
            assert forged["process"] in said and svc.barrier.process in said, said
            assert "--gone" in said and "nothing was retired" in said
            async with svc.db.read() as tx:
                stmt = select(audit.c.details).where(
                    audit.c.action == "key.retire", audit.c.outcome == "refused"
                )
                [(details,)] = (await tx.execute(stmt)).all()
            assert forged["process"] in json.loads(details)["reason"]
            await svc.barrier.beat()  # its own heartbeat written again, MACed
            done = await svc.keys.retire(frozenset({forged["process"]}))
            assert done.retired
        finally:
            await svc.close()

    asyncio.run(work())


def test_a_store_from_before_the_ring_macs_starts_only_once_adopted(settings: Settings) -> None:
    """The ring of a store from before migration 0025 (no MACs, no ring head, a record
    that does not name the ring's tables) is not adopted by a start: the operator runs
    `chainkeys integrity adopt`, which names each master key and its state."""
    r = _rotated_and_retired(settings)

    async def older_record() -> None:
        db, barrier = await open_unadopted(settings)
        try:
            async with db.read() as tx:
                [(blob, key_id)] = (
                    await tx.execute(
                        select(meta.c.value, meta.c.key_id).where(meta.c.key == RECORD)
                    )
                ).all()
            record = read_record(barrier.open(bytes(blob), key_id or "", CONTEXT))
            ring = {"master_keys", "key_ring", "key_users"}
            older = Record(record.key, record.format, record.adopted - ring, record.origin)
            sealed = await barrier.seal(older.encode(), CONTEXT)
            async with db.write() as tx:
                await tx.execute(update(meta).where(meta.c.key == RECORD).values(value=sealed.blob))
        finally:
            await db.close()

    def back_to_0024(c: Any) -> None:
        command.downgrade(migrate.alembic_config(c), "0024")
        command.upgrade(migrate.alembic_config(c), "head")  # `chainkeys db upgrade`
        c.execute(delete(integrity_heads).where(integrity_heads.c.scope == "ring"))

    asyncio.run(older_record())
    _sync(settings, back_to_0024)
    with pytest.raises(StartupError) as caught:
        _starts(settings)
    assert "never authenticated" in caught.value.message
    assert "master_keys" in caught.value.message

    shown = chainkeys_cli("integrity", "adopt", "--yes", env=_env(settings))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"master key {r.old} (retired " in shown.stdout
    assert f"master key {r.new} (not retired)" in shown.stdout
    assert _starts(settings) == r.new
    verify = chainkeys_cli("integrity", "verify", env=_env(settings))
    assert verify.returncode == 0, verify.stdout + verify.stderr
