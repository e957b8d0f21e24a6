"""Group commit's moving parts for SQLite: the doorbell that triggers a batch's COMMIT
in the loop iteration its bodies ran, the lock that lets queued writers in together,
the batch itself, and the COMMIT/BEGIN helpers that may run in the writer thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from chainkeys import metrics

MAX_BATCH = 512  # bodies per group commit: bounds the latency of its first


class Doorbell:
    """Calls `callback` once the event loop has run the callbacks that were ready
    when `ring` was called.

    A byte on a pipe is I/O, and uvloop (libuv) polls for I/O after running its
    ready callbacks in the same iteration: every write body that was ready runs
    first and joins the batch, and the COMMIT follows in that iteration, not the
    next (a loop iteration under load lasts as long as all the requests it runs).
    asyncio's own loop sees the byte in its next iteration, like call_soon.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self.loop = loop
        self._callback = callback
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._rung = False
        loop.add_reader(self._read, self._answer)

    def ring(self) -> None:
        if not self._rung:
            self._rung = True
            os.write(self._write, b"\0")

    def _answer(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read, 64)
        self._rung = False
        self._callback()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the loop may be closed already
            self.loop.remove_reader(self._read)
        os.close(self._read)
        os.close(self._write)


class CohortLock:
    """The writer's lock. A release wakes every waiter at once, not one.

    Write bodies run without suspending, so the waiters woken together all take
    the lock in turn within one loop iteration and join one batch. asyncio.Lock
    wakes one waiter per iteration: under load ~35 creates queued behind a
    COMMIT took ~50 ms to get in one by one.
    """

    __slots__ = ("_locked", "_released")

    def __init__(self) -> None:
        self._locked = False
        self._released: asyncio.Future[None] | None = None

    def locked(self) -> bool:
        return self._locked

    async def __aenter__(self) -> None:
        while self._locked:
            if self._released is None:
                self._released = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._released)  # a cancelled waiter leaves it to the others
        self._locked = True

    async def __aexit__(self, *exc: object) -> None:
        self._locked = False
        released, self._released = self._released, None
        if released is not None:
            released.set_result(None)


class Batch:
    """Write bodies sharing one SQLite transaction and its COMMIT."""

    __slots__ = ("_waiters", "began", "bodies", "changed", "error", "finished", "scheduled")

    def __init__(self) -> None:
        # what the writer reports of it once committed (store/sqlite/counter.py `report`):
        # the WAL-index header and the writer's data_version at its BEGIN (None: not
        # read), and the tables its statements changed rows of
        self.began: tuple[bytes, int] | None = None
        self.changed: set[str] = set()
        self.bodies = 0
        self.scheduled = False
        self.finished = False
        self.error: BaseException | None = None  # why the batch did not commit
        self._waiters: list[asyncio.Future[None]] = []

    def waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """A future of the caller's own, done when the batch is (None if it is)."""
        if self.finished:
            return None
        fut = loop.create_future()
        self._waiters.append(fut)
        return fut

    def finish(self, error: BaseException | None) -> None:
        self.finished, self.error = True, error
        for fut in self._waiters:
            if not fut.done():  # (cancelled with its caller)
                fut.set_result(None)


def commit(raw: sqlite3.Connection) -> float:
    """COMMIT; the seconds it took."""
    started = time.perf_counter()
    raw.execute("COMMIT")
    elapsed = time.perf_counter() - started
    metrics.COMMIT_SECONDS.observe(elapsed)
    return elapsed


def checkpoint(raw: sqlite3.Connection) -> None:
    """A PASSIVE WAL checkpoint: it waits for no reader and no writer (both steps of
    store/sqlite/checkpoint.py)."""
    raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def begin_waiting(raw: sqlite3.Connection, busy_ms: int) -> None:
    """BEGIN IMMEDIATE, retried every millisecond up to the busy timeout.

    Not SQLite's busy handler: it backs off to 100 ms sleeps, while a busy
    writer in another process frees the lock only for microseconds between
    its batches (two workers saw p99 of 0.9-1.9 s with it, ~0.1 s with this).
    """
    deadline = time.monotonic() + busy_ms / 1000
    while True:
        try:
            raw.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.001)


def is_busy(exc: sqlite3.OperationalError) -> bool:
    return exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY


async def wait_thread(fut: asyncio.Future[Any]) -> bool:
    """Wait for the writer thread even through cancellation: it is using the
    connection, so the write lock is not given up before it finishes.
    True when cancelled meanwhile."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.wait({fut})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
