"""Reading accounts: one by name (its view, its stored row) and a page of them.

Its own module because reading has rules of its own that no write shares: two
caches kept until the next commit, a lookup that runs the family's full name check
only when it must, and cursor paging. `AccountService` (service.py) extends
`AccountLookup` with what changes accounts (create, derive, export, delete,
restore), so callers still hold one service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from chainkeys import paging
from chainkeys.accounts.families import (
    PLAUSIBLE_NAME,
    chain_errors,
    check_name,
    family_of,
    lookup_name,
)
from chainkeys.accounts.models import AccountView, Page
from chainkeys.accounts.repository import AccountRow, Accounts
from chainkeys.chains.registry import FAMILIES
from chainkeys.config import Settings
from chainkeys.errors import AccountNotFound, BadRequest
from chainkeys.store import tables
from chainkeys.store.backend import Backend
from chainkeys.store.cache import StoreCache
from chainkeys.tokens.service import Principal
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.derive import Cursors
from chainkeys.vault.gate import opened
from chainkeys.vault.integrity import Integrity

Fetch = Callable[[Any, Integrity, str, str, str], Awaitable[Any]]


class AccountLookup:
    """Look up and list accounts within one tenant."""

    VIEWS_MAX = 32_768  # account views kept (an LRU, ~450 bytes each: 15 MB full)
    ROWS_MAX = 4_096  # stored rows kept for signing (sealed keys: ciphertext, as on disk)

    def __init__(self, db: Backend, barrier: Barrier, settings: Settings, cursors: Cursors) -> None:
        self.db = db
        self.barrier = barrier
        self.settings = settings
        self.cursors = cursors
        # (tenant id, family, name as asked) -> the view `get` answered
        self._views: StoreCache[tuple[str, str, str], AccountView]
        self._views = StoreCache(db, self.VIEWS_MAX, frozenset({tables.accounts.name}), "views")
        self._rows: StoreCache[tuple[str, str, str], AccountRow] = StoreCache(
            db, self.ROWS_MAX, frozenset({tables.accounts.name}), "rows"
        )

    @property
    def _integrity(self) -> Integrity:
        """What every account row read or written here is checked or MACed with."""
        return opened(self.barrier.integrity)

    check_name = staticmethod(check_name)
    lookup_name = staticmethod(lookup_name)

    async def _find(
        self, who: Principal, family: str, name: str, fetch: Fetch = Accounts.get
    ) -> Any:
        """Look a name up; the family's full check runs first only when the name is
        not plausible, and otherwise only on a miss, to say why (a checksum costs
        more than the lookup, and stored names are canonical and valid)."""
        fam = family_of(family)
        if PLAUSIBLE_NAME.fullmatch(name) is None:
            fam, name = self.check_name(family, name)  # 400 before any storage work
        async with self.db.read() as tx:
            row = await fetch(tx, self._integrity, who.tenant_id, fam.name, name)
            if row is None:
                _, canonical = self.lookup_name(family, name)  # 404 saying why if invalid
                if canonical != name:
                    row = await fetch(tx, self._integrity, who.tenant_id, fam.name, canonical)
        if row is None:
            raise AccountNotFound(f"no {fam.name} account by that name")
        return row

    async def get(self, who: Principal, family: str, name: str) -> AccountView:
        """The account's view (no key). Where the store has a change counter, a view is
        remembered until the next commit by any connection or process (a delete, a
        restore, a rotation are such commits), so a repeated get reads nothing while
        nothing changed; a miss (404) is never remembered."""
        return await self._views.through(
            (who.tenant_id, family, name), lambda: self._view(who, family, name)
        )

    async def _view(self, who: Principal, family: str, name: str) -> AccountView:
        row = await self._find(who, family, name, Accounts.view)
        return AccountView.of_details(
            row.family,
            row.network,
            row.name,
            row.address,
            row.public_key,
            msgspec.json.decode(row.details),
            row.created_ms,
        )

    @staticmethod
    def view_of(row: AccountRow) -> AccountView:
        return AccountView.of_details(
            row.family,
            row.network,
            row.name,
            row.address,
            row.public_key,
            row.details,
            row.created_ms,
        )

    async def row(self, who: Principal, family: str, name: str) -> AccountRow:
        """The stored account, sealed key included (signing, export): remembered as `get`'s
        views are; a rotation re-seals rows, a commit that clears the cache."""
        return await self._rows.through(
            (who.tenant_id, family, name), lambda: self._find(who, family, name)
        )

    async def list(
        self,
        who: Principal,
        family: str,
        limit: int | None,
        cursor: str | None,
        network: str | None = None,
        prefix: str | None = None,
    ) -> Page:
        """A page of the family's accounts, oldest first; `prefix` keeps those whose
        name (address) starts with it (a search: a cursor is bound to its prefix)."""
        fam = family_of(family)
        if network is not None:
            with chain_errors():
                network = fam.network(network).name  # 400 listing the accepted ones
        if prefix is not None and not (0 < len(prefix) <= 100 and prefix.isprintable()):
            raise BadRequest(
                "prefix is 1 to 100 printable characters of a name or address",
                code="invalid_prefix",
            )
        scope = f"accounts/{who.tenant_id}/{fam.name}/{network or '*'}"
        if prefix:
            scope += "/prefix:" + prefix
        w = paging.window(self.settings, self.cursors, scope, limit, cursor)
        async with self.db.read() as tx:
            rows = await Accounts.page(
                tx, self._integrity, who.tenant_id, fam.name, w.after or 0, w.fetch, network, prefix
            )
        return Page(*w.page(rows, lambda r: r.id))

    async def counts(self, who: Principal) -> dict[str, int]:
        """Accounts per family this token may use (every family, zeros included)."""
        async with self.db.read() as tx:
            found = await Accounts.counts(tx, who.tenant_id)
        return {f: found.get(f, 0) for f in FAMILIES if who.may_use(f)}
