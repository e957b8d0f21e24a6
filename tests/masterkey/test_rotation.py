"""Master-key rotation: re-seal everything, survive interruption, retire the old key."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import BACKENDS, chainkeys_cli, drop_pg_database, make_pg_database

from chainkeys.accounts.models import CreateRequest
from chainkeys.bootstrap import Services, open_services
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.masterkey.service import KeyService
from chainkeys.store.sealed import SealedColumns


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Key-file settings on a fresh store (no CHAINKEYS_MASTER_KEY)."""
    os.environ.pop("CHAINKEYS_MASTER_KEY", None)
    pg_url = make_pg_database() if request.param == "postgresql" else None
    yield Settings(data_dir=tmp_path / "data", database_url=pg_url)
    if pg_url:
        drop_pg_database(pg_url)


def env_of(settings: Settings) -> dict[str, str]:
    env = {"CHAINKEYS_DATA_DIR": str(settings.data_dir)}
    if settings.database_url is not None:
        env["CHAINKEYS_DATABASE_URL"] = settings.database_url.get_secret_value()
    if settings.master_key is not None:  # commands that write authenticated rows load it
        env["CHAINKEYS_MASTER_KEY"] = settings.master_key.get_secret_value()
    return env


async def populate(svc: Services, n: int) -> list[tuple[Any, str, str]]:
    _, token = await svc.tokens.create("rot")
    tenant = await svc.tokens.authenticate(token)
    assert tenant is not None
    made = []
    for i in range(n):
        family = ("cosmos", "dogecoin", "eos", "litecoin")[i % 4]
        created = await svc.accounts.create(
            tenant, family, CreateRequest(), f"idem-{i}" if i < 3 else None
        )
        made.append((tenant, family, created.view.name))
    for tenant, family, name in made[-4:]:  # retained deletes are re-sealed too
        await svc.accounts.delete(tenant, family, name)
    wallets = [(await svc.wallets.create(tenant, words=12)).id for _ in range(3)]
    await svc.wallets.delete(tenant, wallets[-1])  # a deleted wallet's seed too
    return made[:-4] + [(tenant, "wallet", w) for w in wallets[:-1]]


async def all_open(svc: Services, made: list[tuple[Any, str, str]]) -> None:
    for tenant, family, name in made:
        if family == "wallet":  # its sealed phrase opens: an extended key comes out
            key = await svc.wallets.xpub(tenant, name, "cosmos", None, None, 0, None)
            assert key.key.xpub.startswith("xpub")
        else:
            assert len(await svc.accounts.open_secret(tenant, family, name)) == 32


async def key_ids(svc: Services) -> set[str]:
    async with svc.db.read() as tx:
        return await SealedColumns.key_ids(tx)


def test_rotate_interrupted_resumed_and_retired(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = settings.key_file

    async def setup() -> tuple[list[Any], str]:
        svc = await open_services(settings)
        try:
            return await populate(svc, 40), svc.barrier.key_id
        finally:
            await svc.close()

    made, old_id = asyncio.run(setup())
    old_key = key_file.read_text()

    # A crash part-way: the third batch's transaction dies after some re-seals.
    calls = {"n": 0}
    real_reseal = SealedColumns.reseal

    async def dying_reseal(*args: Any) -> bool:
        calls["n"] += 1
        if calls["n"] == 25:
            raise KeyboardInterrupt("simulated crash")
        return await real_reseal(*args)

    monkeypatch.setattr(KeyService, "BATCH", 10)
    monkeypatch.setattr(SealedColumns, "reseal", staticmethod(dying_reseal))

    async def interrupted() -> None:
        svc = await open_services(settings)
        try:
            await svc.keys.rotate()
        finally:
            await svc.close()

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(interrupted())
    monkeypatch.setattr(SealedColumns, "reseal", staticmethod(real_reseal))
    assert key_file.read_text() == old_key  # not promoted
    next_file = key_file.with_name("master.key.next")
    assert next_file.stat().st_mode & 0o777 == 0o600

    async def mid_way() -> None:
        svc = await open_services(settings)  # starts: holds master.key and master.key.next
        try:
            assert len(await key_ids(svc)) == 2  # half old, half new
            await all_open(svc, made)
        finally:
            await svc.close()

    asyncio.run(mid_way())

    done = chainkeys_cli("key", "rotate", env=env_of(settings))
    assert done.returncode == 0, done.stderr
    assert "re-sealed" in done.stdout
    assert not next_file.exists()
    new_key = key_file.read_text()
    assert new_key != old_key
    assert old_key not in done.stdout + done.stderr and new_key not in done.stdout + done.stderr
    retired = key_file.with_name(f"master.key.retired-{old_id}")
    assert retired.read_text() == old_key

    retire = chainkeys_cli("key", "retire", env=env_of(settings))
    assert retire.returncode == 0, retire.stderr
    assert not retired.exists()

    async def after() -> None:
        svc = await open_services(settings)  # the new key alone opens everything
        try:
            assert await key_ids(svc) == {svc.barrier.key_id} != {old_id}
            await all_open(svc, made)
            tenant = made[0][0]
            replay = await svc.accounts.create(tenant, "cosmos", CreateRequest(), "idem-0")
            assert replay.replayed and replay.private_key
            gone = (await svc.accounts.deleted("rot"))[0].account
            await svc.accounts.restore("rot", gone.family, gone.name)
            assert len(await svc.accounts.open_secret(tenant, gone.family, gone.name)) == 32
        finally:
            await svc.close()

    asyncio.run(after())

    # The old key alone no longer opens this store, and says so.
    key_file.write_text(old_key)

    async def with_old() -> None:
        svc = await open_services(settings)
        await svc.close()

    with pytest.raises(StartupError, match="does not open this store"):
        asyncio.run(with_old())


def test_rotate_with_environment_keys(settings: Settings) -> None:
    old = base64.b64encode(os.urandom(32)).decode()
    new = base64.b64encode(os.urandom(32)).decode()

    async def setup() -> list[Any]:
        svc = await open_services(Settings(**{**settings.model_dump(), "master_key": old}))
        try:
            return await populate(svc, 8)
        finally:
            await svc.close()

    made = asyncio.run(setup())
    env = {**env_of(settings), "CHAINKEYS_MASTER_KEY": new}
    refused = chainkeys_cli("account", "deleted", env=env)  # needs the key that sealed them
    assert refused.returncode != 0 and "does not open this store" in refused.stderr
    assert new not in refused.stderr
    # token administration reads no secret: it works without the right master key
    assert chainkeys_cli("token", "list", env=env).returncode == 0

    rotated = chainkeys_cli("key", "rotate", env={**env, "CHAINKEYS_PREVIOUS_MASTER_KEYS": old})
    assert rotated.returncode == 0, rotated.stderr

    async def after() -> None:
        svc = await open_services(Settings(**{**settings.model_dump(), "master_key": new}))
        try:
            await all_open(svc, made)
        finally:
            await svc.close()

    asyncio.run(after())


def test_a_reseal_never_puts_back_a_value_older_than_the_one_stored(settings: Settings) -> None:
    """A rotation re-seals what it read only if the row still holds exactly that value:
    a process that has not switched keys yet may have written a newer value under the
    same old key meanwhile (here, a changed blob), and the re-seal must leave it."""
    from sqlalchemy import update

    from chainkeys.store.sealed import REGISTRY

    async def main() -> None:
        svc = await open_services(settings)
        try:
            await populate(svc, 5)  # one account left (the last four deleted)
            col = REGISTRY[0]  # accounts.secret
            async with svc.db.read() as tx:
                (row,) = await SealedColumns.not_sealed_by(tx, col, "another-key", 10)
            newer = row.blob[:-1] + bytes([row.blob[-1] ^ 1])
            pk = [c == v for c, v in zip(col.table.primary_key.columns, row.pk, strict=True)]
            async with svc.db.write() as tx:
                await tx.execute(update(col.table).where(*pk).values({col.blob: newer}))
            async with svc.db.write() as tx:
                assert not await SealedColumns.reseal(tx, row, b"re-sealed", "k-next")
            async with svc.db.read() as tx:
                (after,) = await SealedColumns.not_sealed_by(tx, col, "another-key", 10)
            assert (after.blob, after.key_id) == (newer, row.key_id)
        finally:
            await svc.close()

    asyncio.run(main())
