"""PostgreSQL: requests on an asyncpg pool (`pool.py`), everything rare on SQLAlchemy.

Serving reads and writes run on asyncpg directly (statements compiled once by
SQLAlchemy's asyncpg dialect, `plan.py`). The start-up lock, migrations and
copies keep SQLAlchemy's async engine, which holds no connection between uses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Executable, Integer, Table, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from chainkeys.config import Settings
from chainkeys.errors import StorageUnavailable
from chainkeys.store.postgres.hosts import connect
from chainkeys.store.postgres.pool import PgPool, pg_dsn
from chainkeys.store.postgres.watch import WATCH_EVERY, PgChanges
from chainkeys.store.sql import CopySession, RowSigner, Tx, storage_errors

STARTUP_LOCK = 0x636B6579  # "ckey": the advisory lock id for start-up
STARTUP_WAIT_SECONDS = 300.0
_TRY_LOCK = text("SELECT pg_try_advisory_lock(:k)")
_UNLOCK = text("SELECT pg_advisory_unlock(:k)")
T = TypeVar("T")


def async_url(url: str) -> str:
    """postgresql://… → postgresql+asyncpg://…; other URLs unchanged."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


class PostgresBackend:
    """The `Backend` on a PostgreSQL database; maps driver failures to StorageUnavailable."""

    has_change_counter = True  # while a server process's watch holds its lease (watch.py)
    counter_is_immediate = False  # a commit elsewhere is heard a moment later (NOTIFY)

    @property
    def signer(self) -> RowSigner | None:
        """The gate, given to each transaction (store/sql.py Tx)."""
        return self._pool.signer

    @signer.setter
    def signer(self, signer: RowSigner | None) -> None:
        self._pool.signer = signer

    watch_every: float | None = WATCH_EVERY

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.settings = settings
        self._watch = PgChanges(pg_dsn(url), settings.db_connect_timeout)
        self._pool = PgPool(url, settings, self._watch)
        self._engine: AsyncEngine | None = None

    def engine(self) -> AsyncEngine:
        """SQLAlchemy's engine: start-up lock, migrations, copies; keeps no connection
        open between its rare uses. Its connections come from hosts.py as the pool's do
        (SQLAlchemy's URL parser takes one host: a multi-host URL would not parse)."""
        if self._engine is None:
            s, dsn = self.settings, pg_dsn(self.url)

            async def connection() -> Any:
                return await connect(
                    dsn,
                    timeout=s.db_connect_timeout,
                    command_timeout=s.db_statement_timeout_ms / 1000 or None,
                    server_settings={"statement_timeout": str(s.db_statement_timeout_ms)},
                )

            self._engine = create_async_engine(
                "postgresql+asyncpg://",
                async_creator=connection,
                hide_parameters=True,  # bound values (hashes, sealed blobs) stay out of errors
                poolclass=NullPool,
            )
        return self._engine

    async def close(self) -> None:
        await self._watch.close()
        await self._pool.close()
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        """Autocommit: no BEGIN/ROLLBACK around a read (two round trips saved a lookup)."""
        return self._pool.session(write=False)

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]:
        """One transaction. `one_statement`: the body runs a single statement, which then
        runs without BEGIN and COMMIT (atomic on its own: two round trips fewer); a
        second statement is refused."""
        return self._pool.session(write=not one_statement, statements=1 if one_statement else 0)

    def change_counter(self) -> int | None:
        """The notifications counted while the watch holds its lease (None: no lease; a
        process that runs no watch, the CLI, never has one). See watch.py."""
        return self._watch.read()

    def changes(self, since: int, now: int) -> frozenset[str] | None:
        return self._watch.changes(since, now)

    async def watch(self) -> None:
        await self._watch.watch()

    def database_exists(self) -> bool:
        return True  # a database is made by whoever deploys; connecting proves it

    def prepare_location(self) -> None:
        """Nothing: the database exists already (chainkeys never creates one)."""

    @contextlib.asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        """One replica at a time through start-up (schema, key check, first token): a
        session advisory lock, polled (a blocking pg_advisory_lock would meet the
        statement timeout while another replica runs a long migration)."""
        with storage_errors():
            async with self.engine().connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                deadline = asyncio.get_running_loop().time() + STARTUP_WAIT_SECONDS
                while not (await conn.execute(_TRY_LOCK, {"k": STARTUP_LOCK})).scalar_one():
                    if asyncio.get_running_loop().time() > deadline:
                        raise StorageUnavailable(
                            f"waited {STARTUP_WAIT_SECONDS:.0f}s for another replica's start-up"
                        )
                    await asyncio.sleep(0.1)
                try:
                    yield
                finally:
                    await conn.execute(_UNLOCK, {"k": STARTUP_LOCK})

    async def run_sync(self, work: Callable[[Connection], T], *, transaction: bool) -> T:
        """`work` on a connection of its own (migrations): in one transaction, or autocommit."""
        with storage_errors():
            if transaction:
                async with self.engine().begin() as aconn:
                    return await aconn.run_sync(work)
            async with self.engine().connect() as aconn:
                return await aconn.run_sync(work)

    @contextlib.asynccontextmanager
    async def copy_session(self, snapshot: bool) -> AsyncIterator[CopySession]:
        """One transaction for `chainkeys db copy`: a read-only REPEATABLE READ snapshot,
        or the one write transaction."""
        async with self.engine().connect() as aconn:
            if snapshot:
                await aconn.execution_options(
                    isolation_level="REPEATABLE READ", postgresql_readonly=True
                )
            async with aconn.begin():
                yield _CopySession(aconn)


class _CopySession:
    """`CopySession` on SQLAlchemy's async connection."""

    def __init__(self, aconn: AsyncConnection) -> None:
        self._aconn = aconn

    async def execute(self, stmt: Executable, params: Any = None) -> Any:
        return await self._aconn.execute(stmt, params)

    async def batches(self, stmt: Executable, size: int) -> AsyncIterator[list[Any]]:
        stream = await self._aconn.stream(stmt)  # server-side cursor: memory stays flat
        async for part in stream.partitions(size):
            yield list(part)

    async def after_insert(self, table: Table) -> None:
        """Rows came with their ids: move each serial past them for the next insert."""
        col = table.autoincrement_column
        if col is None or not isinstance(col.type, Integer):
            return
        # Identifiers come from our own table metadata, not from input.
        await self._aconn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{col.name}'), "  # noqa: S608
                f'COALESCE(MAX("{col.name}"), 0) + 1, false) FROM "{table.name}"'
            )
        )
