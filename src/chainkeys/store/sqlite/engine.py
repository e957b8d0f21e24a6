"""SQLite connections as chainkeys opens them: the engine's pragmas on every connection
(WAL, the durability setting, the busy timeout, foreign keys), and the writer's TEMP
views of the joined inserts (store/joined.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event

from chainkeys.config import Settings
from chainkeys.store.tables import JOINED


def as_sqlite(driver: object) -> sqlite3.Connection:
    """A driver connection of this engine, typed (a TypeError if it is not sqlite3's)."""
    if not isinstance(driver, sqlite3.Connection):
        raise TypeError("a SQLite connection is not a sqlite3 connection")
    return driver


def joined_views(conn: Connection, install: bool) -> None:
    """The joined inserts' TEMP views (store/joined.py) on the writer, where writes run;
    removed from a connection that runs migrations (a pooled connection may have been a
    writer), whose table renames SQLite checks every trigger against."""
    raw = as_sqlite(conn.connection.driver_connection)
    for joined in JOINED:
        for ddl in joined.sqlite_ddl() if install else [joined.sqlite_drop()]:
            raw.execute(ddl)


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
