"""WAL checkpoints out of the writer's COMMITs (store/sqlite/checkpoint.py): the WAL
stays bounded under sustained writes, every write is kept, and the COMMITs that cross
the threshold no longer carry the checkpoint (nothing of it on the event loop)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from sqlalchemy import text
from tests.conftest import TEST_MASTER_KEY

from chainkeys.config import Settings
from chainkeys.store.sqlite.backend import SqliteBackend
from chainkeys.store.sqlite.checkpoint import CHECKPOINT_PAGES

ROW = "x" * 2000  # about half a page: a batch of 50 adds some 25 pages


def test_the_wal_is_checkpointed_beside_the_writer_and_restarts(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, master_key=TEST_MASTER_KEY, sqlite_synchronous="NORMAL")
    seen: list[str] = []
    peak = 0

    async def insert(db: SqliteBackend, v: str) -> None:
        async with db.write() as tx:
            await tx.execute(text("INSERT INTO item (v) VALUES (:v)"), {"v": f"{v}{ROW}"})

    async def main() -> tuple[int, int]:
        nonlocal peak
        db = SqliteBackend(settings.db_url, settings)
        try:
            async with db.write() as tx:
                await tx.execute(text("CREATE TABLE item (id INTEGER PRIMARY KEY, v TEXT)"))
            db.change_counter()  # (a server's caches read it: the WAL's size comes with it)
            raw = db.connection("w").connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_trace_callback(seen.append)
            n = 0
            for _ in range(3 * CHECKPOINT_PAGES // 25):  # three thresholds' worth
                await asyncio.gather(*(insert(db, f"{n + i}:") for i in range(50)))
                n += 50
                frames = db._counter.frames() if db._counter else None
                assert frames is not None
                peak = max(peak, frames)
                await db._checkpoints.settled()  # step 1 ends before the next batch
            return n, db._checkpoints.taken
        finally:
            await db.close()

    written, taken = asyncio.run(main())
    assert taken >= 2  # the writer's step 2 ran after each threshold crossed
    # the WAL restarted each time: it never held much more than the threshold and a batch
    # (SQLite's own checkpoint, kept only as a safety net, would have let it reach 10,000)
    assert peak < CHECKPOINT_PAGES + 200, peak
    assert all("wal_checkpoint" not in s or "PASSIVE" in s for s in seen)
    conn = sqlite3.connect(tmp_path / "chainkeys.db")
    try:
        assert conn.execute("SELECT count(*) FROM item").fetchone()[0] == written
    finally:
        conn.close()
