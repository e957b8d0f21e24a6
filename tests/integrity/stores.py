"""What the tests of the untrusted database share: a store of its own per test on each
engine, SQL on it as a database writer runs it (no master key, no gate), and the
environment the `chainkeys` command needs to open it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.conftest import TEST_MASTER_KEY, backend_settings, drop_pg_database

from chainkeys.config import Settings
from chainkeys.store.backend import open_backend


@contextlib.contextmanager
def own_store(backend: str, data_dir: Path, **overrides: Any) -> Iterator[Settings]:
    """Settings for a fresh store on `backend` (its PostgreSQL database dropped after)."""
    made, pg_url = backend_settings(backend, data_dir, **overrides)
    try:
        yield made
    finally:
        if pg_url:
            drop_pg_database(pg_url)


def as_writer(settings: Settings, fn: Callable[[Any], Any]) -> Any:
    """Run `fn(connection)` in one transaction on the store, as a database writer would."""

    async def main() -> Any:
        db = open_backend(settings.db_url, settings)
        try:
            return await db.run_sync(fn, transaction=True)
        finally:
            await db.close()

    return asyncio.run(main())


def cli_env(settings: Settings) -> dict[str, str | None]:
    """The command's environment for this store; a variable it must not see is None
    (removed for the call): a key file store gets no CHAINKEYS_MASTER_KEY."""
    env: dict[str, str | None] = {
        "CHAINKEYS_DATA_DIR": str(settings.data_dir),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY if settings.master_key else None,
        "CHAINKEYS_DATABASE_URL": None,
    }
    if settings.database_url is not None:
        env["CHAINKEYS_DATABASE_URL"] = settings.database_url.get_secret_value()
    return env
