"""Adoption is explicit (vault/adoption.py), on both engines: a store is born with its
integrity key; a store that lost its record, holds one of an older format, or holds
rows of tables its record never named, does not start until an operator runs
`chainkeys integrity adopt`, which names what it adopts and audits it."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, insert, select, update
from tests.conftest import (
    BACKENDS,
    TEST_MASTER_KEY,
    chainkeys_cli,
)
from tests.integrity.stores import as_writer as _sync
from tests.integrity.stores import own_store

from chainkeys.bootstrap import open_services, open_unadopted
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store import migrate
from chainkeys.store.integrity import REGISTRY
from chainkeys.store.tables import audit, integrity_heads, meta, tenants, tokens
from chainkeys.vault.adoption import adopt, plan
from chainkeys.vault.integrity import CONTEXT, RECORD, read_record

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def settings(backend: str, tmp_path: Path) -> Iterator[Settings]:
    with own_store(backend, tmp_path) as made:
        yield made


def _store_with_a_tenant(settings: Settings) -> str:
    async def make() -> str:
        svc = await open_services(settings)
        try:
            _, token = await svc.tokens.create("acme", "old")
            await svc.policies.set("acme", '{"rules": [{"family": "cosmos"}]}', "json")
            return token
        finally:
            await svc.close()

    return asyncio.run(make())


def _works(settings: Settings, token: str) -> None:
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


def _refused(settings: Settings, *words: str) -> str:
    with pytest.raises(StartupError) as caught:
        asyncio.run(open_services(settings))
    for word in words:
        assert word in caught.value.message, caught.value.message
    return caught.value.message


def _adopt(settings: Settings) -> Any:
    async def work() -> Any:
        db, barrier = await open_unadopted(settings)
        try:

            async def record(tx: Any, details: dict[str, Any]) -> None:
                await tx.execute(
                    insert(audit).values(
                        tenant_id=None, action="integrity.adopt", outcome="ok", created_ms=1
                    )
                )

            return await adopt(db, barrier, record)
        finally:
            await db.close()

    return asyncio.run(work())


def test_a_store_from_before_integrity_starts_only_once_adopted(settings: Settings) -> None:
    token = _store_with_a_tenant(settings)

    def back_to_0014(conn: Any) -> None:  # what a store of that release held
        digest = hashlib.sha256(token.encode()).hexdigest()
        conn.execute(update(tokens).values(token_hash=digest))
        conn.execute(delete(meta).where(meta.c.key == RECORD))
        command.downgrade(migrate.alembic_config(conn), "0014")
        command.upgrade(migrate.alembic_config(conn), "head")  # `chainkeys db upgrade`

    _sync(settings, back_to_0014)
    _refused(settings, "no integrity record", "chainkeys integrity adopt")
    adopted = _adopt(settings)
    assert adopted.record == "missing" and adopted.rows["tokens"] == 1
    assert [n for n in adopted.unauthenticated["tokens"] if "label 'old'" in n]
    _works(settings, token)
    [(digest, mac)] = _sync(
        settings, lambda c: c.execute(select(tokens.c.token_hash, tokens.c.mac)).all()
    )
    assert digest != hashlib.sha256(token.encode()).hexdigest() and mac.startswith("v1:")
    _works(settings, token)  # and again: adopted once, checked from then on


def test_a_stripped_store_is_not_adopted_by_its_next_start(settings: Settings) -> None:
    """The record deleted, every MAC cleared, the heads deleted and a token row of the
    writer's inserted (the digest as the store held it before integrity): refused at
    start, and `integrity adopt --dry-run` names the writer's token among what it would
    adopt."""
    _store_with_a_tenant(settings)
    chosen = "ck_" + uuid.uuid4().hex

    def strip(conn: Any) -> None:
        conn.execute(delete(meta).where(meta.c.key == RECORD))
        for entry in REGISTRY:
            if "mac" in entry.table.c and entry.table is not integrity_heads:
                conn.execute(update(entry.table).values(mac=None))
        conn.execute(delete(integrity_heads))
        [tenant_id] = conn.execute(select(tenants.c.id)).scalars().all()
        conn.execute(
            insert(tokens).values(
                id=uuid.uuid4().hex,
                tenant_id=tenant_id,
                label="mallory",
                created_ms=1,
                token_hash=hashlib.sha256(chosen.encode()).hexdigest(),
                scopes="create,delete,read,sign",
            )
        )

    _sync(settings, strip)
    _refused(settings, "no integrity record", "stripped")
    _refused(settings, "no integrity record")  # every start, not only the first
    env = {
        "CHAINKEYS_DATA_DIR": str(settings.data_dir),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        **({"CHAINKEYS_DATABASE_URL": settings.db_url} if settings.database_url else {}),
    }
    shown = chainkeys_cli("integrity", "adopt", "--dry-run", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "label 'mallory'" in shown.stdout and "no valid MAC" in shown.stdout
    assert chosen not in shown.stdout + shown.stderr
    refused = chainkeys_cli("integrity", "adopt", env=env)  # no terminal to ask
    assert refused.returncode == 1 and "--yes" in refused.stderr
    _refused(settings, "no integrity record")  # nothing was adopted by either


def test_a_record_of_an_older_format_is_refused(settings: Settings) -> None:
    """A record of the first format (the bare key, any old backup holds one) or of the
    second, put back: refused, naming the format; adopting writes the current one."""
    token = _store_with_a_tenant(settings)

    async def older(fmt: int) -> None:
        db, barrier = await open_unadopted(settings)
        try:
            async with db.read() as tx:
                [(blob, key_id)] = (
                    await tx.execute(
                        select(meta.c.value, meta.c.key_id).where(meta.c.key == RECORD)
                    )
                ).all()
            record = read_record(barrier.open(blob, key_id, CONTEXT))
            plain = record.key if fmt == 1 else record.encode().replace(b'"format":3,', b"")
            sealed = await barrier.seal(plain, CONTEXT)
            async with db.write() as tx:
                await tx.execute(
                    update(meta)
                    .where(meta.c.key == RECORD)
                    .values(value=sealed.blob, key_id=sealed.key_id)
                )
        finally:
            await db.close()

    for fmt in (2, 1):
        asyncio.run(older(fmt))
        _refused(settings, f"format {fmt}", "chainkeys integrity adopt")
    adopted = _adopt(settings)
    assert adopted.record == "format 1" and not adopted.unauthenticated  # same key: all valid
    _works(settings, token)


def test_a_table_its_record_never_named_is_refused_while_it_holds_rows(
    settings: Settings,
) -> None:
    """A record that does not name a table (an older record of the current format put
    back, or a table authenticated by a newer release): started when the table is
    empty, refused while it holds rows."""
    token = _store_with_a_tenant(settings)

    async def without(table: str) -> None:
        db, barrier = await open_unadopted(settings)
        try:
            async with db.read() as tx:
                [(blob, key_id)] = (
                    await tx.execute(
                        select(meta.c.value, meta.c.key_id).where(meta.c.key == RECORD)
                    )
                ).all()
            record = read_record(barrier.open(blob, key_id, CONTEXT))
            smaller = replace(record, adopted=record.adopted - {table})
            sealed = await barrier.seal(smaller.encode(), CONTEXT)
            async with db.write() as tx:
                await tx.execute(
                    update(meta)
                    .where(meta.c.key == RECORD)
                    .values(value=sealed.blob, key_id=sealed.key_id)
                )
        finally:
            await db.close()

    asyncio.run(without("wallet_multisigs"))  # empty: named again by the next start
    _works(settings, token)
    asyncio.run(without("policy_versions"))  # holds the policy: refused, named
    _refused(settings, "policy_versions", "chainkeys integrity adopt")


def test_plan_sees_every_unauthenticated_row_and_names_no_secret(settings: Settings) -> None:
    token = _store_with_a_tenant(settings)
    _sync(settings, lambda c: c.execute(update(tokens).values(label="edited")))

    async def look() -> Any:
        db, barrier = await open_unadopted(settings)
        try:
            return (await plan(db, barrier))[0]
        finally:
            await db.close()

    found = asyncio.run(look())
    assert found.record == "current"
    assert [n for n in found.unauthenticated["tokens"] if "label 'edited'" in n]
    assert token not in str(found)
