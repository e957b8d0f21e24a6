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

from chainkeys.store.sqlite.counter import BACKSTOP, HEADER, ChangeCounter


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
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('INSERT INTO t VALUES (1)'); c.commit()")  # fmt: skip
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
    """A `-shm` replaced under the mapping: the PRAGMA still sees commits, at the latest
    after BACKSTOP seconds, and the counter moves then."""
    frozen = tmp_path / "frozen-shm"
    frozen.write_bytes(Path(f"{db}-shm").read_bytes())  # a copy no writer touches
    reader = Reader(db)
    counter = ChangeCounter(reader.data_version, frozen)
    before = counter.read()
    commit_elsewhere(db)
    time.sleep(BACKSTOP * 1.5)
    assert counter.read() != before


@pytest.mark.parametrize("damage", ["copies differ", "other format", "no file"])
def test_an_unreadable_header_falls_back_to_the_pragma(db: Path, tmp_path: Path,
                                                       damage: str) -> None:  # fmt: skip
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
    reader = Reader(db)
    shm = Path(f"{db}-shm")
    reader.data_version()  # the connection now holds its shared lock on the -shm file
    held = _my_locks_on(shm)
    assert held, "SQLite holds a lock on the -shm file while a connection is open"
    counter = ChangeCounter(reader.data_version, shm)
    for _ in range(3):
        counter.read()
        commit_elsewhere(db)
    assert _my_locks_on(shm) == held
    stale = ChangeCounter(reader.data_version, shm, backstop=0)
    stale.read()
    stale._seen = (stale._mapped(time.perf_counter()), -1)  # as if the PRAGMA moved alone
    stale.read()  # gives the mapping up
    assert _my_locks_on(shm) == held
    counter.close()
    stale.close()
    reader.conn.close()
