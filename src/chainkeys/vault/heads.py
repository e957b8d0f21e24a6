"""Freshness: which version of each authorizing row is the latest.

A row's MAC proves that the service wrote it, not that it is the newest copy: a
database writer who puts back a token row from before its revocation, a credential
row from before its sign counter moved, a spent invite or an approval from before it
was rejected holds a valid MAC for each. So every tenant has one head
(`integrity_heads`, itself a MACed row) that pins its *live* sets: per set, how many
rows it holds and the sum, modulo 2^256, of a keyed element per row
(`Integrity.element`: HMAC over the set, the row's identity and its MAC). The sets:

- `tokens`: the tenant's unrevoked tokens;
- `credentials`: approvers' unrevoked credentials (the MAC covers the sign counter);
- `invites`: unused enrolment codes;
- `approvals`: open requests (pending or approved, not yet ended) and their votes;
- `policy`: the latest policy version (one row);
- `caps`: the running totals behind the caps;
- `freezes`: the freezes not lifted (an emergency's: freezes/repository.py);
- `governance`: the tenant's quorum and delay (one row, once governed);
- `changes`: governance changes not yet ended (pending or scheduled);
- `counters`: the next index of each of its wallets' chains (wallets/repository.py).

A member is a row's identity and its stored MAC. A loader says of each row whether
its MAC is valid; the set matches when the valid rows plus some of the invalid ones
(up to `SPARE` of them) are exactly what the head pins. So a row a writer edited in
place (a member whose content no longer fits its MAC) or inserted (no member at all)
is refused on its own and never stops its tenant's others; a row put back from an
older copy (valid, but not the member) or deleted changes the set, and the tenant's
set fails closed until an operator restores it or adopts the store. Only valid rows
are ever given back as members: an invalid one is never used.

Every change to one of them updates the head in the same transaction, under the
tenant's `head/` scope (one writer per tenant, on every replica). A row is used only
when the whole set it belongs to, as read now, matches the head: a row put back,
removed or added by hand changes the count or the digest. Sets are small (live rows
only); a process keeps what it verified per head version, so a steady state reads one
head row per check, and the live sets again only after a change.

Why keyed sums: the elements are PRF outputs the writer cannot compute, so no
combination of old rows they hold adds up to the digest (a sum of unknown random
values mod 2^256 is an incremental MAC of the multiset), and an update costs two
HMACs, whatever the set's size.

A head put back from an older copy together with its rows is consistent. Against
that, each process never accepts a head older than one it saw (its floors).

The master keys and their ring belong to no tenant: one more head (scope `ring`,
named by a tenant id of None here) pins every row of `master_keys` and `key_ring`
(vault/repository.py). It lives with the tenants' heads rather than in a sealed
`meta` record because it needs what they have already: a MACed row with a version
that only grows, this process's floors, a change in the writer's transaction under
a lock of its own, and the same rebuild by `integrity adopt` and the same check by
`integrity verify`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

import msgspec
from sqlalchemy import bindparam, insert, select, update

from chainkeys.errors import IntegrityFailure
from chainkeys.store.integrity import HEADS
from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import integrity_heads
from chainkeys.vault.integrity import Integrity, failed

SETS: Final = (
    "tokens",
    "credentials",
    "invites",
    "approvals",
    "policy",
    "caps",
    "freezes",
    "governance",
    "changes",
    "counters",
)
RING: Final = "ring"  # the scope of the master keys' head (tenant id None)
RING_SETS: Final = ("master_keys", "key_ring")
SPARE: Final = 8  # invalid rows tried in or out of a set (2^8 sums at most)
RETRIES: Final = 30  # reads of a set that changed under them, before a mismatch counts
MOD: Final = 1 << 256
Member = tuple[str, str]  # a row's identity in its set and its MAC
Loaded = tuple[Member, bool]  # a row as read: its member, and whether its MAC is valid
_h = integrity_heads.c
_GET = Prepared(select(_h.scope, _h.version, _h.body, _h.mac).where(_h.scope == bindparam("s")))
_INSERT = Prepared(insert(integrity_heads), ("scope", "version", "body", "mac"))
_UPDATE = Prepared(
    update(integrity_heads)
    .where(_h.scope == bindparam("s"), _h.version == bindparam("old"))
    .values(version=bindparam("version"), body=bindparam("body"), mac=bindparam("mac")),
    ("version", "body", "mac", "s", "old"),
)
_encode = msgspec.json.Encoder().encode


def tenant_scope(tenant_id: str | None) -> str:
    """A tenant's head, or the ring's (None: the master keys belong to no tenant)."""
    return RING if tenant_id is None else "t" + tenant_id


def head_lock(scope: str) -> str:
    """The lock a writer of this head takes (`Tx.serialize`): one per tenant, one for
    the ring."""
    return "head:ring" if scope == RING else "head/" + scope.removeprefix("t")


def _whose(tenant_id: str | None) -> str:
    return "the master-key ring" if tenant_id is None else f"tenant {tenant_id}"


@dataclass(frozen=True, slots=True)
class Head:
    scope: str
    version: int
    sets: dict[str, tuple[int, int]]  # set -> (rows, digest)

    def body(self) -> str:
        return _encode(
            {name: [rows, format(digest, "064x")] for name, (rows, digest) in self.sets.items()}
        ).decode()

    def values(self) -> dict[str, object]:
        return {"scope": self.scope, "version": self.version, "body": self.body()}


def parse_body(body: str) -> dict[str, tuple[int, int]]:
    raw = msgspec.json.decode(body, type=dict[str, tuple[int, str]])
    return {name: (rows, int(digest, 16)) for name, (rows, digest) in raw.items()}


class Heads:
    """This process's view of the heads: read and checked, changed in the caller's
    transaction, never accepted older than one seen before."""

    def __init__(self, integrity: Integrity) -> None:
        self.integrity = integrity
        self._floors: dict[str, int] = {}
        # (scope, set) -> (head version, the members verified at it)
        self._verified: dict[tuple[str, str], tuple[int, frozenset[Member]]] = {}

    async def head(self, tx: Tx, tenant_id: str | None) -> Head:
        """The tenant's head, authenticated and no older than any this process saw."""
        scope = tenant_scope(tenant_id)
        # The floor as the read starts: one raised while it runs is another coroutine's
        # newer read, which this statement may not see (it is no rollback).
        floor = self._floors.get(scope, 0)
        row = (await tx.execute(_GET, {"s": scope})).first()
        if row is None:
            raise failed(HEADS, f"the head of {_whose(tenant_id)} is missing")
        values = {"scope": row[0], "version": int(row[1]), "body": row[2], "mac": row[3]}
        if not self.integrity.valid(HEADS, values):
            raise failed(HEADS, f"the head of {_whose(tenant_id)}")
        version = values["version"]
        if version < floor:
            raise failed(
                HEADS,
                f"the head of {_whose(tenant_id)} (version {version}, older than "
                f"{floor} seen before: put back from an older copy)",
            )
        if not tx.writing and version > self._floors.get(scope, 0):  # (a write's may roll back)
            self._floors[scope] = version
        return Head(scope, version, parse_body(row[2]))

    def floor(self, scope: str, version: int) -> None:
        """Never accept this scope's head below `version` (the store head's floors)."""
        if version > self._floors.get(scope, 0):
            self._floors[scope] = version

    async def born(self, tx: Tx, tenant_id: str | None) -> None:
        """A new tenant's head (or the ring's, for None): every set empty."""
        head = Head(tenant_scope(tenant_id), 1, {})
        values = head.values()
        await tx.execute(_INSERT, {**values, "mac": self.integrity.mac(HEADS, values)})

    async def change(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        removed: Iterable[Member] = (),
        added: Iterable[Member] = (),
    ) -> None:
        """Take `removed` out of the tenant's set `name` and put `added` in, in the
        caller's write transaction (which then holds the tenant's head until it ends)."""
        await self._write(tx, tenant_id, name, removed, added, exact=False)

    async def replace(
        self, tx: Tx, tenant_id: str | None, name: str, members: Iterable[Member]
    ) -> None:
        """Set `name` to exactly `members` (a set the service rewrites whole, such as the
        latest policy), in the caller's write transaction."""
        await self._write(tx, tenant_id, name, (), members, exact=True)

    async def _write(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        removed: Iterable[Member],
        added: Iterable[Member],
        exact: bool,
    ) -> None:
        if name not in (RING_SETS if tenant_id is None else SETS):
            raise ValueError(f"no pinned set {name!r}")
        await tx.serialize(head_lock(tenant_scope(tenant_id)))
        head = await self.head(tx, tenant_id)
        rows, digest = (0, 0) if exact else head.sets.get(name, (0, 0))
        for ident, mac in removed:
            rows, digest = rows - 1, (digest - self.integrity.element(name, ident, mac)) % MOD
        for ident, mac in added:
            rows, digest = rows + 1, (digest + self.integrity.element(name, ident, mac)) % MOD
        new = Head(head.scope, head.version + 1, {**head.sets, name: (rows, digest)})
        values = new.values()
        params = {
            "version": new.version,
            "body": values["body"],
            "mac": self.integrity.mac(HEADS, values),
            "s": head.scope,
            "old": head.version,
        }
        if (await tx.execute(_UPDATE, params)).rowcount != 1:  # never under the scope
            raise IntegrityFailure(f"the head of {_whose(tenant_id)} moved under its lock")
        # (no floor from here: the transaction may still roll back; the next read of the
        # head after it commits raises the floor)

    def matches(self, head: Head, name: str, members: Iterable[Member]) -> bool:
        """Whether `members` are exactly the set the head pins."""
        rows, digest = self._sum(name, members)
        return head.sets.get(name, (0, 0)) == (rows, digest)

    def _sum(self, name: str, members: Iterable[Member]) -> tuple[int, int]:
        rows, digest = 0, 0
        for ident, mac in members:
            rows, digest = rows + 1, (digest + self.integrity.element(name, ident, mac)) % MOD
        return rows, digest

    def _valid_match(self, head: Head, name: str, loaded: Iterable[Loaded]) -> bool:
        """The valid rows plus some of the invalid ones are the set (edited rows are
        members, inserted ones are not: both are refused on their own)."""
        valid = [m for m, ok in loaded if ok]
        spare = [m for m, ok in loaded if not ok]
        if len(spare) > SPARE:
            return False
        want = head.sets.get(name, (0, 0))
        rows, digest = self._sum(name, valid)
        extras = [(1, self.integrity.element(name, i, m)) for i, m in spare]
        for mask in range(1 << len(spare)):
            n, d = rows, digest
            for bit, (one, element) in enumerate(extras):
                if mask >> bit & 1:
                    n, d = n + one, (d + element) % MOD
            if (n, d) == want:
                return True
        return False

    async def check(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        load: Callable[[], Awaitable[Iterable[Loaded]]],
        what: str,
    ) -> frozenset[Member]:
        """The valid members of set `name` as `load` reads it now; IntegrityFailure
        unless the set is what the head pins. Loaded every time: the caller goes on to
        use what `load` read."""
        return await self._verify(tx, tenant_id, name, load, what, cached=False)

    async def current(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        member: Member,
        load: Callable[[], Awaitable[Iterable[Loaded]]],
        what: str,
    ) -> None:
        """IntegrityFailure unless `member` is in set `name` as the head pins it.

        `load` reads the whole set (each row with whether its MAC is valid); it is
        called only when this process has not verified the set at the head's version."""
        if not await self.holds(tx, tenant_id, name, member, load, what):
            raise failed(HEADS, f"{what} is not the latest copy of its row")

    async def holds(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        member: Member,
        load: Callable[[], Awaitable[Iterable[Loaded]]],
        what: str,
    ) -> bool:
        """Whether `member` is in set `name` as the head pins it (as `current`, for a
        caller outside a write transaction whose row may have been read before a change
        that committed since: it reads the row again before it calls it a failure)."""
        return member in await self._verify(tx, tenant_id, name, load, what)

    async def verified(
        self,
        tx: Tx,
        tenant_id: str,
        name: str,
        load: Callable[[], Awaitable[Iterable[Loaded]]],
        what: str,
    ) -> frozenset[Member]:
        """The members of set `name` as the head pins them (IntegrityFailure unless the
        set matches): as `holds`, for a caller that must also know a row is absent."""
        return await self._verify(tx, tenant_id, name, load, what)

    async def _verify(
        self,
        tx: Tx,
        tenant_id: str | None,
        name: str,
        load: Callable[[], Awaitable[Iterable[Loaded]]],
        what: str,
        cached: bool = True,
    ) -> frozenset[Member]:
        # Outside a write transaction the head and the set are read by two statements,
        # each on its own snapshot: a change committed between them is read again (a
        # busy tenant's head moves often) before a mismatch is called one; a writer's
        # edit stays a mismatch with the head standing still.
        head = await self.head(tx, tenant_id)
        for attempt in range(RETRIES):
            key = (head.scope, name)
            seen = self._verified.get(key)
            if cached and seen is not None and seen[0] == head.version:
                return seen[1]
            loaded = list(await load())
            if self._valid_match(head, name, loaded):
                members = frozenset(m for m, ok in loaded if ok)
                if not tx.writing:  # (a write's view may still roll back)
                    self._verified[key] = (head.version, members)
                return members
            again = await self.head(tx, tenant_id)
            if again.version == head.version:
                break
            head = again
            await asyncio.sleep(0.001 * attempt)  # the tenant is busy: let a change land
        whose = "the ring's" if tenant_id is None else "the tenant's"
        raise failed(HEADS, f"{what}: {whose} {name} are not the latest")
