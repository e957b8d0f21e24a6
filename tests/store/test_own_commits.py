"""Caches outlive this process's own commits that leave their tables alone, and nothing
else (store/changes.py, store/sqlite/counter.py `own`).

A real SQLite store through its own write path (group commit), a `StoreCache` on it, and
commits from another process (a `python -c` with the standard sqlite3 module) and from
another connection of this one. What is asserted is what a caller sees: whether a value
put in the cache is still there after each kind of commit.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from tests.store.test_group_commit import open_db

from chainkeys.store.cache import StoreCache
from chainkeys.store.changes import EVERYTHING, changed_by
from chainkeys.store.sqlite.backend import SqliteBackend
from chainkeys.store.sqlite.counter import ChangeCounter

SCHEMA = (
    "CREATE TABLE watched (id INTEGER PRIMARY KEY, v TEXT)",
    "CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT)",
)


async def store(tmp_path: Path) -> tuple[SqliteBackend, StoreCache[str, str]]:
    db = await open_db(tmp_path)
    async with db.write() as tx:
        for ddl in SCHEMA:
            await tx.execute(text(ddl))
    return db, StoreCache(db, 100, frozenset({"watched"}), "test")


def filled(cache: StoreCache[str, str]) -> StoreCache[str, str]:
    cache.put("k", "v", cache.refresh())
    assert cache.get("k") == "v"
    return cache


def kept(cache: StoreCache[str, str]) -> bool:
    cache.refresh()
    return cache.get("k") == "v"


async def write(db: SqliteBackend, *sql: str) -> None:
    async with db.write() as tx:
        for statement in sql:
            await tx.execute(text(statement))


def commit_elsewhere(path: Path, sql: str) -> None:
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()"
    )
    subprocess.run([sys.executable, "-c", code, str(path), sql], check=True)


def test_own_inserts_and_other_tables_keep_the_cache_and_own_changes_clear_it(
    tmp_path: Path,
) -> None:
    async def main() -> list[bool]:
        db, cache = await store(tmp_path)
        seen = []
        filled(cache)
        for sql in (
            "INSERT INTO watched (v) VALUES ('a')",  # adds a row: kept
            "UPDATE other SET v = 'b'",  # another table: kept
            "DELETE FROM other",
            "INSERT OR REPLACE INTO other (id, v) VALUES (1, 'c')",
        ):
            await write(db, sql)
            seen.append(kept(cache))
        for sql in (
            "UPDATE watched SET v = 'd'",  # its table changed: cleared
            "DELETE FROM watched WHERE id = 99",
            "INSERT INTO watched (id, v) VALUES (1, 'e') ON CONFLICT (id) DO UPDATE SET v = 'e'",
            "INSERT OR REPLACE INTO watched (id, v) VALUES (1, 'f')",
            "CREATE TABLE third (x)",
        ):
            filled(cache)
            await write(db, "INSERT INTO other (v) VALUES ('x')", sql)
            seen.append(kept(cache))
        await db.close()
        return seen

    assert asyncio.run(main()) == [True] * 4 + [False] * 5


def test_concurrent_own_writes_in_batches_keep_the_cache(tmp_path: Path) -> None:
    """Many writes at once (batched by group commit, several batches before the next
    read) still explain every step of the counter."""

    async def main() -> tuple[bool, bool]:
        db, cache = await store(tmp_path)
        filled(cache)
        for _ in range(5):
            await asyncio.gather(
                *(write(db, f"INSERT INTO watched (v) VALUES ('{n}')") for n in range(40))
            )
        after_many = kept(cache)
        await write(db, "UPDATE watched SET v = 'z' WHERE id = 1")
        after_update = kept(cache)
        await db.close()
        return after_many, after_update

    assert asyncio.run(main()) == (True, False)


@pytest.mark.parametrize("where", ["another process", "another connection"])
def test_a_commit_by_anyone_else_clears_the_cache_whatever_it_touched(
    tmp_path: Path, where: str
) -> None:
    """Even a plain INSERT into another table: only own commits are known to be harmless,
    and one of someone else's between two own commits breaks the chain too."""

    async def main() -> list[bool]:
        db, cache = await store(tmp_path)
        path = tmp_path / "chainkeys.db"
        other = sqlite3.connect(path, isolation_level=None)

        def elsewhere(sql: str) -> None:
            if where == "another process":
                commit_elsewhere(path, sql)
            else:
                other.execute(sql)

        seen = []
        filled(cache)
        elsewhere("INSERT INTO other (v) VALUES ('x')")
        seen.append(kept(cache))
        filled(cache)
        await write(db, "INSERT INTO other (v) VALUES ('own')")
        elsewhere("INSERT INTO other (v) VALUES ('y')")
        await write(db, "INSERT INTO other (v) VALUES ('own again')")
        seen.append(kept(cache))
        filled(cache)  # and own commits after that are known again
        await write(db, "INSERT INTO other (v) VALUES ('own, alone')")
        seen.append(kept(cache))
        other.close()
        await db.close()
        return seen

    assert asyncio.run(main()) == [False, False, True]


def test_a_commit_landing_between_an_own_commit_and_its_report_is_not_taken_for_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection commits right after this process's COMMIT, before the writer
    reads the header it reports: the writer's data_version moved, so it reports nothing,
    and the cache clears."""

    async def main() -> bool:
        db, cache = await store(tmp_path)
        filled(cache)
        other = sqlite3.connect(tmp_path / "chainkeys.db", isolation_level=None)
        report = ChangeCounter.report

        def squeezed(self: ChangeCounter, *args: Any) -> Any:
            other.execute("INSERT INTO other (v) VALUES ('between')")
            return report(self, *args)

        monkeypatch.setattr(ChangeCounter, "report", squeezed)
        await write(db, "INSERT INTO other (v) VALUES ('own')")
        monkeypatch.undo()
        other.close()
        still = kept(cache)
        await db.close()
        return still

    assert asyncio.run(main()) is False


def test_statements_are_read_for_the_rows_they_may_change() -> None:
    assert changed_by("SELECT * FROM watched") is None
    assert changed_by("INSERT INTO audit (a) VALUES (1)") is None
    assert changed_by("INSERT OR IGNORE INTO audit (a) VALUES (1)") is None
    assert changed_by('UPDATE "tokens" SET revoked_ms = 1') == "tokens"
    assert changed_by("delete from accounts where id = 1") == "accounts"
    assert changed_by("REPLACE INTO meta VALUES (1)") == "meta"
    assert (
        changed_by("INSERT INTO meta (k) VALUES (1) ON CONFLICT (k) DO UPDATE SET v = 2") == "meta"
    )
    for sql in (
        "CREATE TABLE x (a)",
        "WITH a AS (SELECT 1) DELETE FROM x",
        "PRAGMA user_version = 3",
        "VACUUM",
    ):
        assert changed_by(sql) == EVERYTHING, sql


@pytest.mark.parametrize(
    ("sql", "survives"),
    [
        ("INSERT INTO watched (v) VALUES ('a')", True),
        ("UPDATE watched SET v = 'b'", False),
    ],
)
def test_a_commit_in_the_writer_thread_read_meanwhile_is_settled_when_it_ends(
    tmp_path: Path, sql: str, survives: bool
) -> None:
    """A slow COMMIT runs in the writer's thread while the loop keeps reading: what the
    cache sees meanwhile (the new header, or one the COMMIT wrote on its way) is not
    known yet, so it reads through without clearing, and it is settled by what the
    writer reports once the COMMIT ends."""

    async def main() -> tuple[bool, int]:
        db, cache = await store(tmp_path)
        filled(cache)
        db._commit_inline = False  # as after a slow COMMIT: the next ones go to the thread
        done = asyncio.Event()
        looks = 0

        async def look() -> None:
            nonlocal looks
            while not done.is_set():
                cache.refresh()
                looks += 1
                await asyncio.sleep(0)

        async def writes() -> None:
            for _ in range(20):
                db._commit_inline = False  # (a quick COMMIT in the thread moves them back)
                await write(db, "INSERT INTO other (v) VALUES ('x')", sql)
            done.set()

        await asyncio.gather(look(), writes())
        still = kept(cache)
        await db.close()
        return still, looks

    still, looks = asyncio.run(main())
    assert looks > 20 and still is survives


def test_a_foreign_commit_before_a_commit_in_the_writer_thread_still_clears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection commits; the cache does not look until this process's next
    COMMIT is running in the writer's thread. What it then sees spans both commits: the
    report of its own cannot explain the other's, so the cache clears."""

    async def main() -> bool:
        db, cache = await store(tmp_path)
        filled(cache)
        await write(db, "INSERT INTO other (v) VALUES ('own')")  # the counter is in use
        assert kept(cache)
        other = sqlite3.connect(tmp_path / "chainkeys.db", isolation_level=None)
        other.execute("INSERT INTO other (v) VALUES ('theirs')")
        other.close()
        committing = ChangeCounter.committing

        def look_while_committing(self: ChangeCounter, before: bytes) -> None:
            committing(self, before)
            cache.refresh()  # (in flight: not known yet)

        monkeypatch.setattr(ChangeCounter, "committing", look_while_committing)
        db._commit_inline = False
        await write(db, "INSERT INTO other (v) VALUES ('own, in the thread')")
        still = kept(cache)
        await db.close()
        return still

    assert asyncio.run(main()) is False


def test_a_full_cache_makes_room_by_dropping_the_least_recently_used(tmp_path: Path) -> None:
    """The hot set stays: a cache that filled up keeps taking new values (before, a full
    cache took none until the next commit cleared it)."""

    async def main() -> list[str | None]:
        db, _ = await store(tmp_path)
        cache: StoreCache[str, str] = StoreCache(db, 2, frozenset({"watched"}), "test")
        stamp = cache.refresh()
        cache.put("a", "1", stamp)
        cache.put("b", "2", stamp)
        cache.get("a")  # used: "b" is now the least recently used
        cache.put("c", "3", stamp)
        seen = [cache.get(k) for k in ("a", "b", "c")]
        await db.close()
        return seen

    assert asyncio.run(main()) == ["1", None, "3"]
