"""What an asyncpg error means: the SQLAlchemy error the engine would have raised (its
message quoting no bound value), and whether the connection is still usable or gone
(killed, the server restarting), which decides what store/postgres/pool.py retries."""

from __future__ import annotations

import re
from typing import Any, NoReturn

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    InternalError,
    OperationalError,
    ProgrammingError,
)

# asyncpg's "invalid input for query argument $1: <the value> (expected …)"
_ARG_VALUE = re.compile(r"(query argument \$\d+): .*", re.DOTALL)


class PgDriverError(Exception):
    """An asyncpg error as `orig` of SQLAlchemy's: its kind and message, never its
    DETAIL (which quotes the row: `Key (token_hash)=(…) already exists`)."""

    def __init__(self, exc: BaseException) -> None:
        message = str(exc.args[0]) if exc.args else ""
        message = _ARG_VALUE.sub(r"\1", message.split("\n", 1)[0])
        super().__init__(f"{type(exc).__name__}: {message}")
        self.sqlstate: str | None = getattr(exc, "sqlstate", None)
        self.constraint_name: str | None = getattr(exc, "constraint_name", None)


def translate(exc: BaseException, sql: str | None) -> BaseException:
    """An asyncpg error as the SQLAlchemy error the engine raised for it."""
    if isinstance(exc, asyncpg.PostgresError):
        if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
            kind: type[DBAPIError] = IntegrityError
        elif isinstance(exc, asyncpg.SyntaxOrAccessError):
            kind = ProgrammingError
        elif isinstance(exc, asyncpg.DataError):
            kind = DataError
        elif isinstance(exc, asyncpg.InternalServerError):
            kind = InternalError
        else:  # connection errors (08…), statement timeouts, admin shutdown, …
            kind = OperationalError
        return kind(sql, None, PgDriverError(exc), hide_parameters=True)
    if isinstance(exc, asyncpg.InterfaceError):  # closed connection, operation in progress
        return InterfaceError(sql, None, PgDriverError(exc), hide_parameters=True)
    if isinstance(exc, asyncpg.InternalClientError):
        return InternalError(sql, None, PgDriverError(exc), hide_parameters=True)
    return exc


def raise_translated(exc: BaseException, sql: str) -> NoReturn:
    """Raise a failed statement's error as `translate` says, never chained to a
    PostgreSQL error (its DETAIL may quote bound values)."""
    error = translate(exc, sql)
    if error is exc:
        raise exc
    if isinstance(exc, asyncpg.PostgresError):
        raise error from None
    raise error from exc


def is_sound(exc: BaseException) -> bool:
    """After this error the connection is still usable (the server reported it)."""
    return isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, LOST)


# The connection went away: killed (pg_terminate_backend: 57P01), the server shutting
# down or restarting (57P01-57P03), the socket reset. The server rolls back whatever
# transaction the connection held, unless the COMMIT itself was under way.
LOST = (
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    ConnectionError,
)
RETRIES = 2  # new connections opened in place of ones killed while they connected


def is_lost(exc: BaseException, conn: Any) -> bool:
    """`exc` means the connection is gone (by its class, or a client-side error on a
    connection that is closed now), not that the statement failed.

    asyncpg's InternalClientError counts: a connection whose server sent its FATAL
    while idle is left in a state that refuses the next statement before sending it
    ("cannot switch to state …; another operation is in progress"); the connection is
    dropped (terminated, so the server ends whatever it still held) either way."""
    if isinstance(exc, (*LOST, asyncpg.InternalClientError)):
        return True
    return isinstance(exc, asyncpg.InterfaceError | OSError) and is_closed(conn)


def is_closed(conn: Any) -> bool:
    """Whether a pooled connection is closed (asyncpg detaches the proxy of one the
    server closed: asking it then raises)."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True
