"""PostgreSQL faults under load: backends killed mid-transaction (pg_terminate_backend) and
a restart of the server, with a chainkeys process serving throughout.

What a client may see is a 200 or the 503 `storage_unavailable` envelope, never another
error; a create that carries an Idempotency-Key, retried by its client until it gets a
200, ends as exactly one account; an import without one is stored if it was answered 200
and never twice; every stored account has its audit row; the process never dies; and
`/readyz` follows the database. Counted in the database after the run.

The kills hit only the backends of this test's own database on the shared server. The
restart is of a private cluster the test makes with PostgreSQL's own initdb and pg_ctl
(run as the postgres user when the tests run as root), never the shared server.

Below the HTTP tests, the store's own recovery (store/postgres/pool.py `PgSession`) is
checked statement by statement: a read and a transaction whose connection is killed
between two statements go on on a new one; a transaction whose replay answers otherwise
fails with nothing kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest
from sqlalchemy import BigInteger, Column, Identity, MetaData, String, Table, func, insert, select
from sqlalchemy.exc import IntegrityError
from tests.conftest import (
    PG_ADMIN_URL,
    REQUIRE_PG,
    TEST_MASTER_KEY,
    TLS,
    drop_pg_database,
    free_port,
    make_pg_database,
    wait_for,
)
from tests.process.bounds import TIMEOUTS
from tests.process.test_process import Proc, first_token, start

from chainkeys.config import Settings
from chainkeys.errors import StorageUnavailable
from chainkeys.store.postgres.backend import PostgresBackend

pytestmark = [pytest.mark.slow, pytest.mark.long(40)]

UNAVAILABLE = {
    "success": False,
    "message": "storage is unavailable; try again",
    "code": "storage_unavailable",
}


@dataclass
class Load:
    """Clients in threads until `stop`: keyed creates (retried with their key until a
    200), imports without a key (each key once, whatever the answer), and reads."""

    proc: Proc
    token: str
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    keyed: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> address
    imports: dict[int, int] = field(default_factory=dict)  # key number -> status told
    reads: list[int] = field(default_factory=list)
    unavailable: int = 0  # 503s seen, of any request
    errors: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _next: Iterator[int] = field(default_factory=lambda: iter(range(1, 10**9)))

    def answered(self, r: httpx.Response, allowed: tuple[int, ...] = (200,)) -> bool:
        """Whether `r` is a 200; a 503 must be the envelope, anything else is an error."""
        if r.status_code in allowed:
            return True
        if r.status_code == 503 and r.json() == UNAVAILABLE:
            with self.lock:
                self.unavailable += 1
            return False
        with self.lock:
            self.errors.append(f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text}")
        return False

    def keyed_create(self, c: httpx.Client) -> None:
        key = uuid.uuid4().hex
        deadline = time.monotonic() + 90  # ends a broken run; PostgreSQL restarts within it
        while time.monotonic() < deadline:
            r = c.post("/cosmos", json={}, headers={"Idempotency-Key": key})
            if self.answered(r):
                with self.lock:
                    self.keyed[key] = r.json()["data"]["data"]["address"]
                return
            time.sleep(0.05)  # pacing: the retry of a client that was told 503
        with self.lock:
            self.errors.append(f"keyed create {key} never answered 200")

    def one_import(self, c: httpx.Client) -> None:
        with self.lock:
            n = next(self._next)
        r = c.post("/dogecoin", json={"private_key": f"{n:064x}"})
        self.answered(r)
        with self.lock:
            self.imports[n] = r.status_code

    def one_read(self, c: httpx.Client) -> None:
        r = c.get("/cosmos", params={"limit": 5})
        self.answered(r)
        with self.lock:
            self.reads.append(r.status_code)

    def _client(self) -> None:
        steps = (self.keyed_create, self.one_import, self.one_read)
        with httpx.Client(
            verify=TLS,
            base_url=self.proc.base_url,
            timeout=60,
            headers={"Authorization": self.token},
        ) as c:
            i = 0
            while not self.stop.is_set():
                try:
                    steps[i % len(steps)](c)
                except httpx.HTTPError as exc:  # the process must answer every request
                    with self.lock:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                i += 1

    def __enter__(self) -> Load:
        for _ in range(6):
            t = threading.Thread(target=self._client, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(120)

    def done(self) -> int:
        with self.lock:
            return len(self.keyed) + sum(1 for s in self.imports.values() if s == 200)


def counted(dsn: str) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """Accounts per family, 'ok' audit rows per action, and the cosmos addresses."""

    async def main() -> tuple[dict[str, int], dict[str, int], set[str]]:
        conn = await asyncpg.connect(dsn, timeout=10)
        try:
            accounts = await conn.fetch("SELECT family, count(*) FROM accounts GROUP BY family")
            audit = await conn.fetch(
                "SELECT action, count(*) FROM audit WHERE outcome = 'ok' GROUP BY action"
            )
            cosmos = await conn.fetch("SELECT address FROM accounts WHERE family = 'cosmos'")
        finally:
            await conn.close()
        return (
            {r[0]: int(r[1]) for r in accounts},
            {r[0]: int(r[1]) for r in audit},
            {str(r[0]) for r in cosmos},
        )

    return asyncio.run(main())


def check_counts(load: Load, dsn: str) -> None:
    """Nothing lost, nothing doubled: what the clients were told against the rows."""
    assert not load.errors, load.errors[:5]
    accounts, audited, cosmos = counted(dsn)
    # every keyed create answered 200 once retried, and made exactly one account
    assert set(load.keyed.values()) == cosmos
    assert len(load.keyed) == accounts.get("cosmos", 0) == audited.get("create", 0)
    # an import answered 200 is stored; one answered 503 may have committed before its
    # answer was lost (never twice: the same key again is a 409)
    told_ok = sum(1 for s in load.imports.values() if s == 200)
    stored = accounts.get("dogecoin", 0)
    assert told_ok <= stored <= len(load.imports)
    assert stored == audited.get("import", 0)  # each with its audit row, in one statement


def ready(proc: Proc) -> int:
    return httpx.get(f"{proc.base_url}/readyz", verify=TLS, timeout=30).status_code


async def _admin(dsn: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


KILL = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = $1 AND pid <> pg_backend_pid()"
)


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = make_pg_database()
    yield url
    drop_pg_database(url)


def test_backends_killed_mid_transaction_under_load(pg_url: str, tmp_path: Path) -> None:
    env = {
        "CHAINKEYS_DATABASE_URL": pg_url,
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        **TIMEOUTS,
    }
    proc = start(env, tmp_path / "server.log")
    database = pg_url.rsplit("/", 1)[1]
    try:
        token = first_token(proc)
        with Load(proc, token) as load:
            kills = 0
            rounds = 0
            while rounds < 25 or load.done() < 60:
                assert rounds < 2000, "the load made no progress"
                so_far = load.done()
                wait_for(lambda: load.done() > so_far, "a write answered")  # noqa: B023
                kills += asyncio.run(_admin(PG_ADMIN_URL, KILL, database))
                rounds += 1
        assert kills >= 25
        assert proc.popen.poll() is None  # no process died
        assert ready(proc) == 200
        check_counts(load, pg_url)
    finally:
        log = proc.stop()
    assert "Traceback" not in log


@dataclass
class Cluster:
    """A PostgreSQL cluster of the test's own, on a free port."""

    bindir: Path
    base: Path
    port: int
    as_user: list[str]

    def ctl(self, *args: str) -> None:
        subprocess.run(
            [
                *self.as_user,
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.base / "data"),
                "-l",
                str(self.base / "log"),
                "-w",
                "-t",
                "60",
                *args,
            ],
            check=True,
            capture_output=True,
            text=True,
        )

    def start(self) -> None:
        self.ctl("-o", f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1", "start")

    @property
    def admin(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        why = "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
        if REQUIRE_PG:
            pytest.fail(why)
        pytest.skip(why)
    bindir = Path(found[-1]).parent
    base = Path(tempfile.mkdtemp(prefix="chainkeys-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to postgres
        shutil.chown(base, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [
            *as_user,
            str(bindir / "initdb"),
            "-D",
            str(base / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    made = Cluster(bindir, base, free_port(), as_user)
    made.start()
    try:
        yield made
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            made.ctl("-m", "immediate", "stop")
        shutil.rmtree(base, ignore_errors=True)


def test_a_postgresql_restart_under_load(cluster: Cluster, tmp_path: Path) -> None:
    asyncio.run(_admin(cluster.admin, "CREATE DATABASE chainkeys"))
    dsn = cluster.admin.rsplit("/", 1)[0] + "/chainkeys"
    env = {
        "CHAINKEYS_DATABASE_URL": dsn,
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        **TIMEOUTS,
    }
    proc = start(env, tmp_path / "server.log")
    try:
        token = first_token(proc)
        with Load(proc, token) as load:
            wait_for(lambda: load.done() >= 30, "writes before the restart")
            cluster.ctl("-m", "fast", "stop")  # every backend is told 57P01, then it is gone
            wait_for(lambda: ready(proc) == 503, "/readyz saying the database is down")
            count = load.unavailable
            wait_for(lambda: load.unavailable > count, "a client told 503 meanwhile")
            cluster.start()
            wait_for(lambda: ready(proc) == 200, "/readyz back after the restart")
            after = load.done()
            wait_for(lambda: load.done() >= after + 30, "writes after the restart")
        assert proc.popen.poll() is None
        check_counts(load, dsn)
        assert load.unavailable > 0
    finally:
        log = proc.stop()
    assert "Traceback" not in log


# The store's own recovery, statement by statement, on the shared server.
_meta = MetaData()
_items = Table("fault_items", _meta, Column("name", String(40), primary_key=True))
_serials = Table(
    "fault_serials",
    _meta,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(40), nullable=False),
)
_PID = select(func.pg_backend_pid())


def _in_store(pg_url: str, work: Callable[[PostgresBackend], Any]) -> Any:
    async def main() -> Any:
        await _admin(
            pg_url, "CREATE TABLE IF NOT EXISTS fault_items (name varchar(40) PRIMARY KEY)"
        )
        await _admin(
            pg_url,
            "CREATE TABLE IF NOT EXISTS fault_serials "
            "(id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
            "name varchar(40) NOT NULL)",
        )
        db = PostgresBackend(pg_url, Settings(database_url=pg_url, master_key=TEST_MASTER_KEY))
        try:
            return await work(db)
        finally:
            await db.close()

    return asyncio.run(main())


async def _kill(pg_url: str, pid: int) -> None:
    """Terminate the backend, and wait until it is gone (its next statement cannot
    slip in before)."""
    assert await _admin(pg_url, "SELECT pg_terminate_backend($1)", pid)
    deadline = time.monotonic() + 30
    while await _admin(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
        assert time.monotonic() < deadline, "the backend outlived pg_terminate_backend"
        await asyncio.sleep(0.01)


def _backend_pid(tx: Any) -> int:
    """The server process of the session's connection (asked of the driver: a statement
    would be part of the transaction, and answer otherwise on a replay)."""
    return int(tx.conn.get_server_pid())


async def _names(pg_url: str, table: str) -> list[str]:
    conn = await asyncpg.connect(pg_url, timeout=5)
    try:
        return [str(r[0]) for r in await conn.fetch(f"SELECT name FROM {table} ORDER BY name")]
    finally:
        await conn.close()


def test_a_read_goes_on_on_a_new_connection(pg_url: str) -> None:
    async def work(db: PostgresBackend) -> None:
        async with db.read() as tx:
            pid = (await tx.execute(_PID)).scalar_one()
            await _kill(pg_url, pid)
            assert (await tx.execute(_PID)).scalar_one() != pid  # the same read, another backend

    _in_store(pg_url, work)


def test_a_transaction_killed_before_commit_is_replayed_once(pg_url: str) -> None:
    async def work(db: PostgresBackend) -> None:
        async with db.write() as tx:
            await tx.execute(insert(_items).values(name="first"))
            await _kill(pg_url, _backend_pid(tx))  # the server rolls the transaction back
            await tx.execute(insert(_items).values(name="second"))
        async with db.write() as tx:
            await tx.execute(insert(_items).values(name="third"))
            await _kill(pg_url, _backend_pid(tx))  # lost just before its COMMIT
        assert await _names(pg_url, "fault_items") == ["first", "second", "third"]  # once each

    _in_store(pg_url, work)


def test_a_replay_that_answers_otherwise_keeps_nothing(pg_url: str) -> None:
    async def work(db: PostgresBackend) -> None:
        with pytest.raises(StorageUnavailable):
            async with db.write() as tx:
                # the generated id comes back, and a replay would get the next one: what
                # the body did with the first may not hold
                await tx.execute(insert(_serials).values(name="one"))
                await _kill(pg_url, _backend_pid(tx))
                await tx.execute(insert(_serials).values(name="two"))
        assert await _names(pg_url, "fault_serials") == []

    _in_store(pg_url, work)


def test_a_transaction_with_a_failed_statement_is_not_replayed(pg_url: str) -> None:
    """PostgreSQL aborts a transaction at its first failed statement; a replay (which
    skips that statement) would not, and could commit what the server refused."""

    async def work(db: PostgresBackend) -> None:
        async with db.write() as tx:
            await tx.execute(insert(_items).values(name="taken"))
        with pytest.raises(StorageUnavailable):
            async with db.write() as tx:
                await tx.execute(insert(_items).values(name="kept?"))
                with pytest.raises(IntegrityError):
                    await tx.execute(insert(_items).values(name="taken"))
                await _kill(pg_url, _backend_pid(tx))
        assert await _names(pg_url, "fault_items") == ["taken"]

    _in_store(pg_url, work)
