"""`chainkeys db copy`: move every row from one database to another (SQLite ⇄ PostgreSQL).

The source is read in one snapshot (a read transaction), so a copy is
consistent even if the source is still serving; writes made after the snapshot
are not copied, so stop the writers first. The target must be empty; it is
migrated to the code's schema, then filled and checked in one transaction:
row counts per table and every sealed account opened with the master key.
When any check fails the transaction rolls back and the target stays empty.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sqlalchemy import Executable, Table, func, insert, select
from sqlalchemy.exc import StatementError

from chainkeys.errors import ChainkeysError, StorageUnavailable
from chainkeys.store import migrate
from chainkeys.store.backend import Backend
from chainkeys.store.sealed import REGISTRY, SealedRow, row_of, select_sealed
from chainkeys.store.sql import CopySession, storage_errors
from chainkeys.store.tables import metadata

# What the caller's master key does with one sealed value: True when it opens.
Opener = Callable[[SealedRow], bool]

# Every table but those whose rows describe this database's own processes.
COPIED = [t for t in metadata.sorted_tables if t.info.get("copy", True)]

BATCH = 500


class CopyError(ChainkeysError):
    """The copy was refused or did not verify; the target holds none of it."""

    code = "copy_failed"


@dataclass
class CopyReport:
    """What moved: rows per table (source = target, checked) and seals opened."""

    counts: dict[str, int] = field(default_factory=dict)
    opened: int = 0
    key_ids: set[str] = field(default_factory=set)


def display_url(url: str) -> str:
    """The URL with any password masked, for messages (a URL naming several hosts too,
    which SQLAlchemy's parser refuses)."""
    try:
        parts = urlsplit(url)
        userinfo, at, hosts = parts.netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)]
    except ValueError:
        return "<unparsable URL>"
    if not colon and not any(k == "password" for k, _ in query):
        return url
    masked = parts._replace(netloc=f"{user}{':***' if colon else ''}{at}{hosts}")
    return urlunsplit(masked._replace(query=urlencode(query, safe="*")))


class _Conn:
    """One copy transaction (`Backend.copy_session`): driver failures come out as
    CopyError naming the side (source or target)."""

    def __init__(self, side: str, url: str, session: CopySession) -> None:
        self.side, self.url = side, url
        self._session = session

    async def execute(self, stmt: Executable, params: Any = None) -> Any:
        with _side(self.side, self.url):
            return await self._session.execute(stmt, params)

    async def batches(self, stmt: Executable, size: int) -> AsyncIterator[list[Any]]:
        with _side(self.side, self.url):
            async for rows in self._session.batches(stmt, size):
                yield rows

    async def after_insert(self, table: Table) -> None:
        with _side(self.side, self.url):
            await self._session.after_insert(table)


@contextlib.asynccontextmanager
async def _transaction(db: Backend, side: str, *, snapshot: bool) -> AsyncIterator[_Conn]:
    """A read snapshot (source) or the one write transaction (target)."""
    with _side(side, db.url):
        async with db.copy_session(snapshot) as session:
            yield _Conn(side, db.url, session)


@contextlib.contextmanager
def _side(name: str, url: str) -> Iterator[None]:
    """Name the database that failed, without its password."""
    try:
        with storage_errors():
            yield
    except StorageUnavailable:
        raise CopyError(f"the {name} database {display_url(url)} is unreachable") from None
    except StatementError as exc:
        # The driver's text may quote row values: name the failure, not the data.
        raise CopyError(
            f"the {name} database failed a statement ({type(exc.orig).__name__})"
        ) from None


def _ordered(table: Table) -> Executable:
    return select(table).order_by(*table.primary_key.columns)


def _count(table: Table) -> Executable:
    return select(func.count()).select_from(table)


async def _counts(conn: _Conn) -> dict[str, int]:
    return {t.name: int((await conn.execute(_count(t))).scalar_one()) for t in COPIED}


async def _holds_sealed(conn: _Conn) -> bool:
    for col in REGISTRY:
        stmt = select(func.count()).select_from(col.table).where(col.sealed_rows())
        if (await conn.execute(stmt)).scalar_one():
            return True
    return False


async def check_source(source: Backend) -> None:
    """The source must be a chainkeys database at this code's schema."""
    with _side("source", source.url):
        current = await migrate.current_revision(source)
    head = migrate.HEAD
    if current is None:
        raise CopyError(f"the source {display_url(source.url)} holds no chainkeys schema")
    if current != head:
        raise CopyError(
            f"the source schema is at revision {current}, this chainkeys needs {head}; "
            "run `chainkeys db upgrade` on the source first"
        )


async def prepare_target(target: Backend) -> None:
    """Create (or bring up to date) the target's schema, then insist it is empty."""
    target.prepare_location()
    from alembic.util import CommandError  # (Alembic loads only when migrating)

    try:
        with _side("target", target.url):
            await migrate.upgrade(target)
    except CommandError as exc:  # e.g. a revision this code does not know
        raise CopyError(f"cannot migrate the target: {exc}") from None
    async with _transaction(target, "target", snapshot=True) as conn:
        counts = await _counts(conn)
    held = {name: n for name, n in counts.items() if n}
    if held:
        rows = ", ".join(f"{n} {name}" for name, n in held.items())
        raise CopyError(
            f"the target {display_url(target.url)} is not empty ({rows}); copy only into an "
            "empty database (do not start `chainkeys serve` on it first)"
        )


async def copy_database(
    source: Backend,
    target: Backend,
    load_opener: Callable[[Backend], Awaitable[Opener]],
    *,
    batch: int = BATCH,
) -> CopyReport:
    """Copy every table, preserving ids; verify counts and open every sealed value (every
    column of the registry, store/sealed.py).

    Args:
        source: a chainkeys database at the current schema.
        target: an empty database (created and migrated here).
        load_opener: proves the master key opens the source (called only when it
            holds sealed data) and returns what opens a sealed value with it.
        batch: rows read and inserted per round trip.

    Returns:
        Rows per table and how many sealed values were opened.

    Raises:
        CopyError: refused or not verified; the target is left without the copied rows.
    """
    if source.url == target.url:
        raise CopyError("--from and --to name the same database")
    await check_source(source)
    async with _transaction(source, "source", snapshot=True) as src:
        sealed = await _holds_sealed(src)
    with _side("source", source.url):
        opener = await load_opener(source) if sealed else None
    await prepare_target(target)

    report = CopyReport()
    async with (
        _transaction(source, "source", snapshot=True) as src,
        _transaction(target, "target", snapshot=False) as dst,
    ):
        expected = await _counts(src)
        for table in COPIED:  # parents before children (foreign keys)
            copied = 0
            async for rows in src.batches(_ordered(table), batch):
                await dst.execute(insert(table), [r._asdict() for r in rows])
                copied += len(rows)
            if copied != expected[table.name]:
                raise CopyError(
                    f"{table.name}: read {copied} rows, the source counted {expected[table.name]}"
                )
            await dst.after_insert(table)
        report.counts = await _counts(dst)
        if report.counts != expected:
            raise CopyError(f"row counts differ after the copy: {expected} → {report.counts}")
        if opener is not None:
            report.opened, report.key_ids = await _open_all(dst, opener, batch)
    return report


async def _open_all(dst: _Conn, opens: Opener, batch: int) -> tuple[int, set[str]]:
    """Open every sealed value as the target now holds it; any failure fails the copy."""
    opened, key_ids = 0, set()
    failed: dict[str, int] = {}
    for col in REGISTRY:
        async for rows in dst.batches(select_sealed(col), batch):
            for r in rows:
                row = row_of(col, r._mapping)
                if not opens(row):
                    failed[col.name] = failed.get(col.name, 0) + 1
                    continue
                opened += 1
                key_ids.add(row.key_id)
    if failed:
        where = ", ".join(f"{n} in {name}" for name, n in failed.items())
        raise CopyError(
            f"{sum(failed.values())} sealed values do not open with the master key ({where}); "
            "nothing was copied"
        )
    return opened, key_ids
