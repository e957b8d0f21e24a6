"""CPU per statement of three ways to run chainkeys' PostgreSQL statements, in one process.

    python -m bench.pg_paths [--reads 20000] [--writes 3000] [--rounds 3]

The same hot statements (an account point read, an account insert) through:

- `direct`: what chainkeys runs, `PostgresBackend` (store/postgres/: a statement
  compiled once by SQLAlchemy's asyncpg dialect into a `Plan`, run on the asyncpg
  pool behind the fair gate, rows in `sql.row_class`);
- `engine`: SQLAlchemy's async engine (`create_async_engine`, its pool, its result
  machinery, greenlets), the same statement objects;
- `asyncpg`: the floor: the SQL text and argument order compiled once at import
  with SQLAlchemy's public `compile()`, run on a bare asyncpg pool, records as
  asyncpg returns them (no gate, no error translation, no row class).

Sixteen tasks at once, rounds interleaved; the process CPU time per statement is
what the path costs chainkeys (the server's CPU is not counted). Writes use
one-statement autocommit inserts on `direct` and `asyncpg`, a transaction on
`engine` (what its API gives).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import create_async_engine

from bench import preload
from chainkeys.accounts.repository import _GET_ACCOUNT, _INSERT_ACCOUNT
from chainkeys.config import Settings
from chainkeys.store import migrate
from chainkeys.store.postgres.backend import PostgresBackend, async_url
from chainkeys.store.postgres.plan import DIALECT
from chainkeys.store.sql import Prepared

TASKS = 16
POOL = 10


def _compiled(p: Prepared) -> tuple[str, tuple[str, ...]]:
    c = p.stmt.compile(dialect=DIALECT, column_keys=p.columns or None)  # type: ignore[attr-defined]
    return c.string, tuple(c.positiontup or ())


def _row(tenant: str, i: int) -> dict[str, Any]:
    """An account row (its MAC a placeholder: no read here checks one)."""
    name = f"acct-{uuid.uuid4().hex}" if i < 0 else f"acct-{i}"
    return {
        "tenant_id": tenant,
        "family": "cosmos",
        "name": name,
        "network": "cosmoshub-4",
        "address": name,
        "public_key": "02" + "ab" * 32,
        "details": "{}",
        "secret": b"\x01" * 80,
        "key_id": "k1",
        "created_ms": 1,
        "wallet_id": None,
        "mac": "-",
    }


async def _spread(n: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Run `one(i)` for i < n on TASKS tasks; the process CPU seconds it took."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await one(i)

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(TASKS)))
    return time.process_time() - started


async def main(args: argparse.Namespace) -> None:
    admin = args.pg_url
    name = f"chainkeys_bench_paths_{uuid.uuid4().hex[:8]}"
    await preload._pg(admin, f'CREATE DATABASE "{name}"')
    url = admin.rsplit("/", 1)[0] + "/" + name
    settings = Settings(db_pool_size=POOL)
    backend = PostgresBackend(url, settings)
    engine = create_async_engine(async_url(url), pool_size=POOL, max_overflow=0)
    pool = await asyncpg.create_pool(url, min_size=POOL, max_size=POOL)
    try:
        await migrate.upgrade(backend)
        tenant = "t" * 32
        async with pool.acquire() as c:
            await c.execute(
                "INSERT INTO tenants (id, name, created_ms) VALUES ($1, 'b', 1)", tenant
            )
        get_sql, get_names = _compiled(_GET_ACCOUNT)
        ins_sql, ins_names = _compiled(_INSERT_ACCOUNT)
        async with pool.acquire() as c:
            await c.executemany(
                ins_sql, [[_row(tenant, i)[k] for k in ins_names] for i in range(1000)]
            )

        def key(i: int) -> dict[str, Any]:
            return {"tenant_id": tenant, "family": "cosmos", "name": f"acct-{i % 1000}"}

        async def direct_read(i: int) -> None:
            async with backend.read() as tx:
                row = (await tx.execute(_GET_ACCOUNT, key(i))).first()
                _ = row.secret

        async def engine_read(i: int) -> None:
            async with engine.connect() as c:
                row = (await c.execute(_GET_ACCOUNT.stmt, key(i))).first()
                _ = row.secret  # type: ignore[union-attr]

        async def asyncpg_read(i: int) -> None:
            k = key(i)
            row = await pool.fetchrow(get_sql, *[k[n] for n in get_names])
            _ = row["secret"]

        async def direct_write(i: int) -> None:
            async with backend.write(one_statement=True) as tx:
                await tx.execute(_INSERT_ACCOUNT, _row(tenant, -1))

        async def engine_write(i: int) -> None:
            async with engine.begin() as c:
                await c.execute(_INSERT_ACCOUNT.stmt, _row(tenant, -1))

        async def asyncpg_write(i: int) -> None:
            r = _row(tenant, -1)
            await pool.execute(ins_sql, *[r[n] for n in ins_names])

        paths = {
            "direct": (direct_read, direct_write),
            "engine": (engine_read, engine_write),
            "asyncpg": (asyncpg_read, asyncpg_write),
        }
        for read, write in paths.values():  # warm: connections, statement caches
            await _spread(200, read)
            await _spread(50, write)
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for label, (read, write) in paths.items():
                cpu.setdefault((label, "read"), []).append(
                    await _spread(args.reads, read) / args.reads
                )
                cpu.setdefault((label, "write"), []).append(
                    await _spread(args.writes, write) / args.writes
                )
        print(
            f"{'path':8} {'read µs':>8} {'write µs':>9}  (process CPU per statement, best of"
            f" {args.rounds})"
        )
        for label in paths:
            r, w = min(cpu[(label, "read")]) * 1e6, min(cpu[(label, "write")]) * 1e6
            print(f"{label:8} {r:8.1f} {w:9.1f}")
    finally:
        await backend.close()
        await engine.dispose()
        await pool.close()
        await preload._pg(admin, f'DROP DATABASE "{name}"')


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--reads", type=int, default=20000)
    p.add_argument("--writes", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(p.parse_args()))
