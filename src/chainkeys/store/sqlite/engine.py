"""SQLite connections as chainkeys opens them: the engine's pragmas on every connection
(WAL, the durability setting, the busy timeout, foreign keys)."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, create_engine, event

from chainkeys.config import Settings


def as_sqlite(driver: object) -> sqlite3.Connection:
    """A driver connection of this engine, typed (a TypeError if it is not sqlite3's)."""
    if not isinstance(driver, sqlite3.Connection):
        raise TypeError("a SQLite connection is not a sqlite3 connection")
    return driver


def make_engine(url: str, settings: Settings) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False}, hide_parameters=True)
    sync_mode = settings.sqlite_synchronous
    busy = settings.sqlite_busy_timeout_ms

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={sync_mode}")
        cur.execute(f"PRAGMA busy_timeout={int(busy)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine
