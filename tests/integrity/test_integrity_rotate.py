"""`chainkeys integrity rotate` (vault/rotation.py), on both engines, with the service
stopped: every authenticated row, head, audit row and link MACed again under the new
generation, the old one retired, tokens still authenticating (their digests keep the
store key); an interrupted rotation finishes when run again; the record from before
the rotation, put back, is refused at start."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from tests.conftest import (
    BACKENDS,
    TEST_MASTER_KEY,
    chainkeys_cli,
)
from tests.integrity.stores import as_writer as _sync
from tests.integrity.stores import cli_env as _env
from tests.integrity.stores import own_store

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.bootstrap import open_services
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store.integrity import REGISTRY
from chainkeys.store.tables import audit, meta
from chainkeys.vault.integrity import RECORD
from chainkeys.vault.repository import KeyUser, KeyUsers
from chainkeys.vault.rotation import rotate

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def settings(backend: str, tmp_path: Path) -> Iterator[Settings]:
    with own_store(backend, tmp_path) as made:
        yield made


@pytest.fixture
def key_file_settings(backend: str, tmp_path: Path) -> Iterator[Settings]:
    """A key file (a master-key rotation makes the next one beside it), on a fresh
    store: the ring then holds terms and entries of its own."""
    with own_store(backend, tmp_path / "data", master_key=None) as made:
        yield made


def _store(settings: Settings) -> str:
    async def make() -> str:
        svc = await open_services(settings)
        try:
            _, token = await svc.tokens.create("acme", "old")
            await svc.tokens.create("acme", "revoked")
            await svc.policies.set("acme", '{"rules": [{"family": "cosmos"}]}', "json")
            await svc.policies.set("acme", '{"rules": [{"family": "eos"}]}', "json")
            return token
        finally:
            await svc.close()

    return asyncio.run(make())


def _works(settings: Settings, token: str) -> None:
    async def serve() -> None:
        svc = await open_services(settings)  # a restart: the record read again
        try:
            who = await svc.tokens.authenticate(token)
            assert who is not None and who.tenant == "acme"
            policy = await svc.policies.current(who.tenant_id, fresh=True)
            assert policy is not None and policy.rules[0].family == "eos"
            await svc.tokens.create("acme", "after")  # a write, under the writing key
        finally:
            await svc.close()

    asyncio.run(serve())


def _macs(settings: Settings) -> set[str]:
    def read(conn: Any) -> set[str]:
        found: set[str] = set()
        for entry in REGISTRY:
            found |= {str(m).split(":")[0] for (m,) in conn.execute(select(entry.table.c.mac))}
        found |= {str(m).split(":")[0] for (m,) in conn.execute(select(audit.c.mac)) if m}
        found |= {str(c).split(":")[0] for (c,) in conn.execute(select(audit.c.chain)) if c}
        return found

    return set(_sync(settings, read))


def _beat(settings: Settings, user: KeyUser) -> None:
    """A server's heartbeat, MACed as its barrier writes it (the services' own is
    removed when they close)."""

    async def beat() -> None:
        svc = await open_services(settings)
        try:
            gate = svc.barrier.integrity
            assert gate is not None
            async with svc.db.write() as tx:
                await KeyUsers.beat(tx, gate, user)
        finally:
            await svc.close()

    asyncio.run(beat())


def _users(settings: Settings) -> dict[str, bool | None]:
    """Each heartbeat's process and whether its MAC holds, read as `chainkeys key`
    reads them (through a started service's gate)."""

    async def read() -> dict[str, bool | None]:
        svc = await open_services(settings)
        try:
            async with svc.db.read() as tx:
                users = await KeyUsers.all(tx, svc.barrier.integrity)
            return {u.process: u.authentic for u in users if u.process != svc.barrier.process}
        finally:
            await svc.close()

    return asyncio.run(read())


def _linked(settings: Settings) -> None:
    done = chainkeys_cli("audit", "verify", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr


def _verified(settings: Settings) -> str:
    done = chainkeys_cli("integrity", "verify", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_rotate_macs_every_row_again_and_retires_the_old_key(settings: Settings) -> None:
    token = _store(settings)
    _linked(settings)  # the chaining happens in `audit verify`'s own round
    assert _macs(settings) == {"v1"}
    done = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "generation 2 writes" in done.stdout and "[1] retired" in done.stdout
    assert _macs(settings) == {"v2"}
    _verified(settings)
    _linked(settings)
    _works(settings, token)  # the token's digest kept its key
    events = _sync(
        settings,
        lambda c: c.execute(
            select(audit.c.details).where(audit.c.action == "integrity.rotate")
        ).all(),
    )
    [(details,)] = events  # counts and generations, never a key
    assert '"retired":[1]' in str(details) and '"writing":2' in str(details)
    assert TEST_MASTER_KEY not in str(details) and "macs" not in str(details)
    again = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert again.returncode == 0 and "generation 3 writes" in again.stdout
    assert _macs(settings) == {"v3"}
    _works(settings, token)


def test_an_interrupted_rotation_is_finished_when_run_again(settings: Settings) -> None:
    token = _store(settings)

    async def interrupted() -> None:
        svc = await open_services(settings)
        try:

            async def none() -> list[str]:
                return []

            async def cut(db: Any, gate: Any) -> dict[str, int]:
                raise RuntimeError("the operator's terminal closed")

            async def record(tx: Any, details: dict[str, Any]) -> None:
                await Audit.insert(tx, audit_event(None, "integrity.rotate", "ok", details=details))

            gate = svc.barrier.integrity
            assert gate is not None
            with pytest.raises(RuntimeError):
                await rotate(svc.db, svc.barrier, gate, none, cut, record)
        finally:
            await svc.close()

    asyncio.run(interrupted())
    assert "v2" in _macs(settings)  # rows under the new key, the audit log not yet
    _works(settings, token)  # both keys check meanwhile: the service runs
    _verified(settings)
    done = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "finished the rotation left unfinished" in done.stdout
    assert "generation 2 writes" in done.stdout
    assert _macs(settings) == {"v2"}
    _verified(settings)
    _linked(settings)
    _works(settings, token)


def test_the_record_from_before_a_rotation_put_back_is_refused(settings: Settings) -> None:
    token = _store(settings)
    [(old,)] = _sync(
        settings, lambda c: c.execute(select(meta.c.value).where(meta.c.key == RECORD)).all()
    )
    done = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    _sync(settings, lambda c: c.execute(update(meta).where(meta.c.key == RECORD).values(value=old)))
    with pytest.raises(StartupError) as caught:
        asyncio.run(open_services(settings))
    assert "put back from before a rotation" in caught.value.message
    refused = chainkeys_cli("integrity", "verify", env=_env(settings))
    assert refused.returncode != 0
    del token


def test_rotate_refuses_while_a_server_runs_and_changes_nothing(settings: Settings) -> None:
    token = _store(settings)

    _beat(settings, KeyUser("p1", "replica-1", 4242, "k", "k", now_ms()))
    refused = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert refused.returncode == 1
    assert "process(es) are running (replica-1 pid 4242)" in refused.stderr + refused.stdout
    assert _macs(settings) == {"v1"}
    outcomes = _sync(
        settings,
        lambda c: c.execute(
            select(audit.c.outcome, audit.c.details).where(audit.c.action == "integrity.rotate")
        ).all(),
    )
    assert [(o, "replica-1" in d) for o, d in outcomes] == [("conflict", True)]
    _works(settings, token)


def test_adopting_a_rotated_store_keeps_its_mac_key(settings: Settings) -> None:
    """Generation 1's MAC key is the store key, which the record keeps for token
    digests: an adoption after a rotation must not make it a MAC key again."""
    token = _store(settings)
    done = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    adopted = chainkeys_cli("integrity", "adopt", "--yes", env=_env(settings))
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "every row carries a valid MAC" in adopted.stdout
    assert _macs(settings) == {"v2"}
    _verified(settings)
    _works(settings, token)


def test_rotate_macs_the_master_key_ring_and_heartbeats_again(
    key_file_settings: Settings,
) -> None:
    """The ring's rows are pinned by its own head: re-MACed, they move it in the same
    transaction, so the store still starts and verifies; a stopped process's heartbeat
    keeps a valid MAC (retire and destroy would otherwise stop at it)."""
    settings = key_file_settings
    token = _store(settings)

    async def master_key(step: str) -> None:
        svc = await open_services(settings)
        try:
            if step == "rotate":
                await svc.keys.rotate(wait_seconds=30)
            else:
                await svc.keys.retire()
        finally:
            await svc.close()

    for step in ("rotate", "retire"):  # two terms, the old wrapped under the new
        asyncio.run(master_key(step))
    _beat(settings, KeyUser("p-stopped", "replica-9", 99, "k", "k", 1))  # long gone
    assert _users(settings) == {"p-stopped": True}
    done = chainkeys_cli("integrity", "rotate", env=_env(settings))
    assert done.returncode == 0, done.stdout + done.stderr
    for table in ("master_keys", "key_ring", "key_users"):
        assert f"  {table}: " in done.stdout
    assert _macs(settings) == {"v2"}
    _verified(settings)
    assert _users(settings) == {"p-stopped": True}
    _works(settings, token)  # a start checks the ring against its head
