"""One open transaction that several requests use in turn, as if each had the store.

A batch of sign requests (signing/batch.py) decides, counts, signs and audits
each item in the batch's one transaction: `Shared` answers `read()` and
`write()` as a `Backend` does, with that transaction, so every item's reads
see what the items before it wrote (item 3's caps count what items 1 and 2
spent) and everything commits together or not at all.

It has no savepoints: on PostgreSQL each would be two more round trips and a
subtransaction per item, and past 64 of those in one transaction every other
session's snapshots pay for them. Instead an item's rows are added after the
last thing that can refuse it (signing/service.py `_sign`), so a refused item
leaves nothing of its own behind but the audit row of its refusal. Two things
would break that, and `failed` keeps them from being committed (the owner ends
the transaction with an error when it is set):
- a statement that fails: PostgreSQL aborts the transaction, and a COMMIT then
  rolls everything back without an error;
- a body (a `write()`) that added rows and then raised: nothing of it can be
  undone alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Executable

from chainkeys.store.sql import Params, Prepared, Rows, Tx


def adds_rows(stmt: Executable | Prepared) -> bool:
    """Whether `stmt` is an INSERT (what the owner of a shared transaction cannot undo
    for one request alone)."""
    inner = stmt.stmt if isinstance(stmt, Prepared) else stmt
    return bool(getattr(inner, "is_insert", False))


class Shared:
    """`Backend.read()` and `.write()` over one open transaction `tx` (see the module
    docstring); itself the `Tx` they give."""

    __slots__ = ("_added", "_tx", "failed")

    def __init__(self, tx: Tx) -> None:
        self._tx = tx
        self._added = 0  # INSERTs run so far
        self.failed: BaseException | None = None  # set: this transaction must not commit

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        try:
            rows = await self._tx.execute(stmt, params)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise
        if adds_rows(stmt):
            self._added += 1
        return rows

    async def serialize(self, scope: str) -> None:
        try:
            await self._tx.serialize(scope)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        return self._body()

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]:
        return self._body()

    @contextlib.asynccontextmanager
    async def _body(self) -> AsyncIterator[Any]:
        added = self._added
        try:
            yield self
        except BaseException as exc:
            if self._added != added:  # rows of a write that did not finish: keep none
                self.failed = self.failed or exc
            raise
