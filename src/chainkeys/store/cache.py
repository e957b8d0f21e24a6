"""Read results remembered until the store says something committed since.

The token, account-view and account-row caches ask, per request, "has anything
committed since I filled you?" Where the engine can answer cheaply (SQLite's change
counter read from shared memory, `store/sqlite/counter.py`), a cache keeps what it
read until the answer changes; where it cannot, nothing is kept and every lookup reads. A commit the
store knows to be this process's own, changing no row of the tables the cache reads
from (`tables`; a plain INSERT changes no existing row: store/changes.py), leaves the
values in place: creates and signs do not empty the caches that gets use. Domain code
holds a `StoreCache` and never asks which engine it has.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from chainkeys import metrics
from chainkeys.store.backend import Backend
from chainkeys.store.changes import EVERYTHING, PENDING

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
UNCACHED = -1  # a stamp under which nothing is kept


class StoreCache(Generic[K, V]):
    """At most `size` values, all read while the store's change stamp was `stamp`; when
    full, the least recently used makes room (a hot set of any size up to `size` stays,
    whatever the tenant holds)."""

    __slots__ = ("_bypass", "_cleared", "_db", "_kept", "_size", "_stamp", "_tables", "_values")

    def __init__(self, db: Backend, size: int, tables: frozenset[str], name: str) -> None:
        self._kept = metrics.CACHE_REFRESHES.labels(name, "kept")
        self._cleared = metrics.CACHE_REFRESHES.labels(name, "cleared")
        self._db = db
        self._bypass = False  # a commit not known yet to be harmless: read through
        self._size = size
        self._tables = tables | {EVERYTHING}  # what its values are read from
        self._values: OrderedDict[K, V] = OrderedDict()
        self._stamp = UNCACHED

    def refresh(self) -> int:
        """Ask the store whether anything committed since the values were read (every
        value is dropped when it did, unless only own commits that left the cache's
        tables alone did); the stamp to `put` under (UNCACHED: keep nothing)."""
        if not self._db.has_change_counter:
            return UNCACHED
        stamp = self._db.change_counter()
        self._bypass = False
        if stamp is None:  # the engine cannot tell now: keep nothing, trust nothing kept
            if self._values:
                self._values.clear()
                self._cleared.inc()
            self._stamp = UNCACHED
            return UNCACHED
        if stamp != self._stamp:
            changed = self._db.changes(self._stamp, stamp)
            if changed is PENDING:  # an own COMMIT still running may explain it: not yet
                self._bypass = True
                return UNCACHED
            if changed is None or not self._tables.isdisjoint(changed):
                self._values.clear()
                self._cleared.inc()
            else:
                self._kept.inc()
            self._stamp = stamp
        return stamp

    @property
    def stamp(self) -> int:
        """The stamp of the last `refresh` (a caller may skip refreshing for requests
        that arrived before it, as the token cache does)."""
        return self._stamp

    def get(self, key: K) -> V | None:
        if self._bypass:
            return None
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: K, value: V, stamp: int) -> None:
        """Keep a value read under `stamp`, if nothing committed since (the least recently
        used goes when the cache is full)."""
        if stamp != UNCACHED and stamp == self._stamp:
            self._values[key] = value
            if len(self._values) > self._size:
                self._values.popitem(last=False)

    async def through(self, key: K, read: Callable[[], Awaitable[V]]) -> V:
        """The value kept for `key`, or `read()`'s, kept if nothing committed meanwhile
        (an error, such as a 404, is never kept)."""
        stamp = self.refresh()
        found = self.get(key)
        if found is None:
            found = await read()
            self.put(key, found, stamp)
        return found
