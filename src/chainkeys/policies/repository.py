"""Policy SQL: versions, and the spends and totals behind the rolling 24 h caps and
the rules' limits (policies/limits.py: their counters are rows of the same tables,
keyed by a `denom` that begins with "#", which no denom does)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, delete, insert, select, update

from chainkeys.policies.limits import KEY_PREFIX, Counted
from chainkeys.store.integrity import POLICY_TOTALS
from chainkeys.store.sql import DB_NOW_MS, Prepared, Tx
from chainkeys.store.tables import policy_spends, policy_totals, policy_versions
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded
from chainkeys.vault.integrity import failed
from chainkeys.vault.pinned import cap_ident


@dataclass(frozen=True, slots=True)
class Version:
    version: int
    document: str | None  # None: cleared
    created_ms: int
    mac: str | None = None  # store/integrity.py

    def covered(self, tenant_id: str) -> dict[str, object]:
        """The row by column name, as its MAC covers it (store/integrity.py)."""
        return {
            "tenant_id": tenant_id,
            "version": self.version,
            "document": self.document,
            "created_ms": self.created_ms,
            "mac": self.mac,
        }


_v, _s, _t = policy_versions.c, policy_spends.c, policy_totals.c
_LATEST = Prepared(
    select(_v.version, _v.document, _v.created_ms, _v.mac)
    .where(_v.tenant_id == bindparam("tenant_id"))
    .order_by(_v.version.desc())
    .limit(1)
)
_HISTORY = Prepared(
    select(_v.version, _v.document, _v.created_ms, _v.mac)
    .where(_v.tenant_id == bindparam("tenant_id"))
    .order_by(_v.version)
)
_INSERT_VERSION = Prepared(
    insert(policy_versions), ("tenant_id", "version", "document", "created_ms", "mac")
)
_SCOPE = (
    (_s.tenant_id == bindparam("tenant_id"))
    & (_s.family == bindparam("family"))
    & (_s.network == bindparam("network"))
)
_SEEN = Prepared(
    select(_s.id)
    .where(
        _s.tenant_id == bindparam("tenant_id"),
        _s.digest == bindparam("digest"),
        _s.created_ms > bindparam("cutoff"),
    )
    .limit(1)
)
_DAILY = ~_s.denom.startswith(KEY_PREFIX, autoescape=True)  # a limit's rows leave on its own
_EXPIRE = Prepared(
    delete(policy_spends)
    .where(_SCOPE, _DAILY, _s.created_ms <= bindparam("cutoff"))
    .returning(_s.denom, _s.amount)
)
_EXPIRED = Prepared(  # what _EXPIRE would delete, read only (a read transaction's view)
    select(_s.denom, _s.amount).where(_SCOPE, _DAILY, _s.created_ms <= bindparam("cutoff"))
)
_ONE = _SCOPE & (_s.denom == bindparam("denom")) & (_s.created_ms <= bindparam("cutoff"))
_EXPIRE_COUNTER = Prepared(delete(policy_spends).where(_ONE).returning(_s.amount))
_EXPIRED_COUNTER = Prepared(select(_s.amount).where(_ONE))
_TOTALS = Prepared(  # every total of the tenant: the `caps` set its head pins
    select(_t.tenant_id, _t.family, _t.network, _t.denom, _t.total, _t.mac).where(
        _t.tenant_id == bindparam("tenant_id")
    )
)
_SET_TOTAL = Prepared(
    update(policy_totals)
    .where(
        _t.tenant_id == bindparam("tenant_id"),
        _t.family == bindparam("family"),
        _t.network == bindparam("network"),
        _t.denom == bindparam("denom"),
    )
    .values(total=bindparam("total"), mac=bindparam("mac"))
)
_INSERT_TOTAL = Prepared(
    insert(policy_totals), ("tenant_id", "family", "network", "denom", "total", "mac")
)
_INSERT_SPEND = Prepared(
    insert(policy_spends),
    ("tenant_id", "family", "network", "denom", "digest", "amount", "created_ms"),
)


class Policies:
    @staticmethod
    async def latest(tx: Tx, tenant_id: str) -> Version | None:
        row = (await tx.execute(_LATEST, {"tenant_id": tenant_id})).first()
        return None if row is None else Version(int(row[0]), row[1], int(row[2]), row[3])

    @staticmethod
    async def history(tx: Tx, tenant_id: str) -> list[Version]:
        rows = (await tx.execute(_HISTORY, {"tenant_id": tenant_id})).all()
        return [Version(int(r[0]), r[1], int(r[2]), r[3]) for r in rows]

    @staticmethod
    async def insert(tx: Tx, tenant_id: str, version: Version) -> None:
        params = {
            "tenant_id": tenant_id,
            "version": version.version,
            "document": version.document,
            "created_ms": version.created_ms,
            "mac": version.mac,
        }
        await tx.execute(_INSERT_VERSION, params)


DAY_MS = 24 * 3600 * 1000


class Spends:
    """The rolling window of one tenant's spends on one family and network.

    The running totals are authenticated rows pinned by the tenant's head (the `caps`
    set, vault/heads.py): a total lowered, deleted or put back from an older copy by a
    database writer fails closed (IntegrityFailure: nothing signs under that cap).

    Callers hold `lock` for the whole transaction: SQLite has one writer at a
    time already; PostgreSQL serialises the scope with an advisory lock, so
    replicas never both admit the last unit under a cap. Every time here is the
    database's clock (`now`), never a replica's: spends are stamped and expired on one
    clock, so a replica whose clock is ahead cannot expire anyone's spends early.
    """

    def __init__(self, tx: Tx, gate: Gate, tenant_id: str, family: str, network: str) -> None:
        self.tx = tx
        self.gate = gate
        self.scope = {"tenant_id": tenant_id, "family": family, "network": network}
        self._locked = False
        self._macs: dict[str, str] = {}  # denom -> the MAC of its total as read

    async def lock(self) -> None:
        if not self._locked:
            await self.tx.serialize("policy/" + "/".join(self.scope.values()))
            self._locked = True

    async def now(self) -> int:
        """The database's clock (ms since the epoch)."""
        return int((await self.tx.execute(DB_NOW_MS)).all()[0][0])

    async def cutoff(self) -> int:
        """Spends at or before this left the 24 h window (the database's clock)."""
        return await self.now() - DAY_MS

    async def seen(self, digest: str, cutoff_ms: int) -> bool:
        """Whether these exact bytes were counted in the window already."""
        params = {"tenant_id": self.scope["tenant_id"], "digest": digest, "cutoff": cutoff_ms}
        return (await self.tx.execute(_SEEN, params)).first() is not None

    async def _read_totals(self) -> dict[str, int]:
        """This scope's totals, each authenticated and the tenant's set the latest."""
        tenant_id = self.scope["tenant_id"]
        mine: dict[str, int] = {}

        async def load() -> list[Loaded]:
            mine.clear()
            self._macs.clear()
            found = []
            for row in (await self.tx.execute(_TOTALS, {"tenant_id": tenant_id})).all():
                values = row._mapping
                valid = self.gate.valid(POLICY_TOTALS, values)
                found.append(((cap_ident(values), str(values["mac"])), valid))
                if (values["family"], values["network"]) == (
                    self.scope["family"],
                    self.scope["network"],
                ):
                    if not valid:  # a total of this window that fails: nothing counts on
                        raise failed(POLICY_TOTALS, f"the cap total {cap_ident(values)}")
                    mine[values["denom"]] = int(values["total"])
                    self._macs[values["denom"]] = str(values["mac"])
            return found

        await self.gate.heads.check(self.tx, tenant_id, "caps", load, "the cap totals")
        return dict(mine)

    async def totals(self, cutoff_ms: int) -> dict[str, int]:
        """Per denom, what the window holds after spends at or before `cutoff_ms` left it."""
        totals = await self._read_totals()
        expired = (await self.tx.execute(_EXPIRE, {**self.scope, "cutoff": cutoff_ms})).all()
        if expired:
            for denom, amount in expired:
                totals[denom] = totals.get(denom, 0) - int(amount)
            for denom in {r[0] for r in expired}:
                await self._store(denom, totals[denom], known=True)
        return totals

    async def limits(
        self, counted: tuple[Counted, ...], at_ms: int, totals: dict[str, int], write: bool
    ) -> dict[str, int]:
        """The counters of `counted` in `totals` (as `totals` read them) once what left
        each one's window has left it: with `write`, deleted and the total stored (under
        the lock); without, only read (a dry run). A lifetime counter keeps its total;
        its rows leave after 24 h (they only make a retry of the same bytes free)."""
        out: dict[str, int] = {}
        for c in {c.key: c for c in counted}.values():
            window = c.limit.window_ms
            params = {**self.scope, "denom": c.key, "cutoff": at_ms - (window or DAY_MS)}
            query = _EXPIRE_COUNTER if write else _EXPIRED_COUNTER
            gone = sum(int(r[0]) for r in (await self.tx.execute(query, params)).all())
            if c.key not in totals:
                continue
            out[c.key] = totals[c.key] - (gone if window is not None else 0)
            if write and gone and window is not None:
                await self._store(c.key, out[c.key], known=True)
        return out

    async def peek(self, counted: tuple[Counted, ...]) -> dict[str, int]:
        """The counters of `counted` now, read only (a dry run)."""
        return await self.limits(counted, await self.now(), await self._read_totals(), False)

    async def window(self, cutoff_ms: int) -> dict[str, int]:
        """As `totals`, read only (no lock, nothing rewritten): what a condition reads as
        `spent`. The caps themselves are counted by `totals` under the lock."""
        totals = await self._read_totals()
        expired = await self.tx.execute(_EXPIRED, {**self.scope, "cutoff": cutoff_ms})
        for denom, amount in expired.all():
            totals[denom] = totals.get(denom, 0) - int(amount)
        return {
            denom: total
            for denom, total in totals.items()
            if total > 0 and not denom.startswith(KEY_PREFIX)
        }

    @staticmethod
    async def networks(tx: Tx, tenant_id: str, family: str, cutoff_ms: int) -> list[str]:
        """The family's networks this tenant spent on after `cutoff_ms`."""
        stmt = (
            select(_s.network)
            .distinct()
            .where(_s.tenant_id == tenant_id, _s.family == family, _s.created_ms > cutoff_ms)
            .order_by(_s.network)
        )
        return [str(r[0]) for r in (await tx.execute(stmt)).all()]

    async def add(
        self, digest: str, spent: dict[str, int], old: dict[str, int], at_ms: int
    ) -> None:
        for denom, amount in spent.items():
            params = {
                **self.scope,
                "denom": denom,
                "digest": digest,
                "amount": str(amount),
                "created_ms": at_ms,
            }
            await self.tx.execute(_INSERT_SPEND, params)
            await self._store(denom, old.get(denom, 0) + amount, known=denom in old)

    async def _store(self, denom: str, total: int, known: bool) -> None:
        values = {**self.scope, "denom": denom, "total": str(total)}
        mac = self.gate.mac(POLICY_TOTALS, values)
        ident = cap_ident(values)
        old = self._macs.get(denom)
        await self.tx.execute(_SET_TOTAL if known else _INSERT_TOTAL, {**values, "mac": mac})
        removed = [(ident, old)] if known and old is not None else []
        await self.gate.heads.change(
            self.tx, self.scope["tenant_id"], "caps", removed=removed, added=[(ident, mac)]
        )
        self._macs[denom] = mac
