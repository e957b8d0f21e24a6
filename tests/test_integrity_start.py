"""The integrity key at start-up (vault/integrity.py), on both engines: a store from
before it keeps its tokens and policies (adopted: token digests re-keyed, rows MACed,
no token changes), and a store whose rows carry MACs but whose key record is gone was
edited: refused at start, naming why."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, select, update

from chainkeys.bootstrap import open_services
from chainkeys.errors import StartupError
from chainkeys.store import migrate
from chainkeys.store.backend import open_backend
from chainkeys.store.tables import meta, policy_versions, tokens
from chainkeys.vault.integrity import RECORD
from tests.conftest import BACKENDS, backend_settings, drop_pg_database

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


def _sync(settings: Any, fn: Any) -> Any:
    async def main() -> Any:
        db = open_backend(settings.db_url, settings)
        try:
            return await db.run_sync(fn, transaction=True)
        finally:
            await db.close()

    return asyncio.run(main())


def test_a_store_from_before_integrity_keeps_its_tokens_and_policy(
    backend: str, tmp_path: Path
) -> None:
    settings, pg_url = backend_settings(backend, tmp_path)
    try:

        async def make() -> str:
            svc = await open_services(settings)
            try:
                _, token = await svc.tokens.create("acme", "old")
                await svc.policies.set("acme", '{"rules": [{"family": "cosmos"}]}', "json")
                return token
            finally:
                await svc.close()

        token = asyncio.run(make())

        def back_to_0014(conn: Any) -> None:  # what a store of the previous release held
            conn.execute(update(tokens).values(token_hash=hashlib.sha256(token.encode())
                                               .hexdigest()))  # fmt: skip
            conn.execute(delete(meta).where(meta.c.key == RECORD))
            command.downgrade(migrate.alembic_config(conn), "0014")
            command.upgrade(migrate.alembic_config(conn), "head")  # `chainkeys db upgrade`

        _sync(settings, back_to_0014)
        assert _sync(settings, lambda c: c.execute(select(tokens.c.mac)).all()) == [(None,)]

        async def serve() -> None:
            svc = await open_services(settings)
            try:
                who = await svc.tokens.authenticate(token)
                assert who is not None and who.tenant == "acme"
                policy = await svc.policies.current(who.tenant_id, fresh=True)
                assert policy is not None and policy.rules[0].family == "cosmos"
            finally:
                await svc.close()

        asyncio.run(serve())
        [(digest, mac)] = _sync(settings, lambda c: c.execute(
            select(tokens.c.token_hash, tokens.c.mac)).all())  # fmt: skip
        assert digest != hashlib.sha256(token.encode()).hexdigest() and mac.startswith("v1:")
        macs = _sync(settings, lambda c: c.execute(select(policy_versions.c.mac)).all())
        assert all(m is not None for (m,) in macs)
        asyncio.run(serve())  # and again: adopted once, checked from then on
    finally:
        if pg_url:
            drop_pg_database(pg_url)


def test_rows_with_macs_and_no_integrity_key_are_refused_at_start(
    backend: str, tmp_path: Path
) -> None:
    settings, pg_url = backend_settings(backend, tmp_path)
    try:

        async def make() -> None:
            svc = await open_services(settings)
            try:
                await svc.tokens.create("acme")
            finally:
                await svc.close()

        asyncio.run(make())
        _sync(settings, lambda c: c.execute(delete(meta).where(meta.c.key == RECORD)))
        with pytest.raises(StartupError, match="integrity key is gone"):
            asyncio.run(open_services(settings))
    finally:
        if pg_url:
            drop_pg_database(pg_url)
