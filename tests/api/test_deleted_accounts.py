"""Deleted accounts stay sealed for the retention period and can be restored by an operator."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import TEST_MASTER_KEY, chainkeys_cli

from chainkeys.accounts import service
from chainkeys.accounts.models import CreateRequest
from chainkeys.bootstrap import open_services
from chainkeys.config import Settings
from chainkeys.errors import AccountExists, AccountNotFound


def test_delete_then_restore(server: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    with server.client(server.new_token(tenant)) as c:
        made = c.post("/cosmos", json={}).json()["data"]["data"]
        address, private_key = made["address"], made["private_key"]
        assert c.delete(f"/cosmos/{address}").status_code == 200
        assert c.get(f"/cosmos/{address}").status_code == 404
        assert c.get("/cosmos").json()["data"]["data"]["keys"] == []

        retained = server.call(server.services.accounts.deleted(tenant))
        assert [d.account.name for d in retained] == [address]

        view = server.call(server.services.accounts.restore(tenant, "cosmos", address))
        assert view.address == address
        assert c.get(f"/cosmos/{address}").status_code == 200
        owner = server.call(server.services.tokens.authenticate(c.headers["authorization"]))
        secret = server.call(server.services.accounts.open_secret(owner, "cosmos", address))
        assert secret.hex() == private_key  # the very same key came back
        actions = [e["action"] for e in c.get("/audit").json()["data"]["events"]]
        assert actions[:3] == ["restore", "delete", "create"]  # newest first

        with pytest.raises(AccountNotFound):
            server.call(server.services.accounts.restore(tenant, "cosmos", address))


def test_restore_refuses_a_name_taken_again(server: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    key = "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d"
    with server.client(server.new_token(tenant)) as c:
        address = c.post("/cosmos", json={"private_key": key}).json()["data"]["data"]["address"]
        assert c.delete(f"/cosmos/{address}").status_code == 200
        assert c.post("/cosmos", json={"private_key": key}).status_code == 200  # free again
        with pytest.raises(AccountExists):
            server.call(server.services.accounts.restore(tenant, "cosmos", address))


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(data_dir=tmp_path, master_key=TEST_MASTER_KEY, **kw)


def test_retention_zero_erases_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        svc = await open_services(_settings(tmp_path, deleted_retention_days=0))
        try:
            _, token = await svc.tokens.create("erase")
            tenant = await svc.tokens.authenticate(token)
            assert tenant is not None
            await svc.accounts.create(tenant, "cosmos", CreateRequest())
            name = (await svc.accounts.list(tenant, "cosmos", None, None)).items[0].name
            await svc.accounts.delete(tenant, "cosmos", name)
            assert await svc.accounts.deleted("erase") == []
        finally:
            await svc.close()

    asyncio.run(main())


def test_retained_rows_are_purged_after_the_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        svc = await open_services(_settings(tmp_path, deleted_retention_days=30))
        try:
            _, token = await svc.tokens.create("purge")
            tenant = await svc.tokens.authenticate(token)
            assert tenant is not None
            made = await svc.accounts.create(tenant, "dogecoin", CreateRequest())
            await svc.accounts.delete(tenant, "dogecoin", made.view.name)
            await svc.accounts.purge_expired()
            assert len(await svc.accounts.deleted("purge")) == 1  # within the period
            real_now = service.now_ms  # type: ignore[attr-defined]
            monkeypatch.setattr(service, "now_ms", lambda: real_now() + 31 * 86_400_000)
            await svc.accounts.purge_expired()
            assert await svc.accounts.deleted("purge") == []
        finally:
            await svc.close()

    asyncio.run(main())


def test_cli_lists_and_restores(tmp_path: Path) -> None:
    settings = _settings(tmp_path)

    async def setup() -> str:
        svc = await open_services(settings)
        try:
            _, token = await svc.tokens.create("ops")
            tenant = await svc.tokens.authenticate(token)
            assert tenant is not None
            made = await svc.accounts.create(tenant, "litecoin", CreateRequest())
            await svc.accounts.delete(tenant, "litecoin", made.view.name)
            return made.view.name
        finally:
            await svc.close()

    name = asyncio.run(setup())
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path), "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY}
    listed = chainkeys_cli("account", "deleted", "--tenant", "ops", env=env)
    assert listed.returncode == 0, listed.stderr
    [line] = [x for x in listed.stdout.splitlines() if name in x]
    assert line.split()[-3:] == ["ops", "litecoin", name]  # the tenant by its name, not its id
    restored = chainkeys_cli("account", "restore", "litecoin", name, "--tenant", "ops", env=env)
    assert restored.returncode == 0, restored.stderr
    again = chainkeys_cli("account", "restore", "litecoin", name, "--tenant", "ops", env=env)
    assert again.returncode != 0 and "no deleted litecoin account" in again.stderr
