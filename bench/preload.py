"""Data sets: a chainkeys store with one tenant of N accounts, written straight to the tables.

The schema, the master key and the tenant's token come from chainkeys itself
(`open_services` + `TokenService.create`, what `chainkeys token create` runs);
the accounts are then inserted in bulk (sqlite3 executemany / asyncpg COPY),
each a real key with its real address and its private key sealed under the
store's master key, so a row is what `POST /cosmos` would have written.
"""

from __future__ import annotations

import asyncio
import base64
import multiprocessing
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from coincurve import PublicKey

from bench import lean

FAMILY = "cosmos"  # get and list run on Cosmos accounts
TENANT = "bench"
CHUNK = 20_000
COLUMNS = (
    "tenant_id",
    "family",
    "name",
    "network",
    "address",
    "public_key",
    "details",
    "secret",
    "key_id",
    "created_ms",
    "mac",
)


@dataclass(frozen=True)
class Dataset:
    """A prepared store: where it is, the tenant's token, what to ask for."""

    size: int
    data_dir: Path  # pristine: every server run gets a copy (SQLite) or a clone (PostgreSQL)
    token: str
    tenant_id: str
    names_file: Path  # a shuffled sample of account names in the tenant
    deep_cursor: str  # the list cursor 90% of the way through the tenant
    pg_template: str | None = None  # database name of the PostgreSQL template


def _rows(args: tuple[str, int, bytes, int, bytes]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """`count` Cosmos accounts for one tenant, each MACed as chainkeys MACs an account
    (store/integrity.py ACCOUNTS; runs in a worker process)."""
    from chainkeys.store.integrity import ACCOUNTS
    from chainkeys.vault.integrity import Integrity
    from chainkeys.vault.providers import MasterKey
    from chainkeys.vault.seal import Context, Vault

    tenant_id, count, material, sample_every, integrity_material = args
    vault = Vault(MasterKey(material))
    integrity = Integrity(integrity_material)
    now = int(time.time() * 1000)
    rows, sample = [], []
    for i in range(count):
        secret = os.urandom(32)
        pub = PublicKey.from_secret(secret).format(compressed=True)
        name = lean.cosmos_address(pub)
        b64 = base64.b64encode(pub).decode()
        details = {
            "extra": {"pubkey": lean.COSMOS_KEYRING % b64},
            "address_type": None,
            "compressed": True,
            "source": "generated",
            "path": None,
        }
        sealed = vault.seal(secret, Context(tenant_id, FAMILY, name))
        row = (
            tenant_id,
            FAMILY,
            name,
            "cosmoshub",
            name,
            b64,
            orjson.dumps(details).decode(),
            sealed,
            vault.key_id,
            now,
        )
        rows.append((*row, integrity.mac(ACCOUNTS, dict(zip(COLUMNS, row, strict=False)))))
        if i % sample_every == 0:
            sample.append(name)
    return rows, sample


def generate(
    tenant_id: str, n: int, material: bytes, sample: int, integrity: bytes
) -> Iterator[tuple[list[tuple[Any, ...]], list[str]]]:
    """Chunks of rows (and a spread sample of their names), made on every core."""
    every = max(1, n // sample)
    jobs = [
        (tenant_id, min(CHUNK, n - start), material, every, integrity)
        for start in range(0, n, CHUNK)
    ]
    if len(jobs) == 1:
        yield _rows(jobs[0])
        return
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        yield from pool.imap(_rows, jobs)


def generate_spread(
    tenant_ids: list[str], per_tenant: int, material: bytes, integrity: bytes, run: int = 50
) -> Iterator[tuple[list[tuple[Any, ...]], list[str]]]:
    """`per_tenant` Cosmos accounts in each of `tenant_ids`, made as `generate` makes them
    but interleaved in runs of `run` (tenant 1's first run, tenant 2's, ..., then every
    tenant's second run): a tenant's accounts spread over the table as years of creates
    by many tenants leave them. Chunks of rows, each with the names of the first tenant's
    accounts in it (all of them)."""
    jobs = [
        (tenant, min(run, per_tenant - start), material, 1 if i == 0 else run, integrity)
        for start in range(0, per_tenant, run)
        for i, tenant in enumerate(tenant_ids)
    ]
    first = tenant_ids[0]
    rows: list[tuple[Any, ...]] = []
    names: list[str] = []
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        for job, (made, sampled) in zip(jobs, pool.imap(_rows, jobs, chunksize=8), strict=True):
            rows += made
            if job[0] == first:
                names += sampled
            if len(rows) >= CHUNK:
                yield rows, names
                rows, names = [], []
    if rows:
        yield rows, names


def _issue_token(data_dir: Path, database_url: str | None, env: dict[str, str]) -> str:
    """`chainkeys init` (schema and master key), then `chainkeys token create`."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("CHAINKEYS_")}
    full.update(env, CHAINKEYS_LOG_LEVEL="WARNING")
    if database_url:
        full["CHAINKEYS_DATABASE_URL"] = database_url
    subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", "init", "--data-dir", str(data_dir)],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainkeys.cli",
            "token",
            "create",
            "--tenant",
            TENANT,
            "--label",
            "benchmark",
            "--data-dir",
            str(data_dir),
        ],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chainkeys token create failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def master_material(data_dir: Path) -> bytes:
    return base64.b64decode((data_dir / "master.key").read_text().strip())


def integrity_material(data_dir: Path, sealed: bytes) -> bytes:
    """The store's integrity key from its sealed `meta` record, opened as chainkeys does."""
    from chainkeys.vault.integrity import CONTEXT, read_record
    from chainkeys.vault.providers import MasterKey
    from chainkeys.vault.seal import Vault

    vault = Vault(MasterKey(master_material(data_dir)))
    return read_record(vault.open(sealed, vault.key_id, CONTEXT)).key


def encode_cursor(data_dir: Path, tenant_id: str, last_id: int) -> str:
    """The list cursor chainkeys itself would hand out (opaque, under the store's key)."""
    from chainkeys.vault.derive import Cursors
    from chainkeys.vault.providers import MasterKey
    from chainkeys.vault.seal import Vault

    cursors = Cursors(Vault(MasterKey(master_material(data_dir))))
    return cursors.make(last_id, f"accounts/{tenant_id}/{FAMILY}/*")


def _finish(
    data_dir: Path,
    size: int,
    token: str,
    tenant_id: str,
    names: list[str],
    deep_id: int,
    pg_template: str | None = None,
) -> Dataset:
    random.shuffle(names)
    names_file = data_dir.parent / f"names-{size}.txt"
    names_file.write_text("\n".join(names) + "\n")
    cursor = encode_cursor(data_dir, tenant_id, deep_id)
    return Dataset(size, data_dir, token, tenant_id, names_file, cursor, pg_template)


def sqlite_dataset(
    root: Path, size: int, sample: int = 20_000, env: dict[str, str] | None = None
) -> Dataset:
    data_dir = root / f"sqlite-{size}" / "data"
    token = _issue_token(data_dir, None, env or {})
    material = master_material(data_dir)
    conn = sqlite3.connect(data_dir / "chainkeys.db", isolation_level=None)
    try:
        tenant_id = conn.execute("SELECT id FROM tenants WHERE name = ?", (TENANT,)).fetchone()[0]
        sealed = conn.execute("SELECT value FROM meta WHERE key = 'integrity_key'").fetchone()[0]
        integrity = integrity_material(data_dir, bytes(sealed))
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        names: list[str] = []
        insert = (
            f"INSERT INTO accounts ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
        )
        for rows, sampled in generate(tenant_id, size, material, sample, integrity):
            conn.executemany(insert, rows)
            names += sampled
        conn.execute("COMMIT")
        deep_id = conn.execute(
            "SELECT id FROM accounts WHERE tenant_id = ? AND family = ? ORDER BY id LIMIT 1 OFFSET ?",
            (tenant_id, FAMILY, int(size * 0.9)),
        ).fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return _finish(data_dir, size, token, tenant_id, names, deep_id)


async def _pg(url: str, sql: str, *args: Any) -> Any:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(url, timeout=5)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def pg_admin(admin_url: str, sql: str) -> None:
    asyncio.run(_pg(admin_url, sql))


def pg_url(admin_url: str, database: str) -> str:
    return f"{admin_url.rsplit('/', 1)[0]}/{database}"


def pg_reachable(admin_url: str) -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        asyncio.run(_pg(admin_url, "SELECT 1"))
    except Exception as exc:  # any failure means: not usable for the benchmark
        return f"{type(exc).__name__}: {exc}"
    return None


async def _copy_accounts(
    url: str, tenant_id: str, size: int, data_dir: Path, sample: int
) -> tuple[list[str], int]:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=5)
    try:
        names: list[str] = []
        sealed = await conn.fetchval("SELECT value FROM meta WHERE key = 'integrity_key'")
        integrity = integrity_material(data_dir, bytes(sealed))
        material = master_material(data_dir)
        for rows, sampled in generate(tenant_id, size, material, sample, integrity):
            await conn.copy_records_to_table("accounts", records=rows, columns=list(COLUMNS))
            names += sampled
        await conn.execute("VACUUM ANALYZE accounts")
        deep_id = await conn.fetchval(
            "SELECT id FROM accounts WHERE tenant_id = $1 AND family = $2 ORDER BY id LIMIT 1 OFFSET $3",
            tenant_id,
            FAMILY,
            int(size * 0.9),
        )
    finally:
        await conn.close()
    return names, int(deep_id)


def pg_dataset(
    root: Path,
    size: int,
    admin_url: str,
    prefix: str,
    sample: int = 20_000,
    env: dict[str, str] | None = None,
) -> Dataset:
    """A template database holding the data set; each run clones it (CREATE DATABASE … TEMPLATE)."""
    template = f"{prefix}_tmpl_{size}"
    pg_admin(admin_url, f'CREATE DATABASE "{template}"')
    url = pg_url(admin_url, template)
    data_dir = root / f"pg-{size}" / "data"  # holds the master key file
    token = _issue_token(data_dir, url, env or {})
    tenant_id = asyncio.run(_pg(url, "SELECT id FROM tenants WHERE name = $1", TENANT))
    names, deep_id = asyncio.run(_copy_accounts(url, tenant_id, size, data_dir, sample))
    return _finish(data_dir, size, token, tenant_id, names, deep_id, pg_template=template)
