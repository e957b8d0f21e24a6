"""Master-key rotation and retirement while the service runs under load.

Real processes: `chainkeys serve --workers 2` on SQLite, and two replicas (each with
its own data directory and a copy of the key file, as on two hosts) on PostgreSQL.
Creates and signs go through every process the whole time; `chainkeys key rotate`
and `chainkeys key retire` run beside them. Nothing may answer 5xx, every account
created before, during and after must open (it signs) through every process, and
after a restart on the current key everything still opens.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import (
    BACKENDS,
    TLS,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    make_pg_database,
    wait_for,
)
from tests.process.test_process import Proc, start

pytestmark = [pytest.mark.slow, pytest.mark.long(95)]
FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")
MORE = 20  # accounts created, and requests each process answers, that a step waits for


class Load:
    """Creates and signs on every process until stopped; counts every status."""

    def __init__(self, procs: list[Proc], token: str) -> None:
        self.procs, self.token = procs, token
        self.stop = threading.Event()
        self.statuses: Counter[int] = Counter()
        self.ok: Counter[int | None] = Counter()  # 200s by the port that answered
        self.created: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def run(self, worker: int) -> None:
        clients = [
            httpx.Client(
                verify=TLS, base_url=p.base_url, headers={"Authorization": self.token}, timeout=30
            )
            for p in self.procs
        ]
        n = 0
        try:
            while not self.stop.is_set():
                family = FAMILIES[(worker + n) % len(FAMILIES)]
                client = clients[n % len(clients)]
                n += 1
                r = client.post(f"/{family}", json={})
                self.count(r)
                if r.status_code != 200:
                    continue
                name = (
                    r.json()["data"]["data"]["address"]
                    if family == "cosmos"
                    else r.json()["address"]
                )
                with self._lock:
                    self.created.append((family, name))
                self.count(sign(clients[n % len(clients)], family, name))
                time.sleep(0.05)  # steady traffic, not a flood: a few hundred accounts
        finally:
            for c in clients:
                c.close()

    def count(self, r: httpx.Response) -> None:
        with self._lock:
            self.statuses[r.status_code] += 1
            if r.status_code == 200:
                self.ok[r.request.url.port] += 1
            if r.status_code >= 500:
                self.errors.append(f"{r.request.method} {r.request.url.path}: {r.text[:300]}")

    def progress(self) -> list[int]:
        """Accounts created so far, then the 200s each process answered (`procs` order)."""
        with self._lock:
            ports = [httpx.URL(p.base_url).port for p in self.procs]
            return [len(self.created), *(self.ok[port] for port in ports)]


def sign(client: httpx.Client, family: str, name: str) -> httpx.Response:
    """A signature that opens the account's sealed key (EOS and UTXO message, Cosmos
    ADR-036)."""
    body = {"message": "rotation"}
    return client.post(f"/{family}/{name}/sign-message", json=body)


def all_sign(procs: list[Proc], token: str, created: list[tuple[str, str]]) -> None:
    def check(proc: Proc, part: list[tuple[str, str]]) -> None:
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            for family, name in part:
                r = sign(c, family, name)
                assert r.status_code == 200, (proc.base_url, family, name, r.text)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        work = [pool.submit(check, p, created[i::2]) for p in procs for i in range(2)]
        for done in work:
            done.result()


def issue_token(env: dict[str, str]) -> str:
    made = chainkeys_cli("token", "create", "--tenant", "rot", "--label", "load", env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def sealing_keys(env: dict[str, str]) -> list[str]:
    """The key each running server process seals with, from its heartbeat row as
    `chainkeys key list` shows it (a stale heartbeat is no running process)."""
    listed = chainkeys_cli("key", "list", env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.split("\nPROCESS", 1)[1].splitlines()[1:]
    return [row.split()[3] for row in rows if row.strip() and "(stale)" not in row]


def wait_for_servers(env: dict[str, str], servers: int, key: str | None, what: str) -> None:
    """Until `servers` server processes have a live heartbeat, each sealing with `key`
    (any key when None); a timeout says what `chainkeys key list` showed last."""
    seen: list[str] = []

    def check() -> bool:
        seen[:] = sealing_keys(env)
        return len(seen) == servers and (key is None or set(seen) == {key})

    try:
        wait_for(check, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the live heartbeats seal with {seen}") from None


def rotated_to(out: str) -> str:
    """The new key id `chainkeys key rotate` reports."""
    return out.split("under master key ", 1)[1].split()[0]


def rotate_under_load(procs: list[Proc], env: dict[str, str], token: str, servers: int) -> Load:
    load = Load(procs, token)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        running = [pool.submit(load.run, i) for i in range(4)]

        def traffic(what: str) -> None:
            """Until MORE accounts were created, and every process answered MORE requests
            with 200, from now on (a load thread that ended fails it with its error)."""
            since = load.progress()

            def more() -> bool:
                for future in running:
                    if future.done():
                        future.result()
                        raise AssertionError("a load thread ended before it was stopped")
                return all(
                    now >= then + MORE for now, then in zip(load.progress(), since, strict=True)
                )

            wait_for(more, f"{MORE} accounts created and {MORE} 200s from each process {what}")

        try:
            wait_for_servers(env, servers, None, f"a heartbeat from each of {servers} servers")
            traffic("before the first rotation")
            rotated = chainkeys_cli("key", "rotate", env=env, timeout=180)
            assert rotated.returncode == 0, rotated.stderr + rotated.stdout
            assert "re-sealed" in rotated.stdout
            key = rotated_to(rotated.stdout)
            wait_for_servers(env, servers, key, f"every server sealing with key {key}")
            traffic("under the first new key")
            again = chainkeys_cli("key", "rotate", env=env, timeout=180)  # a second one, at once
            assert again.returncode == 0, again.stderr + again.stdout
            key = rotated_to(again.stdout)
            wait_for_servers(env, servers, key, f"every server sealing with key {key}")
            traffic("under the second new key")
            retired = chainkeys_cli("key", "retire", env=env, timeout=60)
            assert retired.returncode == 0, retired.stderr + retired.stdout
            assert "removed" in retired.stdout
            traffic("after the retirement")
        finally:
            load.stop.set()  # also when a step failed: the pool's exit waits for the threads
        for future in running:
            future.result()
    assert load.errors == [], load.errors[:5]
    assert load.statuses[200] > 50 and set(load.statuses) == {200}, load.statuses
    print(f"{len(load.created)} accounts created under rotation: {dict(load.statuses)}")
    return load


def unset_key_variables() -> None:
    """The key file is the provider here (it is what a rotation replaces)."""
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_PREVIOUS_MASTER_KEYS", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_rotate_and_retire_online_then_restart(backend: str, tmp_path: Path) -> None:
    pg_url = make_pg_database() if backend == "postgresql" else None
    unset_key_variables()
    base = {"CHAINKEYS_KEY_REFRESH_SECONDS": "0.5"}
    if pg_url:
        base["CHAINKEYS_DATABASE_URL"] = pg_url
    env_a = {**base, "CHAINKEYS_DATA_DIR": str(tmp_path / "a")}
    env_b = {**base, "CHAINKEYS_DATA_DIR": str(tmp_path / "b")}
    procs: list[Proc] = []
    try:
        if pg_url:  # two replicas, as on two hosts: each its own copy of the key file
            procs.append(start(env_a, tmp_path / "a.log"))
            (tmp_path / "b").mkdir(mode=0o700)
            shutil.copy2(tmp_path / "a" / "master.key", tmp_path / "b" / "master.key")
            procs.append(start(env_b, tmp_path / "b.log"))
        else:
            procs.append(start(env_a, tmp_path / "a.log", "--workers", "2"))
        token = issue_token(env_a)
        load = rotate_under_load(procs, env_a, token, servers=2)  # 2 replicas, or 2 workers
        all_sign(procs, token, load.created)
        for proc in procs:
            proc.stop()
        if pg_url:
            # Replica b still has the retired key: it refuses to start, saying why...
            refused = chainkeys_cli("serve", "--port", str(free_port()), env=env_b, timeout=60)
            assert refused.returncode != 0
            assert "install its key file here" in refused.stderr, refused.stderr
            # ...until the operator copies the current key file, as the docs say.
            (tmp_path / "b" / "master.key").unlink()
            shutil.copy2(tmp_path / "a" / "master.key", tmp_path / "b" / "master.key")
        procs = [start(env_a, tmp_path / "a2.log")]
        if pg_url:
            procs.append(start(env_b, tmp_path / "b2.log"))
        all_sign(procs, token, load.created)
        assert list((tmp_path / "a").glob("master.key.*")) == []  # retired files removed
    finally:
        for proc in procs:
            proc.stop()
        if pg_url:
            drop_pg_database(pg_url)


def test_retire_refuses_while_a_process_seals_with_an_old_key(tmp_path: Path) -> None:
    """A server that cannot learn the new key (here: its refresh is slower than the
    rotation's wait) blocks retirement, and the refusal names it."""
    unset_key_variables()
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d"), "CHAINKEYS_KEY_REFRESH_SECONDS": "10"}
    proc = start(env, tmp_path / "s.log")
    try:
        token = issue_token(env)
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            made = c.post("/dogecoin", json={})
            name: Any = made.json()["address"]
        # the rotation must find the server's heartbeat to wait for it (and give up)
        wait_for_servers(env, 1, None, "the server's heartbeat")
        rotated = chainkeys_cli("key", "rotate", "--wait", "1", env=env, timeout=60)
        assert rotated.returncode != 0
        assert "still seal with an older key" in rotated.stderr, rotated.stderr
        assert "pid" in rotated.stderr
        retired = chainkeys_cli("key", "retire", env=env, timeout=60)
        assert retired.returncode != 0
        assert "run `chainkeys key rotate`" in retired.stderr or "still seal" in retired.stderr
        # the server learns the key in its own time; then the rotation resumes and retires
        rotated = chainkeys_cli("key", "rotate", "--wait", "30", env=env, timeout=90)
        assert rotated.returncode == 0, rotated.stderr
        assert chainkeys_cli("key", "retire", env=env, timeout=60).returncode == 0
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            assert sign(c, "dogecoin", name).status_code == 200
    finally:
        proc.stop()
