"""PostgreSQL's change counter: LISTEN on one connection, NOTIFY from every write.

Why: the token and account-view caches (store/cache.py) may keep what they read only
while they learn of every change another replica commits. Every write transaction
that changes existing rows (store/changes.py: an UPDATE, a DELETE, an upsert; a plain
INSERT changes none) sends `NOTIFY chainkeys_changes, '<tables>'` in the same
transaction, so the notification exists exactly when the change does. Each replica
listens on a connection of its own (outside the pool): every notification, its own
included, is a new version of the counter, and says which tables changed.

Bounded staleness: a server process's supervised `watch` round runs `SELECT 1` on the
listening connection every WATCH_EVERY seconds. PostgreSQL delivers the notifications
committed before a statement ahead of its answer, so each answered round proves that
every change committed before it has been counted, and leases the counter for LEASE
seconds. Past the lease (the connection dropped, or stalled without a word), the
counter is down: `read` answers None and the caches clear and read through, until a
round answers again on a fresh connection (a new version that explains nothing:
whatever was missed clears them once more). A revoked token, a deleted account or a
changed policy is therefore refused by every replica at most about LEASE seconds after
it commits, and at once by the replica that committed it. Processes that run no
rounds (the CLI) never lease the counter: they cache nothing.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final

from chainkeys.store.changes import EVERYTHING, between
from chainkeys.store.postgres.hosts import connect

CHANNEL: Final = "chainkeys_changes"
NOTIFY: Final = "SELECT pg_notify($1, $2)"  # a write's last statement: channel, tables
WATCH_EVERY: Final = 0.25  # seconds between two rounds
LEASE: Final = 1.0  # seconds an answered round vouches for
KEPT: Final = 1024  # versions remembered (a cache further behind clears)


class PgChanges:
    """The versions notifications made, and the lease of the connection they came on."""

    def __init__(self, dsn: str, connect_timeout: float) -> None:
        self._dsn = dsn
        self._timeout = connect_timeout
        self._conn: Any = None
        self._version = 0
        self._changes: dict[int, frozenset[str] | None] = {}
        self._leased_until = -1.0  # time.monotonic() the last answered round vouches until

    def read(self) -> int | None:
        """The current version, or None while the counter is down (no lease)."""
        return self._version if time.monotonic() < self._leased_until else None

    def changes(self, since: int, now: int) -> frozenset[str] | None:
        """The tables changed from version `since` to `now` (None: not known)."""
        return between(self._changes, since, now)

    async def watch(self) -> None:
        """One round: (re)connect and LISTEN if needed, then prove the connection
        delivers by an answered statement, and extend the lease."""
        asked = time.monotonic()
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = None
                conn = await connect(  # the primary's: only it sends notifications
                    self._dsn,
                    timeout=self._timeout,
                    server_settings={"application_name": "chainkeys-watch"},
                )
                await conn.add_listener(CHANNEL, self._notified)
                self._conn = conn
                self._bump(None)  # what was missed while not listening: unknown
            await self._conn.fetchval("SELECT 1", timeout=LEASE / 2)
        except BaseException:
            self._leased_until = -1.0
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.terminate()
            raise
        self._leased_until = asked + LEASE

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self._leased_until = -1.0
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=1.0)

    def committed(self, tables: frozenset[str]) -> None:
        """This process committed changes to rows of `tables`: counted at once, before
        its own notification comes back (its next request must see them)."""
        self._bump(tables)

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        tables = frozenset(t for t in payload.split(",") if t)
        self._bump(tables or frozenset({EVERYTHING}))

    def _bump(self, tables: frozenset[str] | None) -> None:
        self._version += 1
        self._changes[self._version] = tables
        if len(self._changes) > KEPT:
            del self._changes[next(iter(self._changes))]
