"""A replica stopped (SIGSTOP) across a key rotation and retirement, then resumed.

What a paused VM, swap or a long pause does to one of several processes: it misses
the rotation (its heartbeat ages out, so the rotation stops waiting for it, saying so)
and, since retiring the key it holds would strand it, `key retire` refuses, naming it,
until the operator names it with `--gone`. When it resumes, its barrier must not seal anything
with the retired key (it re-reads the ring before sealing: the fence, and refuses
when it cannot learn the current key), nothing may be lost, and every process
started afterwards with the current key alone opens everything.

Real processes under load: two `chainkeys serve` replicas on one store (SQLite: one
data directory, as two workers share it; PostgreSQL: two data directories with a copy
of the key file each, as on two hosts).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest
from tests.conftest import BACKENDS, TLS, chainkeys_cli, drop_pg_database, make_pg_database
from tests.masterkey.test_rotation_online import (
    Load,
    all_sign,
    issue_token,
    sign,
    unset_key_variables,
)
from tests.process.test_process import Proc, start

from chainkeys.config import Settings
from chainkeys.store.backend import open_backend
from chainkeys.store.sealed import SealedColumns

pytestmark = [pytest.mark.slow, pytest.mark.long(100)]


def tree(pid: int) -> list[int]:
    """A process and its descendants (Granian serves from child processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            children = (
                (task / "children").read_text().split() if (task / "children").exists() else []
            )
            todo += [int(c) for c in children]
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in tree(pid):
        os.kill(p, sig)


def process_of(env: dict[str, str], pids: list[int]) -> str:
    """The heartbeat id (`chainkeys key list`) of the one server process among `pids`."""
    listed = chainkeys_cli("key", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    (process,) = [r[0] for r in rows if len(r) > 3 and r[2].isdigit() and int(r[2]) in pids]
    return process


def sealed_key_ids(url: str) -> set[str]:
    async def read() -> set[str]:
        db = open_backend(url, Settings())
        try:
            async with db.read() as tx:
                return await SealedColumns.key_ids(tx)
        finally:
            await db.close()

    return asyncio.run(read())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_replica_stopped_across_rotate_and_retire_seals_nothing_with_the_retired_key(
    backend: str, tmp_path: Path
) -> None:
    pg_url = make_pg_database() if backend == "postgresql" else None
    unset_key_variables()
    base = {"CHAINKEYS_KEY_REFRESH_SECONDS": "0.5"}  # live window 15 s, fence 7.5 s
    if pg_url:
        base["CHAINKEYS_DATABASE_URL"] = pg_url
    env_a = {**base, "CHAINKEYS_DATA_DIR": str(tmp_path / "a")}
    env_b = env_a if pg_url is None else {**base, "CHAINKEYS_DATA_DIR": str(tmp_path / "b")}
    url = pg_url or f"sqlite:///{tmp_path / 'a' / 'chainkeys.db'}"
    procs: list[Proc] = []
    try:
        a = start(env_a, tmp_path / "a.log")
        procs.append(a)
        if pg_url:  # as on two hosts: each its own copy of the key file
            (tmp_path / "b").mkdir(mode=0o700)
            shutil.copy2(tmp_path / "a" / "master.key", tmp_path / "b" / "master.key")
        b = start(env_b, tmp_path / "b.log")
        procs.append(b)
        token = issue_token(env_a)
        before = Load([a, b], token)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = [pool.submit(before.run, i) for i in range(2)]
            while len(before.created) < 20:
                assert all(not f.done() for f in running), [f.result() for f in running]
                time.sleep(0.1)
            before.stop.set()
            for f in running:
                f.result()
        [old] = sealed_key_ids(url)

        signal_tree(b.popen.pid, signal.SIGSTOP)  # B misses what follows
        load = Load([a], token)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = [pool.submit(load.run, i) for i in range(2)]
            rotated = chainkeys_cli("key", "rotate", "--wait", "120", env=env_a, timeout=300)
            assert rotated.returncode == 0, rotated.stderr + rotated.stdout
            stopped = process_of(env_a, tree(b.popen.pid))
            assert "not waiting for 1 process(es) whose heartbeat stopped" in rotated.stderr
            # B's heartbeat stopped, but a stalled process is not an ended one: retiring
            # the key B holds would strand it, so it is refused until B is named.
            refused = chainkeys_cli("key", "retire", env=env_a, timeout=60)
            assert refused.returncode == 1 and stopped in refused.stderr, refused.stderr
            assert "--gone PROCESS" in refused.stderr
            retired = chainkeys_cli("key", "retire", "--gone", stopped, env=env_a, timeout=60)
            assert retired.returncode == 0, retired.stderr + retired.stdout
            load.stop.set()
            for f in running:
                f.result()
        assert load.errors == [] and set(load.statuses) == {200}, load.statuses
        [new] = sealed_key_ids(url)
        assert new != old

        signal_tree(b.popen.pid, signal.SIGCONT)  # B resumes, holding the retired key only
        with httpx.Client(
            verify=TLS, base_url=b.base_url, headers={"Authorization": token}, timeout=60
        ) as c:
            for family in ("cosmos", "dogecoin", "eos", "litecoin"):
                made = c.post(f"/{family}", json={})
                # it never seals with the retired key: it refuses, and says why
                assert made.status_code == 503, made.text
                assert made.json()["code"] == "seal_fenced"
                assert "restart it with the current key" in made.json()["message"]
            family, name = load.created[0]
            opened = sign(c, family, name)  # sealed with the new key, which B cannot learn
            assert opened.status_code == 503 and opened.json()["code"] == "key_unavailable"
            ready = c.get("/readyz")  # out of a load balancer's rotation
            assert ready.status_code == 503 and ready.json()["code"] == "seal_fenced"
        assert sealed_key_ids(url) == {new}  # nothing was sealed with the retired key
        for proc in procs:
            proc.stop()

        # Both restart with the current key alone, and every account opens through both.
        if pg_url:
            (tmp_path / "b" / "master.key").unlink()
            shutil.copy2(tmp_path / "a" / "master.key", tmp_path / "b" / "master.key")
        assert not list((tmp_path / "a").glob("master.key.*"))  # only the current key file
        procs = [start(env_a, tmp_path / "a2.log"), start(env_b, tmp_path / "b2.log")]
        all_sign(procs, token, before.created + load.created)
    finally:
        for proc in procs:
            if proc.popen.poll() is None:
                signal_tree(proc.popen.pid, signal.SIGCONT)
            proc.stop()
        if pg_url:
            drop_pg_database(pg_url)
