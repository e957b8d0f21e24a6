"""Policies in force: set and read by the operator, applied to every sign request.

Each server re-reads a tenant's policy at most `policy_refresh_seconds` after
it last did, so a change reaches every process and replica within that time
without a restart. Caps are checked and counted in the transaction that
records the signature (see `SigningService`), never from the cache.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import Summary
from chainkeys.clock import monotonic, now_ms
from chainkeys.errors import IntegrityFailure, NotFound, StartupError
from chainkeys.policies.conditions import Facts
from chainkeys.policies.document import Policy, PolicyError, Rule, parse
from chainkeys.policies.engine import Decision, Refusal, decide, over_the_day
from chainkeys.policies.limits import over
from chainkeys.policies.repository import DAY_MS as DAY_MS
from chainkeys.policies.repository import Policies, Spends, Version
from chainkeys.store.backend import Backend, Transactions
from chainkeys.store.integrity import POLICY_VERSIONS
from chainkeys.store.sql import Tx
from chainkeys.tokens.repository import Tenants
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded
from chainkeys.vault.integrity import Integrity, failed

log = logging.getLogger("chainkeys")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Account:
    """What conditions read of the signing account (`account` in CEL)."""

    name: str
    address: str
    wallet: str = ""  # "" when not derived from a wallet
    path: str = ""
    index: int = -1  # -1 when not derived


@dataclass(frozen=True, slots=True)
class Usage:
    """One daily cap of the policy in force and what its 24 h window holds."""

    rule: Rule
    network: str
    denom: str
    cap: int
    spent: int


@dataclass(frozen=True, slots=True)
class Spend:
    """A request's spend, checked against the caps under their lock
    (`PolicyService.check`): recorded in the same transaction once it is signed."""

    spends: Spends
    digest: str
    amounts: dict[str, int]  # per denom, and per limit counter (policies/limits.py)
    totals: dict[str, int]  # the windows' before this spend
    at_ms: int

    async def record(self) -> None:
        await self.spends.add(self.digest, self.amounts, self.totals, self.at_ms)


@dataclass(frozen=True, slots=True)
class Shown:
    tenant: str
    version: Version | None  # None: never had a policy


class PolicyService:
    def __init__(
        self, db: Backend, refresh_seconds: float = 5.0, integrity: Gate | None = None
    ) -> None:
        self.db = db
        self.refresh = refresh_seconds
        self.integrity = integrity  # None: an administration process without the key
        self._cache: dict[str, tuple[float, Policy | None]] = {}

    # -- serving -----------------------------------------------------------------

    async def current(
        self, tenant_id: str, fresh: bool = False, db: Transactions | None = None
    ) -> Policy | None:
        """The tenant's policy in force (None: no policy, sign as scopes allow).
        `fresh` reads the store past the cache: a signature at an approval's quorum
        may come long after the request, and must follow the policy of that moment.
        `db`: where to read it (a batch's transaction), the store by default."""
        hit = self._cache.get(tenant_id)
        now = monotonic()
        if hit is not None and now < hit[0] and not fresh:
            return hit[1]
        async with (db or self.db).read() as tx:
            try:
                latest = await self.latest(tx, tenant_id)
            except IntegrityFailure:
                self._cache.pop(tenant_id, None)  # no request uses what it held either
                raise
        policy = None
        if latest is not None and latest.document is not None:
            try:
                policy = parse(latest.document)
            except PolicyError:  # stored by another version: refuse everything, say why
                log.error(
                    "the stored policy of tenant %s cannot be read; signing refused", tenant_id
                )
                policy = Policy((), "")
        self._cache[tenant_id] = (now + self.refresh, policy)
        return policy

    async def latest(self, tx: Tx, tenant_id: str) -> Version | None:
        """The tenant's latest version, authenticated and the one its head pins
        (IntegrityFailure for a version a database writer made, edited, put back or
        deleted: sign nothing, change nothing)."""
        gate = self._keyed()
        latest = await Policies.latest(tx, tenant_id)
        if latest is not None:
            what = f"policy version {latest.version} of tenant {tenant_id}"
            if not gate.valid(POLICY_VERSIONS, latest.covered(tenant_id)):
                raise failed(POLICY_VERSIONS, what)

        async def load() -> list[Loaded]:  # (its MAC was checked above)
            if latest is None:
                return []
            return [((str(latest.version), str(latest.mac)), True)]

        await gate.heads.check(tx, tenant_id, "policy", load, "the latest policy")
        return latest

    async def facts(
        self,
        who: Principal,
        account: Account,
        summary: Summary,
        policy: Policy,
        db: Transactions | None = None,
    ) -> Facts | None:
        """The variables a policy's conditions read beside the summary (None when it has
        none): the token, the account, the time, and the 24 h window spent so far (read
        only when a condition names `spent`; from `db`, a batch's transaction, whose
        earlier items' spends count, or the store)."""
        if not policy.conditional:
            return None
        spent: dict[str, int] = {}
        if policy.reads_spent:  # a first look: decided again under the lock (`count`)
            async with (db or self.db).read() as tx:
                window = Spends(tx, self._keyed(), who.tenant_id, summary.family, summary.network)
                spent = await window.window(await window.cutoff())
        return Facts(
            who.token_id,
            who.label,
            tuple(sorted(who.scopes)),
            tuple(sorted(who.families or ())),
            account.name,
            account.address,
            account.wallet,
            account.path,
            account.index,
            now_ms(),
            spent,
        )

    async def decide(self, policy: Policy, summary: Summary, facts: Facts | None) -> Decision:
        """The decision on a request (Refusal). Pure and bounded (each condition's cost is
        checked when the policy is set), so it runs on the event loop."""
        return decide(policy, summary, facts)

    async def usage(self, who: Principal) -> list[Usage]:
        """Every daily cap of the policy in force (rules of the families this token may
        use) against its window: a network-less rule on each network spent on in the
        window (its family's default network when none)."""
        policy = await self.current(who.tenant_id, fresh=True)
        if policy is None:
            return []
        windows: dict[tuple[str, str], dict[str, int]] = {}
        out: list[Usage] = []
        async with self.db.read() as tx:
            cutoff = await Spends(tx, self._keyed(), who.tenant_id, "", "").cutoff()
            for rule in policy.rules:
                if rule.effect != "allow" or not rule.max_per_day or not who.may_use(rule.family):
                    continue
                networks = (
                    [rule.network]
                    if rule.network
                    else (
                        await Spends.networks(tx, who.tenant_id, rule.family, cutoff)
                        or [FAMILIES[rule.family].default_network]
                    )
                )
                for network in networks:
                    if (rule.family, network) not in windows:
                        window = Spends(tx, self._keyed(), who.tenant_id, rule.family, network)
                        windows[(rule.family, network)] = await window.window(cutoff)
                    spent = windows[(rule.family, network)]
                    out.extend(
                        Usage(rule, network, denom, cap, spent.get(denom, 0))
                        for denom, cap in rule.max_per_day.items()
                    )
        return out

    async def count(
        self,
        tx: Tx,
        tenant_id: str,
        network: str,
        decision: Decision,
        summary: Summary,
        record: bool = True,
        again: tuple[Policy, Facts | None] | None = None,
    ) -> Decision:
        """Check the 24 h caps and count this request's spend, in the caller's
        transaction (Refusal rolls it back); the decision that counted. Without
        `record`, only check (a request that waits for approval: its spend is counted
        when it is signed). `check` and `Spend.record` in one call."""
        decision, spend = await self.check(tx, tenant_id, network, decision, summary, again)
        if record and spend is not None:
            await spend.record()
        return decision

    async def check(
        self,
        tx: Tx,
        tenant_id: str,
        network: str,
        decision: Decision,
        summary: Summary,
        again: tuple[Policy, Facts | None] | None = None,
    ) -> tuple[Decision, Spend | None]:
        """Check the 24 h caps and the rule's limits under their lock, in the caller's
        transaction (Refusal when one would be passed): the decision that counts, and
        the spend to record in the same transaction once the request is signed (None:
        nothing to count, or these bytes were counted in the window already: a digest
        counted is free).

        `again` (the policy and the request's facts), when the policy's conditions read
        `spent`: the decision is made again here, under the scope's lock, on the window
        this transaction sees, so concurrent requests (on any replica) never all pass a
        budget on the same stale `spent`."""
        spends = Spends(tx, self._keyed(), tenant_id, summary.family, network)
        if again is not None and (facts := again[1]) is not None:
            policy = again[0]
            await spends.lock()
            spent = await spends.window(await spends.cutoff())
            decision = decide(policy, summary, replace(facts, spent=spent))
        if not decision.spent and not decision.limits:
            return decision, None
        await spends.lock()
        at = await spends.now()
        cutoff = at - DAY_MS
        if await spends.seen(summary.digest, cutoff):
            return decision, None
        totals = await spends.totals(cutoff)
        for denom, cap in decision.daily.items():
            total = totals.get(denom, 0) + decision.spent[denom]
            if total > cap:
                raise Refusal(
                    decision.rule, over_the_day(summary, denom, decision.spent[denom], total, cap)
                )
        counters = await spends.limits(decision.limits, at, totals, write=True)
        if (why := over_limit(decision, counters)) is not None:
            raise Refusal(decision.rule, why)
        amounts = {**decision.spent, **{c.key: c.amount for c in decision.limits}}
        old = {denom: n for denom, n in totals.items() if denom in decision.spent}
        return decision, Spend(spends, summary.digest, amounts, {**old, **counters}, at)

    # -- operator ----------------------------------------------------------------

    async def set(self, tenant: str, text: str | bytes, fmt: str) -> Version:
        """Validate and store a new version (PolicyError naming the field)."""
        policy = parse(text, fmt)
        return await self._new_version(tenant, policy.canonical)

    async def clear(self, tenant: str) -> Version:
        return await self._new_version(tenant, None)

    async def show(self, tenant: str) -> Shown:
        async def work(tx: Tx, tenant_id: str) -> Shown:
            return Shown(tenant, await Policies.latest(tx, tenant_id))

        return await self._read(tenant, work)

    async def history(self, tenant: str) -> list[Version]:
        async def work(tx: Tx, tenant_id: str) -> list[Version]:
            return await Policies.history(tx, tenant_id)

        return await self._read(tenant, work)

    async def _read(self, tenant: str, work: Callable[[Tx, str], Awaitable[T]]) -> T:
        async with self.db.read() as tx:
            return await work(tx, await _tenant_id(tx, tenant, self.integrity))

    async def _new_version(self, tenant: str, document: str | None) -> Version:
        async with self.db.write() as tx:
            tenant_id = await _tenant_id(tx, tenant, self.integrity)
            version = await self.write_version(tx, tenant_id, tenant, document)
        return version

    async def write_version(
        self, tx: Tx, tenant_id: str, tenant: str, document: str | None, why: str | None = None
    ) -> Version:
        """Store `document` (canonical JSON; None: clear) as the tenant's next version,
        pinned and audited, in the caller's write transaction: a governance change is
        applied in the transaction that decides it (`why`: the change's id, audited)."""
        latest = await Policies.latest(tx, tenant_id)
        version = Version((latest.version if latest else 0) + 1, document, now_ms())
        gate = self._keyed()
        mac = gate.mac(POLICY_VERSIONS, version.covered(tenant_id))
        version = replace(version, mac=mac)
        await Policies.insert(tx, tenant_id, version)
        await gate.heads.replace(tx, tenant_id, "policy", [(str(version.version), mac)])
        details: dict[str, object] = {
            "version": version.version,
            "sha256": hashlib.sha256(document.encode()).hexdigest() if document else None,
        }
        if why is not None:
            details["change"] = why
        action = "policy.set" if document is not None else "policy.clear"
        actor = Principal(tenant_id, tenant, "")
        await Audit.insert(tx, audit_event(actor, action, "ok", details=details))
        self._cache.pop(tenant_id, None)
        return version

    def _keyed(self) -> Gate:
        if self.integrity is None:
            raise StartupError(
                "setting and applying a policy needs the master key (its "
                "versions are authenticated under it)"
            )
        return self.integrity


def over_limit(decision: Decision, counters: dict[str, int]) -> str | None:
    """Why the first of the decision's limits that a request would pass refuses (the
    same words for the refusal and the dry run); None when it fits every one."""
    for c in decision.limits:
        total = counters.get(c.key, 0)
        if total + c.amount > c.bound:
            return over(c, total)
    return None


async def _tenant_id(tx: Tx, tenant: str, integrity: Integrity | None) -> str:
    tenant_id = await Tenants.id_by_name(tx, tenant, integrity)
    if tenant_id is None:
        raise NotFound(f"no tenant named {tenant}")
    return tenant_id
