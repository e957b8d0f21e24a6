"""Alembic migrations, run programmatically on a live connection (both backends).

Alembic itself (with Mako and Pygments, ~0.25 s of imports) is loaded only to
migrate: a process that finds the schema at `HEAD` reads the revision with one
SELECT. tests/store/test_migrations.py checks `HEAD` is Alembic's head.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect, text

from chainkeys.errors import StartupError
from chainkeys.store.backend import Backend

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("chainkeys.store")
MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0025"  # the newest revision in migrations/versions/ (a new migration moves it)


def alembic_config(connection: Any = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """Alembic's own answer (`HEAD` is what the code compares with)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StartupError("the migrations have no head revision")
    return head


def _current(connection: Any) -> str | None:
    """The revision Alembic recorded (its `alembic_version` table), None on an empty
    database; more than one row (branches) is refused, as Alembic refuses it."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    if len(rows) > 1:
        raise StartupError(f"the database records {len(rows)} schema revisions; expected one")
    return str(rows[0][0]) if rows else None


def _upgrade(connection: Any) -> tuple[str | None, str | None]:
    from alembic import command

    before = _current(connection)
    command.upgrade(alembic_config(connection), "head")
    return before, _current(connection)


async def current_revision(db: Backend) -> str | None:
    return await db.run_sync(_current, transaction=False)


async def upgrade(db: Backend) -> None:
    """Apply every pending migration (in one transaction); one summary line at INFO
    (each migration's own line is Alembic's, at DEBUG)."""
    before, after = await db.run_sync(_upgrade, transaction=True)
    if before is None:
        log.info("schema created at revision %s", after)
    elif before != after:
        log.info("schema upgraded from revision %s to %s", before, after)


async def ensure_schema(db: Backend) -> None:
    """Create the schema on an empty database; refuse to serve an older one."""
    current = await current_revision(db)
    head = HEAD
    if current == head:
        return
    if current is None:
        await upgrade(db)
        return
    from alembic.script import ScriptDirectory

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
