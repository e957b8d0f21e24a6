"""The policy decision on a sign request's summary: pure, no I/O.

Which rule decides: every `deny` rule that covers the request's family and network
and whose `when` is true, or cannot be evaluated (fail closed), refuses it, whatever
else the policy says; otherwise the first `allow` rule that covers it (this network's
rules in file order, then the family's network-less ones) and whose `when` is true (or
that has none) decides; none: refused (default deny). A `when` that cannot be
evaluated never lets an allow rule apply.

`decide` then applies that rule's stateless checks (message types, recipients,
per-transaction caps) and returns what the stateful part must still check: the
rolling 24 h caps and the rule's `limits` (each counter it would add to), which
`policies/service.py` checks and counts inside the transaction that records the
signature.

A rule that restricts recipients or caps amounts only allows what it can
check: a message it cannot decode (whatever `raw_messages` says) and a
transaction whose fee is unknown are refused under it, because neither their
recipients nor their amounts can be counted. Under a recipient allow-list an
IBC memo that the receiving chain could act on (JSON: packet-forward
`forward`, wasm hooks, callbacks) is refused unless the rule says
`"ibc_memo": true`: the receiver on the allow-list would not be the final one.
"""

from __future__ import annotations

import json  # the standard library's on purpose: its lenient parser (NaN, duplicates)
from collections.abc import Mapping
from dataclasses import dataclass, field

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import Vocabulary
from chainkeys.chains.tx.base import Item, Summary
from chainkeys.policies.conditions import Bindings, Facts, evaluate
from chainkeys.policies.document import Approval, Policy, Rule, Scope
from chainkeys.policies.limits import Counted, counted, subject

Evaluated = bool | str  # a `when`'s value, or "error: …"


class Refusal(Exception):
    """What a rule does not allow; the message names the rule and the reason."""

    def __init__(self, rule: Rule | None, reason: str) -> None:
        self.rule = rule
        self.reason = reason
        self.evaluations: dict[int, Evaluated] = {}
        where = f"policy {rule.label}" if rule is not None else "policy"
        super().__init__(f"{where}: {reason}")

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True, slots=True)
class Decision:
    """Allowed so far; `daily` maps each denom this request spends to its 24 h cap
    (empty: nothing left to count); `approval`, when set, is who must approve it first."""

    rule: Rule
    spent: Mapping[str, int]
    daily: Mapping[str, int]
    approval: Approval | None = None
    evaluations: Mapping[int, Evaluated] = field(default_factory=dict)  # rule index -> when
    limits: tuple[Counted, ...] = ()  # what it adds to each of the rule's limits' counters


class Conditions:
    """The `when`s of one request, each evaluated at most once, on variables bound once
    (at the first one needed); each rule on its own, within its own budget."""

    __slots__ = ("_bindings", "facts", "summary", "values")

    def __init__(self, summary: Summary, facts: Facts | None) -> None:
        self.summary, self.facts = summary, facts
        self.values: dict[int, Evaluated] = {}
        self._bindings: Bindings | None = None

    def of(self, rule: Rule) -> Evaluated:
        if rule.when is None:
            return True
        found = self.values.get(rule.index)
        if found is not None:
            return found
        if self.facts is None:
            value: Evaluated = "error: no request to evaluate it on"
        else:
            if self._bindings is None:
                self._bindings = Bindings(self.summary, self.facts)
            value = evaluate(rule.when, self._bindings)
        self.values[rule.index] = value
        return value


def decide(
    policy: Policy, summary: Summary, facts: Facts | None = None, every: bool = False
) -> Decision:
    """Refusal unless a rule allows every part of `summary` (default deny). With `every`
    (a dry run), every covering rule's `when` is evaluated, not only those needed."""
    scope = policy.scope(summary.family, summary.network)
    conditions = Conditions(summary, facts)
    try:
        rule = _deciding(scope, summary, conditions, every)
        return _allowed_by(rule, summary, conditions.values, facts)
    except Refusal as refusal:
        refusal.evaluations = conditions.values
        raise


def _deciding(scope: Scope, summary: Summary, conditions: Conditions, every: bool) -> Rule:
    """The allow rule that decides, unless a deny rule applies (Refusal)."""
    if every:
        for rule in scope.conditional:
            conditions.of(rule)
    for rule in scope.deny:
        value = conditions.of(rule)
        if value is not False:  # true, or not evaluable: a deny applies (fail closed)
            why = f" ({value})" if isinstance(value, str) else ""
            raise Refusal(rule, f"a deny rule applies{why}")
    for rule in scope.allow:
        if conditions.of(rule) is True:
            return rule
    raise Refusal(None, f"no rule allows signing for {summary.family} on {summary.network}")


def _allowed_by(
    rule: Rule, summary: Summary, evaluations: dict[int, Evaluated], facts: Facts | None
) -> Decision:
    """The decision of the rule that applies: its allow-lists, caps and approval."""
    if summary.raw and not rule.raw_messages:
        raise Refusal(rule, "raw message signing is not allowed (raw_messages is false)")
    capped = _caps_amounts(rule)
    if capped and summary.fee is None:
        raise Refusal(
            rule,
            "the fee is unknown (an input's previous output is missing): "
            "this rule caps amounts, so every input's amount must be given",
        )
    words = FAMILIES[summary.family].vocabulary
    for n, item in enumerate(summary.items):
        _check_item(rule, words, n, item)
    spent = {denom: amount for denom, amount in summary.spent().items() if amount > 0}
    daily: dict[str, int] = {}
    for denom, amount in spent.items():
        if rule.max_per_tx is not None:
            _within(rule, rule.max_per_tx, "max_per_tx", "per-transaction", summary, denom, amount)
        if rule.max_per_day is not None:
            daily[denom] = _within(
                rule, rule.max_per_day, "max_per_day", "24 h", summary, denom, amount
            )
    limits = _limits(rule, spent, facts)
    approval = _approval_needed(rule, summary, spent)
    return Decision(rule, spent, daily, approval, evaluations, tuple(limits))


def _caps_amounts(rule: Rule) -> bool:
    """Whether the rule counts amounts (then every amount must be known)."""
    limited = any(limit.amount is not None for limit in rule.limits)
    return rule.max_per_tx is not None or rule.max_per_day is not None or limited


def _limits(rule: Rule, spent: Mapping[str, int], facts: Facts | None) -> list[Counted]:
    """The counters the request adds to; Refusal when it alone is over a limit, or
    when a limit per account, wallet or token has no facts to name whose (fail closed)."""
    if not rule.limits:
        return []

    def who(per: str) -> str:
        if facts is None:
            if per == "tenant":
                return subject(per, "", "", "")
            raise Refusal(rule, f"a limit per {per} has no {per} to count on")
        return subject(per, facts.token_id, facts.account_name, facts.wallet)

    found, why = counted(rule.limits, spent, who)
    if why is not None:
        raise Refusal(rule, why)
    return found


def _approval_needed(rule: Rule, summary: Summary, spent: Mapping[str, int]) -> Approval | None:
    """The rule's approval, unless it applies only `above` amounts and this request
    stays within every listed denom and moves no other one. A request whose total is
    not known (an unknown fee, a message not decoded) is never "within": people look."""
    if rule.approval is None or rule.above is None:
        return rule.approval
    outputs = FAMILIES[summary.family].vocabulary.outputs  # an output's amount is known
    unread = not outputs and any(not item.decoded for item in summary.items)
    if summary.fee is None or unread:
        return rule.approval
    for denom, amount in spent.items():
        limit = rule.above.get(denom)
        if limit is None or amount > limit:
            return rule.approval
    return None


def _within(
    rule: Rule,
    caps: Mapping[str, int],
    key: str,
    label: str,
    summary: Summary,
    denom: str,
    amount: int,
) -> int:
    """The cap of `denom` when `amount` alone is within it (a denom without a cap is not
    moved by this rule); the 24 h window is checked against it in the store. A refusal
    names both in the smallest unit and the display unit (`300000000 litoshi (3 LTC)`),
    never the ticker alone beside a count of its smallest unit."""
    cap = caps.get(denom)
    if cap is None:
        raise Refusal(rule, f"{denom} is not in {key}: this rule does not move it")
    if amount > cap:
        raise Refusal(
            rule,
            f"{summary.words(denom, amount)} is over the {label} cap of "
            f"{summary.words(denom, cap)}",
        )
    return cap


def _check_item(rule: Rule, words: Vocabulary, n: int, item: Item) -> None:
    if words.outputs:
        if item.change:
            return
        if not item.decoded:  # a script with no address; its amount is known and counted
            if not rule.raw_messages:
                raise Refusal(rule, f"output {n} pays a script with no address")
            return
    else:
        what = words.item
        if not item.decoded:
            # A message the service cannot read: only when raw messages are allowed,
            # if the rule lists types only a listed one, and never under a rule that
            # checks recipients or amounts (what it moves cannot be known).
            if not rule.raw_messages:
                raise Refusal(rule, f"{what} {item.type} cannot be decoded (raw_messages is false)")
            if rule.listed and item.type not in rule.allowed:
                raise Refusal(rule, f"{what} {item.type} is not allowed")
            if rule.recipients is not None or _caps_amounts(rule):
                raise Refusal(
                    rule,
                    f"{what} {item.type} cannot be decoded, and this rule "
                    "checks recipients or caps amounts",
                )
            return
        if item.type not in rule.allowed:
            raise Refusal(rule, f"{what} {item.type} is not allowed")
    if rule.recipients is not None:
        if item.recipient is None:
            raise Refusal(rule, f"{item.type} names no recipient to check")
        if item.recipient not in rule.recipients:  # both in the family's canonical form
            raise Refusal(rule, f"recipient {item.recipient[:100]} is not on the allow-list")
        if item.memo and not rule.ibc_memo and instructs(item.memo):
            raise Refusal(
                rule,
                f"{item.type} carries a memo the receiving chain may act on (forwarding, "
                "hooks, callbacks): its funds may not stay with the allowed receiver; "
                'set "ibc_memo": true to allow it',
            )


def instructs(memo: str) -> bool:
    """Whether an IBC memo could carry instructions for middleware on the receiving
    chain: any JSON value (ibc-go middlewares read JSON objects; the check is wider),
    or text with a brace in it (a lenient parser could still find an object)."""
    if "{" in memo or "[" in memo:
        return True
    try:
        json.loads(memo)
    except (ValueError, RecursionError):
        return False
    return True


def over_the_day(summary: Summary, denom: str, spent: int, total: int, cap: int) -> str:
    """Why a 24 h cap refuses: `300000000 litoshi (3 LTC) would bring the last 24 h to
    …, over the cap of …`, every amount in the request's own units (the same words for
    the refusal and the dry run)."""
    over = summary.words(denom, total)
    return (
        f"{summary.words(denom, spent)} would bring the last 24 h to {over}, over the "
        f"cap of {summary.words(denom, cap)}"
    )
