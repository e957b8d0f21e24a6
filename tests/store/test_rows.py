"""One row type and one set of "no row" errors on every engine and every path: a
repository reads a row the same way whether its statement is `Prepared` (the fast
path) or run by SQLAlchemy's engine, on SQLite or on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.exc import MultipleResultsFound, NoResultFound
from tests.conftest import TEST_MASTER_KEY, drop_pg_database, make_pg_database

from chainkeys.config import Settings
from chainkeys.store import migrate
from chainkeys.store.backend import open_backend
from chainkeys.store.sql import Prepared
from chainkeys.store.tables import tenants

_BY_NAME = select(tenants.c.id, tenants.c.name).where(tenants.c.name == "acme")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rows.db'}"
        return
    pg = make_pg_database()
    yield pg
    drop_pg_database(pg)


def test_rows_are_one_type_on_every_path(url: str) -> None:
    async def main() -> None:
        db = open_backend(url, Settings(master_key=TEST_MASTER_KEY))
        try:
            await migrate.upgrade(db)
            async with db.write() as tx:
                for name in ("acme", "beta", "gamma"):
                    await tx.execute(
                        tenants.insert(), {"id": f"id-{name}", "name": name, "created_ms": 1}
                    )
            async with db.read() as tx:
                fast = (await tx.execute(Prepared(_BY_NAME))).first()
                slow = (await tx.execute(_BY_NAME)).first()
                listed = (
                    await tx.execute(
                        select(tenants.c.id, tenants.c.name)
                        .where(tenants.c.name.in_(["beta", "gamma"]))
                        .order_by(tenants.c.name)
                    )
                ).all()
                with pytest.raises(NoResultFound):
                    (
                        await tx.execute(select(tenants.c.id).where(tenants.c.name == "x"))
                    ).scalar_one()
                with pytest.raises(NoResultFound):
                    await _scalar(tx, Prepared(select(tenants.c.id).where(tenants.c.name == "x")))
                with pytest.raises(MultipleResultsFound):
                    (await tx.execute(select(tenants.c.id))).scalar_one()
            assert type(fast) is type(slow)
            assert fast == slow == ("id-acme", "acme")
            assert fast.name == "acme" and fast._mapping == {"id": "id-acme", "name": "acme"}
            assert [r.name for r in listed] == ["beta", "gamma"]
            assert {type(r) for r in listed} == {type(fast)}
        finally:
            await db.close()

    asyncio.run(main())


async def _scalar(tx: object, stmt: Prepared) -> object:
    return (await tx.execute(stmt)).scalar_one()  # type: ignore[attr-defined]
