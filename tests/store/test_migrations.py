"""Alembic migrations on both backends: up from empty, down and up again, old schemas refused."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from tests.conftest import (
    BACKENDS,
    TEST_MASTER_KEY,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    make_pg_database,
)

from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store import migrate
from chainkeys.store.backend import open_backend
from chainkeys.store.tables import metadata

pytestmark = [pytest.mark.parametrize("backend", BACKENDS, indirect=True), pytest.mark.long(50)]


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'chainkeys.db'}"
        return
    url = make_pg_database()
    yield url
    drop_pg_database(url)


def cli_env(url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "CHAINKEYS_DATABASE_URL": url,
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
    }


def on_connection(url: str, fn: Any) -> Any:
    """Run fn(sync connection) inside one transaction on either backend."""

    async def main() -> Any:
        db = open_backend(url, Settings())
        try:
            return await db.run_sync(fn, transaction=True)
        finally:
            await db.close()

    return asyncio.run(main())


def schema_diff(conn: Any) -> list[Any]:
    """What tables.py describes and the database lacks (or has extra): [] when equal."""
    ctx = MigrationContext.configure(conn, opts={"compare_type": True})
    return list(compare_metadata(ctx, metadata))


def table_names(conn: Any) -> set[str]:
    return set(inspect(conn).get_table_names())


def downgrade_to_base(conn: Any) -> None:
    command.downgrade(migrate.alembic_config(conn), "base")


def upgrade_to_head(conn: Any) -> None:
    command.upgrade(migrate.alembic_config(conn), "head")


def test_upgrade_creates_the_schema_in_an_empty_database_that_exists(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    """The migration step of a deploy (an init container, a Helm hook) runs before the
    replicas start, on the first deploy too: no master key, no token needed."""
    env = cli_env(db_url, tmp_path)
    del env["CHAINKEYS_MASTER_KEY"]  # schema only: the migration job holds no key
    if backend == "sqlite":  # a file nobody made: the wrong place, not a store to make
        refused = chainkeys_cli("db", "upgrade", env=env)
        assert refused.returncode == 2 and "does not exist" in refused.stderr
        assert not (tmp_path / "chainkeys.db").exists()  # nothing was made there
        (tmp_path / "chainkeys.db").touch()  # an empty file someone made on purpose
    assert on_connection(db_url, table_names) == set()
    done = chainkeys_cli("db", "upgrade", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"schema created at revision {migrate.head_revision()}"
    assert on_connection(db_url, schema_diff) == []
    again = chainkeys_cli("db", "upgrade", env=env)  # running it again is harmless
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"schema at revision {migrate.head_revision()}"
    assert not (tmp_path / "data").exists()  # no key file made by a migration
    made = chainkeys_cli("init", env=cli_env(db_url, tmp_path))  # then the replicas start
    assert made.returncode == 0, made.stderr
    listed = chainkeys_cli("token", "create", "--tenant", "t", env=cli_env(db_url, tmp_path))
    assert listed.returncode == 0, listed.stderr


def test_downgrade_to_base_and_up_again(db_url: str) -> None:
    on_connection(db_url, upgrade_to_head)
    on_connection(db_url, downgrade_to_base)
    assert on_connection(db_url, table_names) <= {"alembic_version"}
    on_connection(db_url, upgrade_to_head)
    assert on_connection(db_url, schema_diff) == []


def test_serve_refuses_an_older_schema_and_names_the_fix(db_url: str, tmp_path: Path) -> None:
    on_connection(db_url, lambda c: command.upgrade(migrate.alembic_config(c), "0001"))  # older
    env = cli_env(db_url, tmp_path)
    done = chainkeys_cli("serve", "--port", str(free_port()), env=env, timeout=60)
    assert done.returncode != 0
    assert "chainkeys db upgrade" in done.stderr
    assert "revision 0001" in done.stderr
    assert "first start" not in done.stdout  # nothing was issued on a refused start


NEXT_REVISION = '''"""A later schema (test only): a nullable column on tenants.

Revision ID: 9999
Revises: {head}
"""

import sqlalchemy as sa
from alembic import op

revision = "9999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("note")
'''

# `chainkeys` with its migrations directory swapped for one holding a newer revision.
NEWER_CODE = """
import pathlib, sys
import chainkeys.store.migrate as m
m.MIGRATIONS = pathlib.Path(sys.argv[1])
m.HEAD = "9999"  # a release with a new migration names it as its head
from chainkeys.cli import app
app(sys.argv[2:], prog_name="chainkeys")
"""


def newer_chainkeys(migrations: Path, *args: str, env: dict[str, str]) -> Any:
    import os

    return subprocess.run(
        [sys.executable, "-c", NEWER_CODE, str(migrations), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_upgrade_to_newer_code(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data made by this code; newer code refuses to serve it until `db upgrade` runs."""
    env = cli_env(db_url, tmp_path)
    assert chainkeys_cli("init", env=env).returncode == 0
    made = chainkeys_cli("token", "create", "--tenant", "acme", env=env)
    assert made.returncode == 0, made.stderr

    migrations = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    head = migrate.head_revision()
    (migrations / "versions" / "9999_note.py").write_text(NEXT_REVISION.format(head=head))

    refused = newer_chainkeys(migrations, "token", "list", env=env)
    assert refused.returncode != 0
    assert f"at revision {head}" in refused.stderr and "chainkeys db upgrade" in refused.stderr

    upgraded = newer_chainkeys(migrations, "db", "upgrade", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "schema at revision 9999" in upgraded.stdout

    listed = newer_chainkeys(migrations, "token", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "acme" in listed.stdout  # the data came through the migration
    columns = on_connection(
        db_url, lambda c: {col["name"] for col in inspect(c).get_columns("tenants")}
    )
    assert "note" in columns

    # And the newer schema passes the start-up check of the newer code, in process too.
    monkeypatch.setattr(migrate, "MIGRATIONS", migrations)
    monkeypatch.setattr(migrate, "HEAD", "9999")

    async def check() -> None:
        db = open_backend(db_url, Settings())
        try:
            await migrate.ensure_schema(db)
        finally:
            await db.close()

    asyncio.run(check())
    monkeypatch.undo()
    with pytest.raises(StartupError, match="9999"):
        asyncio.run(check())  # this (older) code will not serve the newer schema


def test_serve_refuses_a_newer_schema_and_says_so(db_url: str, tmp_path: Path) -> None:
    """After a rollback of the code: upgrading is not the fix, and the message says so."""
    on_connection(db_url, upgrade_to_head)
    on_connection(
        db_url, lambda c: c.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    )
    done = chainkeys_cli(
        "serve", "--port", str(free_port()), env=cli_env(db_url, tmp_path), timeout=60
    )
    assert done.returncode != 0
    assert "newer than this chainkeys" in done.stderr
    assert "db upgrade" not in done.stderr


def test_0013_fills_the_wallet_of_accounts_derived_before_it(db_url: str) -> None:
    """An account derived before the column existed is listed with its wallet after."""

    def before(conn: Any) -> None:
        command.upgrade(migrate.alembic_config(conn), "0012")
        conn.execute(text("INSERT INTO tenants (id, name, created_ms) VALUES ('t1', 'a', 1)"))
        for n, details in enumerate(
            ('{"wallet": "w1", "path": "m/44\'/118\'/0\'/0/0"}', '{"source": "generated"}')
        ):
            conn.execute(
                text(
                    "INSERT INTO accounts (tenant_id, family, name, network, address, public_key,"
                    " details, secret, key_id, created_ms) VALUES ('t1', 'cosmos', :n, 'cosmoshub',"
                    " :n, 'pk', :d, :s, 'k1', 1)"
                ),
                {"n": f"name{n}", "d": details, "s": b"x"},
            )

    on_connection(db_url, before)
    on_connection(db_url, upgrade_to_head)
    rows = on_connection(
        db_url,
        lambda c: c.execute(text("SELECT name, wallet_id FROM accounts ORDER BY name")).all(),
    )
    assert [tuple(r) for r in rows] == [("name0", "w1"), ("name1", None)]
    assert on_connection(db_url, schema_diff) == []
