"""PostgreSQL statements on asyncpg directly: no SQLAlchemy engine, greenlet or
result machinery per request.

A statement is compiled by SQLAlchemy's own asyncpg dialect (the SQL text,
`$n` placeholders and casts its engine would send) into a `Plan`: the
argument order, literal defaults, bind/result processors and how to run it.
`Prepared` statements keep their plan; others are compiled per call. asyncpg
then prepares each SQL text once per connection (its statement cache) and
runs it on a pooled connection: autocommit for reads, one transaction for
writes.

Rows read by attribute name and by index (a namedtuple per statement, like
the SQLite fast path), `rowcount` comes from the command status, and a
driver error is raised as SQLAlchemy's (an `IntegrityError` for a constraint
violation) with a message that quotes no bound value.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import sys
import time
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import BigInteger, Executable, bindparam, func, select
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    InternalError,
    OperationalError,
    ProgrammingError,
)

from chainkeys import metrics
from chainkeys.config import Settings
from chainkeys.errors import StorageUnavailable
from chainkeys.store.changes import changed_by
from chainkeys.store.postgres.plan import PgRows, Plan
from chainkeys.store.postgres.private import release_inline
from chainkeys.store.postgres.watch import CHANNEL, NOTIFY, PgChanges
from chainkeys.store.sql import Params, Prepared, is_storage_error, lock_key

_DRIVER_SUFFIX = re.compile(r"^(postgres|postgresql)\+\w+://")
# asyncpg's "invalid input for query argument $1: <the value> (expected …)"
_ARG_VALUE = re.compile(r"(query argument \$\d+): .*", re.DOTALL)


def pg_dsn(url: str) -> str:
    """postgresql+asyncpg://… (or +psycopg, or postgres://…) → postgresql://… for asyncpg."""
    url = _DRIVER_SUFFIX.sub("postgresql://", url, count=1)
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    return url


class PgDriverError(Exception):
    """An asyncpg error as `orig` of SQLAlchemy's: its kind and message, never its
    DETAIL (which quotes the row: `Key (token_hash)=(…) already exists`)."""

    def __init__(self, exc: BaseException) -> None:
        message = str(exc.args[0]) if exc.args else ""
        message = _ARG_VALUE.sub(r"\1", message.split("\n", 1)[0])
        super().__init__(f"{type(exc).__name__}: {message}")
        self.sqlstate: str | None = getattr(exc, "sqlstate", None)
        self.constraint_name: str | None = getattr(exc, "constraint_name", None)


def translate(exc: BaseException, sql: str | None) -> BaseException:
    """An asyncpg error as the SQLAlchemy error the engine raised for it."""
    if isinstance(exc, asyncpg.PostgresError):
        if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
            kind: type[DBAPIError] = IntegrityError
        elif isinstance(exc, asyncpg.SyntaxOrAccessError):
            kind = ProgrammingError
        elif isinstance(exc, asyncpg.DataError):
            kind = DataError
        elif isinstance(exc, asyncpg.InternalServerError):
            kind = InternalError
        else:  # connection errors (08…), statement timeouts, admin shutdown, …
            kind = OperationalError
        return kind(sql, None, PgDriverError(exc), hide_parameters=True)
    if isinstance(exc, asyncpg.InterfaceError):  # closed connection, operation in progress
        return InterfaceError(sql, None, PgDriverError(exc), hide_parameters=True)
    if isinstance(exc, asyncpg.InternalClientError):
        return InternalError(sql, None, PgDriverError(exc), hide_parameters=True)
    return exc


def is_sound(exc: BaseException) -> bool:
    """After this error the connection is still usable (the server reported it)."""
    return isinstance(exc, asyncpg.PostgresError) and not isinstance(
        exc, asyncpg.PostgresConnectionError
    )


_ADVISORY_LOCK = Prepared(select(func.pg_advisory_xact_lock(bindparam("k", type_=BigInteger))))


class PgTx:
    """`Tx` on one pooled asyncpg connection."""

    __slots__ = ("_left", "broken", "changed", "conn")

    def __init__(self, conn: Any, statements: int = 0) -> None:
        self.conn = conn
        self.broken = False  # the connection may be unusable: dropped, not reused
        self._left = statements or -1  # statements allowed (-1: any number)
        # a write's: the tables its statements change rows of (store/changes.py), told
        # to every replica's cache when it commits (watch.py)
        self.changed: set[str] | None = None

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> PgRows:
        if self._left == 0:
            raise RuntimeError("a one-statement write ran a second statement")
        self._left -= 1
        if isinstance(stmt, Executable):  # a rarer statement: compiled per call
            plan = Plan(stmt, sorted(params) if params else [], params or {})
        else:
            plan = plan_of(stmt)
        args = plan.args(params)
        if self.changed is not None and (table := changed_by(plan.sql)) is not None:
            if self._left >= 0:  # autocommit: no transaction to send the NOTIFY in
                raise RuntimeError("a one-statement write may only add rows")
            self.changed.add(table)
        try:
            if plan.returns_rows:
                return PgRows(plan, await self.conn.fetch(plan.sql, *args), None, args)
            return PgRows(plan, [], await self.conn.execute(plan.sql, *args), args)
        except BaseException as exc:
            if not is_sound(exc):
                self.broken = True
            error = translate(exc, plan.sql)
            if error is exc:
                raise
            if isinstance(exc, asyncpg.PostgresError):
                raise error from None  # its DETAIL may quote bound values
            raise error from exc

    async def serialize(self, scope: str) -> None:
        await self.execute(_ADVISORY_LOCK, {"k": lock_key(scope)})


class FairGate:
    """At most `size` holders at once; waiters get in strictly in arrival order.

    asyncpg's pool queues waiters on an asyncio.Queue, where a connection given
    back for the first waiter can be taken by a newcomer before that waiter
    runs; the waiter then queues again at the back. With 64 requests on 10
    connections that starved some for hundreds of ms (list p50 7 ms, p99
    280 ms). Here a freed place goes to the first waiter directly, so the pool
    behind the gate always has a connection for whoever passes it.
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def enter(self, timeout: float) -> None:
        """Take a place, waiting up to `timeout` seconds (TimeoutError after)."""
        if self._free:  # (never free while someone waits: leave() hands places over)
            self._free -= 1
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        timer = loop.call_later(timeout, _expire, fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.leave()  # handed a place just as it was cancelled: pass it on
            raise
        finally:
            timer.cancel()

    def leave(self) -> None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():  # (timed out or cancelled: skipped)
                fut.set_result(None)
                return
        self._free += 1


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError("no database connection came free in time"))


class PgPool:
    """The asyncpg pool of one PostgresBackend, made on first use in the running loop,
    behind a FairGate of the same size."""

    def __init__(self, url: str, settings: Settings, changes: PgChanges | None = None) -> None:
        self.dsn = pg_dsn(url)
        self.settings = settings
        self.changes = changes  # told of each commit that changed rows (watch.py)
        self._pool: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate = FairGate(settings.db_pool_size)

    async def pool(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        old, s = self._pool, self.settings
        if old is not None:  # made in another (finished) event loop
            with contextlib.suppress(Exception):
                old.terminate()
        timeout_s = s.db_statement_timeout_ms / 1000 or None
        pool = asyncpg.create_pool(
            self.dsn,
            min_size=0,  # nothing connects until a request needs it (nor fails at start)
            max_size=s.db_pool_size,
            max_queries=sys.maxsize,  # no graceful close mid-flight: it could stall
            max_inactive_connection_lifetime=0,  # no idle timer per release
            reset=_no_reset,  # not a RESET ALL round trip per release (see release())
            timeout=s.db_connect_timeout,
            command_timeout=timeout_s,
            server_settings={"statement_timeout": str(s.db_statement_timeout_ms)},
        )
        # With min_size=0 initialising connects nothing and never suspends, so no
        # other task can meet the pool half-made.
        await pool
        self._pool, self._loop = pool, loop
        self._gate = FairGate(s.db_pool_size)  # (the old pool's places went with it)
        metrics.DB_POOL_SIZE.set(s.db_pool_size)
        return pool

    async def acquire(self) -> Any:
        """A pooled connection; StorageUnavailable when none comes within the bounds.
        Every acquired connection is given back by `done()`."""
        try:
            pool = await self.pool()
            gate = self._gate
            # Waiting for a place is bounded by db_pool_timeout; connecting by
            # db_connect_timeout.
            await gate.enter(self.settings.db_pool_timeout)
        except Exception as exc:
            raise StorageUnavailable() from translate(exc, None)
        try:
            # Past the gate a connection is idle (or can be made): no timeout task.
            timeout = None if pool.get_idle_size() else self.settings.db_pool_timeout
            conn = await pool.acquire(timeout=timeout)
            metrics.DB_POOL_IN_USE.inc()
            return conn
        except BaseException as exc:
            gate.leave()
            if not isinstance(exc, Exception):
                raise
            raise StorageUnavailable() from translate(exc, None)

    async def done(self, conn: Any, broken: bool) -> None:
        """Give back an acquired connection: reused, or terminated when `broken`."""
        try:
            if broken:
                terminate(conn)
            else:
                await self.release(conn)
        finally:
            metrics.DB_POOL_IN_USE.dec()
            self._gate.leave()

    async def release(self, conn: Any) -> None:
        """Give back a connection that finished cleanly (no transaction left open).

        `Pool.release()` runs the holder's release in a shielded task: a task and
        two loop turns (~20 µs of CPU) per request. Here that release cannot
        suspend (no reset query, no query being cancelled: such connections are
        terminated instead), so it runs inline. tests/store/test_pg_direct.py
        checks that connections are reused.
        """
        if self._pool is None:  # closed meanwhile
            terminate(conn)
            return
        try:
            await release_inline(conn)
        except Exception:
            terminate(conn)  # a failed release has dropped it already

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self._loop is not asyncio.get_running_loop():
            pool.terminate()
            return
        try:
            await asyncio.wait_for(pool.close(), self.settings.db_pool_timeout)
        except Exception:  # a stalled connection: drop them all
            pool.terminate()

    def session(self, write: bool, statements: int = 0) -> PgSession:
        return PgSession(self, write, statements)


async def _no_reset(conn: Any) -> None:
    """Connections come back clean: a transaction always ends (or the connection is
    terminated), and chainkeys sets no session state, LISTENs or advisory locks on
    them (the start-up lock runs on the SQLAlchemy engine)."""


def terminate(conn: Any) -> None:
    """Drop a connection that may be dead or mid-statement; its holder goes back to
    the pool and connects afresh on next use. The server rolls back what was open."""
    with contextlib.suppress(Exception):
        conn.terminate()


class PgSession:
    """`PostgresBackend.read()` (autocommit) or `.write()` (one transaction)."""

    __slots__ = ("_pool", "_statements", "_tx", "_write", "_xact")

    def __init__(self, pool: PgPool, write: bool, statements: int = 0) -> None:
        self._pool = pool
        self._write = write
        self._statements = statements  # > 0: at most that many, autocommit
        self._tx: PgTx | None = None
        self._xact: Any = None

    async def __aenter__(self) -> PgTx:
        conn = await self._pool.acquire()
        tx = self._tx = PgTx(conn, self._statements)
        if self._write or self._statements:  # (a one-statement session is a write)
            tx.changed = set()
        if self._write:
            xact = conn.transaction()
            try:
                await xact.start()
            except BaseException as exc:
                await self._pool.done(conn, broken=True)
                if not isinstance(exc, Exception):
                    raise
                raise StorageUnavailable() from translate(exc, "BEGIN")
            self._xact = xact
        return tx

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: Any) -> bool:  # fmt: skip
        tx = self._tx
        if tx is None:
            raise RuntimeError("the transaction was not entered")
        conn, xact = tx.conn, self._xact
        self._tx = self._xact = None
        ended: BaseException | None = None
        if exc is not None and not isinstance(exc, Exception):
            tx.broken = True  # cancelled, perhaps mid-statement
        if not tx.broken and xact is not None:
            try:
                if exc is None:
                    started = time.perf_counter()
                    if tx.changed:  # in the transaction: told exactly when it commits
                        await conn.execute(NOTIFY, CHANNEL, ",".join(sorted(tx.changed)))
                    await xact.commit()
                    if tx.changed and self._pool.changes is not None:
                        self._pool.changes.committed(frozenset(tx.changed))
                    metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
                else:
                    await xact.rollback()
            except BaseException as end_exc:
                tx.broken = True
                ended = end_exc
        await self._pool.done(conn, tx.broken)
        if exc is not None:
            if _is_storage_error(exc):
                raise StorageUnavailable() from exc
            return False  # the body's own error (a rollback that failed too is moot)
        if ended is not None:
            if not isinstance(ended, Exception):
                raise ended
            error = translate(ended, "COMMIT")
            if isinstance(error, IntegrityError):
                raise error from None
            # The COMMIT's outcome is unknown (the row may be there): 503, not a 409.
            raise StorageUnavailable() from error
        return False


def _is_storage_error(exc: BaseException) -> bool:
    return is_storage_error(exc)


def plan_of(prepared: Prepared) -> Plan:
    """The statement's PostgreSQL plan, made once and kept on it."""
    plan: Plan | None = prepared._pg
    if plan is None:
        plan = prepared._pg = Plan(prepared.stmt, prepared.columns or None)
    return plan
