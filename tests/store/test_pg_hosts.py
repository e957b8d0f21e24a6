"""A URL naming several PostgreSQL hosts (store/postgres/hosts.py): every connection
chainkeys opens, the pool's, the change watch's and SQLAlchemy's (migrations), reaches
the host that answers, each host given the whole connect timeout.

The cluster a multi-host URL is made for (a primary and its standby, a failover) is
tests/process/test_failover.py's; here the first host is a port that never answers, the way a
machine gone without a reset looks, and the second is the shared PostgreSQL."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest
from tests.conftest import TEST_MASTER_KEY, drop_pg_database, make_pg_database

from chainkeys.config import Settings
from chainkeys.store import migrate
from chainkeys.store.dbcopy import display_url
from chainkeys.store.postgres.backend import PostgresBackend
from chainkeys.store.postgres.hosts import connect, per_host
from chainkeys.store.postgres.watch import PgChanges
from chainkeys.vault.repository import Meta


def test_each_host_of_the_list_gets_its_own_dsn_asking_for_the_primary() -> None:
    many = per_host("postgresql://u:p%2C@h1:5433,[::1]:5434,h3/db?sslmode=disable")
    assert [urlsplit(d).netloc for d in many] == [
        "u:p%2C@h1:5433",
        "u:p%2C@[::1]:5434",
        "u:p%2C@h3",
    ]
    for dsn in many:
        parts = urlsplit(dsn)
        assert parts.path == "/db"
        assert dict(parse_qsl(parts.query)) == {
            "sslmode": "disable",
            "target_session_attrs": "read-write",
        }
    asked = per_host("postgresql://h1,h2/db?target_session_attrs=primary")
    assert all(
        dict(parse_qsl(urlsplit(d).query))["target_session_attrs"] == "primary" for d in asked
    )
    one = "postgresql://u@h1:5432/db"
    assert per_host(one) == [one]  # one host: as given (any standby is the user's choice)


def test_a_multi_host_url_is_shown_without_its_password() -> None:
    url = "postgresql://ck:hunter2@db1:5432,db2:5432/ck?target_session_attrs=read-write"
    assert display_url(url) == (
        "postgresql://ck:***@db1:5432,db2:5432/ck?target_session_attrs=read-write"
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes TCP connections (the kernel's backlog) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = make_pg_database()
    yield url
    drop_pg_database(url)


def test_a_silent_first_host_does_not_use_up_the_timeout(silent_port: int, pg_url: str) -> None:
    """asyncpg bounds the whole list by one timeout: the silent host would take it all
    and the answering one would never be tried."""
    rest = urlsplit(pg_url)
    url = f"{rest.scheme}://{rest.username}@127.0.0.1:{silent_port},{rest.netloc.split('@')[-1]}{rest.path}"

    async def main() -> None:
        conn = await connect(url, timeout=0.5)
        try:
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()
        # the server's own paths: migrations on SQLAlchemy's engine, the pool, the watch
        settings = Settings(database_url=url, master_key=TEST_MASTER_KEY, db_connect_timeout=0.5)
        db = PostgresBackend(url, settings)
        try:
            await migrate.upgrade(db)
            assert await migrate.current_revision(db) == migrate.HEAD
            async with db.read() as tx:  # the pool's
                await Meta.ping(tx)
        finally:
            await db.close()
        watch = PgChanges(url, 0.5)
        try:
            await watch.watch()  # connects (its lease counts from before: spent waiting)
            await watch.watch()
            assert watch.read() is not None  # leased: listening on the answering host
        finally:
            await watch.close()

    asyncio.run(main())
