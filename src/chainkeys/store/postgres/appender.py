"""Group commit for PostgreSQL's appends: the one-row INSERTs that are a whole write
(a signature's audit row, a refusal's), gathered per event-loop iteration and sent as
one `executemany` (one round trip, one transaction, one WAL flush) in place of one
autocommit INSERT each.

Under load a worker's loop runs many requests per iteration, and each used to bind
and send its own statement and wait for its own commit; asyncpg's per-statement
work was a quarter of a worker's Python time on a signature (bench/README.md, issue
56). Each caller still returns only once its row is committed, so a signature is
never answered before its audit row is durable.

What it keeps of a lone INSERT's behaviour: the batch is atomic (asyncpg's
executemany), so a failure fails every row of it, never a part; a row that cannot
be stored fails alone: a batch refused by the database is retried row by row, and
each caller gets its own row's answer. A batch whose connection was lost after it
was sent may have been kept, so it is never repeated: 503, as for the lone INSERT
(pool.py, PgSession).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chainkeys import metrics
from chainkeys.errors import StorageUnavailable
from chainkeys.store.changes import changed_by
from chainkeys.store.postgres.failures import is_sound, translate
from chainkeys.store.postgres.plan import Plan
from chainkeys.store.sql import is_storage_error

MAX_BATCH = 512  # rows per executemany: bounds the latency of its first


class Appender:
    """The rows waiting for the next batch, per statement, and the batches in flight."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool  # a PgPool (acquire, done, session)
        self._waiting: dict[Plan, list[tuple[Any, asyncio.Future[None]]]] = {}
        self._scheduled = False
        self._flights: set[asyncio.Task[None]] = set()

    async def append(self, plan: Plan, args: Any) -> None:
        """Add one row; returns once it is committed (its error, if it failed)."""
        if changed_by(plan.sql) is not None or not plan.is_insert:
            raise RuntimeError("only a plain INSERT is appended (what it returns is dropped)")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.setdefault(plan, []).append((args, done))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._send)  # after the requests ready in this iteration
        await asyncio.shield(done)  # a cancelled caller's row is still written

    def _send(self) -> None:
        self._scheduled = False
        waiting, self._waiting = self._waiting, {}
        for plan, rows in waiting.items():
            for start in range(0, len(rows), MAX_BATCH):
                task = asyncio.ensure_future(self._flush(plan, rows[start : start + MAX_BATCH]))
                self._flights.add(task)
                task.add_done_callback(self._flights.discard)

    async def _flush(self, plan: Plan, rows: list[tuple[Any, asyncio.Future[None]]]) -> None:
        try:
            error = await self._batch(plan, [args for args, _ in rows])
            if error is not None and len(rows) > 1 and not isinstance(error, StorageUnavailable):
                for args, done in rows:  # refused: each row alone, each its own answer
                    _settle(done, await self._batch(plan, [args]))
                return
            for _, done in rows:
                _settle(done, error)
        except Exception as exc:  # no connection came (StorageUnavailable)
            for _, done in rows:
                _settle(done, exc if isinstance(exc, StorageUnavailable) else StorageUnavailable())
        except BaseException:  # cancelled (the loop is closing): nobody waits in vain
            for _, done in rows:
                _settle(done, StorageUnavailable())
            raise

    async def _batch(self, plan: Plan, rows: list[Any]) -> BaseException | None:
        """One executemany on a pooled connection: None once committed, else the error
        the callers get (StorageUnavailable when the database is out of reach or the
        outcome unknown; a refusal, e.g. IntegrityError, as the lone INSERT raised it)."""
        conn = await self._pool.acquire()
        broken = False
        started = time.perf_counter()
        try:
            if len(rows) == 1:
                await conn.execute(plan.sql, *rows[0])
            else:
                await conn.executemany(plan.sql, rows)
            metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
            return None
        except Exception as exc:
            broken = not is_sound(exc)
            error = translate(exc, plan.sql)
            if error is exc or is_storage_error(error):
                unavailable = StorageUnavailable()
                unavailable.__cause__ = error
                return unavailable
            return error
        finally:
            await self._pool.done(conn, broken)

    async def close(self) -> None:
        """Wait for the batches in flight (their callers are answered)."""
        if self._flights:
            await asyncio.gather(*self._flights, return_exceptions=True)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
