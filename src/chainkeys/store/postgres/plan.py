"""A statement compiled once for asyncpg, and the rows it returns.

`Plan` holds what SQLAlchemy's own asyncpg dialect compiles for a statement (the SQL
with its `$n` placeholders and casts, the parameter names in order) and the bind and
result processing its types ask for, read from the documented surface of a compiled
statement (`SQLCompiler`: `string`, `positiontup`, `binds`, `insert_prefetch`,
`effective_returning`, `construct_expanded_state`); `PgRows` reads records into the
one row type of every engine (`sql.row_class`). An INSERT that must give back its
generated key says so (`.returning(...)`), on every engine alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Executable
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.exc import InvalidRequestError

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

    __slots__ = ("defaults", "names", "procs", "result_procs", "returns_rows", "row", "sql")

    def __init__(
        self,
        stmt: Executable,
        column_keys: Sequence[str] | None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        compiled = stmt.compile(dialect=DIALECT, column_keys=column_keys)  # type: ignore[attr-defined]
        binds = compiled.binds
        # Python-side scalar column defaults of an INSERT (SQLAlchemy's engine fills
        # them in at execution, not at compilation).
        prefetched: dict[str, Any] = {}
        for col in compiled.insert_prefetch:
            default = col.default
            if default is None or not default.is_scalar:
                raise NotImplementedError(
                    f"column {col.key!r}: only scalar Python defaults are supported here"
                )
            prefetched[col.key] = default.arg
        expanded: Mapping[str, Callable[[Any], Any]] = {}
        if params is not None:
            state = compiled.construct_expanded_state({**prefetched, **params}, escape_names=False)
            self.sql: str = state.statement
            self.names: tuple[str, ...] = tuple(state.positiontup or ())
            self.defaults: dict[str, Any] = dict(state.parameters)
            expanded = state.processors
        else:
            if compiled.post_compile_params or compiled.literal_execute_params:
                raise NotImplementedError(
                    "a Prepared statement has fixed SQL: no expanding (IN) or "
                    "literal-execute parameters"
                )
            self.sql = compiled.string
            self.names = tuple(compiled.positiontup or ())
            # Values bound in the statement itself; a required one must be given per call.
            self.defaults = {
                n: b.effective_value for n in self.names if not (b := binds[n]).required
            }
            self.defaults.update(prefetched)
        procs = []
        for i, name in enumerate(self.names):
            bind = binds.get(name)
            if bind is not None:
                proc = bind.type.dialect_impl(DIALECT).bind_processor(DIALECT)
            else:  # one of an expanded IN's values
                proc = expanded.get(name)
            if proc is not None:
                procs.append((i, proc))
        self.procs: list[tuple[int, Callable[[Any], Any]]] = procs
        if getattr(stmt, "is_select", False):
            self.returns_rows = True
            columns: list[Any] = list(stmt.selected_columns)  # type: ignore[attr-defined]
        elif getattr(stmt, "is_dml", False):
            columns = list(compiled.effective_returning or ())
            self.returns_rows = bool(columns)
        else:  # text(), DDL
            words = self.sql.lstrip(" \t\r\n(").split(None, 1)
            self.returns_rows = bool(words) and (
                words[0].upper() in _ROW_KEYWORDS or " RETURNING " in self.sql.upper()
            )
            columns = []
        self.result_procs = _result_processors(columns)
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

    __slots__ = ("_plan", "_records", "_status")

    def __init__(self, plan: Plan, records: list[Any], status: str | None) -> None:
        self._plan = plan
        self._records = records
        self._status = status

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


async def run(conn: Any, plan: Plan, args: Any) -> PgRows:
    """`plan` with `args` on an asyncpg connection: its rows, or its command status."""
    if plan.returns_rows:
        return PgRows(plan, await conn.fetch(plan.sql, *args), None)
    return PgRows(plan, [], await conn.execute(plan.sql, *args))


def answer_of(rows: PgRows) -> Any:
    """What a statement answered, comparable with the answer of its replay."""
    return rows.status if rows.status is not None else [tuple(r) for r in rows.records]
