"""SQLite, the embedded engine: reads inline on the event loop, writes by group commit.

SQLite statements run inline on the event loop: a point query costs
microseconds, far less than the ~85 µs a thread hand-off would add, and one
process never interleaves two SQLite transactions (a lock serialises them).
Writes are grouped: bodies that arrive together share one transaction and one
COMMIT (group commit). A COMMIT runs inline while COMMITs are quick and in one
writer thread when they are slow (a slow disk); a BEGIN that meets another
process's write lock waits in that thread too.

Hot statements are `Prepared`: compiled once, and executed on the sqlite3
cursor itself, skipping SQLAlchemy's execution and result machinery per call.
The SQL text is SQLAlchemy's own compilation of the same statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Executable, Table

from chainkeys.config import Settings
from chainkeys.store.sql import CopySession, RowSigner, Tx, storage_errors
from chainkeys.store.sqlite.batch import (
    MAX_BATCH,
    Batch,
    CohortLock,
    Doorbell,
    begin_waiting,
    commit,
    is_busy,
    wait_thread,
)
from chainkeys.store.sqlite.checkpoint import SAFETY_NET_PAGES, Checkpoints
from chainkeys.store.sqlite.counter import ChangeCounter, reader_counter
from chainkeys.store.sqlite.engine import as_sqlite, make_engine
from chainkeys.store.sqlite.full import sqlite_errors, unavailable
from chainkeys.store.sqlite.read import OneStatementTx, SqliteRead, SyncTx

_BODY = "chainkeys_body"  # the savepoint around each write body of a batch
SLOW_COMMIT = 0.002  # seconds: slower COMMITs move to the writer thread (see _end_batch)
T = TypeVar("T")


class SqliteBackend:
    """The `Backend` on one SQLite file (WAL); maps driver failures to StorageUnavailable
    (StorageFull when the disk is full: store/sqlite/full.py)."""

    has_change_counter = True  # see change_counter
    counter_is_immediate = True  # the WAL index moves with the commit
    signer: RowSigner | None = None  # the gate, given to each writer (store/sql.py Tx)
    watch_every: float | None = None  # the counter is read from shared memory: nothing to keep up

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.settings = settings
        self.path = Path(url.removeprefix("sqlite:///"))
        self._engine: Engine | None = None
        self._reader: Connection | None = None
        self._writer: Connection | None = None
        self._write_lock = CohortLock()
        self._commit_inline = True  # see _end_batch
        self.commits = 0  # COMMITs of write(): fewer than writes under group commit
        self._batch: Batch | None = None  # the open group-commit transaction
        self._thread: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sqlite_read = SqliteRead(self)
        self._counter: ChangeCounter | None = None  # see change_counter
        self._bell: Doorbell | None = None  # rings _batch_due once the loop has run its ready work
        self._checkpoints = Checkpoints(self.engine)  # see _end_batch

    def engine(self) -> Engine:
        """SQLAlchemy's engine over the file: the connections for serving, migrations
        and copies (each with the WAL, synchronous and busy-timeout pragmas)."""
        if self._engine is None:
            self._engine = make_engine(self.url, self.settings)
        return self._engine

    async def close(self) -> None:
        if self._batch is not None:  # writers still waiting for their commit
            async with self._write_lock:
                if self._batch is not None:
                    await self._end_batch(self._batch)
        await self._checkpoints.close()
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        if self._bell is not None:
            self._bell.close()
            self._bell = None
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._counter is not None:  # last: its -shm descriptors outlive every connection
            self._counter.close()
            self._counter = None

    def database_exists(self) -> bool:
        return self.path.exists()

    def prepare_location(self) -> None:
        """The file's directory (0700 when made here), before a schema is made there."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def run_sync(self, work: Callable[[Connection], T], *, transaction: bool) -> T:
        """`work` on a connection of its own (migrations): in one transaction, or autocommit."""
        with storage_errors():
            if transaction:
                with self.engine().begin() as conn:
                    return work(conn)
            with self.engine().connect() as conn:
                return work(conn)

    @contextlib.asynccontextmanager
    async def copy_session(self, snapshot: bool) -> AsyncIterator[CopySession]:
        """One transaction for `chainkeys db copy`: a read snapshot (a deferred BEGIN
        under WAL) or the one write transaction (BEGIN IMMEDIATE holds the write lock)."""
        with self.engine().connect() as raw:
            conn = raw.execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql("BEGIN" if snapshot else "BEGIN IMMEDIATE")
            try:
                yield _CopySession(conn)
            except BaseException:
                conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("ROLLBACK" if snapshot else "COMMIT")

    @property
    def reader(self) -> Connection | None:
        """The reader connection while it is open (`read()` reuses its transaction)."""
        return self._reader

    def connection(self, which: str) -> Connection:
        """The reader ("r") or the writer ("w") connection, opened on first use."""
        conn = self._reader if which == "r" else self._writer
        if conn is None or conn.closed:
            conn = self.engine().connect().execution_options(isolation_level="AUTOCOMMIT")
            if which == "r":
                self._reader = conn
            else:
                raw = as_sqlite(conn.connection.driver_connection)
                raw.execute("PRAGMA busy_timeout=0")  # never busy-wait on the loop; see _begin
                raw.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")  # see _end_batch
                self._writer = conn
        return conn

    @contextlib.asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        """One process at a time through start-up (schema, key check, first token): an
        flock on a file beside the database. Replicas started together on an empty
        store would otherwise race to create the schema and each issue a "first" token.
        """
        with storage_errors(), open(str(self.path) + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        """Autocommit reads: each statement sees a consistent snapshot."""
        return self._sqlite_read

    def change_counter(self) -> int:
        """A number that changes whenever another connection or process has committed,
        where the engine has one cheap enough to read per request (`has_change_counter`).

        The WAL-index header's commit counter, read from shared memory, with
        `PRAGMA data_version` on the reader behind it (`store/sqlite/counter.py`; this
        process's own writer counts as another connection).
        """
        counter = self._counter
        if counter is None:
            counter = self._counter = reader_counter(lambda: self._sqlite_read.tx().raw)
        return counter.read()

    async def watch(self) -> None:
        """Nothing (`watch_every` is None)."""

    def changes(self, since: int, now: int) -> frozenset[str] | None:
        """The tables whose rows changed between two `change_counter` values, where every
        commit between them was this process's own (None otherwise: then anything may
        have changed; PENDING: not known yet). See store/sqlite/counter.py."""
        return None if self._counter is None else self._counter.changes(since, now)

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]:
        """One atomic transaction: all of it commits or none of it does.

        Every write joins a group-commit batch (`_grouped`); a `one_statement` write
        runs without a savepoint (its statement is atomic on its own).
        """
        return self._sqlite_write(one_statement)

    @contextlib.asynccontextmanager
    async def _sqlite_write(self, one_statement: bool) -> AsyncIterator[Tx]:
        with sqlite_errors():  # a full disk is StorageFull (store/sqlite/full.py)
            async with self._grouped(one_statement) as tx:
                yield tx

    @contextlib.asynccontextmanager
    async def _grouped(self, one_statement: bool = False) -> AsyncIterator[Tx]:
        """Group commit: this body joins the open transaction (a batch) in a SAVEPOINT,
        and returns once the batch's COMMIT (scheduled for the next loop
        iteration, see _end_batch) has finished.

        One fsync then serves every write of the batch. A body that raises undoes
        only its own savepoint. A body sees the rows of earlier bodies of its
        batch before they commit, so a failing body also waits for the COMMIT
        (a 409 or an idempotency replay must find the row it met committed),
        and gets 503 instead of its own error when that COMMIT fails.

        A `one_statement` body has no savepoint (SAVEPOINT and RELEASE would be two
        statements of its three): SQLite backs out a failing statement whole and
        keeps the transaction, so there is nothing of it to undo; a statement that
        succeeded is the whole write, kept whatever the body does next, as on
        PostgreSQL where it commits on its own. A second statement is refused.
        """
        loop = asyncio.get_running_loop()
        failed: Exception | None = None
        async with self._write_lock:
            tx = (OneStatementTx if one_statement else SyncTx)(self.connection("w"), self.signer)
            raw = tx.raw
            batch = self._batch
            if batch is not None and batch.bodies >= MAX_BATCH:
                await self._end_batch(batch)  # full: commit it now, start the next
                batch = None
            if batch is None:
                if raw.in_transaction:  # left by a failed batch whose ROLLBACK failed too
                    raw.execute("ROLLBACK")
                await self._begin(raw)
                batch = self._batch = Batch()
                if self._counter is not None:  # (none until a cache asks: nothing to tell)
                    batch.began = self._counter.begin(raw)
            tx.changes = batch.changed
            batch.bodies += 1
            try:
                if not one_statement:
                    self._savepoint(raw, batch)
                try:
                    yield tx
                    if not one_statement:
                        raw.execute(f"RELEASE {_BODY}")
                except Exception as exc:
                    self._undo_body(raw, batch, one_statement)
                    failed = exc
                except BaseException:  # cancelled: no waiting
                    self._undo_body(raw, batch, one_statement)
                    raise
            finally:
                if not batch.scheduled:  # the first body to finish schedules the COMMIT
                    batch.scheduled = True
                    self._doorbell(loop).ring()
                committed = batch.waiter(loop)
        if committed is not None:
            await committed  # its own future: a cancelled caller leaves the batch intact
        if batch.error is not None:
            raise unavailable(batch.error) from batch.error
        if failed is not None:
            raise failed

    def _savepoint(self, raw: sqlite3.Connection, batch: Batch) -> None:
        try:
            raw.execute(f"SAVEPOINT {_BODY}")
        except sqlite3.Error as exc:
            if not raw.in_transaction:
                self._fail_batch(batch, exc)
            raise

    def _undo_body(self, raw: sqlite3.Connection, batch: Batch, one_statement: bool) -> None:
        """Roll back one body (a one-statement body has nothing to undo); if SQLite
        already rolled back the whole transaction (some I/O and disk-full errors do),
        the batch fails."""
        if raw.in_transaction and one_statement:
            return
        if raw.in_transaction:
            try:
                raw.execute(f"ROLLBACK TO {_BODY}")
                raw.execute(f"RELEASE {_BODY}")
                return
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    raw.execute("ROLLBACK")
                self._fail_batch(batch, exc)
                return
        self._fail_batch(batch, sqlite3.OperationalError("transaction rolled back by SQLite"))

    def _fail_batch(self, batch: Batch, exc: BaseException) -> None:
        if self._batch is batch:
            self._batch = None
        if not batch.finished:
            batch.finish(exc)

    def _doorbell(self, loop: asyncio.AbstractEventLoop) -> Doorbell:
        bell = self._bell
        if bell is None or bell.loop is not loop:
            if bell is not None:
                bell.close()
            bell = self._bell = Doorbell(loop, self._batch_due)
        return bell

    def _batch_due(self) -> None:
        """The loop has run every body that was ready: COMMIT the open batch now if
        that can be done inline, else through the lock (behind a busy writer)."""
        batch = self._batch
        if batch is None:
            return
        if self._commit_inline and not self._write_lock.locked() and not self._checkpoints.finish:
            try:
                self._commit_now(batch)
            except Exception as exc:  # (a callback's error would only be logged: fail the batch)
                self._fail_batch(batch, exc)
            return
        task = asyncio.get_running_loop().create_task(self._commit_later(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _commit_later(self, batch: Batch) -> None:
        # Queued on the lock behind the bodies already waiting: they join the batch first.
        async with self._write_lock:
            await self._end_batch(batch)

    async def _end_batch(self, batch: Batch) -> None:
        """COMMIT the batch (the caller holds the lock).

        Inline while COMMITs are quick: a writer-thread hop costs every create of
        the batch a loop iteration or more (measured under load: the loop saw a
        0.8 ms COMMIT finish 7-21 ms later), more than the loop loses waiting for
        a quick fsync. A COMMIT slower than SLOW_COMMIT (a slow disk, a
        checkpoint) moves the next ones to the writer thread, where the loop
        keeps serving reads meanwhile; a quick one there moves them back.

        Then, when due, the second step of a WAL checkpoint (store/sqlite/checkpoint.py):
        in the writer thread, after the batch's callers were answered, the lock held.
        """
        if self._batch is not batch:
            return  # already committed (it was full) or failed
        if self._commit_inline:
            self._commit_now(batch)
        else:
            await self._commit_in_thread(batch)
        if self._checkpoints.finish:
            await self._checkpoints.step_two(self._writer_thread(), self._writer_raw())

    async def _commit_in_thread(self, batch: Batch) -> None:
        self._batch = None
        raw = self._writer_raw()
        if self._counter is not None and batch.began is not None:
            self._counter.committing(batch.began[0])
        fut = asyncio.get_running_loop().run_in_executor(self._writer_thread(), commit, raw)
        cancelled = await wait_thread(fut)
        error = fut.exception()
        self._commit_inline = error is None and fut.result() < SLOW_COMMIT
        self._committed(batch, raw, error)
        if cancelled:
            raise asyncio.CancelledError

    def _commit_now(self, batch: Batch) -> None:
        """COMMIT on the loop (nobody else is using the writer connection)."""
        self._batch = None
        raw = self._writer_raw()
        error: BaseException | None = None
        try:
            self._commit_inline = commit(raw) < SLOW_COMMIT
        except sqlite3.Error as exc:
            error = exc
        self._committed(batch, raw, error)

    def _committed(
        self, batch: Batch, raw: sqlite3.Connection, error: BaseException | None
    ) -> None:
        if error is None:
            self.commits += 1
            self._checkpoints.after_commit(self._counter)
        if self._counter is not None:
            reported = None
            if error is None:
                reported = self._counter.report(batch.began, raw, frozenset(batch.changed))
            self._counter.settled(reported)
        elif raw.in_transaction:  # nothing of the batch may stay half-written
            with contextlib.suppress(sqlite3.Error):
                raw.execute("ROLLBACK")
        batch.finish(error)

    def _writer_raw(self) -> sqlite3.Connection:
        return as_sqlite(self.connection("w").connection.driver_connection)

    async def _begin(self, raw: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE: inline when the write lock is free, else waiting in the
        writer thread (up to the busy timeout) rather than on the event loop.

        IMMEDIATE takes the write lock up front, so two processes cannot
        deadlock upgrading read locks.
        """
        try:
            raw.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        busy_ms = int(self.settings.sqlite_busy_timeout_ms)
        fut = asyncio.get_running_loop().run_in_executor(
            self._writer_thread(), begin_waiting, raw, busy_ms
        )
        if await wait_thread(fut):
            if fut.exception() is None:
                raw.execute("ROLLBACK")
            raise asyncio.CancelledError
        fut.result()

    def _writer_thread(self) -> ThreadPoolExecutor:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="chainkeys-sqlite-writer")
        return self._thread


class _CopySession:
    """`CopySession` on a SQLite connection inside an explicit transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def execute(self, stmt: Executable, params: Any = None) -> Any:
        return self._conn.execute(stmt, params)

    async def batches(self, stmt: Executable, size: int) -> AsyncIterator[list[Any]]:
        result = self._conn.execute(stmt)
        while rows := result.fetchmany(size):
            yield list(rows)

    async def after_insert(self, table: Table) -> None:
        """Nothing: SQLite's next rowid follows the largest one inserted."""
