"""SQLite's read path: rows straight off the sqlite3 cursor, a transaction wrapper for
the engine's connections, and the reusable read context `SqliteBackend.read()` hands out.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol, cast

from sqlalchemy import Connection, Executable
from sqlalchemy.exc import IntegrityError, OperationalError

from chainkeys.store.changes import EVERYTHING, changed_by
from chainkeys.store.sql import (
    ListRows,
    Params,
    Prepared,
    Rows,
    RowSigner,
    Tx,
    is_storage_error,
    only_row,
    row_class,
    storage_errors,
)
from chainkeys.store.sqlite.full import unavailable

_STEPS = "chainkeys_steps"  # the savepoint around a Prepared's sqlite_steps


class Connections(Protocol):
    """What the read context needs of the backend (store/sqlite/backend.py, which builds
    it): its reader connection, and the way to open one."""

    signer: RowSigner | None

    @property
    def reader(self) -> Connection | None: ...

    def connection(self, role: str) -> Connection: ...


class FastRows:
    """The `Rows` subset over a sqlite3 cursor."""

    __slots__ = ("_cursor", "_prepared")

    def __init__(self, cursor: sqlite3.Cursor, prepared: Prepared) -> None:
        self._cursor = cursor
        self._prepared = prepared

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def first(self) -> Any:
        cursor = self._cursor
        row = cursor.fetchone()
        cursor.close()
        if row is None:
            return None
        return (self._prepared._row or self._prepared.row_type(cursor.description))._make(row)

    def all(self) -> Sequence[Any]:
        rows = self._cursor.fetchall()
        make = self._prepared.row_type(self._cursor.description)._make if rows else None
        self._cursor.close()
        return [make(r) for r in rows] if make else []

    def scalar_one(self) -> Any:
        rows = self._cursor.fetchmany(2)
        self._cursor.close()
        return only_row(rows)[0]


class SyncTx:
    __slots__ = ("_conn", "changes", "raw", "signer")

    def __init__(self, conn: Connection, signer: RowSigner | None = None) -> None:
        self._conn = conn
        self.signer = signer
        self.raw: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
        # the writer's: the tables its statements change rows of (store/changes.py)
        self.changes: set[str] | None = None

    @property
    def writing(self) -> bool:
        return self.changes is not None

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        if stmt.__class__ is not Prepared:  # a rarer statement: SQLAlchemy runs it
            result = self._conn.execute(stmt, params)  # type: ignore[arg-type]
            rows = []
            if result.returns_rows:
                make = row_class(tuple(result.keys()))._make
                rows = [make(r) for r in result]
            if self.changes is not None:
                sql = getattr(result.context, "statement", None)
                changed = changed_by(sql) if isinstance(sql, str) else EVERYTHING
                if changed is not None:
                    self.changes.add(changed)
            return ListRows(rows, result.rowcount)
        stmt = cast(Prepared, stmt)  # (an exact type test: isinstance costs more here)
        if stmt.steps:
            return await self._steps(stmt.steps, params)
        sql = stmt._sql or stmt.for_sqlite(self._conn.dialect)[0]
        args = stmt.args(params)
        if self.changes is not None and (changed := changed_by(sql)) is not None:
            self.changes.add(changed)
        try:
            cursor = self.raw.execute(sql, args)
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(sql, args, exc) from None
        except sqlite3.Error as exc:
            raise OperationalError(sql, args, exc) from None
        return FastRows(cursor, stmt)

    async def execute_many(self, stmt: Prepared, params: Sequence[Params]) -> None:
        if stmt.steps:  # (several statements each: one after the other)
            for one in params:
                await self.execute(stmt, one)
            return
        sql = stmt._sql or stmt.for_sqlite(self._conn.dialect)[0]
        if self.changes is not None and (changed := changed_by(sql)) is not None:
            self.changes.add(changed)
        rows = [stmt.args(one) for one in params]
        try:
            self.raw.executemany(sql, rows)
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(sql, None, exc) from None
        except sqlite3.Error as exc:
            raise OperationalError(sql, None, exc) from None

    async def _steps(self, steps: Sequence[Prepared], params: Params) -> Rows:
        """Statements that are one write on PostgreSQL (store/joined.py), in a savepoint
        of their own: all kept, or none (a one-statement body has no other)."""
        self.raw.execute(f"SAVEPOINT {_STEPS}")
        try:
            for step in steps:
                rows = await SyncTx.execute(self, step, params)  # (not a second "statement")
        except BaseException:
            if self.raw.in_transaction:  # (SQLite may have rolled all of it back: a full disk)
                try:
                    self.raw.execute(f"ROLLBACK TO {_STEPS}")
                    self.raw.execute(f"RELEASE {_STEPS}")
                except sqlite3.Error:  # the body's undo (store/sqlite/backend.py) fails the batch
                    pass
            raise
        self.raw.execute(f"RELEASE {_STEPS}")
        return rows

    async def serialize(self, scope: str) -> None:
        """SQLite writes one transaction at a time already."""


class OneStatementTx(SyncTx):
    """A `one_statement` write's: the first statement is the whole write (no savepoint
    around it, store/sqlite/backend.py `_grouped`), so a second is refused."""

    __slots__ = ("_ran",)

    def __init__(self, conn: Connection, signer: RowSigner | None = None) -> None:
        super().__init__(conn, signer)
        self._ran = False

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        if self._ran:
            raise RuntimeError("a one-statement write ran a second statement")
        self._ran = True
        return await super().execute(stmt, params)


class SqliteRead:
    """`SqliteBackend.read()`: one reusable context over the reader connection.

    Reads run inline and hold nothing between statements, so every read can
    share it; a generator-based context manager per read costs more than the
    point lookup it wraps.
    """

    __slots__ = ("_conn", "_db", "_tx")

    def __init__(self, db: Connections) -> None:
        self._db = db
        self._conn: Connection | None = None
        self._tx: SyncTx | None = None

    def tx(self) -> SyncTx:
        tx = self._tx
        if tx is not None and self._db.reader is self._conn:  # SqliteBackend.close() unsets it
            tx.signer = self._db.signer  # (set once the barrier opened)
            return tx
        with storage_errors():
            conn = self._db.connection("r")
        self._conn, self._tx = conn, SyncTx(conn, self._db.signer)
        return self._tx

    async def __aenter__(self) -> Tx:
        return self.tx()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        if exc is not None and is_storage_error(exc):
            raise unavailable(exc) from exc
        return False
