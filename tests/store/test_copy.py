"""`chainkeys db copy`: SQLite → PostgreSQL → SQLite, verified, refusing what it must."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import TEST_MASTER_KEY, chainkeys_cli, drop_pg_database, make_pg_database

from chainkeys.accounts.models import CreateRequest
from chainkeys.bootstrap import Services, open_services, sealed_opener
from chainkeys.config import Settings
from chainkeys.store.backend import open_backend
from chainkeys.store.dbcopy import CopyError, copy_database, display_url

FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")
IMPORTED_HEX = "a" * 63 + "1"


@dataclass
class Snapshot:
    """What a store holds, as the service sees it."""

    tokens: dict[str, str]  # token → tenant name
    secrets: dict[tuple[str, str, str], bytes]  # (tenant id, family, name) → private key
    names: dict[tuple[str, str], list[str]]  # (tenant id, family) → names in list order


def settings(url: str, tmp: Path, key: str = TEST_MASTER_KEY) -> Settings:
    return Settings(data_dir=tmp / "unused", database_url=url, master_key=key)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = make_pg_database()
    yield url
    drop_pg_database(url)


async def populate(url: str, tmp: Path) -> Snapshot:
    """Two tenants, every family, generated and imported keys, one delete."""
    svc = await open_services(settings(url, tmp))
    try:
        tokens: dict[str, str] = {}
        for name in ("alpha", "beta"):
            _, token = await svc.tokens.create(name, "copy test")
            _, second = await svc.tokens.create(name, "second token")
            tokens |= {token: name, second: name}
            tenant = await svc.tokens.authenticate(token)
            assert tenant is not None
            for family in FAMILIES:
                for _ in range(3):
                    await svc.accounts.create(tenant, family, CreateRequest())
                await svc.accounts.create(tenant, family, CreateRequest(private_key=IMPORTED_HEX))
        beta = tenant
        assert beta is not None
        doomed = await svc.accounts.create(beta, "cosmos", CreateRequest())
        await svc.accounts.delete(beta, "cosmos", doomed.view.name)
        return await snapshot(svc, tokens)
    finally:
        await svc.close()


async def snapshot(svc: Services, tokens: dict[str, str]) -> Snapshot:
    secrets: dict[tuple[str, str, str], bytes] = {}
    names: dict[tuple[str, str], list[str]] = {}
    for token in tokens:
        tenant = await svc.tokens.authenticate(token)
        assert tenant is not None, "a token stopped working"
        for family in FAMILIES:
            page = await svc.accounts.list(tenant, family, 1000, None)
            names[(tenant.tenant_id, family)] = [a.name for a in page.items]
            for a in page.items:
                secrets[(tenant.tenant_id, family, a.name)] = await svc.accounts.open_secret(
                    tenant, family, a.name
                )
    return Snapshot(tokens, secrets, names)


async def read_back(url: str, tmp: Path, tokens: dict[str, str]) -> Snapshot:
    """Open the copy as a service would, check it, and prove it still takes writes."""
    svc = await open_services(settings(url, tmp))
    try:
        seen = await snapshot(svc, tokens)
        tenant = await svc.tokens.authenticate(next(iter(tokens)))
        assert tenant is not None
        for family in FAMILIES:  # ids continue after the copied ones (PostgreSQL sequences)
            await svc.accounts.create(tenant, family, CreateRequest())
        await svc.tokens.create("gamma", "after the copy")
        return seen
    finally:
        await svc.close()


def copy_cli(src: str, dst: str, key: str = TEST_MASTER_KEY) -> tuple[int, str, str]:
    done = chainkeys_cli(
        "db",
        "copy",
        "--from",
        src,
        "--to",
        dst,
        env={"CHAINKEYS_MASTER_KEY": key, "CHAINKEYS_DATABASE_URL": ""},
    )
    return done.returncode, done.stdout, done.stderr


def test_sqlite_to_postgresql_and_back(tmp_path: Path, pg_url: str) -> None:
    source = sqlite_url(tmp_path / "source.db")
    before = asyncio.run(populate(source, tmp_path))
    assert len(before.secrets) == 2 * 4 * 4

    code, out, err = copy_cli(source, pg_url)
    assert code == 0, err
    assert "tenants      2" in out and "tokens       4" in out and "accounts     32" in out
    # 32 accounts, 1 retained after its delete, the master-key check record and the
    # integrity key (vault/integrity.py): the copy's tokens and policies still check
    assert "35 sealed values open" in out
    assert asyncio.run(read_back(pg_url, tmp_path, before.tokens)) == before

    back = sqlite_url(tmp_path / "back" / "chainkeys.db")  # the directory is made
    code, out, err = copy_cli(pg_url, back)
    assert code == 0, err
    assert "accounts     36" in out  # the four made on PostgreSQL after the copy
    again = asyncio.run(read_back(back, tmp_path, before.tokens))
    assert again.tokens == before.tokens
    for key, secret in before.secrets.items():
        assert again.secrets[key] == secret
    # list order (keyset by id) survives both moves
    for where, names in before.names.items():
        assert again.names[where][: len(names)] == names


def test_sqlite_to_sqlite_without_postgresql(tmp_path: Path) -> None:
    source, target = sqlite_url(tmp_path / "a.db"), sqlite_url(tmp_path / "b.db")
    before = asyncio.run(populate(source, tmp_path))
    code, _, err = copy_cli(source, target)
    assert code == 0, err
    seen = asyncio.run(read_back(target, tmp_path, before.tokens))
    assert seen == before


def test_refuses_a_target_that_is_not_empty(tmp_path: Path, pg_url: str) -> None:
    source = sqlite_url(tmp_path / "source.db")
    asyncio.run(populate(source, tmp_path))
    assert copy_cli(source, pg_url)[0] == 0
    code, _, err = copy_cli(source, pg_url)
    assert code != 0
    assert "not empty" in err and "2 tenants" in err and "copy failed" in err
    code, _, err = copy_cli(source, source)
    assert code != 0 and "same database" in err


def test_wrong_master_key_copies_nothing(tmp_path: Path) -> None:
    source, target = sqlite_url(tmp_path / "a.db"), tmp_path / "b.db"
    asyncio.run(populate(source, tmp_path))
    wrong = base64.b64encode(b"\x07" * 32).decode()
    code, out, err = copy_cli(source, sqlite_url(target), key=wrong)
    assert code != 0
    assert "does not open" in err
    assert wrong not in err + out
    assert not target.exists() or _rows(target, "accounts") == 0


def test_an_account_that_does_not_open_rolls_the_copy_back(tmp_path: Path) -> None:
    """The check record opens but one account was tampered with: nothing lands."""
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    asyncio.run(populate(sqlite_url(source), tmp_path))
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE accounts SET secret = ? WHERE id = 3", (b"\x01" + bytes(40),))
    conn.close()

    async def run() -> None:
        s = settings(sqlite_url(source), tmp_path)
        src, dst = open_backend(sqlite_url(source), s), open_backend(sqlite_url(target), s)
        try:
            with pytest.raises(
                CopyError,
                match=r"1 sealed values do not open with the master key \(1 in accounts.secret\)",
            ):
                await copy_database(src, dst, lambda db: sealed_opener(db, s), batch=7)
        finally:
            await src.close()
            await dst.close()

    asyncio.run(run())
    for table in ("tenants", "tokens", "accounts", "meta"):
        assert _rows(target, table) == 0  # migrated, but empty: one transaction


def test_source_at_another_schema_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "a.db"
    asyncio.run(populate(sqlite_url(source), tmp_path))
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0000'")
    conn.close()
    code, _, err = copy_cli(sqlite_url(source), sqlite_url(tmp_path / "b.db"))
    assert code != 0 and "chainkeys db upgrade" in err


def test_unreachable_database_is_named_without_its_password(tmp_path: Path) -> None:
    url = "postgresql://chainkeys:hunter2@127.0.0.1:1/nowhere"
    code, out, err = copy_cli(url, sqlite_url(tmp_path / "b.db"))
    assert code != 0
    assert "source database" in err and "unreachable" in err
    assert "hunter2" not in err + out
    assert display_url(url) == "postgresql://chainkeys:***@127.0.0.1:1/nowhere"


def test_batches_preserve_ids(tmp_path: Path) -> None:
    """Small batches: every id kept, so cursors handed out before the move still work."""
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    asyncio.run(populate(sqlite_url(source), tmp_path))

    async def run() -> None:
        s = settings(sqlite_url(source), tmp_path)
        src, dst = open_backend(sqlite_url(source), s), open_backend(sqlite_url(target), s)
        try:
            report = await copy_database(src, dst, lambda db: sealed_opener(db, s), batch=5)
            assert report.counts["accounts"] == 32 and report.opened == 35
        finally:
            await src.close()
            await dst.close()

    asyncio.run(run())
    ids = "SELECT id, tenant_id, family, name, secret FROM accounts ORDER BY id"
    assert _all(source, ids) == _all(target, ids)


def _rows(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _all(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()
