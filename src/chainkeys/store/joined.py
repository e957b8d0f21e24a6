"""A row of each of two tables, written by one INSERT statement.

A statement is atomic on its own on both engines: a write that is one statement needs
no transaction around it on PostgreSQL (`Backend.write(one_statement=True)`: BEGIN and
COMMIT are two round trips) and no savepoint around it in SQLite's group commit
(SAVEPOINT and RELEASE are two statements, each handing the GIL to another thread).
A create writes an account and the audit event of its creation; as one statement, it
is such a write.

- PostgreSQL: a data-modifying CTE inserts the first row, and the outer
  INSERT ... SELECT the second.
- SQLite has no data-modifying CTE: an INSERT into a TEMP view whose INSTEAD OF
  trigger inserts both rows. SQLite backs out a failing statement whole, its
  trigger's inserts included (ABORT, the default conflict resolution), and leaves the
  transaction open. TEMP objects live in each connection, not in the database file:
  no migration, and nothing a backup or `chainkeys db copy` sees. The SQLite engine
  creates them on its writer connection (`JOINED`, in store/tables.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Column, MetaData, Table, bindparam, insert, select

from chainkeys.store.sql import Prepared


@dataclass(frozen=True)
class JoinedInsert:
    """`first` gets a row of `first_columns`, each from the parameter of its own name;
    `then` a row of `then_columns`, each (column, parameter): a parameter may feed both."""

    name: str
    first: Table
    first_columns: Sequence[str]
    then: Table
    then_columns: Sequence[tuple[str, str]]

    def params(self) -> list[str]:
        """Every parameter, once, in order (the SQLite view's columns)."""
        names = list(self.first_columns)
        names += [p for _, p in self.then_columns if p not in names]
        return names

    def prepared(self) -> Prepared:
        first = self.first
        created = (
            insert(first)
            .values({c: bindparam(c, type_=first.c[c].type) for c in self.first_columns})
            .returning(*first.primary_key.columns)
            .cte(self.name)
        )
        then = self.then
        values = [bindparam(p, type_=then.c[c].type) for c, p in self.then_columns]
        postgres = insert(then).from_select(
            [c for c, _ in self.then_columns], select(*values).select_from(created)
        )
        view = Table(self.name, MetaData(), *(Column(p) for p in self.params()), schema="temp")
        return Prepared(postgres, sqlite=insert(view), sqlite_columns=self.params())

    def sqlite_ddl(self) -> tuple[str, str]:
        """The TEMP view and its trigger (identifiers from the tables' metadata, never
        from input)."""
        view = ", ".join(f"NULL AS {_q(p)}" for p in self.params())
        first = [(c, c) for c in self.first_columns]
        trigger = [
            "CREATE TEMP TRIGGER IF NOT EXISTS", _q(f"{self.name}_insert"),
            "INSTEAD OF INSERT ON", _q(self.name), "BEGIN",
            _insert_new(self.first, first), _insert_new(self.then, self.then_columns), "END",
        ]  # fmt: skip
        return " ".join(["CREATE TEMP VIEW IF NOT EXISTS", _q(self.name), "AS SELECT", view,
                         "WHERE 0"]), " ".join(trigger)  # fmt: skip

    def sqlite_drop(self) -> str:
        """Removes the TEMP view, and its trigger with it."""
        return f"DROP VIEW IF EXISTS temp.{_q(self.name)}"


def _q(name: str) -> str:
    return f'"{name}"'


def _insert_new(table: Table, columns: Sequence[tuple[str, str]]) -> str:
    """A trigger's INSERT of one row of `table`, each column from NEW's parameter."""
    names = ", ".join(_q(c) for c, _ in columns)
    values = ", ".join(f"NEW.{_q(p)}" for _, p in columns)
    return " ".join(["INSERT INTO", _q(table.name), f"({names})", "VALUES", f"({values});"])
