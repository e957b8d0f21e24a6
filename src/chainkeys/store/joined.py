"""A row of each of two tables, written as one write.

A create writes an account and the audit event of its creation. On PostgreSQL that is
one statement (a data-modifying CTE inserts the first row, the outer INSERT ... SELECT
the second), so the write needs no BEGIN and COMMIT (`Backend.write(one_statement=True)`:
two round trips). SQLite has no data-modifying CTE: it runs the two INSERTs in a
savepoint of their own (`Prepared.sqlite_steps`, store/sqlite/read.py), inside its
group commit's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Table, bindparam, insert, select

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
        row = {c: bindparam(p, type_=then.c[c].type) for c, p in self.then_columns}
        steps = (Prepared(insert(first), self.first_columns), Prepared(insert(then).values(row)))
        return Prepared(postgres, sqlite_steps=steps)
