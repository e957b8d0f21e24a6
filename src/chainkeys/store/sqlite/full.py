"""A full disk, told apart from other storage failures by SQLite's result code.

When the file system has no room for a page of the WAL or the database, SQLite
answers SQLITE_FULL (its `unixWrite` maps ENOSPC to it) and rolls back the statement
or the whole transaction; Python's own file calls raise OSError(ENOSPC). Either is
a 503 `storage_full` (errors.StorageFull), not the `storage_unavailable` of a
database that went away: a client cannot fix it by retrying now, an operator by
freeing space. Told by codes, never by message text.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator

from chainkeys.errors import StorageFull, StorageUnavailable
from chainkeys.store.sql import storage_errors

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or an error it wraps (SQLAlchemy's `orig`, a cause or context),
    is SQLite's SQLITE_FULL or the OS's ENOSPC/EDQUOT."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
                return True
        elif isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            return True
        orig = getattr(exc, "orig", None)
        if isinstance(orig, BaseException) and id(orig) not in seen:
            exc = orig
            continue
        exc = exc.__cause__ or exc.__context__
    return False


def unavailable(cause: BaseException | None) -> StorageUnavailable:
    """The 503 for a failed write: StorageFull when the disk is full."""
    return StorageFull() if is_disk_full(cause) else StorageUnavailable()


@contextlib.contextmanager
def sqlite_errors() -> Iterator[None]:
    """`storage_errors()`, with a full disk told apart (StorageFull)."""
    try:
        with storage_errors():
            yield
    except StorageUnavailable as exc:
        if type(exc) is StorageUnavailable and is_disk_full(exc.__cause__):
            raise StorageFull() from exc.__cause__
        raise
