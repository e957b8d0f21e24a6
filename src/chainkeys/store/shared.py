"""One open transaction that several requests use in turn, as if each had the store.

A batch of sign requests (signing/batch.py) decides, counts, signs and audits
each item in the batch's one transaction: `Shared` answers `read()` and
`write()` as a `Backend` does, with that transaction, so every item's reads
see what the items before it wrote (item 3's caps count what items 1 and 2
spent) and everything commits together or not at all.

Rows are added behind: an INSERT that answers nothing is kept and sent with the
ones after it in one `execute_many` (on PostgreSQL one round trip for a batch's
audit rows instead of one per item), before any other statement runs, so every
read still sees every row added before it; the owner `flush`es before it commits.

It has no savepoints: on PostgreSQL each would be two more round trips and a
subtransaction per item, and past 64 of those in one transaction every other
session's snapshots pay for them. Instead an item's rows are added after the
last thing that can refuse it (signing/service.py `_sign`), so a refused item
leaves nothing of its own behind but the audit row of its refusal. Three things
would break that, and `failed` keeps them from being committed (the owner ends
the transaction with an error when it is set):
- a statement that fails: PostgreSQL aborts the transaction, and a COMMIT then
  rolls everything back without an error;
- rows added behind that fail when they are sent (their request answered already);
- a body (a `write()`) that added rows and then raised: nothing of it can be
  undone alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Executable

from chainkeys.store.sql import ListRows, Params, Prepared, Rows, RowSigner, Tx


def adds_rows(stmt: Executable | Prepared) -> bool:
    """Whether `stmt` is an INSERT (what the owner of a shared transaction cannot undo
    for one request alone)."""
    inner = stmt.stmt if isinstance(stmt, Prepared) else stmt
    return bool(getattr(inner, "is_insert", False))


def _behind(stmt: Executable | Prepared) -> bool:
    """An INSERT that answers nothing (no RETURNING), compiled once: sent behind."""
    if stmt.__class__ is not Prepared:
        return False
    found = _BEHIND.get(stmt)  # (statements compiled once live as long as the process)
    if found is None:
        inner: Any = stmt.stmt  # type: ignore[union-attr]
        found = _BEHIND[stmt] = bool(getattr(inner, "is_insert", False)) and not (
            inner.returning_column_descriptions
        )
    return found


_BEHIND: dict[Any, bool] = {}


_ADDED = ListRows([], 1)  # what a row added behind answers: one row, nothing to read


class Shared:
    """`Backend.read()` and `.write()` over one open transaction `tx` (see the module
    docstring); itself the `Tx` they give."""

    __slots__ = ("_added", "_behind", "_rows", "_tx", "failed", "signer")

    def __init__(self, tx: Tx) -> None:
        self._tx = tx
        # what MACs a row as it is written (store/sql.py Tx)
        self.signer: RowSigner | None = tx.signer
        self._added = 0  # INSERTs run (or kept to be sent) so far
        self._behind: Prepared | None = None  # the INSERT whose rows wait in `_rows`
        self._rows: list[Params] = []
        self.failed: BaseException | None = None  # set: this transaction must not commit

    @property
    def writing(self) -> bool:
        """Always: what a batch reads may still roll back with it (store/sql.py Tx)."""
        return True

    async def execute(self, stmt: Executable | Prepared, params: Params = None) -> Rows:
        if _behind(stmt):
            self._added += 1
            if self._behind is not stmt:
                await self.flush()
                self._behind = stmt  # type: ignore[assignment]
            self._rows.append(params)
            return _ADDED
        await self.flush()
        try:
            rows = await self._tx.execute(stmt, params)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise
        if adds_rows(stmt):
            self._added += 1
        return rows

    async def execute_many(self, stmt: Prepared, params: Sequence[Params]) -> None:
        for one in params:
            await self.execute(stmt, one)

    async def flush(self) -> None:
        """Send the rows added behind (before any other statement, and before COMMIT)."""
        stmt, rows = self._behind, self._rows
        if stmt is None or not rows:
            return
        self._behind, self._rows = None, []
        try:
            await self._tx.execute_many(stmt, rows)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise

    async def serialize(self, scope: str) -> None:
        await self.flush()
        try:
            await self._tx.serialize(scope)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        return _Body(self)

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]:
        return _Body(self)


class _Body:
    """A read or write body over the shared transaction: one that added rows and then
    raised fails it. (A class: a generator-based context per item costs more.)"""

    __slots__ = ("_added", "_shared")

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._added = shared._added

    async def __aenter__(self) -> Shared:
        return self._shared

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        shared = self._shared
        if exc is not None and shared._added != self._added and shared.failed is None:
            shared.failed = exc  # rows of a write that did not finish: keep none
        return False
