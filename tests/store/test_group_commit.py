"""SQLite group commit (synchronous=FULL/EXTRA): concurrent writes share one COMMIT,
each body stays atomic on its own, and nothing waits for a lock on the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from tests.conftest import TEST_MASTER_KEY

from chainkeys.accounts.models import CreateRequest
from chainkeys.bootstrap import open_services
from chainkeys.config import Settings
from chainkeys.errors import AccountExists, StorageUnavailable
from chainkeys.store.sqlite import backend as sqlite_backend
from chainkeys.store.sqlite.backend import SqliteBackend
from chainkeys.store.sqlite.batch import MAX_BATCH

SCHEMA = (
    "CREATE TABLE parent (id INTEGER PRIMARY KEY)",
    "CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE,"
    " parent_id INTEGER REFERENCES parent(id))",
)
INSERT = text("INSERT INTO item (v) VALUES (:v)")


def make_settings(tmp_path: Path, sync: str = "FULL", busy_ms: int = 5000) -> Settings:
    return Settings(
        data_dir=tmp_path,
        master_key=TEST_MASTER_KEY,
        sqlite_synchronous=sync,
        sqlite_busy_timeout_ms=busy_ms,
    )


async def open_db(tmp_path: Path, sync: str = "FULL", busy_ms: int = 5000) -> SqliteBackend:
    settings = make_settings(tmp_path, sync, busy_ms)
    db = SqliteBackend(settings.db_url, settings)
    async with db.write() as tx:
        for ddl in SCHEMA:
            await tx.execute(text(ddl))
    return db


def stored(tmp_path: Path) -> set[str]:
    """The committed rows, read by a fresh connection after the Database is closed."""
    conn = sqlite3.connect(tmp_path / "chainkeys.db")
    try:
        return {v for (v,) in conn.execute("SELECT v FROM item")}
    finally:
        conn.close()


async def insert(db: SqliteBackend, v: str) -> None:
    async with db.write() as tx:
        await tx.execute(INSERT, {"v": v})


async def settle(*aws: Awaitable[Any]) -> list[Any]:
    return await asyncio.gather(*aws, return_exceptions=True)


@pytest.mark.parametrize("sync", ["FULL", "EXTRA"])
def test_concurrent_writes_share_commits_and_all_survive_reopening(
    tmp_path: Path, sync: str
) -> None:
    n = 2 * MAX_BATCH + 100

    async def main() -> int:
        db = await open_db(tmp_path, sync)
        before = db.commits
        try:
            results = await settle(*(insert(db, f"v{i}") for i in range(n)))
            assert results == [None] * n
            return db.commits - before
        finally:
            await db.close()

    commits = asyncio.run(main())
    assert 3 <= commits < n  # grouped, and no batch beyond MAX_BATCH bodies
    assert stored(tmp_path) == {f"v{i}" for i in range(n)}


def test_normal_groups_writes_too(tmp_path: Path) -> None:
    """At NORMAL there is no fsync to share, but a batch writes each page it
    touches to the WAL once instead of once per write."""

    async def main() -> int:
        db = await open_db(tmp_path, "NORMAL")
        before = db.commits
        try:
            await settle(*(insert(db, f"v{i}") for i in range(20)))
            return db.commits - before
        finally:
            await db.close()

    assert 1 <= asyncio.run(main()) < 20
    assert stored(tmp_path) == {f"v{i}" for i in range(20)}
    assert len(stored(tmp_path)) == 20


def test_a_failing_body_leaves_no_rows_and_spares_its_batch(tmp_path: Path) -> None:
    db: Any = None

    async def failing() -> None:
        async with db.write() as tx:
            await tx.execute(INSERT, {"v": "bad-1"})
            await tx.execute(INSERT, {"v": "bad-2"})
            raise ValueError("the request failed half-way")

    async def cancelled() -> None:
        async with db.write() as tx:
            await tx.execute(INSERT, {"v": "cancelled"})
            await asyncio.sleep(10)  # cancelled here, holding its batch open

    async def main() -> list[Any]:
        nonlocal db
        db = await open_db(tmp_path)
        before = db.commits
        try:
            victim = asyncio.ensure_future(cancelled())
            asyncio.get_running_loop().call_later(0.05, victim.cancel)
            results = await settle(
                insert(db, "a"), failing(), insert(db, "b"), victim, insert(db, "c")
            )
            assert db.commits - before < 4  # the good bodies shared a COMMIT
            return results
        finally:
            await db.close()

    ok1, err, ok2, cancel, ok3 = asyncio.run(main())
    assert (ok1, ok2, ok3) == (None, None, None)
    assert isinstance(err, ValueError)
    assert isinstance(cancel, asyncio.CancelledError)
    assert stored(tmp_path) == {"a", "b", "c"}


async def duplicate_of_a(db: SqliteBackend) -> int:
    """A body meeting "a" (inserted by an earlier body of its batch): the rows it saw
    are committed by the time its IntegrityError is raised."""
    try:
        async with db.write() as tx:
            await tx.execute(INSERT, {"v": "dup-own"})
            await tx.execute(INSERT, {"v": "a"})
    except IntegrityError:
        async with db.read() as tx:
            found = await tx.execute(text("SELECT count(*) FROM item WHERE v = 'a'"))
            return int(found.scalar_one())
    raise AssertionError("the duplicate was inserted")


def test_a_unique_violation_fails_only_its_body(tmp_path: Path) -> None:
    async def main() -> list[Any]:
        db = await open_db(tmp_path)
        try:
            return await settle(insert(db, "a"), duplicate_of_a(db), insert(db, "b"))
        finally:
            await db.close()

    assert asyncio.run(main()) == [None, 1, None]
    assert stored(tmp_path) == {"a", "b"}


def test_a_failed_commit_fails_every_body_of_its_batch(tmp_path: Path) -> None:
    """COMMIT itself fails (a deferred foreign key is checked only then): the whole
    batch rolls back, each of its callers gets 503 (the duplicate too: the row it
    met is gone), and the next batch commits."""
    db: Any = None

    async def orphan() -> None:
        async with db.write() as tx:
            await tx.execute(text("PRAGMA defer_foreign_keys=ON"))
            await tx.execute(text("INSERT INTO item (v, parent_id) VALUES ('orphan', 42)"))

    async def main() -> list[Any]:
        nonlocal db
        db = await open_db(tmp_path)
        try:
            results = await settle(insert(db, "a"), orphan(), duplicate_of_a(db), insert(db, "b"))
            await insert(db, "after")
            return results
        finally:
            await db.close()

    results = asyncio.run(main())
    assert all(isinstance(r, StorageUnavailable) for r in results), results
    assert stored(tmp_path) == {"after"}


async def beside(work: Awaitable[Any], read: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
    """Start `work`, then run `read` on the same loop while it is under way: (work's
    outcome, whether `read` finished while work was still waiting). A loop blocked by
    the waiting work could run neither `read` nor anything that frees the work."""
    task = asyncio.ensure_future(work)
    await asyncio.sleep(0.05)  # the work reaches its wait
    await read()
    overlapped = not task.done()
    try:
        outcome: Any = await task
    except Exception as exc:
        outcome = exc
    return outcome, overlapped


def hold_write_lock(tmp_path: Path) -> sqlite3.Connection:
    """Another process's writer, as far as SQLite can tell: its own connection."""
    other = sqlite3.connect(tmp_path / "chainkeys.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


async def count_rows(db: SqliteBackend) -> int:
    async with db.read() as tx:
        return int((await tx.execute(text("SELECT count(*) FROM item"))).scalar_one())


@pytest.mark.parametrize("sync", ["FULL", "NORMAL"])
def test_waiting_for_another_writer_does_not_block_the_loop(tmp_path: Path, sync: str) -> None:
    """While five writes wait for another process's lock, a read on the same loop is
    answered, and only then does the other process commit (from that same loop): the
    writes can finish only because the loop was free while they waited."""

    async def main() -> tuple[Any, bool, list[int]]:
        db = await open_db(tmp_path, sync)
        other = hold_write_lock(tmp_path)
        seen: list[int] = []

        async def read_then_release() -> None:
            seen.append(await count_rows(db))  # the writes are not in yet
            other.execute("COMMIT")

        try:
            writes = settle(*(insert(db, f"v{i}") for i in range(5)))
            outcome, overlapped = await beside(writes, read_then_release)
            return outcome, overlapped, seen
        finally:
            other.close()
            await db.close()

    outcome, overlapped, seen = asyncio.run(main())
    assert outcome == [None] * 5
    assert overlapped and seen == [0]
    assert len(stored(tmp_path)) == 5


@pytest.mark.parametrize("sync", ["FULL", "NORMAL"])
def test_another_writer_past_the_busy_timeout_is_a_503(tmp_path: Path, sync: str) -> None:
    """A write that waits past the busy timeout is a 503 (StorageUnavailable), reads go on
    meanwhile, and the writer recovers once the lock is free."""

    async def main() -> tuple[Any, bool]:
        db = await open_db(tmp_path, sync, busy_ms=300)
        other = hold_write_lock(tmp_path)
        try:
            outcome, overlapped = await beside(insert(db, "late"), lambda: count_rows(db))
            other.execute("COMMIT")
            await insert(db, "after")
            return outcome, overlapped
        finally:
            other.close()
            await db.close()

    outcome, overlapped = asyncio.run(main())
    assert isinstance(outcome, StorageUnavailable)
    assert overlapped
    assert stored(tmp_path) == {"after"}


def test_services_under_group_commit(tmp_path: Path) -> None:
    """The real repositories: concurrent token issues and imports of one key."""
    settings = Settings(data_dir=tmp_path / "data", master_key=TEST_MASTER_KEY)
    key = "c" * 64

    token = ""

    async def main() -> list[Any]:
        nonlocal token
        svc = await open_services(settings)
        try:
            _, token = await svc.tokens.create("t", "setup")
            tenant = await svc.tokens.authenticate(token)
            assert tenant is not None
            issued = [svc.tokens.create(f"tenant-{i}") for i in range(50)]
            imports = [
                svc.accounts.create(tenant, "cosmos", CreateRequest(private_key=key))
                for _ in range(5)
            ]
            results = await settle(*issued, *imports)
            assert isinstance(svc.db, SqliteBackend)
            assert svc.db.commits < 55
            return results
        finally:
            await svc.close()

    results = asyncio.run(main())
    issued, imports = results[:50], results[50:]
    assert all(isinstance(r, tuple) for r in issued), issued
    assert sum(not isinstance(r, Exception) for r in imports) == 1
    assert sum(isinstance(r, AccountExists) for r in imports) == 4

    async def reopen() -> tuple[int, int, int]:
        svc = await open_services(settings)
        try:
            tokens = await svc.tokens.list()
            tenant = await svc.tokens.authenticate(issued[0][1])
            assert tenant is not None and tenant.tenant == "tenant-0"
            owner = await svc.tokens.authenticate(token)
            assert owner is not None
            page = await svc.accounts.list(owner, "cosmos", None, None)
            return len(tokens), len({t.tenant for t in tokens}), len(page.items)
        finally:
            await svc.close()

    assert asyncio.run(reopen()) == (51, 51, 1)


def commits_seen_by_thread(db: SqliteBackend) -> list[str]:
    """The names of the threads that ran each COMMIT of `db`'s writer, as they run."""
    names: list[str] = []
    raw = db.connection("w").connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)

    def trace(sql: str) -> None:
        if sql.strip().upper() == "COMMIT":
            names.append(threading.current_thread().name)

    raw.set_trace_callback(trace)
    return names


@pytest.mark.parametrize("slow", [False, True], ids=["quick-commits", "slow-commits"])
def test_commits_run_on_the_loop_while_quick_and_in_the_writer_thread_once_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: bool
) -> None:
    """A quick COMMIT stays on the loop (no thread hop for every create of the batch);
    once one is slower than SLOW_COMMIT the next go to the writer thread, where the
    loop keeps serving. Either way every write is committed."""
    monkeypatch.setattr(sqlite_backend, "SLOW_COMMIT", 0.0 if slow else 3600.0)

    async def main() -> list[str]:
        db = await open_db(tmp_path)
        names = commits_seen_by_thread(db)
        try:
            for wave in range(4):
                results = await settle(*(insert(db, f"w{wave}-{i}") for i in range(25)))
                assert results == [None] * 25
            return names
        finally:
            await db.close()

    names = asyncio.run(main())
    assert len(names) >= 4
    loop_thread = threading.main_thread().name
    if slow:  # open_db's COMMIT (the schema) ran on the loop, was slow, and moved these
        assert all(n.startswith("chainkeys-sqlite-writer") for n in names), names
    else:
        assert set(names) == {loop_thread}
    assert stored(tmp_path) == {f"w{w}-{i}" for w in range(4) for i in range(25)}


def test_writers_queued_behind_the_writer_all_join_its_next_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the writer is busy (a COMMIT in the writer thread holds the lock),
    writes queue; when it frees up they all join the next batch: one COMMIT, not one
    per write (which, under load, cost each create tens of ms)."""
    # COMMITs on the loop: one in the writer thread would let the loop spin meanwhile
    monkeypatch.setattr(sqlite_backend, "SLOW_COMMIT", 3600.0)
    n = 200

    async def main() -> int:
        db = await open_db(tmp_path)
        try:
            async with db._write_lock:  # the writer is busy
                writes = [asyncio.ensure_future(insert(db, f"q{i}")) for i in range(n)]
                for _ in range(3):
                    await asyncio.sleep(0)  # every write is now waiting for the writer
                assert not any(w.done() for w in writes)
                before = db.commits
            assert await settle(*writes) == [None] * n
            return db.commits - before
        finally:
            await db.close()

    assert asyncio.run(main()) == 1  # one batch for all n
    assert len(stored(tmp_path)) == n


def test_writes_started_together_commit_together_on_either_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COMMIT is rung for once the loop has run every ready body, on asyncio's loop
    and on uvloop (which polls for I/O after its ready callbacks): twenty writes started
    at once are one COMMIT on both, and every one of them is stored."""
    monkeypatch.setattr(sqlite_backend, "SLOW_COMMIT", 3600.0)  # COMMITs on the loop (see above)

    async def commits_for_writes(prefix: str) -> int:
        db = await open_db(tmp_path / prefix)
        try:
            before = db.commits
            assert await settle(*(insert(db, f"{prefix}{i}") for i in range(20))) == [None] * 20
            return db.commits - before
        finally:
            await db.close()

    (tmp_path / "a").mkdir()
    (tmp_path / "u").mkdir()
    assert asyncio.run(commits_for_writes("a")) == 1
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(commits_for_writes("u")) == 1
    assert len(stored(tmp_path / "a")) == len(stored(tmp_path / "u")) == 20
