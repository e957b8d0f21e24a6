"""Engines and transactions for SQLite (embedded) and PostgreSQL.

Repositories are written once against `Tx.execute`. SQLite statements run
inline on the event loop: a point query costs microseconds, far less than the
~85 µs a thread hand-off would add, and one process never interleaves two
SQLite transactions (a lock serialises them). PostgreSQL runs on asyncpg.

Hot statements are `Prepared`: compiled once, and on SQLite executed on the
sqlite3 cursor itself, skipping ~25 µs of SQLAlchemy result machinery per
call. The SQL text is SQLAlchemy's own compilation of the same statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import sqlite3
from collections import namedtuple
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Executable, create_engine, event, text
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from chainkeys.config import Settings
from chainkeys.errors import StorageUnavailable

Params = Mapping[str, Any] | None
STARTUP_LOCK = 0x636B6579  # "ckey": the PostgreSQL advisory lock id for start-up
STARTUP_WAIT_SECONDS = 300.0
_TRY_LOCK = text("SELECT pg_try_advisory_lock(:k)")
_UNLOCK = text("SELECT pg_advisory_unlock(:k)")


class Rows(Protocol):
    """What repositories read from a result (SQLAlchemy's, or the SQLite fast path's)."""

    @property
    def rowcount(self) -> int: ...

    @property
    def inserted_primary_key(self) -> Any: ...

    def first(self) -> Any: ...

    def all(self) -> Sequence[Any]: ...

    def scalar_one(self) -> Any: ...


class Prepared:
    """A module-level statement, compiled once for SQLite's fast path.

    `columns` names the parameters of an INSERT (which has no bind names of
    its own until it is compiled for a set of columns).
    """

    __slots__ = ("_defaults", "_names", "_row", "_sql", "columns", "stmt")

    def __init__(self, stmt: Executable, columns: Sequence[str] = ()) -> None:
        self.stmt = stmt
        self.columns = list(columns)
        self._sql: str | None = None
        self._names: list[str] = []
        self._defaults: dict[str, Any] = {}
        self._row: Any = None

    def for_sqlite(self, dialect: Dialect) -> tuple[str, list[str]]:
        if self._sql is None:
            compiled = self.stmt.compile(  # type: ignore[attr-defined]
                dialect=dialect, column_keys=self.columns or None
            )
            self._names = list(compiled.positiontup or [])
            self._defaults = dict(compiled.params)  # literals bound by SQLAlchemy itself
            self._sql = str(compiled)
        return self._sql, self._names

    def args(self, params: Params) -> list[Any]:
        if not params:
            return [self._defaults[n] for n in self._names]
        return [params[n] if n in params else self._defaults[n] for n in self._names]

    def row_type(self, description: Any) -> Any:
        """A namedtuple per statement: rows read by name and by index, like SQLAlchemy's."""
        if self._row is None:
            self._row = namedtuple("Row", [d[0] for d in description], rename=True)  # type: ignore[misc]
        return self._row


class _FastRows:
    """The `Rows` subset over a sqlite3 cursor."""

    __slots__ = ("_cursor", "_prepared")

    def __init__(self, cursor: sqlite3.Cursor, prepared: Prepared) -> None:
        self._cursor = cursor
        self._prepared = prepared

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def inserted_primary_key(self) -> Any:
        return (self._cursor.lastrowid,)

    def first(self) -> Any:
        row = self._cursor.fetchone()
        self._cursor.close()
        return None if row is None else self._prepared.row_type(self._cursor.description)._make(row)

    def all(self) -> Sequence[Any]:
        rows = self._cursor.fetchall()
        make = self._prepared.row_type(self._cursor.description)._make if rows else None
        self._cursor.close()
        return [make(r) for r in rows] if make else []

    def scalar_one(self) -> Any:
        row = self._cursor.fetchone()
        self._cursor.close()
        if row is None:
            raise LookupError("no row")
        return row[0]


class Tx(Protocol):
    """One transaction (or autocommit reader); the only way repositories reach SQL."""

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows: ...


def async_url(url: str) -> str:
    """postgresql://… → postgresql+asyncpg://…; other URLs unchanged."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite")


def is_unique_violation(exc: IntegrityError) -> bool:
    text = str(exc.orig).lower()
    return "unique" in text or "duplicate key" in text


class _SyncTx:
    __slots__ = ("_conn", "raw")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.raw: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        if not isinstance(stmt, Prepared):
            return self._conn.execute(stmt, params)
        sql, _ = stmt.for_sqlite(self._conn.dialect)
        args = stmt.args(params)
        try:
            cursor = self.raw.execute(sql, args)
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(sql, args, exc) from None
        except sqlite3.Error as exc:
            raise OperationalError(sql, args, exc) from None
        return _FastRows(cursor, stmt)


class _AsyncTx:
    __slots__ = ("_conn",)

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        if isinstance(stmt, Prepared):
            stmt = stmt.stmt
        return await self._conn.execute(stmt, params)


class Database:
    """Opens transactions; maps driver failures to StorageUnavailable (503)."""

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.settings = settings
        self.is_sqlite = is_sqlite_url(url)
        self._sync_engine: Engine | None = None
        self._async_engine: AsyncEngine | None = None
        self._async_reader: AsyncEngine | None = None  # same pool, autocommit
        self._reader: Connection | None = None
        self._writer: Connection | None = None
        self._write_lock = asyncio.Lock()

    def sync_engine(self) -> Engine:
        """The synchronous SQLite engine (serving and migrations)."""
        if self._sync_engine is None:
            self._sync_engine = make_sync_engine(self.url, self.settings)
        return self._sync_engine

    def async_engine(self) -> AsyncEngine:
        if self._async_engine is None:
            s = self.settings
            self._async_engine = create_async_engine(
                async_url(self.url),
                hide_parameters=True,  # bound values (hashes, sealed blobs) stay out of errors
                pool_size=s.db_pool_size,
                max_overflow=s.db_pool_size,
                pool_timeout=s.db_pool_timeout,
                pool_pre_ping=False,  # a disconnect invalidates the whole pool anyway
                connect_args={
                    "timeout": s.db_connect_timeout,
                    "command_timeout": s.db_statement_timeout_ms / 1000 or None,
                    "server_settings": {"statement_timeout": str(s.db_statement_timeout_ms)},
                },
            )
        return self._async_engine

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None
        if self._sync_engine is not None:
            self._sync_engine.dispose()
            self._sync_engine = None
        if self._async_engine is not None:
            await self._async_engine.dispose()
            self._async_engine = self._async_reader = None

    def _sqlite_conn(self, which: str) -> Connection:
        conn = self._reader if which == "r" else self._writer
        if conn is None or conn.closed:
            conn = self.sync_engine().connect().execution_options(isolation_level="AUTOCOMMIT")
            if which == "r":
                self._reader = conn
            else:
                self._writer = conn
        return conn

    @contextlib.asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        """One process at a time through start-up (schema, key check, first token).

        Replicas started together on an empty database would otherwise race
        to create the schema and each issue a "first" token.
        """
        with storage_errors():
            if self.is_sqlite:
                path = self.url.removeprefix("sqlite:///") + ".lock"
                with open(path, "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    try:
                        yield
                    finally:
                        fcntl.flock(lock, fcntl.LOCK_UN)
                return
            async with self.async_engine().connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                # Polled: a blocking pg_advisory_lock would meet the statement timeout
                # while another replica runs a long migration.
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

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[Tx]:
        """Autocommit reads: each statement sees a consistent snapshot."""
        with storage_errors():
            if self.is_sqlite:
                yield _SyncTx(self._sqlite_conn("r"))
                return
            # No BEGIN/ROLLBACK around a read: two round trips saved per lookup.
            async with self._reader_engine().connect() as conn:
                yield _AsyncTx(conn)

    def _reader_engine(self) -> AsyncEngine:
        if self._async_reader is None:
            self._async_reader = self.async_engine().execution_options(isolation_level="AUTOCOMMIT")
        return self._async_reader

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[Tx]:
        """One atomic transaction: all of it commits or none of it does."""
        with storage_errors():
            if self.is_sqlite:
                async with self._write_lock:
                    tx = _SyncTx(self._sqlite_conn("w"))
                    raw = tx.raw
                    # IMMEDIATE takes the write lock up front, so two processes
                    # cannot deadlock upgrading read locks.
                    raw.execute("BEGIN IMMEDIATE")
                    try:
                        yield tx
                        raw.execute("COMMIT")
                    finally:
                        if raw.in_transaction:  # the body or the COMMIT failed
                            raw.execute("ROLLBACK")
                return
            async with self.async_engine().begin() as aconn:
                yield _AsyncTx(aconn)


@contextlib.contextmanager
def storage_errors() -> Any:
    """Translate lost connections and timeouts into a 503 (constraint errors pass)."""
    try:
        yield
    except IntegrityError:
        raise
    except (
        OperationalError,
        DBAPIError,
        OSError,
        TimeoutError,  # asyncpg connect and command timeouts
        sqlite3.OperationalError,
        PoolTimeout,  # every pooled connection is stuck (e.g. a network stall)
    ) as exc:
        raise StorageUnavailable() from exc


def make_sync_engine(url: str, settings: Settings) -> Engine:
    if is_sqlite_url(url):
        engine = create_engine(url, connect_args={"check_same_thread": False}, hide_parameters=True)
        sync_mode = settings.sqlite_synchronous
        busy = settings.sqlite_busy_timeout_ms

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sync_mode}")
            cur.execute(f"PRAGMA busy_timeout={int(busy)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    raise ValueError("a synchronous engine is only made for SQLite; PostgreSQL runs on asyncpg")
