"""Keyset pages, one way for every list (accounts, wallets, approvals, the audit log).

A page is asked for with a limit (checked against the settings) and an opaque
cursor that only this service makes, bound to the list it came from (its scope:
a cursor of one tenant's accounts opens nothing in another's). The repository
reads one row more than the page: if it comes back, another page follows and its
cursor names the page's last row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from chainkeys.config import Settings
from chainkeys.errors import BadRequest
from chainkeys.vault.derive import Cursors

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Window:
    """Where a page starts (`after`: the position of the row before it; None: the
    first page) and how many rows to read for it (`fetch`: one more than `limit`)."""

    cursors: Cursors
    scope: str
    limit: int
    after: int | None

    @property
    def fetch(self) -> int:
        return self.limit + 1

    def page(self, rows: Sequence[T], position: Callable[[T], int]) -> tuple[list[T], str | None]:
        """The page out of the `fetch` rows read, and the next page's cursor (None: last)."""
        shown = list(rows[: self.limit])
        more = len(rows) > self.limit and bool(shown)
        return shown, (self.cursors.make(position(shown[-1]), self.scope) if more else None)


def window(
    settings: Settings, cursors: Cursors | None, scope: str, limit: int | None, cursor: str | None
) -> Window:
    """The page asked for, or a 400 naming what is wrong (`invalid_limit`, `invalid_cursor`)."""
    limit = settings.list_default_limit if limit is None else limit
    if not 1 <= limit <= settings.list_max_limit:
        raise BadRequest(
            f"limit must be between 1 and {settings.list_max_limit}", code="invalid_limit"
        )
    if cursors is None:
        raise RuntimeError("pages need cursors (the master key)")
    after = None
    if cursor:
        after = cursors.open(cursor, scope)
        if after is None:
            raise BadRequest("cursor is not one this service returned", code="invalid_cursor")
    return Window(cursors, scope, limit, after)
