"""The one interface between chainkeys and a storage engine, and the factory that picks it.

Each engine is one class in its own folder: `store/sqlite/` (embedded, the
default: group commit, inline reads, a change counter from shared memory) and
`store/postgres/` (asyncpg for requests, SQLAlchemy for the rare paths).
Everything outside `store/` holds a `Backend` and asks it for transactions and
capabilities; nothing outside names an engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol, TypeVar

from sqlalchemy import Connection

from chainkeys.config import Settings
from chainkeys.store.sql import CopySession, RowSigner, Tx

T = TypeVar("T")


class Transactions(Protocol):
    """Where a service's reads and writes go: a `Backend` (each write its own
    transaction), or one transaction several requests share (store/shared.py)."""

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]: ...

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]: ...


class Backend(Protocol):
    """A chainkeys store on one engine."""

    url: str
    # Whether change_counter() is cheap enough to read per request (caches rely on it).
    has_change_counter: bool
    # Whether it moves with the commit itself (SQLite's shared memory), or a moment
    # later (PostgreSQL's notifications): what must hold "at once" on every replica
    # (a freeze) is cached only where it is immediate.
    counter_is_immediate: bool
    # Seconds between two rounds of `watch` in a server process (None: it has none).
    watch_every: float | None
    # The gate (vault/gate.py) once the barrier opened it, handed to every transaction:
    # what lets an audit row carry its MAC from the statement that inserts it.
    signer: RowSigner | None

    def read(self) -> contextlib.AbstractAsyncContextManager[Tx]:
        """Autocommit reads: each statement sees a consistent snapshot."""
        ...

    def write(self, one_statement: bool = False) -> contextlib.AbstractAsyncContextManager[Tx]:
        """One atomic transaction: all of it commits or none of it does. `one_statement`
        promises a single statement, which is then the whole write: atomic on its own
        and kept whatever the body does after it (PostgreSQL skips BEGIN and COMMIT,
        SQLite the savepoint); a second statement is refused."""
        ...

    def change_counter(self) -> int | None:
        """A number that changes whenever another connection or process has committed
        (only where `has_change_counter`); None while the engine cannot tell (then
        nothing read may be kept)."""
        ...

    async def watch(self) -> None:
        """One round of what keeps `change_counter` true (PostgreSQL: the LISTEN
        connection's proof of life, store/postgres/watch.py), every `watch_every`."""
        ...

    def changes(self, since: int, now: int) -> frozenset[str] | None:
        """The tables whose existing rows changed between two `change_counter` values,
        when that is known (store/changes.py); None: anything may have changed."""
        ...

    def startup_lock(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One process at a time through start-up (schema, key check, first token)."""
        ...

    async def run_sync(self, work: Callable[[Connection], T], *, transaction: bool) -> T:
        """`work` on a synchronous SQLAlchemy connection of its own (Alembic's migrations)."""
        ...

    def copy_session(self, snapshot: bool) -> contextlib.AbstractAsyncContextManager[CopySession]:
        """A read snapshot (`snapshot`) or one write transaction, for `chainkeys db copy`."""
        ...

    def prepare_location(self) -> None:
        """Make what the store's location needs before a schema is created there."""
        ...

    def database_exists(self) -> bool:
        """Whether the database itself was made by someone (a PostgreSQL database we
        can name always was; a SQLite file only once it is on disk): `db upgrade`
        creates a schema in an existing database, never the database."""
        ...

    async def close(self) -> None: ...


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite")


def open_backend(url: str, settings: Settings) -> Backend:
    """The backend for a database URL (sqlite:///… or postgresql://…); nothing connects yet.

    Each engine's module is imported only when its URL is used: a SQLite server never
    loads asyncpg.
    """
    if is_sqlite_url(url):
        from chainkeys.store.sqlite.backend import SqliteBackend

        return SqliteBackend(url, settings)
    from chainkeys.store.postgres.backend import PostgresBackend

    return PostgresBackend(url, settings)
