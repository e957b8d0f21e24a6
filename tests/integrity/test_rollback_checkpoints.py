"""A whole database put back from an older copy (docs/security.md, audit/checkpoints.py):
with a file audit device, each shipping round leaves a MACed checkpoint of every
tenant's position in the file; a start on an older copy of the database refuses,
naming the tenant and both positions (a real `chainkeys serve`, and `chainkeys
integrity verify`); the newer copy starts; a forged checkpoint line is reported and
not trusted; a store ahead of the file starts. Both engines: SQLite by copying its
file, PostgreSQL by `CREATE DATABASE … TEMPLATE`."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from tests.conftest import (
    BACKENDS,
    PG_PREFIX,
    TEST_MASTER_KEY,
    Server,
    _made_databases,
    _pg_admin,
    backend_settings,
    chainkeys_cli,
    drop_pg_database,
    wait_for,
)
from tests.integrity.test_audit_devices import Receiver
from tests.process.test_process import start

from chainkeys.config import Settings
from chainkeys.store.tables import audit, audit_heads, integrity_heads

pytestmark = [pytest.mark.parametrize("backend", BACKENDS, indirect=True), pytest.mark.long(75)]


@dataclass
class Store:
    """One store's settings (with the file audit device) and how to copy its database
    aside and put a copy back, with every server stopped."""

    settings: Settings
    pg_url: str | None
    backups: Path
    backend: str

    @property
    def env(self) -> dict[str, str]:
        env = {
            "CHAINKEYS_DATA_DIR": str(self.settings.data_dir),
            "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        }
        if self.settings.audit_file is not None:
            env["CHAINKEYS_AUDIT_FILE"] = str(self.settings.audit_file)
        if self.settings.audit_http_url is not None:
            env["CHAINKEYS_AUDIT_HTTP_URL"] = self.settings.audit_http_url
        if self.pg_url is not None:
            env["CHAINKEYS_DATABASE_URL"] = self.pg_url
        return env

    def save(self, name: str) -> None:
        if self.pg_url is None:
            for path in self.settings.data_dir.glob("chainkeys.db*"):
                shutil.copy2(path, self.backups / f"{name}{path.name[len('chainkeys.db') :]}")
            return
        copy = f"{PG_PREFIX}{name}_{uuid.uuid4().hex[:8]}"
        _made_databases.add(copy)
        _pg(f'CREATE DATABASE "{copy}" TEMPLATE "{self._name}"')
        (self.backups / name).write_text(copy)

    def restore(self, name: str) -> None:
        if self.pg_url is None:
            for path in self.settings.data_dir.glob("chainkeys.db*"):
                path.unlink()
            for path in self.backups.glob(f"{name}*"):
                shutil.copy2(path, self.settings.data_dir / f"chainkeys.db{path.name[len(name) :]}")
            return
        copy = (self.backups / name).read_text()
        _pg(f'DROP DATABASE "{self._name}" WITH (FORCE)')
        _pg(f'CREATE DATABASE "{self._name}" TEMPLATE "{copy}"')

    @property
    def _name(self) -> str:
        assert self.pg_url is not None
        return self.pg_url.rsplit("/", 1)[1]

    def drop(self) -> None:
        if self.pg_url is None:
            return
        drop_pg_database(self.pg_url)
        for saved in self.backups.iterdir():
            drop_pg_database(f"{self.pg_url.rsplit('/', 1)[0]}/{saved.read_text()}")


def _pg(sql: str) -> None:
    import asyncio

    asyncio.run(_pg_admin(sql))


@contextlib.contextmanager
def made_store(backend: str, tmp_path: Path, **devices: Any) -> Iterator[Store]:
    settings, pg_url = backend_settings(backend, tmp_path / "data", **devices)
    (tmp_path / "backups").mkdir()
    made = Store(settings, pg_url, tmp_path / "backups", backend)
    try:
        yield made
    finally:
        made.drop()


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Store]:
    with made_store(backend, tmp_path, audit_file=tmp_path / "audit.jsonl") as made:
        yield made


@contextlib.contextmanager
def serving(store: Store) -> Iterator[Server]:
    server = Server(store.settings, store.backend)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def position(server: Server, tenant_id: str) -> tuple[int, int]:
    """The tenant's head version and audit rows linked, read from the tables."""
    assert server.services is not None
    db = server.services.db

    async def read() -> tuple[int, int]:
        async with db.read() as tx:
            version = (
                await tx.execute(
                    select(integrity_heads.c.version).where(
                        integrity_heads.c.scope == "t" + tenant_id
                    )
                )
            ).scalar_one()
            linked = (
                await tx.execute(
                    select(audit_heads.c.rows).where(audit_heads.c.tenant_key == "t" + tenant_id)
                )
            ).first()
        return int(version), int(linked[0]) if linked is not None else 0

    return server.call(read())


def checkpoints(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [o for o in map(json.loads, lines) if o.get("action") == "checkpoint"]


def in_newest(found: list[dict[str, Any]], tenant_id: str) -> tuple[int, int] | None:
    heads = {k: (v, n) for k, v, n in found[-1]["heads"]} if found else {}
    return heads.get("t" + tenant_id)


def activity(server: Server, tenant: str) -> tuple[str, str]:
    """A token, an account and a signature in `tenant`; its id, and the token."""
    assert server.services is not None
    token = server.new_token(tenant)
    with server.client(token) as c:
        address = c.post("/dogecoin", json={}).json()["address"]
        signed = c.post(f"/dogecoin/{address}/sign-message", json={"message": "hello"})
        assert signed.status_code == 200, signed.text
    return server.call(server.services.tokens.tenant_id(tenant)), token


def settle(server: Server, *tenant_ids: str, receiver: Receiver | None = None) -> None:
    """Until every audit row of these tenants is linked (the chain round) and the audit
    file's (or the receiver's) newest checkpoint holds their positions as the tables do."""
    assert server.services is not None
    db, audit_file = server.services.db, server.settings.audit_file

    def newest() -> list[dict[str, Any]]:
        if receiver is not None:
            return list(receiver.checkpoints)
        assert audit_file is not None
        return checkpoints(audit_file)

    async def rows(tenant_id: str) -> int:
        async with db.read() as tx:
            count = select(func.count()).select_from(audit).where(audit.c.tenant_id == tenant_id)
            return int((await tx.execute(count)).scalar_one())

    def done(tenant_id: str) -> bool:
        now = position(server, tenant_id)
        return now[1] == server.call(rows(tenant_id)) and in_newest(newest(), tenant_id) == now

    for tenant_id in tenant_ids:
        wait_for(lambda: done(tenant_id), f"tenant {tenant_id} linked and checkpointed")  # noqa: B023


def refused(store: Store, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A real `chainkeys serve` on the store, which must end without serving."""
    proc = start(store.env, tmp_path / f"serve-{uuid.uuid4().hex[:6]}.log", wait=False)

    def serving() -> bool:
        try:
            return httpx.get(f"{proc.base_url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        # (a process start on a machine this busy can take longer than wait_for's 30 s:
        # the bound only ends a run that hangs)
        deadline = time.monotonic() + 180
        while proc.popen.poll() is None and not serving():
            assert time.monotonic() < deadline, proc.log_path.read_text()
            time.sleep(0.1)
        assert proc.popen.poll() is not None, "it started on an older copy of the database"
    finally:
        proc.stop()
    code = proc.popen.returncode
    return subprocess.CompletedProcess(
        proc.popen.args, code, proc.stdout, proc.log_path.read_text()
    )


def test_a_start_on_an_older_copy_of_the_database_refuses_and_the_newer_starts(
    store: Store, tmp_path: Path
) -> None:
    with serving(store) as server:
        alice, alice_token = activity(server, "alice")
        settle(server, alice)
        old = position(server, alice)
    store.save("old")
    with serving(store) as server:  # an honest restart starts
        activity(server, "alice")
        bob, _ = activity(server, "bob")
        settle(server, alice, bob)
        new = position(server, alice)
        bob_new = position(server, bob)
    assert new[0] > old[0] and new[1] > old[1]
    store.save("new")

    store.restore("old")
    result = refused(store, tmp_path)
    assert result.returncode != 0
    said = " ".join(result.stderr.split())
    assert "the database is behind the audit file's newest checkpoint" in said, said
    assert (
        f"tenant {alice}: the store is at head version {old[0]} with {old[1]} audit rows "
        f"linked, the device at version {new[0]} with {new[1]}"
    ) in said
    assert (
        f"tenant {bob}: the store is at head version 0 with 0 audit rows linked, the device "
        f"at version {bob_new[0]} with {bob_new[1]}"
    ) in said
    assert "Traceback" not in result.stderr
    verify = chainkeys_cli("integrity", "verify", env=store.env)
    assert verify.returncode == 1
    assert f"tenant {alice}: the store is at head version {old[0]}" in " ".join(
        (verify.stdout + verify.stderr).split()
    )

    store.restore("new")
    honest = chainkeys_cli("integrity", "verify", env=store.env)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert "the store is not behind it" in honest.stdout
    with serving(store) as server, server.client(alice_token) as c:
        assert c.get("/dogecoin").status_code == 200


def test_a_forged_checkpoint_is_reported_not_trusted_and_a_store_ahead_starts(
    store: Store,
) -> None:
    audit_file = store.settings.audit_file
    assert audit_file is not None
    with serving(store) as server:
        alice, token = activity(server, "alice")
        settle(server, alice)
        version, _ = position(server, alice)
    # someone who can write the file (not the key) claims alice went much further
    forged = dict(checkpoints(audit_file)[-1])
    forged["heads"] = [
        [k, v + 100, n + 100] if k == "t" + alice else [k, v, n] for k, v, n in forged["heads"]
    ]
    with audit_file.open("a") as f:
        f.write(json.dumps(forged) + "\n")
    offset = audit_file.stat().st_size - len(json.dumps(forged)) - 1
    # and the store moves ahead of the file (a command with no audit device configured)
    made = chainkeys_cli(
        "token", "create", "--tenant", "alice", env={**store.env, "CHAINKEYS_AUDIT_FILE": None}
    )
    assert made.returncode == 0, made.stderr

    verify = chainkeys_cli("integrity", "verify", env=store.env)
    out = " ".join((verify.stdout + verify.stderr).split())
    assert verify.returncode == 1, out
    assert f"FAILED: the checkpoint line in {audit_file} at byte {offset} fails its MAC" in out
    assert f"checkpoint of {checkpoints(audit_file)[-2]['time']} in {audit_file}" in out
    assert "the store is not behind it" in out
    with serving(store) as server, server.client(token) as c:  # the forged line is not used
        assert c.get("/dogecoin").status_code == 200
        assert position(server, alice)[0] > version


def test_a_receivers_copy_is_checked_by_integrity_verify_checkpoints(
    backend: str, tmp_path: Path
) -> None:
    """An HTTP receiver gets the checkpoints too but cannot be read back: the start
    on an older copy is not refused (said so), and `integrity verify --checkpoints`
    with what the receiver stored names the tenant behind."""
    receiver = Receiver()
    receiver.start()
    try:
        with made_store(backend, tmp_path, audit_http_url=receiver.url) as store:
            with serving(store) as server:
                alice, _ = activity(server, "alice")
                settle(server, alice, receiver=receiver)
                old = position(server, alice)
            store.save("old")
            with serving(store) as server:
                activity(server, "alice")
                settle(server, alice, receiver=receiver)
                new = position(server, alice)
            copy = tmp_path / "received.jsonl"
            copy.write_text("".join(json.dumps(e) + "\n" for e in receiver.checkpoints))
            store.restore("old")
            verify = chainkeys_cli("integrity", "verify", "--checkpoints", str(copy), env=store.env)
    finally:
        receiver.stop()
    out = " ".join((verify.stdout + verify.stderr).split())
    assert verify.returncode == 1, out
    assert "note: the HTTP audit device cannot be read back" in out
    assert (
        f"tenant {alice}: the store is at head version {old[0]} with {old[1]} audit rows "
        f"linked, the device at version {new[0]} with {new[1]}"
    ) in out
