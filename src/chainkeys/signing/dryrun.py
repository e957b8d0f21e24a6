"""A policy's dry run: what it would decide on a sign request, and why, with nothing
signed, no key opened and no cap counted.

The request is decoded by the sign endpoint's own decoder and decided by the same
engine (`policies/engine.py`) on the same variables as a real request, so the dry run
agrees with the real decision; the 24 h caps are read, never counted. `POST
/policy/test` tries the tenant's policy in force, `chainkeys policy test` a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chainkeys.accounts.families import family_of
from chainkeys.accounts.repository import Accounts
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import Summary, summary_record
from chainkeys.errors import AccountNotFound, BadRequest
from chainkeys.jsonvalues import convert
from chainkeys.policies.document import Approval, Policy, Rule
from chainkeys.policies.engine import Decision, Evaluated, Refusal, decide, over_the_day
from chainkeys.policies.repository import Spends
from chainkeys.policies.service import PolicyService, over_limit
from chainkeys.signing.requests import account_for, kind_of, owner_of, prepare
from chainkeys.store.backend import Backend
from chainkeys.together import Together
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import Gate


@dataclass(frozen=True, slots=True)
class RuleValue:
    """One rule in the dry run: whether it covers the request, and its `when`'s value
    (None: no condition, or not covering)."""

    rule: Rule
    covers: bool
    value: Evaluated | None


@dataclass(frozen=True, slots=True)
class DryRun:
    decision: str  # allow, deny or approval
    rule: Rule | None  # the rule that decided (None: no policy, or no rule applied)
    reason: str | None
    approval: Approval | None
    rules: list[RuleValue]
    summary: dict[str, Any]
    cosigner: bool = False  # a co-signer would be asked before it signs (docs/cosigner.md)


async def dry_run(
    db: Backend,
    integrity: Gate,
    policies: PolicyService,
    who: Principal,
    family: str,
    account: str,
    kind_path: str,
    body: Any,
    policy: Policy | None = None,
    cosigner: bool = False,
) -> DryRun:
    """Decide `body` (a sign endpoint's request) for `account` as `who`, under `policy`
    (None: the tenant's policy in force, read fresh). No master key is needed. With
    `cosigner` (one is configured), say whether it would be asked: for whatever would
    sign, unless the deciding rule says `"cosigner": false`."""
    fam = family_of(family)
    kind = kind_of(fam.name, kind_path)
    request = convert(body, kind.request, "request: ")
    Together(one_of=getattr(kind.request, "one_of", ())).check(request)  # as the endpoint's
    try:
        name = fam.check_name(account)
    except ChainError as exc:
        raise BadRequest(exc.message, code=exc.code) from None
    async with db.read() as tx:
        row = await Accounts.get(tx, integrity, who.tenant_id, fam.name, name)
    if row is None:
        raise AccountNotFound(f"no {fam.name} account by that name")
    summary = prepare(kind, request, owner_of(row)).summary  # as the sign endpoint does
    if policy is None:
        policy = await policies.current(who.tenant_id, fresh=True)
    record = summary_record(summary)
    if policy is None:
        why = "no policy: the token's scopes decide"
        return DryRun("allow", None, why, None, [], record, cosigner)
    facts = await policies.facts(who, await account_for(db, integrity, row), summary, policy)
    try:
        decision = decide(policy, summary, facts, every=True)
    except Refusal as refusal:
        return DryRun(
            "deny",
            refusal.rule,
            refusal.message,
            None,
            _values(who, policy, summary.family, summary.network, refusal.evaluations),
            record,
        )
    values = _values(who, policy, summary.family, summary.network, decision.evaluations)
    over = await _over_daily_cap(db, integrity, who, summary, decision)
    if over is not None:
        return DryRun("deny", decision.rule, over, None, values, record)
    asked = cosigner and decision.rule.cosigner
    if decision.approval is not None:
        return DryRun("approval", decision.rule, None, decision.approval, values, record, asked)
    return DryRun("allow", decision.rule, None, None, values, record, asked)


def _values(
    who: Principal,
    policy: Policy,
    family: str,
    network: str,
    evaluations: dict[int, Evaluated] | Any,
) -> list[RuleValue]:
    """Every rule of the families this token may use (a family-limited token sees no
    other family's rules here either, as in `GET /policy`)."""
    return [
        RuleValue(r, r.covers(family, network), evaluations.get(r.index))
        for r in policy.rules
        if who.may_use(r.family)
    ]


async def _over_daily_cap(
    db: Backend, gate: Gate, who: Principal, summary: Summary, decision: Decision
) -> str | None:
    """Why the 24 h window or a limit would refuse it (read, never counted); None when
    it fits."""
    if not decision.daily and not decision.limits:
        return None
    async with db.read() as tx:
        window = Spends(tx, gate, who.tenant_id, summary.family, summary.network)
        cutoff = await window.cutoff()
        if await window.seen(summary.digest, cutoff):
            return None  # the same bytes were counted already: free
        totals = await window.window(cutoff)
        counters = await window.peek(decision.limits)
    for denom, cap in decision.daily.items():
        total = totals.get(denom, 0) + decision.spent[denom]
        if total > cap:
            words = over_the_day(summary, denom, decision.spent[denom], total, cap)
            return f"policy {decision.rule.label}: {words}"
    limited = over_limit(decision, counters)
    return None if limited is None else f"policy {decision.rule.label}: {limited}"
