"""The baseline on PostgreSQL: the leanest app that does chainkeys' get and list work there.

The same bare ASGI app as bench/baseline.py (its response bodies, cursors and token
hashing), on an asyncpg pool of chainkeys' default size instead of sqlite3: per
request, the token's point lookup (tokens JOIN tenants) and then the account row or the
keyset page, each one statement on a pooled connection, every request, as a service
without a cache must. What it leaves out is what the benchmark prices: routing,
validation, request ids, access logging, error envelopes, and chainkeys' caches (a
get there reads nothing while nothing changed; store/postgres/watch.py).

Run: python -m bench.baseline_pg --port P --data-dir D [--workers N]
(the database: CHAINKEYS_DATABASE_URL, as for chainkeys).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson

from bench.baseline import (
    AUTH_SQL,
    DEFAULT_NETWORK,
    GET_SQL,
    PAGE_SQL,
    Baseline,
    got,
    integrity_key,
    list_body,
    main,
    token_digest,
)
from chainkeys.config import Settings


def _numbered(sql: str) -> str:
    """sqlite3's ? placeholders as PostgreSQL's $1, $2, …"""
    parts = sql.split("?")
    return "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))


PG_AUTH, PG_GET, PG_PAGE = (_numbered(s) for s in (AUTH_SQL, GET_SQL, PAGE_SQL))
READS = ("get", "list-first", "list-deep")  # the scenarios it serves


class PgBaseline(Baseline):
    """Reads on an asyncpg pool; anything else is a 405."""

    def __init__(self, data_dir: Path, url: str) -> None:
        super().__init__(data_dir)
        self.url = url
        self.pool: Any = None

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.pool = await asyncpg.create_pool(
                    self.url, min_size=1, max_size=Settings().db_pool_size
                )
                sealed = await self.pool.fetchval(
                    "SELECT value FROM meta WHERE key = 'integrity_key'"
                )
                self.token_key = integrity_key(self.aes, bytes(sealed))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _handle(self, scope: dict[str, Any], receive: Any) -> tuple[int, bytes]:
        if scope["path"] == "/healthz":
            return 200, b'{"success":true,"message":"ok"}'
        parts = scope["path"].strip("/").split("/")
        family = parts[0]
        if family not in DEFAULT_NETWORK or len(parts) > 2 or scope["method"] != "GET":
            return 405, b'{"success":false,"message":"not served","code":"method_not_allowed"}'
        tenant = await self._tenant(scope)
        if tenant is None:
            return 401, b'{"success":false,"message":"unauthorized","code":"unauthorized"}'
        if len(parts) == 2:
            return got(family, await self.pool.fetchrow(PG_GET, tenant, family, parts[1]))
        limit, after = self.page_of(tenant, family, scope["query_string"])
        rows = await self.pool.fetch(PG_PAGE, tenant, family, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = self.cursors.make(rows[-1][0], f"accounts/{tenant}/{family}/*") if more else None
        return 200, orjson.dumps(list_body(family, rows, cursor))

    async def _tenant(self, scope: dict[str, Any]) -> str | None:
        digest = token_digest(scope, self.token_key)
        if digest is None:
            return None
        row = await self.pool.fetchrow(PG_AUTH, digest)
        return None if row is None else str(row[0])


def app_factory() -> PgBaseline:
    """uvicorn --factory entry point; settings come from the environment."""
    return PgBaseline(
        Path(os.environ["BENCH_BASELINE_DATA_DIR"]), os.environ["CHAINKEYS_DATABASE_URL"]
    )


if __name__ == "__main__":
    main("bench.baseline_pg:app_factory")
