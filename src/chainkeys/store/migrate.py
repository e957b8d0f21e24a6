"""Alembic migrations, run programmatically on a live connection (both backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from chainkeys.errors import StartupError
from chainkeys.store.backend import Backend

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Any = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StartupError("the migrations have no head revision")
    return head


def _current(connection: Any) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _upgrade(connection: Any) -> None:
    command.upgrade(alembic_config(connection), "head")


async def current_revision(db: Backend) -> str | None:
    return await db.run_sync(_current, transaction=False)


async def upgrade(db: Backend) -> None:
    """Apply every pending migration (in one transaction)."""
    await db.run_sync(_upgrade, transaction=True)


async def ensure_schema(db: Backend) -> None:
    """Create the schema on an empty database; refuse to serve an older one."""
    current = await current_revision(db)
    head = head_revision()
    if current == head:
        return
    if current is None:
        await upgrade(db)
        return
    known = {r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current not in known:
        raise StartupError(
            f"the database schema is at revision {current}, newer than this chainkeys "
            f"knows (it needs {head}); run the chainkeys version that upgraded it"
        )
    raise StartupError(
        f"the database schema is at revision {current}, this chainkeys needs {head}; "
        "run `chainkeys db upgrade` (after a backup) and start again"
    )
