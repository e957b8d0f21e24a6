"""SQLite's change counter from the WAL-index header (store/sqlite/counter.py).

A real WAL database; commits from another process (a `python -c` with the standard
sqlite3 module). The PRAGMA the counter falls back to is counted: while nothing
commits, reading the counter runs no statement.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text

from chainkeys.store.sqlite.counter import BACKSTOP, HEADER, STALE_AFTER, ChangeCounter


class Reader:
    """A reader connection and its PRAGMA data_version, counted."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.calls = 0

    def data_version(self) -> int:
        self.calls += 1
        version: int = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return version


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "t.db"
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x INTEGER)")
    yield path
    setup.close()


def commit_elsewhere(path: Path) -> None:
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
        "c.execute('INSERT INTO t VALUES (1)'); c.commit()"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def test_nothing_committed_reads_no_statement_and_a_commit_elsewhere_is_seen(db: Path) -> None:
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, Path(f"{db}-shm"), backstop=3600)
    first = counter.read()
    calls = reader.calls
    assert all(counter.read() == first for _ in range(1000))
    assert reader.calls == calls  # the mapping answered: no PRAGMA
    for _ in range(3):
        before = counter.read()
        commit_elsewhere(db)
        assert counter.read() != before  # the very next read, before any backstop
        assert counter.read() == counter.read()


def test_a_commit_on_another_connection_of_this_process_is_seen(db: Path) -> None:
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, Path(f"{db}-shm"))
    writer = sqlite3.connect(db, isolation_level=None)
    before = counter.read()
    writer.execute("INSERT INTO t VALUES (2)")
    assert counter.read() != before


def test_a_mapping_that_stopped_moving_is_caught_by_the_backstop(db: Path, tmp_path: Path) -> None:
    """A `-shm` replaced under the mapping: the PRAGMA still sees every commit, at the
    latest after BACKSTOP seconds, the counter moves each time, and after STALE_AFTER
    such commits the header never followed, the mapping is given up."""
    frozen = tmp_path / "frozen-shm"
    frozen.write_bytes(Path(f"{db}-shm").read_bytes())  # a copy no writer touches
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, frozen)
    stale = sample("stale")
    for n in range(STALE_AFTER):
        before = counter.read()
        assert counter.stale == 0, n
        commit_elsewhere(db)
        time.sleep(BACKSTOP * 1.5)  # (a lower bound: a slower machine only waits longer)
        assert counter.read() != before  # the commit is seen, through the PRAGMA
    assert counter.stale == 1
    assert sample("stale") >= stale + 1  # and counted in the process's metric
    calls = reader.calls
    counter.read()
    assert reader.calls == calls + 1  # given up: every read is the PRAGMA now


def sample(path: str) -> float:
    value = REGISTRY.get_sample_value("chainkeys_change_counter_reads_total", {"path": path})
    return value or 0.0


WRITER = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA synchronous=OFF")
print("ready", flush=True)
while True:
    c.execute("INSERT INTO t VALUES (1)")
"""


def test_commits_between_the_header_and_the_pragma_never_switch_the_fast_path_off(
    db: Path,
) -> None:
    """The real race: a writer process committing as fast as it can beside a reader
    that reads the PRAGMA on every read (backstop 0), until a commit has landed
    between a header read and its PRAGMA (counted as `raced`). The mapping must stay
    in use: once nothing commits, reads run no statement again."""
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, Path(f"{db}-shm"), backstop=0)
    # this counter's own counts: the metric is the process's, which other stores share
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 120  # a bound for a machine that never races
        while counter.raced == 0 and time.monotonic() < deadline:
            for _ in range(1000):
                counter.read()
        assert counter.raced > 0, "the race was not produced"
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()
    assert counter.stale == 0  # never taken for a stale mapping
    counter.backstop = 3600
    counter.read()
    calls = reader.calls
    assert all(counter.read() == counter.read() for _ in range(1000))
    assert reader.calls == calls  # the mapping answers again: no statement


@pytest.mark.parametrize("damage", ["copies differ", "other format", "no file"])
def test_an_unreadable_header_falls_back_to_the_pragma(
    db: Path, tmp_path: Path, damage: str
) -> None:
    shm = tmp_path / "crafted-shm"
    head = bytearray(Path(f"{db}-shm").read_bytes()[: 2 * HEADER])
    if damage == "copies differ":  # a writer between its two copies
        head[HEADER + 8] ^= 0xFF
    elif damage == "other format":
        head[0:4] = head[HEADER : HEADER + 4] = (1).to_bytes(4, sys.byteorder)
    if damage != "no file":
        shm.write_bytes(bytes(head))
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, shm)
    before = counter.read()
    calls = reader.calls
    assert counter.read() == before and reader.calls == calls + 1  # every read asks SQLite
    commit_elsewhere(db)
    assert counter.read() != before


def _my_locks_on(path: Path) -> list[str]:
    """This process's POSIX locks on `path`, as the kernel lists them (/proc/locks)."""
    inode = path.stat().st_ino
    mine = str(os.getpid())
    return sorted(
        " ".join(f[1:4] + f[5:])
        for f in (line.split() for line in Path("/proc/locks").read_text().splitlines())
        if f[1] == "POSIX" and f[4] == mine and f[5].rsplit(":", 1)[-1] == str(inode)
    )


def test_reading_never_drops_sqlites_locks_on_the_shm_file(db: Path, tmp_path: Path) -> None:
    """Closing any descriptor of a file drops all of the process's POSIX locks on it: had
    the counter closed one, another process could truncate the -shm under SQLite's
    mapping (SIGBUS). Mapping, reading, a stale mapping and a failed open keep them."""
    shm = Path(f"{db}-shm")
    frozen = shm.with_name("frozen-shm")  # copied by another process: a read here would
    subprocess.run(["cp", str(shm), str(frozen)], check=True)  # close a descriptor of it
    reader = Reader(db)
    reader.data_version()  # the connection now holds its shared lock on the -shm file
    held = _my_locks_on(shm)
    assert held, "SQLite holds a lock on the -shm file while a connection is open"
    counter = ChangeCounter(reader.data_version, shm)
    for _ in range(3):
        counter.read()
        commit_elsewhere(db)
    assert _my_locks_on(shm) == held
    stale = ChangeCounter(reader.data_version, frozen, backstop=0)
    stale.read()
    commit_elsewhere(db)
    stale.read()  # gives the (frozen) mapping up
    assert _my_locks_on(shm) == held
    counter.close()
    stale.close()
    reader.conn.close()


def test_a_closed_store_closes_the_counter_after_its_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's close: its connections first, then the counter's -shm descriptors
    (closing those first would drop SQLite's locks while connections still held them).
    Seen from outside: after close, this process holds no lock on the -shm file and no
    descriptor of it."""
    import asyncio

    from chainkeys.config import Settings
    from chainkeys.store import migrate
    from chainkeys.store.backend import open_backend

    path = tmp_path / "store.db"

    async def work() -> None:
        db = open_backend(f"sqlite:///{path}", Settings(data_dir=tmp_path))
        await migrate.upgrade(db)
        async with db.write() as tx:
            await tx.execute(text("CREATE TABLE probe (x INTEGER)"))
        assert db.has_change_counter
        db.change_counter()  # maps the -shm file
        shm = Path(f"{path}-shm")
        assert _my_locks_on(shm)  # SQLite's, while its connections are open
        order: list[str] = []
        real_close = ChangeCounter.close

        def close(self: ChangeCounter) -> None:
            locks = _my_locks_on(shm) if shm.exists() else []  # the last connection removes it
            order.append("counter" if not locks else "counter-with-locks-held")
            real_close(self)

        monkeypatch.setattr(ChangeCounter, "close", close)
        await db.close()
        assert order == ["counter"]  # no SQLite lock was held any more when it closed
        fds = [os.readlink(f) for f in Path("/proc/self/fd").iterdir() if f.is_symlink()]
        assert str(shm) not in fds

    asyncio.run(work())
