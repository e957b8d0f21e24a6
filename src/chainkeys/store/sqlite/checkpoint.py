"""WAL checkpoints that neither stall the event loop nor hold the writers up for long.

SQLite checkpoints on its own (`wal_autocheckpoint`, 1,000 pages by default) inside the
COMMIT that takes the WAL past the threshold, copying some 4 MB back into the database
file. The writer commits on the event loop while COMMITs are quick
(store/sqlite/backend.py `_end_batch`), so that COMMIT stalled every request of the
process, and the batch waited for it: under 64 concurrent creates at
`synchronous=NORMAL`, 5 % of the COMMITs took 5-10 ms, and the creates' p99 was 28 ms
against 19 ms with no checkpoint at all (bench/README.md).

So the checkpoint is taken in two steps, once the WAL holds CHECKPOINT_PAGES:
1. PASSIVE, on a connection and in a thread of its own, while the writer goes on
   committing: it copies what the WAL held (sqlite3 lets go of the GIL meanwhile).
2. Then PASSIVE again on the writer, in the writer's thread, after a COMMIT and holding
   the write lock: only what the writer added during step 1 is left to copy, and no
   transaction begins before it ends, so the next one restarts the WAL from its start
   (a checkpoint beside a busy writer alone never catches up: the WAL only grows).
The writer's own threshold is raised to SAFETY_NET_PAGES: should these steps stop, or
in a process that reads no change counter (the WAL's size comes from its header,
store/sqlite/counter.py), its COMMITs take checkpoints over again.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Engine

from chainkeys import metrics
from chainkeys.store.sqlite.batch import checkpoint, wait_thread
from chainkeys.store.sqlite.counter import ChangeCounter
from chainkeys.store.sqlite.engine import as_sqlite

CHECKPOINT_PAGES = 1_000  # WAL pages that start a checkpoint (SQLite's own default)
SAFETY_NET_PAGES = 10_000  # the writer's own wal_autocheckpoint

log = logging.getLogger("chainkeys.store")


class Checkpoints:
    """Step 1 in the background; `finish` tells the writer that step 2 is due."""

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self._engine = engine
        self._thread: ThreadPoolExecutor | None = None
        self._conn: Any = None  # a pooled DB-API connection, opened in the thread
        self._task: asyncio.Task[None] | None = None
        self.finish = False  # step 1 ended: the writer takes step 2 after its next COMMIT
        self.taken = 0  # step 2s run (the tests read it)

    def after_commit(self, counter: ChangeCounter | None) -> None:
        """After each COMMIT of the writer: step 1 once the WAL holds CHECKPOINT_PAGES
        (its header says how many; without a counter, the safety net alone)."""
        if self.finish or self._task is not None or counter is None:
            return
        frames = counter.frames()
        if frames is None or frames < CHECKPOINT_PAGES:
            return
        self._task = asyncio.get_running_loop().create_task(self._step_one())

    async def _step_one(self) -> None:
        try:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="chainkeys-checkpoint")
            fut = asyncio.get_running_loop().run_in_executor(self._thread, self._passive)
            if await _ran(fut, "1"):  # (failed: the writer's step 2 and threshold remain)
                raise asyncio.CancelledError
            self.finish = True
        finally:
            self._task = None

    def _passive(self) -> None:
        if self._conn is None:
            self._conn = self._engine().raw_connection()
        checkpoint(as_sqlite(self._conn.driver_connection))

    async def step_two(self, thread: ThreadPoolExecutor, writer: sqlite3.Connection) -> None:
        """On the writer, in its thread, after a COMMIT, the write lock held (the
        caller's): only what the writer added during step 1 is left to copy."""
        self.finish = False
        fut = asyncio.get_running_loop().run_in_executor(thread, checkpoint, writer)
        if await _ran(fut, "2"):
            raise asyncio.CancelledError
        self.taken += fut.exception() is None

    async def settled(self) -> None:
        """Once step 1, if under way, has ended."""
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """After the last step 1 (cancelled; its thread finishes the checkpoint under way)."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def _ran(fut: asyncio.Future[None], step: str) -> bool:
    """Wait for a step's thread (through cancellation: True when cancelled); a failure
    is logged (its type, never its message) and counted, as a background task's is."""
    cancelled = await wait_thread(fut)
    error = None if fut.cancelled() else fut.exception()
    if error is not None:
        metrics.BACKGROUND_ERRORS.labels("wal-checkpoint").inc()
        log.warning("step %s of a WAL checkpoint failed (%s)", step, type(error).__name__)
    return cancelled
