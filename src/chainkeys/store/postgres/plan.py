"""A statement compiled once for asyncpg, and the rows it returns.

`Plan` holds the SQL text and parameter order SQLAlchemy's own asyncpg dialect
compiles for a statement, and the result processing it would apply; `PgRows`
reads records into the one row type of every engine (`sql.row_class`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable, Insert
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.exc import (
    InvalidRequestError,
)

from chainkeys.store.postgres.private import is_required
from chainkeys.store.sql import Params, only_row, row_class

# The dialect of `create_async_engine("postgresql+asyncpg://…")`: the same SQL,
# placeholders ($1…), bind casts and type processing as the engine had.
DIALECT = PGDialect_asyncpg(dbapi=PGDialect_asyncpg.import_dbapi())  # type: ignore[no-untyped-call]
# A text() statement whose SQL starts with one of these returns rows.
_ROW_KEYWORDS = ("SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN", "FETCH")


class Plan:
    """One statement compiled for PostgreSQL, and how to run it on asyncpg.

    With `params` (a statement compiled per call) the plan is for those values:
    expanding (IN) parameters are expanded. Without, it serves every call of a
    `Prepared` statement, which must then have fixed SQL.
    """

    __slots__ = (
        "defaults",
        "is_insert",
        "names",
        "pk",
        "procs",
        "result_procs",
        "returns_rows",
        "row",
        "sql",
    )

    def __init__(
        self,
        stmt: Executable,
        column_keys: Sequence[str] | None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        compiled = stmt.compile(dialect=DIALECT, column_keys=column_keys)  # type: ignore[attr-defined]
        added: list[Any] | None = None
        if _lacks_pk_returning(stmt, compiled, column_keys):
            # Callers read inserted_primary_key: the generated id must come back.
            # (Named here, not read back: SQLAlchemy 2.1's returning() copies the
            # statement's memoised, empty, list of returned columns.)
            if not isinstance(stmt, Insert):
                raise TypeError("only an INSERT lacks a primary key to return")
            added = list(stmt.table.primary_key)
            stmt = stmt.returning(*added)
            compiled = stmt.compile(dialect=DIALECT, column_keys=column_keys)
        binds = compiled.binds
        # Python-side scalar column defaults of an INSERT (SQLAlchemy fills them in
        # at execution, not at compilation).
        prefetched: dict[str, Any] = {}
        for col in getattr(compiled, "insert_prefetch", ()) or ():
            default = col.default
            if default is None or not default.is_scalar:
                raise NotImplementedError(
                    f"column {col.key!r}: only scalar Python defaults are supported here"
                )
            prefetched[col.key] = default.arg
        expanding = compiled.post_compile_params or compiled.literal_execute_params
        if params is not None:
            state = compiled.construct_expanded_state({**prefetched, **params}, escape_names=False)
            self.sql: str = state.statement
            self.names: tuple[str, ...] = tuple(state.positiontup or ())
            self.defaults: dict[str, Any] = dict(state.parameters)
            expanded = state.processors
        else:
            if expanding:
                raise NotImplementedError(
                    "a Prepared statement has fixed SQL: no expanding (IN) or "
                    "literal-execute parameters"
                )
            self.sql = compiled.string
            self.names = tuple(compiled.positiontup or ())
            unescape = {v: k for k, v in (compiled.escaped_bind_names or {}).items()}
            # Literals bound by SQLAlchemy itself; a bindparam without a value must be given.
            self.defaults = dict(prefetched)
            for key, value in compiled.params.items():
                name = unescape.get(key, key)
                bind = binds.get(name)
                if is_required(value) or (bind is not None and bind.required):
                    continue
                self.defaults[name] = value
            expanded = {}
        procs = []
        for i, name in enumerate(self.names):
            bind = binds.get(name)
            if bind is not None:
                proc = bind.type.dialect_impl(DIALECT).bind_processor(DIALECT)
            else:
                proc = expanded.get(name)
            if proc is not None:
                procs.append((i, proc))
        self.procs: list[tuple[int, Callable[[Any], Any]]] = procs
        if added is None:
            added = list(getattr(compiled, "effective_returning", None) or ())
        returning = added
        if getattr(stmt, "is_select", False):
            self.returns_rows = True
            columns: list[Any] = list(stmt.selected_columns)  # type: ignore[attr-defined]
        elif getattr(stmt, "is_dml", False):
            self.returns_rows = bool(returning)
            columns = returning
        else:  # text(), DDL
            words = self.sql.lstrip(" \t\r\n(").split(None, 1)
            self.returns_rows = bool(words) and (
                words[0].upper() in _ROW_KEYWORDS or " RETURNING " in self.sql.upper()
            )
            columns = []
        self.result_procs = _result_processors(columns)
        self.is_insert = bool(compiled.isinsert)
        # inserted_primary_key: ("row", i) from the RETURNING row, ("arg", j) from the
        # arguments, ("none", 0) when neither has it
        self.pk: list[tuple[str, int]] = []
        if self.is_insert:
            for col in stmt.table.primary_key.columns:  # type: ignore[attr-defined]
                if col in returning:
                    self.pk.append(("row", returning.index(col)))
                elif col.key in self.names:
                    self.pk.append(("arg", self.names.index(col.key)))
                else:
                    self.pk.append(("none", 0))
        self.row: Any = None  # the row class, made from the first result's columns

    def args(self, params: Params) -> list[Any]:
        names, defaults = self.names, self.defaults
        try:
            if params:
                values = [params[n] if n in params else defaults[n] for n in names]
            else:
                values = [defaults[n] for n in names]
        except KeyError as exc:
            raise InvalidRequestError(
                f"a value is required for bind parameter {exc.args[0]!r}"
            ) from None
        for i, proc in self.procs:
            values[i] = proc(values[i])
        return values

    def row_type(self, record: Any) -> Any:
        if self.row is None:
            self.row = row_class(tuple(record.keys()))
        return self.row


def _lacks_pk_returning(stmt: Executable, compiled: Any, column_keys: Sequence[str] | None) -> bool:
    """An INSERT of one row whose generated primary key would not come back."""
    if not isinstance(stmt, Insert) or stmt.select is not None:
        return False
    auto = stmt.table.autoincrement_column  # type: ignore[attr-defined]
    if auto is None or (column_keys is not None and auto.key in column_keys):
        return False
    return auto not in list(getattr(compiled, "effective_returning", None) or ())


def _result_processors(columns: Sequence[Any]) -> list[tuple[int, Callable[[Any], Any]]]:
    procs = []
    for i, col in enumerate(columns):
        impl = col.type.dialect_impl(DIALECT)
        try:
            proc = impl.result_processor(DIALECT, None)
        except TypeError:  # wants the driver's type code (numeric): chainkeys has none
            raise NotImplementedError(
                f"result column type {col.type!r} is not supported on PostgreSQL here"
            ) from None
        if proc is not None:
            procs.append((i, proc))
    return procs


class PgRows:
    """The `Rows` subset over asyncpg's records (or a command status)."""

    __slots__ = ("_args", "_plan", "_records", "_status")

    def __init__(self, plan: Plan, records: list[Any], status: str | None, args: list[Any]) -> None:
        self._plan = plan
        self._records = records
        self._status = status
        self._args = args

    @property
    def records(self) -> list[Any]:
        return self._records

    @property
    def status(self) -> str | None:
        """The command status (None for a statement that returns rows)."""
        return self._status

    @property
    def rowcount(self) -> int:
        status = self._status
        if status is None:
            return len(self._records)
        last = status.rpartition(" ")[2]
        return int(last) if last.isdigit() else -1

    @property
    def inserted_primary_key(self) -> Any:
        plan = self._plan
        if not plan.is_insert:
            raise InvalidRequestError("inserted_primary_key is only for an INSERT")
        row = self._records[0] if self._records else None
        out = []
        for where, i in plan.pk:
            if where == "row":
                out.append(None if row is None else row[i])
            elif where == "arg":
                out.append(self._args[i])
            else:
                out.append(None)
        return tuple(out)

    def _make(self, record: Any) -> Any:
        plan = self._plan
        if plan.result_procs:
            values = list(record)
            for i, proc in plan.result_procs:
                values[i] = proc(values[i])
            return plan.row_type(record)._make(values)
        return plan.row_type(record)._make(record)

    def first(self) -> Any:
        records = self._records
        return self._make(records[0]) if records else None

    def all(self) -> Sequence[Any]:
        records = self._records
        if not records:
            return []
        plan = self._plan
        if plan.result_procs:
            return [self._make(r) for r in records]
        make = plan.row_type(records[0])._make
        return [make(r) for r in records]

    def scalar_one(self) -> Any:
        return self._make(only_row(self._records))[0]
