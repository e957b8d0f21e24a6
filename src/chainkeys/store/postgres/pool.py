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
import contextlib
import logging
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import BigInteger, Executable, bindparam, func, select
from sqlalchemy.exc import (
    IntegrityError,
)

from chainkeys import metrics
from chainkeys.config import Settings
from chainkeys.errors import StorageUnavailable
from chainkeys.store.changes import changed_by
from chainkeys.store.postgres.failures import (
    LOST,
    RETRIES,
    is_closed,
    is_lost,
    is_sound,
    raise_translated,
    translate,
)
from chainkeys.store.postgres.gate import FairGate
from chainkeys.store.postgres.hosts import connect
from chainkeys.store.postgres.plan import PgRows, Plan, answer_of, run
from chainkeys.store.postgres.private import release_inline
from chainkeys.store.postgres.watch import CHANNEL, NOTIFY, PgChanges
from chainkeys.store.sql import Params, Prepared, RowSigner, is_storage_error, lock_key

log = logging.getLogger("chainkeys.store")
_DRIVER_SUFFIX = re.compile(r"^(postgres|postgresql)\+\w+://")


def pg_dsn(url: str) -> str:
    """postgresql+asyncpg://… (or +psycopg, or postgres://…) → postgresql://… for asyncpg."""
    url = _DRIVER_SUFFIX.sub("postgresql://", url, count=1)
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    return url


_ADVISORY_LOCK = Prepared(select(func.pg_advisory_xact_lock(bindparam("k", type_=BigInteger))))


class PgTx:
    """`Tx` on one pooled asyncpg connection (another one, should that one be lost:
    `PgSession.recover`)."""

    __slots__ = ("_left", "_session", "broken", "changed", "conn", "log", "signer")

    def __init__(self, conn: Any, statements: int = 0, session: PgSession | None = None) -> None:
        self.conn = conn  # None once given back after a loss no new one replaced
        self.signer: RowSigner | None = session._pool.signer if session else None
        self.broken = False  # the connection may be unusable: dropped, not reused
        self._left = statements or -1  # statements allowed (-1: any number)
        self._session = session
        # a write's: the tables its statements change rows of (store/changes.py), told
        # to every replica's cache when it commits (watch.py)
        self.changed: set[str] | None = None
        # a transaction's statements so far and what each answered: replayed on a new
        # connection when this one is lost before its COMMIT (PgSession.recover)
        self.log: list[tuple[Plan, Any, Any]] | None = None

    @property
    def writing(self) -> bool:
        return self.changed is not None

    @property
    def recoverable(self) -> bool:
        """Whether a lost connection may still be replaced (no statement has failed)."""
        return self._session is not None

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
        session, tries = self._session, 0
        retries = 0 if session is None else session.retries
        while True:
            if self.conn is None:  # lost, and no new one came (the body went on)
                raise StorageUnavailable()
            if tries < retries and session is not None and is_closed(self.conn):
                tries += 1  # lost before this statement was sent: safe on a new one
                await session.recover(self)
            try:
                rows = await run(self.conn, plan, args)
            except BaseException as exc:
                if (
                    session is not None
                    and tries < retries
                    and isinstance(exc, Exception)
                    and is_lost(exc, self.conn)
                    and session.may_repeat(plan, exc)
                ):
                    tries += 1
                    await session.recover(self)
                    continue
                if not is_sound(exc):
                    self.broken = True
                # A failed statement aborts a PostgreSQL transaction; a replay would
                # not: this transaction is not recovered from here on.
                self._session = None
                raise_translated(exc, plan.sql)
            if self.log is not None:
                self.log.append((plan, args, answer_of(rows)))
            return rows

    async def execute_many(self, stmt: Prepared, params: Sequence[Params]) -> None:
        """Every row in one round trip (asyncpg `executemany`): never replayed (unlogged)."""
        plan = plan_of(stmt)
        if self.conn is None:  # lost, and no new one came
            raise StorageUnavailable()
        if self.changed is not None and (table := changed_by(plan.sql)) is not None:
            self.changed.add(table)
        rows = [plan.args(one) for one in params]
        self._session = None  # (its answers are not logged)
        try:
            await self.conn.executemany(plan.sql, rows)
        except BaseException as exc:
            self.broken = self.broken or not is_sound(exc)
            raise_translated(exc, plan.sql)

    async def serialize(self, scope: str) -> None:
        await self.execute(_ADVISORY_LOCK, {"k": lock_key(scope)})


class Replayed(Exception):
    """A lost transaction's replay answered otherwise than the first run (a serial id, a
    row another transaction changed meanwhile): the body's decisions may not hold, so
    the request fails (503) rather than go on."""


class PgPool:
    """The asyncpg pool of one PostgresBackend, made on first use in the running loop,
    behind a FairGate of the same size."""

    def __init__(self, url: str, settings: Settings, changes: PgChanges | None = None) -> None:
        self.dsn = pg_dsn(url)
        self.settings = settings
        self.changes = changes  # told of each commit that changed rows (watch.py)
        self.signer: RowSigner | None = None  # given to each transaction (store/sql.py Tx)
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
            connect=connect,  # each host of a multi-host URL in turn (hosts.py)
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
        for tries in range(RETRIES + 1):
            try:
                # Past the gate a connection is idle (or can be made): no timeout task.
                timeout = None if pool.get_idle_size() else self.settings.db_pool_timeout
                conn = await pool.acquire(timeout=timeout)
                metrics.DB_POOL_IN_USE.inc()
                return conn
            except BaseException as exc:
                # A new connection killed while it was being opened: nothing was sent on it.
                if tries < RETRIES and isinstance(exc, LOST):
                    continue
                gate.leave()
                if not isinstance(exc, Exception):
                    raise
                raise StorageUnavailable() from translate(exc, None)
        raise RuntimeError("unreachable")  # (the loop returns or raises)

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
    """`PostgresBackend.read()` (autocommit) or `.write()` (one transaction).

    A connection lost under it (pg_terminate_backend, a restart of the server, a reset)
    is replaced where that is safe, as many times as the pool has connections (a kill
    or a restart leaves every idle one dead): a read's SELECT runs again; a transaction
    lost before its COMMIT was sent (the server rolled it back) is replayed statement
    by statement on the new connection, and goes on only if every statement answers
    as it did the first time (else Replayed: 503); a statement the driver refused
    before sending it runs on a new connection. Never repeated: a one-statement write
    (autocommit) that was sent, or a COMMIT whose answer was lost, since either may
    have been kept: 503, and the client's Idempotency-Key makes its retry safe
    (accounts/idempotency.py).
    """

    __slots__ = ("_pool", "_statements", "_tx", "_write", "_xact", "retries")

    def __init__(self, pool: PgPool, write: bool, statements: int = 0) -> None:
        self._pool = pool
        self._write = write
        self._statements = statements  # > 0: at most that many, autocommit
        self._tx: PgTx | None = None
        self._xact: Any = None
        # connections it may replace: a kill or a restart leaves every idle one in the
        # pool dead, and each is found so only when used
        self.retries = pool.settings.db_pool_size + 1

    async def __aenter__(self) -> PgTx:
        for tries in range(self.retries + 1):
            conn = await self._pool.acquire()
            try:
                await self._begin(conn)
            except BaseException as exc:
                await self._pool.done(conn, broken=True)
                if not isinstance(exc, Exception):
                    raise
                if tries < self.retries and is_lost(exc, conn):
                    continue  # a pooled connection that died idle: nothing was done on it
                raise StorageUnavailable() from translate(exc, "BEGIN")
            break
        tx = self._tx = PgTx(conn, self._statements, self)
        if self._write or self._statements:  # (a one-statement session is a write)
            tx.changed = set()
        if self._write:
            tx.log = []
        return tx

    async def _begin(self, conn: Any) -> None:
        """BEGIN on a write's connection (nothing on a read's)."""
        if self._write:
            xact = conn.transaction()
            await xact.start()
            self._xact = xact

    def may_repeat(self, plan: Plan, exc: Exception) -> bool:
        """Whether a statement whose connection was lost under it may run again: in a
        transaction (rolled back by the server, replayed by `recover`), a read's
        SELECT, or one the driver refused before sending it (InternalClientError, see
        is_lost); never a one-statement write that was sent, which may have been kept."""
        if self._write or isinstance(exc, asyncpg.InternalClientError):
            return True
        return not self._statements and plan.sql.lstrip()[:6].upper() == "SELECT"

    async def recover(self, tx: PgTx) -> None:
        """A new connection in place of `tx`'s lost one; a transaction begun again on it
        and its statements so far replayed (Replayed when one answers otherwise)."""
        old, tx.conn, self._xact = tx.conn, None, None
        if old is not None:
            await self._pool.done(old, broken=True)
        conn = await self._pool.acquire()  # StorageUnavailable: tx keeps no connection
        tx.conn = conn
        try:
            await self._begin(conn)
            for plan, args, answer in tx.log or ():
                if answer_of(await run(conn, plan, args)) != answer:
                    raise Replayed("a replayed statement answered otherwise")
        except BaseException as exc:
            tx.broken = True
            if isinstance(exc, Replayed | StorageUnavailable) or not isinstance(exc, Exception):
                raise
            raise StorageUnavailable() from translate(exc, "replay")
        log.warning(
            "a lost PostgreSQL connection was replaced%s",
            f" ({len(tx.log)} statements replayed)" if tx.log else "",
        )

    async def _commit(self, tx: PgTx) -> None:
        """NOTIFY (see watch.py) and COMMIT; a transaction found lost before its COMMIT
        went out is replayed on a new connection first."""
        for tries in range(self.retries + 1):
            try:
                if is_closed(tx.conn):
                    raise asyncpg.ConnectionDoesNotExistError("connection was lost")
                if tx.changed:  # in the transaction: told exactly when it commits
                    await tx.conn.execute(NOTIFY, CHANNEL, ",".join(sorted(tx.changed)))
                break
            except Exception as exc:
                if tries >= self.retries or not tx.recoverable or not is_lost(exc, tx.conn):
                    raise
                await self.recover(tx)
        await self._xact.commit()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        tx = self._tx
        if tx is None:
            raise RuntimeError("the transaction was not entered")
        self._tx = None
        ended: BaseException | None = None
        if exc is not None and not isinstance(exc, Exception):
            tx.broken = True  # cancelled, perhaps mid-statement
        if not tx.broken and tx.conn is not None and self._xact is not None:
            try:
                if exc is None:
                    started = time.perf_counter()
                    await self._commit(tx)
                    if tx.changed and self._pool.changes is not None:
                        self._pool.changes.committed(frozenset(tx.changed))
                    metrics.COMMIT_SECONDS.observe(time.perf_counter() - started)
                else:
                    await self._xact.rollback()
            except BaseException as end_exc:
                tx.broken = True
                ended = end_exc
        self._xact = None
        if tx.conn is not None:
            await self._pool.done(tx.conn, tx.broken or is_closed(tx.conn))
        if exc is not None:
            if _is_storage_error(exc) or isinstance(exc, Replayed):
                raise StorageUnavailable() from exc
            return False  # the body's own error (a rollback that failed too is moot)
        if ended is not None:
            if isinstance(ended, StorageUnavailable):
                raise ended
            if isinstance(ended, Replayed):
                raise StorageUnavailable() from ended
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
