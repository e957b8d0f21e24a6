"""One transaction several requests use in turn (store/shared.py, a batch of sign
requests), on both engines: rows added behind are seen by every later read and kept only
if the whole transaction commits; what cannot be undone for one request alone (a failed
statement, rows of a write that then failed, rows that fail when they are sent) marks
the transaction failed, so its owner commits none of it. What a user would notice if
that were wrong: a batch whose audit rows or cap counts were lost while its signatures
were handed out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text
from tests.process.test_faults_postgres import _backend_pid, _kill
from tests.store.test_one_statement import event, open_db, ready, stored, url  # noqa: F401

from chainkeys.audit.repository import Audit
from chainkeys.store.backend import Backend
from chainkeys.store.shared import Shared


class Failed(Exception):
    pass


async def count(tx: Any) -> int:
    return int((await tx.execute(text("SELECT count(*) FROM audit"))).scalar_one())


def run(where: str, work: Any) -> Any:
    async def main() -> Any:
        db = await ready(where)
        try:
            return await work(db)
        finally:
            await db.close()

    return asyncio.run(main())


def test_rows_added_behind_are_read_back_and_kept_together(url: str) -> None:  # noqa: F811
    async def work(db: Backend) -> tuple[Any, list[int]]:
        seen = []
        async with db.write() as tx:
            shared = Shared(tx)
            for n in range(5):
                async with shared.write(one_statement=True) as item:
                    await Audit.insert(item, event(f"n{n}"))
                async with shared.read() as item:
                    seen.append(await count(item))  # each read sees every row before it
            await shared.flush()
            assert shared.failed is None
        return await stored(db), seen

    (_, audit), seen = run(url, work)
    assert seen == [1, 2, 3, 4, 5]
    assert audit == [("create", f"n{n}") for n in range(5)]


def test_a_write_that_added_rows_and_failed_fails_the_transaction(url: str) -> None:  # noqa: F811
    async def work(db: Backend) -> Any:
        async with db.write() as tx:
            shared = Shared(tx)
            with pytest.raises(Failed):
                async with shared.write() as item:  # refused before adding: nothing to undo
                    await count(item)
                    raise Failed
            assert shared.failed is None
            with pytest.raises(Failed):
                async with shared.write() as item:  # added, then refused: cannot be undone
                    await Audit.insert(item, event("half"))
                    raise Failed
            return shared.failed  # (its owner then ends the transaction with it)

    assert isinstance(run(url, work), Failed)


def test_a_statement_that_fails_fails_the_transaction(url: str) -> None:  # noqa: F811
    async def work(db: Backend) -> Any:
        with pytest.raises(Failed):
            async with db.write() as tx:
                shared = Shared(tx)
                await Audit.insert(shared, event("before"))
                with pytest.raises(Exception):  # noqa: B017 - whatever the engine raises
                    await shared.execute(text("SELECT * FROM no_such_table"))
                assert shared.failed is not None
                raise Failed  # as signing/batch.py does: nothing of it commits
        return await stored(db)

    _, audit = run(url, work)
    assert audit == []  # the row added behind before the failure went with the rest


def test_rows_that_fail_when_sent_fail_the_transaction(tmp_path: Any) -> None:
    """PostgreSQL: the connection killed while rows wait behind; sending them fails,
    the transaction is not replayed (their answers were never read), nothing is kept."""
    from tests.conftest import drop_pg_database, make_pg_database

    pg = make_pg_database()
    try:

        async def work(db: Backend) -> Any:
            with pytest.raises(Exception):  # noqa: B017 - a lost connection: 503 or the driver's
                async with db.write() as tx:
                    shared = Shared(tx)
                    await count(shared)  # the transaction has begun on this connection
                    for n in range(3):
                        await Audit.insert(shared, event(f"lost{n}"))
                    await _kill(pg, _backend_pid(tx))
                    try:
                        await shared.flush()
                    finally:
                        assert shared.failed is not None
            return await stored(db)

        _, audit = run(pg, work)
        assert audit == []
    finally:
        drop_pg_database(pg)
