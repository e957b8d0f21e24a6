"""One-statement writes (`Backend.write(one_statement=True)`) and the joined insert of an
account with its audit row (store/joined.py), on both engines: a write that is one
statement is atomic on its own, so SQLite's group commit runs it without a savepoint
and PostgreSQL without BEGIN and COMMIT; SQLite's two INSERTs of a create have one. What a user would notice if that were wrong:
an account without its audit row, an audit row of a create that did not happen, or
another request's write lost with a failing one."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from tests.conftest import TEST_MASTER_KEY, drop_pg_database, make_pg_database

from chainkeys.accounts.repository import AccountRow, Accounts
from chainkeys.audit.repository import Audit, AuditEvent
from chainkeys.config import Settings
from chainkeys.errors import AccountExists
from chainkeys.store import migrate
from chainkeys.store.backend import Backend
from chainkeys.store.postgres.backend import PostgresBackend
from chainkeys.store.sqlite.backend import SqliteBackend
from chainkeys.tokens.repository import Tenants
from chainkeys.vault.integrity import Integrity

KEY = Integrity(secrets.token_bytes(32))  # rows written here carry real MACs

TENANT = "t-one-statement"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'chainkeys.db'}"
        return
    pg = make_pg_database()  # (skips, or fails when REQUIRE_PG, without a server)
    yield pg
    drop_pg_database(pg)


def open_db(url: str) -> Backend:
    settings = Settings(master_key=TEST_MASTER_KEY)  # (the store is the URL's)
    if url.startswith("sqlite"):
        return SqliteBackend(url, settings)
    return PostgresBackend(url, settings)


async def ready(url: str) -> Backend:
    db = open_db(url)
    await migrate.upgrade(db)
    async with db.write() as tx:
        await Tenants.insert(tx, {"id": TENANT, "name": TENANT, "created_ms": 1, "mac": None})
    return db


def account(name: str) -> AccountRow:
    return AccountRow(
        tenant_id=TENANT,
        family="cosmos",
        name=name,
        network="cosmoshub",
        address=f"addr-{name}",
        public_key="02" + "ab" * 32,
        details={"extra": {}},
        secret=b"\x01" * 60,
        key_id="k1",
        created_ms=7,
    )


def event(name: str, action: Any = "create") -> AuditEvent:
    return AuditEvent(
        tenant_id=TENANT,
        action=action,
        outcome="ok",
        created_ms=7,
        family="cosmos",
        account_name=name,
    )


async def stored(db: Backend) -> tuple[set[str], list[tuple[str, str]]]:
    """The account names, and each audit row's (action, account)."""
    async with db.read() as tx:
        names = {r[0] for r in (await tx.execute(text("SELECT name FROM accounts"))).all()}
        rows = await tx.execute(text("SELECT action, account_name FROM audit ORDER BY id"))
        return names, sorted((r[0], r[1]) for r in rows.all())


async def create(db: Backend, name: str, action: Any = "create") -> None:
    await Accounts.create_audited(db, KEY, account(name), event(name, action))


def run(url: str, main: Any) -> Any:
    async def wrapped() -> Any:
        db = await ready(url)
        try:
            return await main(db)
        finally:
            await db.close()

    return asyncio.run(wrapped())


def test_a_create_writes_both_rows_or_neither_and_spares_its_neighbours(url: str) -> None:
    """Concurrent creates (one batch on SQLite): a taken name is a 409 with no audit row
    of its own; a create whose second row (the audit row) fails leaves no account either
    (the trigger's first insert backed out with its statement); the others commit."""

    async def main(db: Backend) -> Any:
        outcomes = await asyncio.gather(
            create(db, "a"),
            create(db, "a"),
            create(db, "b"),
            create(db, "c", action=None),
            create(db, "d"),
            return_exceptions=True,
        )
        return outcomes, await stored(db)

    outcomes, (names, audit) = run(url, main)
    assert outcomes[0] is None and outcomes[2] is None and outcomes[4] is None, outcomes
    assert isinstance(outcomes[1], AccountExists), outcomes
    assert isinstance(outcomes[3], IntegrityError), outcomes  # audit.action is NOT NULL
    assert names == {"a", "b", "d"}
    assert audit == [("create", "a"), ("create", "b"), ("create", "d")]


def test_a_one_statement_write_is_kept_whatever_its_body_does_next(url: str) -> None:
    """As on PostgreSQL, where it commits on its own: the statement is the whole write.
    A second statement is refused (and the first is still kept)."""

    async def raises_after(db: Backend) -> None:
        async with db.write(one_statement=True) as tx:
            await Audit.insert(tx, event("kept-1"))
            raise ValueError("after the statement")

    async def second(db: Backend) -> None:
        async with db.write(one_statement=True) as tx:
            await Audit.insert(tx, event("kept-2"))
            await Audit.insert(tx, event("refused"))

    async def main(db: Backend) -> Any:
        outcomes = await asyncio.gather(
            raises_after(db), second(db), create(db, "e"), return_exceptions=True
        )
        return outcomes, await stored(db)

    outcomes, (names, audit) = run(url, main)
    assert isinstance(outcomes[0], ValueError), outcomes
    assert isinstance(outcomes[1], RuntimeError), outcomes
    assert outcomes[2] is None
    assert names == {"e"}
    assert audit == [("create", "e"), ("create", "kept-1"), ("create", "kept-2")]


def test_sqlite_runs_a_create_as_two_inserts_in_a_savepoint_of_their_own(tmp_path: Path) -> None:
    """A batch of creates on SQLite: BEGIN, then each create's two INSERTs between a
    SAVEPOINT and its RELEASE (its whole write, kept or undone together), COMMIT."""
    seen: list[str] = []

    async def main(db: Backend) -> None:
        assert isinstance(db, SqliteBackend)
        raw = db.connection("w").connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        raw.set_trace_callback(seen.append)
        await asyncio.gather(*(create(db, f"n{i}") for i in range(5)))
        raw.set_trace_callback(None)

    run(f"sqlite:///{tmp_path / 'chainkeys.db'}", main)
    verbs = [s.split()[0].upper() for s in seen if not s.startswith("PRAGMA")]
    assert verbs == ["BEGIN", *["SAVEPOINT", "INSERT", "INSERT", "RELEASE"] * 5, "COMMIT"], seen


def test_audit_rows_recorded_at_once_each_stand_alone(url: str) -> None:
    """Audit.record (a signature's or a refusal's audit row, a write of its own): thirty
    at once (one group commit on SQLite), a row the database refuses fails alone, and
    every other call returns only once its row is there for another connection."""

    async def main(db: Backend) -> Any:
        events = [event(f"r{i}", action=None if i == 7 else "sign") for i in range(30)]
        outcomes = await asyncio.gather(
            *(Audit.record(db, e) for e in events), return_exceptions=True
        )
        return outcomes, await stored(db)

    outcomes, (_, audit) = run(url, main)
    assert isinstance(outcomes[7], IntegrityError), outcomes  # audit.action is NOT NULL
    assert all(o is None for i, o in enumerate(outcomes) if i != 7), outcomes
    assert audit == sorted(("sign", f"r{i}") for i in range(30) if i != 7)
