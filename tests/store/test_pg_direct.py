"""PostgreSQL statements on asyncpg directly (store/postgres/): the same rows, counts and
errors as SQLAlchemy's engine gave, and a 503 rather than a hang when the database
or the pool cannot answer."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
import msgspec
import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, insert, select, text
from sqlalchemy.exc import DataError, IntegrityError
from tests.conftest import TEST_MASTER_KEY, drop_pg_database, free_port, make_pg_database

from chainkeys.accounts.idempotency_store import Idempotency, IdempotencyRecord
from chainkeys.accounts.repository import AccountRow, Accounts, DeletedAccounts
from chainkeys.audit.repository import Audit, AuditEvent, AuditQuery
from chainkeys.config import Settings
from chainkeys.errors import AccountExists, StorageUnavailable
from chainkeys.store import migrate
from chainkeys.store.integrity import ACCOUNTS
from chainkeys.store.postgres.backend import PostgresBackend
from chainkeys.store.postgres.plan import Plan
from chainkeys.store.postgres.pool import pg_dsn
from chainkeys.store.sealed import SealedColumns
from chainkeys.store.sql import is_unique_violation
from chainkeys.store.tables import accounts, metadata
from chainkeys.tokens.repository import _INSERT_TOKEN, Tenants, TokenRow
from chainkeys.vault.integrity import Integrity
from chainkeys.vault.repository import Meta

KEY = Integrity(secrets.token_bytes(32))  # rows written here carry real MACs

T = TypeVar("T")


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """One fresh database with the schema, for the whole module."""
    url = make_pg_database()

    async def setup() -> None:
        db = PostgresBackend(url, Settings(master_key=TEST_MASTER_KEY))
        try:
            await migrate.upgrade(db)
        finally:
            await db.close()

    asyncio.run(setup())
    yield url
    drop_pg_database(url)


def run_with_db(url: str, fn: Callable[[PostgresBackend], Awaitable[T]], **settings: Any) -> T:
    async def main() -> T:
        db = PostgresBackend(url, Settings(master_key=TEST_MASTER_KEY, **settings))
        try:
            return await fn(db)
        finally:
            await db.close()

    return asyncio.run(main())


async def raw_fetch(url: str, sql: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


_n = iter(range(1_000_000))


async def new_tenant(db: PostgresBackend) -> str:
    tenant_id = f"t{next(_n):08d}{int(time.time() * 1000) % 10**8:08d}"
    async with db.write() as tx:
        await Tenants.insert(
            tx, {"id": tenant_id, "name": f"name-{tenant_id}", "created_ms": 1, "mac": None}
        )
    return tenant_id


def account(tenant_id: str, name: str, **kw: Any) -> AccountRow:
    fields: dict[str, Any] = {
        "tenant_id": tenant_id,
        "family": "cosmos",
        "name": name,
        "network": "cosmoshub",
        "address": f"addr-{name}",
        "public_key": "02" + "ab" * 32,
        "details": {"extra": {"k": "välue ✓", "n": [1, 2.5, None]}, "compressed": True},
        "secret": bytes(range(256)) + b"\x00",
        "key_id": "k1",
        "created_ms": 2**62 + 7,
    }
    fields.update(kw)
    return AccountRow(**fields)


def test_pg_dsn() -> None:
    assert pg_dsn("postgresql+asyncpg://u:p@h:5/db") == "postgresql://u:p@h:5/db"
    assert pg_dsn("postgresql+psycopg://u@h/db?sslmode=require") == (
        "postgresql://u@h/db?sslmode=require"
    )
    assert pg_dsn("postgres://u@h/db") == "postgresql://u@h/db"
    assert pg_dsn("postgresql://u@h/db") == "postgresql://u@h/db"


def test_every_table_compiles_and_needs_no_driver_codec() -> None:
    """The column types of tables.py round-trip as asyncpg gives them: no result
    processing (SQLAlchemy's engine had none either), bind casts in the SQL."""
    for table in metadata.tables.values():
        plan = Plan(select(table), None)
        assert plan.result_procs == [], table.name
        assert plan.returns_rows
        ins = Plan(insert(table), [c.key for c in table.c if c.autoincrement is not True])
        assert "$1::" in ins.sql
    assert "RETURNING accounts.id" in Plan(insert(accounts), ["tenant_id"]).sql


def test_an_insert_gives_back_its_generated_id_when_it_asks() -> None:
    """The one way on every engine: `.returning(...)`; a key SQLAlchemy would fetch
    before the INSERT (no implicit RETURNING) is refused when the plan is made."""
    t = Table("x", MetaData(), Column("id", Integer, primary_key=True), Column("v", String))
    plan = Plan(insert(t).returning(t.c.id), ["v"])
    assert plan.sql.endswith("RETURNING x.id") and plan.returns_rows
    assert plan.names == ("v",)
    prefetching = Table(
        "y",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("v", String),
        implicit_returning=False,
    )
    with pytest.raises(NotImplementedError, match="column 'id'"):
        Plan(insert(prefetching), ["v"])


def test_rows_round_trip_like_sqlalchemys_engine(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        row = account(tenant, "direct")
        async with db.write() as tx:
            new_id = await Accounts.insert(tx, KEY, row)
        assert isinstance(new_id, int) and new_id > 0
        # The same row through SQLAlchemy's engine, as before this change.
        via = account(tenant, "engine")
        async with db.engine().begin() as aconn:
            params = {
                **{k: getattr(via, k) for k in ("tenant_id", "family", "name", "network")},
                **{k: getattr(via, k) for k in ("address", "public_key", "secret", "key_id")},
                "details": msgspec.json.encode(via.details).decode(),
                "created_ms": via.created_ms,
            }
            params["mac"] = KEY.mac(ACCOUNTS, params)  # as the repository MACs a row
            await aconn.execute(insert(accounts), params)
            engine_rows = {
                r.name: r
                for r in (
                    await aconn.execute(select(accounts).where(accounts.c.tenant_id == tenant))
                )
            }
        stored = {
            r["name"]: r
            for r in await raw_fetch(
                pg_url, "SELECT * FROM accounts WHERE tenant_id = $1 ORDER BY id", tenant
            )
        }
        a, b = stored["direct"], stored["engine"]
        for col in ("details", "secret", "created_ms", "public_key", "key_id", "network"):
            assert a[col] == b[col], col
        assert type(a["secret"]) is bytes and a["secret"] == row.secret
        assert msgspec.json.decode(a["details"]) == row.details
        assert a["id"] == new_id

        async with db.read() as tx:
            got = await Accounts.get(tx, KEY, tenant, "cosmos", "direct")
            engine_written = await Accounts.get(tx, KEY, tenant, "cosmos", "engine")
            missing = await Accounts.get(tx, KEY, tenant, "cosmos", "nobody")
            page = await Accounts.page(tx, KEY, tenant, "cosmos", 0, 10)
        assert got == dataclasses.replace(row, id=new_id)
        assert engine_written is not None
        assert engine_written.secret == via.secret and engine_written.details == via.details
        assert missing is None
        # Rows read by name and by index, like SQLAlchemy's, and hold the same values.
        assert [(p.id, p.tenant_id) for p in page] == [(p[0], p[1]) for p in page]  # type: ignore[attr-defined,index]
        assert tuple(engine_rows["direct"]) == tuple(await _get_all_columns(db, tenant, "direct"))

    run_with_db(pg_url, main)


async def _get_all_columns(db: PostgresBackend, tenant: str, name: str) -> Any:
    async with db.read() as tx:
        stmt = select(accounts).where(accounts.c.tenant_id == tenant, accounts.c.name == name)
        return (await tx.execute(stmt)).first()


def test_rowcount_of_delete_and_update(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        record = IdempotencyRecord("f" * 64, b"\x01sealed", "k1", 5)
        async with db.write() as tx:
            for i in range(3):
                assert await Idempotency.insert(tx, tenant, f"key{i}", record)
        async with db.write() as tx:
            assert await Idempotency.reseal(tx, tenant, "key0", "k1", b"new", "k2")
            assert not await Idempotency.reseal(tx, tenant, "key0", "k1", b"new", "k2")
            assert await Idempotency.purge(tx, 10) >= 3  # DELETE 3 (+ any of other tests)
            assert await Idempotency.purge(tx, 10) == 0
        async with db.write() as tx:
            await Accounts.insert(tx, KEY, account(tenant, "gone"))
        async with db.write() as tx:
            assert await Accounts.delete(tx, tenant, "cosmos", "gone", retain_at_ms=123)
            assert not await Accounts.delete(tx, tenant, "cosmos", "gone", retain_at_ms=None)
        async with db.read() as tx:
            deleted = await DeletedAccounts.latest(tx, KEY, tenant, "cosmos", "gone")
            recent = await DeletedAccounts.recent(tx, None, 5)
        assert deleted is not None and deleted.deleted_ms == 123
        assert deleted.account.secret == account(tenant, "gone").secret
        assert any(d.id == deleted.id for d in recent)

    run_with_db(pg_url, main)


def test_unique_violation_is_an_integrity_error_that_quotes_no_value(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        secret_hash = "feedface" * 8
        token = {
            "id": "tok-a",
            "tenant_id": tenant,
            "label": "",
            "created_ms": 1,
            "scopes": "read",
            "expires_ms": None,
            "families": None,
            "approver_group": None,
            "mac": None,
        }
        async with db.write() as tx:
            await tx.execute(_INSERT_TOKEN, {**token, "token_hash": secret_hash})
        with pytest.raises(IntegrityError) as caught:
            async with db.write() as tx:
                await tx.execute(_INSERT_TOKEN, {**token, "id": "tok-b", "token_hash": secret_hash})
        assert is_unique_violation(caught.value)
        assert secret_hash not in str(caught.value)
        assert secret_hash not in repr(caught.value.orig)
        assert "UniqueViolationError" in str(caught.value.orig)

        async with db.write() as tx:
            await Accounts.insert(tx, KEY, account(tenant, "twice"))
        with pytest.raises(AccountExists):
            async with db.write() as tx:
                await Accounts.insert(tx, KEY, account(tenant, "twice"))
        # A connection that met the error is fine for the next request.
        async with db.read() as tx:
            assert await Accounts.get(tx, KEY, tenant, "cosmos", "twice") is not None

    run_with_db(pg_url, main, db_pool_size=1)


def test_a_transaction_that_raises_leaves_nothing(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        with pytest.raises(RuntimeError):
            async with db.write() as tx:
                await Accounts.insert(tx, KEY, account(tenant, "half"))
                await Audit.insert(tx, AuditEvent(tenant, "create", "ok", 1, "cosmos", "half"))
                raise RuntimeError("after the inserts")
        with pytest.raises(AccountExists):
            async with db.write() as tx:
                await Accounts.insert(tx, KEY, account(tenant, "first"))
                await Accounts.insert(tx, KEY, account(tenant, "first"))
        async with db.read() as tx:
            assert await Accounts.get(tx, KEY, tenant, "cosmos", "half") is None
            assert await Accounts.get(tx, KEY, tenant, "cosmos", "first") is None
            assert await Audit.page(tx, AuditQuery(tenant), 0, 10) == []

    run_with_db(pg_url, main, db_pool_size=1)


def test_an_account_and_its_audit_row_go_in_as_one_statement(pg_url: str) -> None:
    """A create without an idempotency key is one statement (a data-modifying CTE, no
    BEGIN/COMMIT): both rows or, for a taken name, neither; a second statement in a
    one-statement write is refused."""

    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        event = AuditEvent(tenant, "create", "ok", 7, "cosmos", "solo", "rid-1")
        async with db.write(one_statement=True) as tx:
            await Accounts.insert_audited(tx, KEY, account(tenant, "solo"), event)
        with pytest.raises(AccountExists):
            async with db.write(one_statement=True) as tx:
                await Accounts.insert_audited(tx, KEY, account(tenant, "solo"), event)
        with pytest.raises(RuntimeError, match="second statement"):
            async with db.write(one_statement=True) as tx:
                await Accounts.insert(tx, KEY, account(tenant, "other"))
                await Audit.insert(tx, event)
        async with db.read() as tx:
            row = await Accounts.get(tx, KEY, tenant, "cosmos", "solo")
            assert row is not None and row.address == account(tenant, "solo").address
            events = await Audit.page(tx, AuditQuery(tenant), 0, 10)
        assert [
            (e.action, e.outcome, e.account_name, e.request_id, e.created_ms) for e in events
        ] == [("create", "ok", "solo", "rid-1", 7)]

    run_with_db(pg_url, main, db_pool_size=2)


def test_rarer_statements_compiled_per_call(pg_url: str) -> None:
    """Token listing, audit pages, key ids, text(): not Prepared, same answers."""

    async def main(db: PostgresBackend) -> None:
        tenant = await new_tenant(db)
        async with db.write() as tx:
            row = TokenRow("tok-x", tenant, f"name-{tenant}", "lbl", 5, None)
            await Tenants.insert_token(tx, row, "ab" * 32, None)
            await Audit.insert(tx, AuditEvent(tenant, "create", "ok", 7, "eos", "n1", "req"))
            await Meta.insert(tx, f"m-{tenant}", b"\x00\xff", "k9")
        async with db.read() as tx:
            tokens = await Tenants.list_tokens(tx, f"name-{tenant}")
            events = await Audit.page(tx, AuditQuery(tenant), 0, 10)
            key_ids = await SealedColumns.key_ids(tx)
            meta = await Meta.get(tx, f"m-{tenant}")
            n = (
                await tx.execute(
                    text("SELECT count(*) AS n FROM tenants WHERE id = :i"), {"i": tenant}
                )
            ).scalar_one()
            listed = (
                await tx.execute(
                    select(accounts.c.id).where(
                        accounts.c.key_id.in_(bindparam("ids", expanding=True))
                    ),
                    {"ids": ["nope", "nada"]},
                )
            ).all()
        assert [(t.id, t.label, t.created_ms, t.revoked_ms) for t in tokens] == [
            ("tok-x", "lbl", 5, None)
        ]
        assert [(e.action, e.family, e.account_name, e.request_id) for e in events] == [
            ("create", "eos", "n1", "req")
        ]
        assert events[0].id is not None
        assert "k9" in key_ids
        assert meta == (b"\x00\xff", "k9")
        assert n == 1
        assert listed == []
        async with db.write() as tx:
            assert await Tenants.revoke_token(tx, "tok-x", 9, None) == tenant
            assert await Tenants.revoke_token(tx, "tok-x", 9, None) is None

    run_with_db(pg_url, main)


def test_concurrent_writes_share_the_pool(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> int:
        tenant = await new_tenant(db)

        async def one(i: int) -> None:
            async with db.write() as tx:
                await Accounts.insert(tx, KEY, account(tenant, f"c{i}"))

        await asyncio.gather(*(one(i) for i in range(60)))
        async with db.read() as tx:
            return len(await Accounts.page(tx, KEY, tenant, "cosmos", 0, 100))

    assert run_with_db(pg_url, main, db_pool_size=3) == 60


def test_connections_are_reused_after_reads_writes_and_errors(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> set[int]:
        pids = set()
        backend_pid = text("SELECT pg_backend_pid()")
        for _ in range(3):
            async with db.read() as tx:
                pids.add((await tx.execute(backend_pid)).scalar_one())
            async with db.write() as tx:
                pids.add((await tx.execute(backend_pid)).scalar_one())
            with pytest.raises(AccountExists):  # the body's own error keeps it too
                async with db.write() as tx:
                    pids.add((await tx.execute(backend_pid)).scalar_one())
                    raise AccountExists("body error")
        return pids

    assert len(run_with_db(pg_url, main, db_pool_size=2)) == 1


def test_pool_exhausted_gives_storage_unavailable_then_serves(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> float:
        async with db.read() as tx:  # the only connection, held
            await Meta.ping(tx)
            started = time.monotonic()
            with pytest.raises(StorageUnavailable):
                async with db.read() as other:
                    await Meta.ping(other)
            waited = time.monotonic() - started
        async with db.read() as tx:
            await Meta.ping(tx)
        return waited

    waited = run_with_db(pg_url, main, db_pool_size=1, db_pool_timeout=0.3)
    assert waited >= 0.25  # it waited for its pool timeout (a lower bound: load only adds)


def test_statement_timeout_gives_storage_unavailable_then_serves(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        with pytest.raises(StorageUnavailable):
            async with db.read() as tx:
                await tx.execute(text("SELECT pg_sleep(600)"))
        with pytest.raises(StorageUnavailable):
            async with db.write() as tx:
                await tx.execute(text("SELECT pg_sleep(600)"))
        async with db.read() as tx:
            await Meta.ping(tx)

    # cut by the 200 ms statement timeout, not by the sleeps' end (a test timeout would be)
    run_with_db(pg_url, main, db_pool_size=1, db_statement_timeout_ms=200)


def test_a_value_the_database_refuses_is_no_503_and_an_audit_text_is_cut_to_fit(
    pg_url: str,
) -> None:
    """A value too long for its column is chainkeys' mistake, not the database's
    state: a DataError (the 500 that is logged), never "503, try again" (which hid a
    refusal's lost audit row from the fuzzer). AuditEvent cuts its texts to fit."""
    long = "x" * 150

    async def main(db: PostgresBackend) -> list[AuditEvent]:
        with pytest.raises(DataError):
            async with db.write() as tx:
                await tx.execute(
                    text(
                        "INSERT INTO audit (action, outcome, created_ms, "
                        "account_name) VALUES ('a', 'b', 1, :n)"
                    ),
                    {"n": long},
                )
        await Audit.record(
            db,
            AuditEvent(
                tenant_id="t-cut", action="sign", outcome="x" * 99, created_ms=1, account_name=long
            ),
        )
        async with db.read() as tx:
            return await Audit.page(tx, AuditQuery(tenant_id="t-cut"), 0, 10)

    [event] = run_with_db(pg_url, main)
    assert event.account_name == long[:100] and event.outcome == "x" * 64


def test_a_killed_connection_is_dropped_and_replaced(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        async with db.read() as tx:
            pid = (await tx.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        await raw_fetch(pg_url, "SELECT pg_terminate_backend($1)", pid)
        await asyncio.sleep(0.2)
        again = pid
        for _ in range(3):  # the dead one fails (503) at most once, then a fresh one serves
            try:
                async with db.read() as tx:
                    again = (await tx.execute(text("SELECT pg_backend_pid()"))).scalar_one()
                break
            except StorageUnavailable:
                continue
        assert again != pid

    run_with_db(pg_url, main, db_pool_size=1)


async def running(url: str, sql: str) -> None:
    """Until the server runs `sql` (seen from a connection of its own)."""
    conn = await asyncpg.connect(pg_dsn(url))
    try:
        query = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1"
        for _ in range(3000):  # 30 s end a failing run
            if await conn.fetchval(query, sql):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never saw {sql!r} running")
    finally:
        await conn.close()


def test_a_cancelled_statement_drops_its_connection(pg_url: str) -> None:
    async def main(db: PostgresBackend) -> None:
        async def slow() -> None:
            async with db.write() as tx:
                await tx.execute(text("SELECT pg_sleep(600)"))

        task = asyncio.create_task(slow())
        await running(pg_url, "SELECT pg_sleep(600)")  # cancelled mid-statement
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with db.read() as tx:  # the pool's one connection serves, the sleep not waited
            await Meta.ping(tx)  # for (else the test's own timeout ends it)

    run_with_db(pg_url, main, db_pool_size=1)


def test_an_unreachable_database_gives_storage_unavailable(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"

    async def main(db: PostgresBackend) -> None:
        for _ in range(2):
            with pytest.raises(StorageUnavailable):
                async with db.read() as tx:
                    await Meta.ping(tx)
            with pytest.raises(StorageUnavailable):
                async with db.write() as tx:
                    await Meta.ping(tx)

    run_with_db(url, main, db_connect_timeout=1)
