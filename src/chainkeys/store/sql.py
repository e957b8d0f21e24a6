"""What both backends share: compiled statements, the transaction and copy protocols, errors.

`store/sqlite/` (the embedded engine) and `store/postgres/` (asyncpg, with
SQLAlchemy for the rare paths) both build on this module; neither imports
the other's internals through it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sqlite3
from collections import namedtuple
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Protocol

from sqlalchemy import BigInteger, Executable, Table, select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    MultipleResultsFound,
    NoResultFound,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from chainkeys.errors import StorageUnavailable

Params = Mapping[str, Any] | None


class Rows(Protocol):
    """What repositories read from a result (SQLAlchemy's, or the SQLite fast path's)."""

    @property
    def rowcount(self) -> int: ...

    def first(self) -> Any: ...

    def all(self) -> Sequence[Any]: ...

    def scalar_one(self) -> Any: ...


class Prepared:
    """A module-level statement, compiled once for SQLite's fast path and once
    for PostgreSQL's.

    `columns` names the parameters of an INSERT (which has no bind names of
    its own until it is compiled for a set of columns). `sqlite_steps` are what
    SQLite runs instead, in order and in a savepoint of their own, where it needs
    several statements for what PostgreSQL does in one (store/joined.py).
    """

    __slots__ = (
        "_defaults",
        "_get",
        "_names",
        "_pg",
        "_row",
        "_sql",
        "_sqlite",
        "columns",
        "steps",
        "stmt",
    )

    def __init__(
        self,
        stmt: Executable,
        columns: Sequence[str] = (),
        *,
        sqlite_steps: Sequence[Prepared] = (),
    ) -> None:
        self.stmt = stmt
        self.columns = list(columns)
        self.steps = tuple(sqlite_steps)
        self._sqlite = (stmt, self.columns)
        self._sql: str | None = None
        self._names: list[str] = []
        self._defaults: dict[str, Any] = {}
        self._get: Callable[[Mapping[str, Any]], Any] = _no_args
        self._row: Any = None
        self._pg: Any = None  # the PostgreSQL plan, made and kept by store/postgres/pool.py

    def for_sqlite(self, dialect: Dialect) -> tuple[str, list[str]]:
        if self._sql is None:
            stmt, columns = self._sqlite
            compiled = stmt.compile(  # type: ignore[attr-defined]
                dialect=dialect, column_keys=columns or None
            )
            self._names = names = list(compiled.positiontup or [])
            self._defaults = dict(compiled.params)  # literals bound by SQLAlchemy itself
            if len(names) > 1:
                self._get = itemgetter(*names)  # params -> a tuple, in C
            elif names:
                self._get = _one_arg(names[0])
            self._sql = str(compiled)
        return self._sql, self._names

    def args(self, params: Params) -> Sequence[Any]:
        """The positional values for `for_sqlite`'s SQL."""
        try:
            return self._get(params or _EMPTY)  # type: ignore[no-any-return]
        except KeyError:  # a parameter left to its default
            given = params or _EMPTY
            return [given[n] if n in given else self._defaults[n] for n in self._names]

    def row_type(self, description: Any) -> Any:
        """The statement's `row_class`, from a DB-API cursor description."""
        if self._row is None:
            self._row = row_class(tuple(d[0] for d in description))
        return self._row


@functools.lru_cache(maxsize=512)
def row_class(names: tuple[str, ...]) -> Any:
    """The one row type of every engine: a namedtuple over these column names (invalid
    or repeated ones renamed), read by name and by index; `_mapping` gives the columns
    by their own names, as SQLAlchemy's Row does."""
    base = namedtuple("Row", names, rename=True)  # type: ignore[misc]

    def _mapping(self: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(names, self, strict=True))

    return type("Row", (base,), {"__slots__": (), "_mapping": property(_mapping)})


class ListRows:
    """`Rows` over rows already read (a statement SQLAlchemy's engine ran), in `row_class`."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def all(self) -> Sequence[Any]:
        return self._rows

    def scalar_one(self) -> Any:
        return only_row(self._rows)[0]


def only_row(rows: Sequence[Any]) -> Any:
    """The one row of `scalar_one`, on every engine: SQLAlchemy's own exceptions when
    there is none or more than one."""
    if not rows:
        raise NoResultFound("No row was found when one was required")
    if len(rows) > 1:
        raise MultipleResultsFound("Multiple rows were found when exactly one was required")
    return rows[0]


_EMPTY: Mapping[str, Any] = {}


def _no_args(params: Mapping[str, Any]) -> tuple[()]:
    return ()


def _one_arg(name: str) -> Callable[[Mapping[str, Any]], tuple[Any]]:
    def get(params: Mapping[str, Any]) -> tuple[Any]:
        return (params[name],)

    return get


class RowSigner(Protocol):
    """What MACs a row as it is written (the barrier's gate, vault/gate.py): the store
    holds it for the transactions it hands out and never sees its key."""

    def mac(self, entry: Any, row: Mapping[str, Any]) -> str: ...

    def valid(self, entry: Any, row: Mapping[str, Any]) -> bool: ...


class Tx(Protocol):
    """One transaction (or autocommit reader); the only way repositories reach SQL.

    Where the engines differ, a repository asks for a capability, never for the
    engine's name: the engine-specific half lives here in `store/`.
    """

    # the gate, once the barrier opened it (None before: then no authenticated row is
    # written through this transaction)
    signer: RowSigner | None

    @property
    def writing(self) -> bool:
        """A write transaction's (what it reads may still roll back with it)."""
        ...

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows: ...

    async def execute_many(self, stmt: Prepared, params: Sequence[Params]) -> None:
        """`stmt`, a statement that answers no rows (an INSERT without RETURNING), once per
        set of parameters, sent together (PostgreSQL: one round trip): the rows a batch
        of sign requests adds (store/shared.py)."""
        ...

    async def serialize(self, scope: str) -> None:
        """Hold `scope` until this transaction ends: every other transaction that asks
        for the same scope, on any replica, waits (PostgreSQL: a transaction-scoped
        advisory lock; SQLite has one writer at a time already, so nothing to do)."""
        ...


def lock_key(scope: str) -> int:
    """A scope's advisory-lock key: 64 bits of its SHA-256, as a signed bigint."""
    return int.from_bytes(hashlib.sha256(scope.encode()).digest()[:8], "big", signed=True)


def is_unique_violation(exc: IntegrityError) -> bool:
    """A unique or primary-key violation, by SQLSTATE 23505 (PostgreSQL) or SQLite's
    extended result code, never by message text."""
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state is not None:
        return bool(state == "23505")
    name = getattr(orig, "sqlite_errorname", None)
    return name in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY")


async def insert_new(tx: Tx, stmt: Executable | Prepared, params: Params) -> bool:
    """Run an INSERT; False when a unique or primary key is taken already (another
    transaction got there first), any other error raised as it is. On PostgreSQL the
    transaction is aborted then: the caller ends it (raises, or retries anew)."""
    try:
        await tx.execute(stmt, params)
    except IntegrityError as exc:
        if is_unique_violation(exc):
            return False
        raise
    return True


_STORAGE_ERRORS = (
    OperationalError,
    DataError,
    DBAPIError,
    OSError,
    TimeoutError,  # asyncpg connect and command timeouts
    sqlite3.OperationalError,
    PoolTimeout,  # every pooled connection is stuck (e.g. a network stall)
)


# chainkeys' own mistakes, not the storage's: a value too long for its column, SQL the
# engine refuses. A "503, try again" would hide them (the same request fails again, and
# a fuzzer takes a 503 for a database under load); they are the 500 that is logged.
_OWN_ERRORS = (IntegrityError, DataError, ProgrammingError)


def is_storage_error(exc: BaseException) -> bool:
    """A lost connection or a timeout (a 503), not a constraint violation or a value
    the engine refuses (chainkeys' own error: a 500)."""
    return isinstance(exc, _STORAGE_ERRORS) and not isinstance(exc, _OWN_ERRORS)


@contextlib.contextmanager
def storage_errors() -> Any:
    """Translate lost connections and timeouts into a 503 (constraint errors pass)."""
    try:
        yield
    except _OWN_ERRORS:
        raise
    except _STORAGE_ERRORS as exc:
        raise StorageUnavailable() from exc


class CopySession(Protocol):
    """One transaction of `chainkeys db copy` on either engine (`Backend.copy_session`)."""

    async def execute(self, stmt: Executable, params: Any = None) -> Any: ...

    def batches(self, stmt: Executable, size: int) -> AsyncIterator[list[Any]]:
        """The statement's rows, `size` at a time (memory stays flat)."""
        ...

    async def after_insert(self, table: Table) -> None:
        """After rows were inserted with their own ids: what the engine needs so the
        next generated id follows them (PostgreSQL: advance the serial)."""
        ...


class DbNowMs(FunctionElement[int]):
    """The database's own clock, in milliseconds since the epoch: one clock for every
    replica (the 24 h cap windows are read on it, so a replica whose clock is off
    neither shortens nor lengthens anyone's window)."""

    type = BigInteger()
    inherit_cache = True
    name = "db_now_ms"


@compiles(DbNowMs, "sqlite")
def _sqlite_now(element: DbNowMs, compiler: Any, **kw: Any) -> str:
    return "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"


@compiles(DbNowMs, "postgresql")
def _pg_now(element: DbNowMs, compiler: Any, **kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"


DB_NOW_MS = Prepared(select(DbNowMs().label("now_ms")))


class CommitHorizon(FunctionElement[int]):
    """How far rows are known committed, for linking the audit chain in commit order
    (audit/chain.py): on PostgreSQL the oldest transaction still running (every
    transaction below it has ended), and `audit.horizon`, set at insert to the next
    transaction id of that moment, says from when a row and every lower id are
    visible. SQLite has one writer: NULL, everything a writer sees is committed."""

    type = BigInteger()
    inherit_cache = True
    name = "commit_horizon"


@compiles(CommitHorizon, "sqlite")
def _sqlite_horizon(element: CommitHorizon, compiler: Any, **kw: Any) -> str:
    return "NULL"


@compiles(CommitHorizon, "postgresql")
def _pg_horizon(element: CommitHorizon, compiler: Any, **kw: Any) -> str:
    return "CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS TEXT) AS BIGINT)"


class NextTransaction(FunctionElement[int]):
    """PostgreSQL's next transaction id (no row can carry a horizon past it: one that
    does was written by hand); NULL on SQLite."""

    type = BigInteger()
    inherit_cache = True
    name = "next_transaction"


@compiles(NextTransaction, "sqlite")
def _sqlite_next(element: NextTransaction, compiler: Any, **kw: Any) -> str:
    return "NULL"


@compiles(NextTransaction, "postgresql")
def _pg_next(element: NextTransaction, compiler: Any, **kw: Any) -> str:
    return "CAST(CAST(pg_snapshot_xmax(pg_current_snapshot()) AS TEXT) AS BIGINT)"


COMMIT_HORIZON = Prepared(select(CommitHorizon().label("horizon"), NextTransaction().label("next")))
# what `audit.horizon` defaults to on PostgreSQL (the migration sets it)
PG_ROW_HORIZON = "CAST(CAST(pg_snapshot_xmax(pg_current_snapshot()) AS TEXT) AS BIGINT)"
