"""SQLite's change counter read without a statement: the WAL-index header.

Why: the token cache and the account-view cache ask "has anything committed since I
last looked?" on every request. `PRAGMA data_version` answers it, but it is a
statement, and under Granian every statement releases the GIL to a server thread
that holds it for a while: ~20-25 µs of the event loop per statement, a fifth of a
get (bench/README.md). SQLite keeps the answer in shared memory: the WAL-index
header at the start of the database's `-shm` file, which every commit of every
connection and process rewrites (https://www.sqlite.org/walformat.html, "The
WAL-Index Header": `mxFrame`, the last frame, grows with each commit; `aSalt` changes
when the WAL restarts; `aFrameCksum`/`aCksum` chain over every frame). Its `iChange`
field is not enough: it did not move for a commit by another process (SQLite 3.40.1),
so the whole header is compared. Read from a read-only mapping, it is a memory access.

The header is SQLite's internal format, so it is used defensively, in this module
only (chainkeys/private_apis.py pins the SQLite version it was read against):
- the header's version field must be the WAL-index format this was written for
  (3007000), or the mapping is not used;
- the header is written twice (second copy, then first); a read whose two copies
  differ is a writer mid-update, and `PRAGMA data_version` answers instead;
- `PRAGMA data_version` is still read at least every `BACKSTOP` seconds: if it moved
  while the mapped header did not, the header is read again first (a commit may have
  landed between the two reads: then the header has moved too, and the mapping is
  sound). The PRAGMA can also move with no commit at all: SQLite resets a connection's
  page cache, and counts a new data_version, when beginning a read meets a busy
  writer and is retried (seen beside a writer committing as fast as it can: about one
  read in several hundred races). So only a header that has not moved through
  `STALE_AFTER` such PRAGMA moves in a row is a stale mapping (a `-shm` file replaced
  under it), given up for the PRAGMA; each of the others is a version more (caches
  cleared once for nothing), never a change missed. Without a `-shm` file (no WAL) every
  read is the PRAGMA, as before. `chainkeys_change_counter_reads_total{path}` counts
  the reads the mapping answered and those the PRAGMA did (and, as `raced` and `stale`,
  the re-reads after a PRAGMA that moved alone and the mappings given up).

Own commits. Each new version also says what changed, where it can (`changes`): the
store's writer reports every batch it committed alone (`own`: the header it began
from, the header it left, the tables it changed rows of, store/changes.py). A version
whose header moved along a chain of such reports alone changed those tables and
nothing else; any other move (another process's commit, a header read mid-update, a
PRAGMA that moved alone) is unexplained, and a cache asking about it clears. The writer
reports a batch only when no other connection committed from its BEGIN until it read
the header after its COMMIT (its own `PRAGMA data_version` did not move: SQLite counts
other connections' commits there, never its own), and a header reached by another
process's commit cannot be a reported one (it holds the checksum of that commit's last
frame), so a foreign commit is never taken for an own one. While a COMMIT runs in the
writer's thread (`committing` until `settled`), a move that is not explained yet is
PENDING: not known either way (a cache then reads through without clearing). The
reader may see headers of that COMMIT before it ends (a WAL restart writes one before
the frames): once the COMMIT is reported as alone, every header seen meanwhile was its
own, and the moves among them are its; not reported, they are unexplained.

A file descriptor of the `-shm` file is never closed while the store's connections
are open: closing any descriptor of a file drops every POSIX lock the process holds
on it, SQLite's included, and another process would then take itself for the first
user of the WAL-index, truncate the file, and every process with it mapped would die
of SIGBUS (seen under a key rotation). `close()` runs after the connections closed.
"""

from __future__ import annotations

import math
import mmap
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chainkeys import metrics
from chainkeys.errors import StorageUnavailable
from chainkeys.store.changes import PENDING, between

WAL_INDEX_VERSION = 3007000  # WALINDEX_MAX_VERSION in SQLite's wal.c
HEADER = 48  # sizeof(WalIndexHdr); the header is stored twice, back to back
BACKSTOP = 0.05  # seconds between two PRAGMA reads at most
STALE_AFTER = 3  # PRAGMA moves in a row with a header that did not: a stale mapping
KEPT = 256  # own commits and versions remembered (a cache further behind clears)
MAPPED = metrics.CHANGE_COUNTER_READS.labels("mapped")
PRAGMA = metrics.CHANGE_COUNTER_READS.labels("pragma")
STALE = metrics.CHANGE_COUNTER_READS.labels("stale")
RACED = metrics.CHANGE_COUNTER_READS.labels("raced")  # a commit between header and PRAGMA


class ChangeCounter:
    """A number that changes whenever any connection or process has committed.

    `pragma` reads `PRAGMA data_version` on the caller's reader connection; `shm` is
    the database's `-shm` file (None: in-memory or not WAL).
    """

    __slots__ = (
        "_changes",
        "_held",
        "_in_flight",
        "_map",
        "_own",
        "_pending",
        "_pragma",
        "_pragma_at",
        "_retry_at",
        "_seen",
        "_shm",
        "_suspect",
        "_version",
        "backstop",
        "raced",
        "stale",
    )

    def __init__(
        self, pragma: Callable[[], int], shm: Path | None, backstop: float = BACKSTOP
    ) -> None:
        self.backstop = backstop  # seconds between two PRAGMA reads at most
        self._pragma = pragma
        self._shm = shm
        self._map: mmap.mmap | None = None
        self._held: list[int | mmap.mmap] = []  # every descriptor and mapping, kept until close()
        self._retry_at = -math.inf  # when to try mapping the file again
        self._pragma_at = -math.inf  # when the PRAGMA was last read
        self._seen: tuple[bytes | None, int] | None = None  # (mapped header, PRAGMA) last read
        self._version = 0
        self._suspect = 0  # PRAGMA moves in a row that the header did not follow
        self._own: dict[bytes, tuple[bytes, frozenset[str]]] = {}  # before -> after, tables
        self._changes: dict[int, frozenset[str] | None] = {}  # version -> what it changed
        self._in_flight: bytes | None = None  # the header an own COMMIT running began from
        self._pending: dict[int, tuple[bytes | None, bytes | None]] = {}  # version -> move
        # this counter's own share of the process-wide RACED and STALE counts
        self.raced = self.stale = 0

    def read(self) -> int:
        now = time.perf_counter()
        mapped = self._mapped(now)
        seen = self._seen
        unchanged = mapped is not None and seen is not None and mapped == seen[0]
        if unchanged and now - self._pragma_at < self.backstop:
            MAPPED.inc()
            return self._version  # nothing committed: no statement run
        PRAGMA.inc()
        pragma = self._pragma()
        self._pragma_at = now
        if seen is None or (mapped, pragma) != seen:
            if seen is not None and pragma != seen[1] and mapped is not None and mapped == seen[0]:
                # The PRAGMA moved and the header did not: a commit landed between the two
                # reads (the header has moved by now: SQLite's own check of data_version
                # reads it), SQLite moved the PRAGMA alone (a read retried after a busy
                # writer), or the mapping is stale (then it does not move, time after time).
                mapped = self._mapped(now)
                still = mapped is not None and mapped == seen[0]
                self._suspect = self._suspect + 1 if still else 0
                if self._suspect >= STALE_AFTER:
                    # Stale: not used again in this process (and not closed: see the note).
                    self._map, self._shm, mapped = None, None, None
                    STALE.inc()
                    self.stale += 1
                else:
                    RACED.inc()
                    self.raced += 1
            else:
                self._suspect = 0
            self._seen = (mapped, pragma)
            self._version += 1
            before = None if seen is None else seen[0]
            explained = self._explain(before, mapped)
            if explained is None and self._in_flight is not None:
                explained = PENDING
                self._pending[self._version] = (before, mapped)
            self._changes[self._version] = explained
            if len(self._changes) > KEPT:
                del self._changes[next(iter(self._changes))]
        return self._version

    def header(self) -> bytes | None:
        """The WAL-index header now (None: not mapped, or a writer mid-update)."""
        return self._mapped(time.perf_counter())

    def frames(self) -> int | None:
        """The WAL's frames (pages) now: its `mxFrame` (None: not readable)."""
        head = self.header()
        return None if head is None else _frames_in(head)

    def begin(self, writer: sqlite3.Connection) -> tuple[bytes, int] | None:
        """Where an own write transaction begins, read holding the write lock (so the
        latest commit's header): the header, and the writer's `PRAGMA data_version`,
        which moves for other connections' commits only (None: not readable)."""
        before = self.header()
        if before is None:
            return None
        try:
            return before, writer.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:  # (only an optimisation is lost)
            return None

    def report(
        self,
        began: tuple[bytes, int] | None,
        writer: sqlite3.Connection,
        tables: frozenset[str],
    ) -> tuple[bytes, frozenset[str]] | None:
        """After the COMMIT of a transaction that `began` so: record it as own (`own`) if
        no other connection committed from its BEGIN until the header after it was read
        here; what was recorded (None: nothing)."""
        after = self.header()
        if began is None or after is None:
            return None
        try:
            if writer.execute("PRAGMA data_version").fetchone()[0] != began[1]:
                return None
        except sqlite3.Error:
            return None
        self.own(began[0], after, tables)
        return after, tables

    def own(self, before: bytes, after: bytes, tables: frozenset[str]) -> None:
        """This process's writer committed alone from `before` to `after`, changing rows
        of `tables` (see the module's note on when a writer may say so)."""
        self._own[before] = (after, tables)
        if len(self._own) > KEPT:
            del self._own[next(iter(self._own))]

    def committing(self, before: bytes) -> None:
        """An own COMMIT from header `before` is about to run in the writer's thread:
        moves not explained meanwhile are PENDING until `settled`."""
        self._in_flight = before

    def settled(self, reported: tuple[bytes, frozenset[str]] | None) -> None:
        """The COMMIT `committing` announced has finished: `reported` is what the writer
        reported of it (`own`: the header after, the tables), None if it could not.

        Reported, every header seen while it ran was its own (a header read mid-update
        too): a PENDING move is explained by the COMMIT's tables, and by the chain of
        own commits from where it began to the COMMIT's start when it began before the
        COMMIT ran; each header seen leads on to the header after. Not reported, they
        are unexplained."""
        start, self._in_flight = self._in_flight, None
        pending, self._pending = self._pending, {}
        if start is None or reported is None:
            for version in pending:
                self._changes[version] = None
            return
        after, tables = reported
        for version, (before, seen) in pending.items():
            if seen is not None and seen != after:
                self._own[seen] = (after, tables)
            if version not in self._changes:
                continue
            during = version - 1 in pending or before == start  # it began in the COMMIT
            way = frozenset() if during else self._explain(before, start)
            self._changes[version] = None if way is None else way | tables

    def changes(self, since: int, now: int) -> frozenset[str] | None:
        """The tables changed from version `since` to `now`; None where any step is not
        known to be this process's own commits; PENDING where one is not known yet."""
        return between(self._changes, since, now)

    def _explain(self, before: bytes | None, after: bytes | None) -> frozenset[str] | None:
        """The tables own commits changed on a way from header `before` to `after`
        (None: no such way)."""
        if before is None or after is None or before == after:
            return None
        tables: set[str] = set()
        here = before
        for _ in range(KEPT):
            step = self._own.get(here)
            if step is None:
                return None
            here, changed = step
            tables |= changed
            if here == after:
                return frozenset(tables)
        return None

    def _mapped(self, now: float) -> bytes | None:
        m = self._map
        if m is None:
            if self._shm is None or now < self._retry_at:
                return None
            m = self._open()
            if m is None:
                self._retry_at = now + 1.0
                return None
        head = m[: 2 * HEADER]
        if head[:HEADER] != head[HEADER:]:
            return None  # a writer is between its two copies
        if int.from_bytes(head[0:4], sys.byteorder) != WAL_INDEX_VERSION or not head[12]:
            return None  # another format, or not initialised yet
        return head[:HEADER]

    def _open(self) -> mmap.mmap | None:
        if self._shm is None or not hasattr(mmap, "PROT_READ") or len(self._held) > 16:
            return None
        try:
            fd = os.open(self._shm, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        self._held.append(fd)  # never closed before close(): see the module's note
        try:
            if os.fstat(fd).st_size < 2 * HEADER:
                return None
            mapped = mmap.mmap(fd, 2 * HEADER, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except (OSError, ValueError):
            return None
        self._held.append(mapped)  # (it holds a descriptor of its own)
        self._map = mapped
        return mapped

    def close(self) -> None:
        """Only once the store's SQLite connections are closed (their locks go with it)."""
        self._map = None
        for held in reversed(self._held):
            if isinstance(held, int):
                os.close(held)
            else:
                held.close()
        self._held.clear()


def _frames_in(header: bytes) -> int:
    """A WAL-index header's `mxFrame`: the frames in the WAL (0 after a restart)."""
    return int.from_bytes(header[16:20], sys.byteorder)


def reader_counter(reader: Callable[[], sqlite3.Connection]) -> ChangeCounter:
    """The counter of the database `reader()` (the store's reader connection) has open:
    its `PRAGMA data_version`, and the `-shm` file of its main database (none in memory)."""

    def query(sql: str) -> list[Any]:
        try:  # (no context manager: the backstop runs on a request's path)
            cursor = reader().execute(sql)
            rows = cursor.fetchall()
            cursor.close()  # the statement is finished: no read snapshot stays open
        except sqlite3.Error as exc:
            raise StorageUnavailable() from exc
        return rows

    def data_version() -> int:
        version: int = query("PRAGMA data_version")[0][0]
        return version

    main = next((str(r[2]) for r in query("PRAGMA database_list") if r[1] == "main"), "")
    return ChangeCounter(data_version, Path(main + "-shm") if main else None)
