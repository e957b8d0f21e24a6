"""The policy file: parsed, validated and put in canonical form.

One format (DESIGN.md "Policies"), read from JSON or the same in TOML. Every
error names the field (`rules[1].max_per_tx.uatom`), so an operator can fix
the file without reading code. Values are compared later exactly as they are
held here: amounts as Python ints, recipients in the family's canonical form.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError, Family
from chainkeys.errors import BadRequest
from chainkeys.policies.analysis import SCOPE_COST
from chainkeys.policies.conditions import Condition, ConditionError, compile_condition
from chainkeys.policies.limits import Limit, LimitFile, read_limits
from chainkeys.policies.shape import did_you_mean, problems, usable
from chainkeys.tokens.service import GROUP, parse_duration

MAX_AMOUNT = 2**256  # Cosmos amounts are sdk.Int (256 bits); no cap is larger
# The rule fields that list item types, as the families' vocabularies name them (Cosmos
# `messages`, EOS `actions`): a family's own, and refused on every other family's rule.
LISTS: Final = tuple(sorted({f.vocabulary.lists for f in FAMILIES.values() if f.vocabulary.lists}))


class PolicyError(BadRequest):
    """A policy refused: `problems` holds each of its problems, path first; the message
    joins them (one line for the API's envelope and the audit log)."""

    code = "invalid_policy"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.problems: tuple[str, ...] = (self.message,)

    @classmethod
    def of(cls, problems: list[str]) -> PolicyError:
        error = cls("; ".join(problems))
        error.problems = tuple(problems)
        return error


class ApprovalFile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    quorum: int
    group: str
    ttl: str = "24h"
    passkey: bool = False  # a vote counts only signed by the person's passkey or key


class RuleFields(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A rule's fields but those listing item types (`RuleFile` adds them, from `LISTS`)."""

    family: str
    network: str | None = None
    name: str | None = None
    recipients: list[str] | None = None
    max_per_tx: dict[str, Any] | None = None  # values checked by _caps: messages name the denom
    max_per_day: dict[str, Any] | None = None
    raw_messages: bool = False
    ibc_memo: bool = False
    approval: ApprovalFile | None = None
    above: dict[str, Any] | None = None  # values checked by _caps, like the caps
    when: str | None = None  # a CEL condition (policies/conditions.py)
    effect: str = "allow"  # or "deny"
    cosigner: bool = True  # false: what this rule allows is signed without the co-signer
    limits: list[LimitFile] | None = None  # policies/limits.py


RuleFile: Final = msgspec.defstruct(
    "RuleFile",
    [(name, list[str] | None, None) for name in LISTS],
    bases=(RuleFields,),
    forbid_unknown_fields=True,
    omit_defaults=True,
)
PolicyFile: Final = msgspec.defstruct(
    "PolicyFile",
    [("rules", list[RuleFile])],  # type: ignore[valid-type]
    forbid_unknown_fields=True,
)
# how the messages name each object of the file ("rules[0].bogus: not a key of a rule")
NOUNS: Final = {
    PolicyFile: 'a policy ({"rules": [...]})',
    RuleFile: "a rule",
    ApprovalFile: "an approval",
    LimitFile: "a limit",
}


@dataclass(frozen=True, slots=True)
class Approval:
    """People who must approve what a rule allows: `quorum` of `group`, within `ttl_ms`;
    with `passkey`, each vote signed by the person's enrolled credential."""

    quorum: int
    group: str
    ttl_ms: int
    passkey: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated rule; `None` means the key was left out (no restriction)."""

    index: int
    family: str
    network: str | None
    name: str | None
    recipients: frozenset[str] | None
    max_per_tx: Mapping[str, int] | None
    max_per_day: Mapping[str, int] | None
    allowed: frozenset[str]  # the item types its family's vocabulary lists (defaults filled in)
    listed: bool  # the family's list (`messages`, `actions`) given explicitly
    raw_messages: bool
    ibc_memo: bool = False  # IBC memos that may instruct the receiving chain are allowed
    approval: Approval | None = None
    above: Mapping[str, int] | None = None  # approval only above these, or for other denoms
    when: Condition | None = None  # applies only when this is true (None: always)
    effect: str = "allow"  # "deny": applies to refuse, whatever else allows
    cosigner: bool = True  # the co-signer (if one is set) is asked before it signs
    limits: tuple[Limit, ...] = ()  # windows, counts and lifetime caps (policies/limits.py)

    @property
    def label(self) -> str:
        where = f"{self.family}/{self.network or '*'}"
        return f"rule {self.index} ({self.name or where})"

    def covers(self, family: str, network: str) -> bool:
        return self.family == family and self.network in (None, network)


@dataclass(frozen=True, slots=True)
class Scope:
    """The rules that cover one family and network, worked out once per policy."""

    allow: tuple[Rule, ...]  # in the order they are tried
    deny: tuple[Rule, ...]
    conditional: tuple[Rule, ...]  # the covering rules with a `when`, in file order


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...]
    canonical: str  # the document as stored and shown: JSON, sorted keys
    _scopes: dict[tuple[str, str], Scope] = field(default_factory=dict, compare=False, repr=False)

    # whether any rule has a condition or a limit per account, wallet or token (then
    # requests carry their facts), and whether one reads `spent` (then the 24 h window
    # is read before deciding)
    conditional: bool = field(init=False, compare=False, repr=False)
    reads_spent: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        whens = [rule.when for rule in self.rules if rule.when is not None]
        per = any(limit.per != "tenant" for rule in self.rules for limit in rule.limits)
        object.__setattr__(self, "conditional", bool(whens) or per)
        object.__setattr__(self, "reads_spent", any("spent" in w.reads for w in whens))

    def scope(self, family: str, network: str) -> Scope:
        """The covering rules of (family, network), kept on the policy (a policy is
        parsed once per refresh; networks are the registry's, so this stays small)."""
        found = self._scopes.get((family, network))
        if found is None:
            covering = [r for r in self.rules if r.covers(family, network)]
            allow = sorted(
                (r for r in covering if r.effect == "allow"), key=lambda r: r.network is None
            )
            conditional = tuple(r for r in covering if r.when is not None)
            found = Scope(
                tuple(allow), tuple(r for r in covering if r.effect == "deny"), conditional
            )
            self._scopes[(family, network)] = found
        return found

    def allow_rules(self, family: str, network: str) -> tuple[Rule, ...]:
        """The allow rules that may decide, in the order they are tried: those for
        exactly this network in file order, then the family's network-less ones."""
        return self.scope(family, network).allow


def parse(text: str | bytes, fmt: str = "json") -> Policy:
    """A policy from a file's text: `fmt` is "json" or "toml". Refused with every
    problem of the file at once (`PolicyError.problems`), each with its path."""
    try:
        if fmt == "toml":
            raw = text.decode() if isinstance(text, bytes) else text
            data: Any = tomllib.loads(raw)
        else:
            data = msgspec.json.decode(text)
    except (msgspec.DecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"the policy is not valid {fmt.upper()}: {exc}") from None
    try:  # the shape of every policy stored, and of most files: read at once
        doc: Any = msgspec.convert(data, PolicyFile)
    except msgspec.ValidationError:
        doc = None  # read key by key below, to name every problem
    rules = data.get("rules") if isinstance(data, dict) else None
    found: list[str] = []
    if doc is None:  # the file's own keys first (each rule is read below, on its own)
        top = {**data, "rules": []} if isinstance(rules, list) else data
        found = [p.message for p in problems(top, PolicyFile, "", NOUNS)]
    if not isinstance(rules, list):  # missing, or not an array: said just now
        raise PolicyError.of(found)
    checked: list[Rule] = []
    seen: dict[tuple[str, str | None], int] = {}
    for i, rule in enumerate(rules):
        if doc is not None:
            made = _rule(i, doc.rules[i], f"rules[{i}]", frozenset(), found)
        else:
            made = _read_rule(i, rule, found)
        if made is None:
            continue
        key = (made.family, made.network)
        if made.effect == "allow" and made.when is None:  # it always applies: a later
            if key in seen:  # unconditional allow rule of the same scope never would
                where = made.network or "every network"
                found.append(
                    f"rules[{i}]: rules[{seen[key]}] already covers {made.family} on "
                    f"{where} with no condition (give one of them a when)"
                )
            seen[key] = i
        checked.append(made)
    if found:
        raise PolicyError.of(found)
    if doc is None:  # every part was checked above: it converts
        doc = msgspec.convert(data, PolicyFile)
    policy = Policy(tuple(checked), msgspec.json.encode(doc, order="sorted").decode())
    _within_cost(policy)
    return policy


def _read_rule(index: int, rule: Any, found: list[str]) -> Rule | None:
    """One rule of the file, or None with each of its problems added to `found`: its
    shape's first (unknown keys, types), then its values' (the keys whose shape was
    right), so a rule's every problem is named, not only the first."""
    at = f"rules[{index}]"
    shape = problems(rule, RuleFile, at, NOUNS)
    found += [p.message for p in shape]
    fine = usable(rule, RuleFile) if isinstance(rule, dict) else {}
    if "family" not in fine:
        return None  # without its family nothing else of the rule can be checked
    broken = frozenset(rule) - frozenset(fine)  # left out: their problems are named
    raw: RuleFields = msgspec.convert(fine, RuleFile)  # type: ignore[assignment]
    made = _rule(index, raw, at, broken, found)
    return None if shape else made


def _within_cost(policy: Policy) -> None:
    """The conditions one request can meet (every rule that covers one family and
    network) cost at most SCOPE_COST together (analysis.py): a decision, or a dry run
    that evaluates them all, holds the event loop a few milliseconds at most."""
    for family in {r.family for r in policy.rules}:
        for network in FAMILIES[family].networks:
            rules = policy.scope(family, network).conditional
            cost = sum(r.when.cost for r in rules if r.when is not None)
            if cost > SCOPE_COST:
                names = ", ".join(f"rules[{r.index}]" for r in rules)
                raise PolicyError(
                    f"the conditions of {names} ({family} on {network}) could cost about "
                    f"{cost:,} steps together on a large request, over the {SCOPE_COST:,} "
                    'one request may take: simplify or merge them (docs/policies.md, "Cost")'
                )


def _rule(
    index: int, raw: RuleFields, at: str, broken: frozenset[str], found: list[str]
) -> Rule | None:
    """The rule, or None with each of its problems added to `found` (`broken`: its keys
    whose shape was wrong, already named, left out here)."""
    before = len(found)
    fam = FAMILIES.get(raw.family)
    if fam is None:
        found.append(
            f"{at}.family: {raw.family!r} is not one of {', '.join(FAMILIES)}"
            f"{did_you_mean(raw.family, FAMILIES)}"
        )
        return None  # the rest is read by the family's rules
    network = raw.network
    if network is not None and network not in fam.networks:
        names = ", ".join(fam.networks)
        found.append(
            f"{at}.network: {network!r} is not a {raw.family} network ({names})"
            f"{did_you_mean(network, fam.networks)}"
        )
        network = None  # recipients are still checked, as for any of the family's
    words = fam.vocabulary
    for name in LISTS:  # another family's list: say whose it is
        if getattr(raw, name) is not None and name != words.lists:
            theirs = [(n, f.vocabulary) for n, f in FAMILIES.items() if f.vocabulary.lists == name]
            found.append(
                f"{at}.{name}: only {' and '.join(n for n, _ in theirs)} rules "
                f"list {theirs[0][1].item}s"
            )
    if raw.ibc_memo and not words.ibc:
        ibc = " and ".join(n for n, f in FAMILIES.items() if f.vocabulary.ibc)
        found.append(f"{at}.ibc_memo: only {ibc} rules carry IBC transfers")
    if raw.above is not None and raw.approval is None and "approval" not in broken:
        found.append(f"{at}.above: says when approval is needed; add approval")
    if raw.effect not in ("allow", "deny"):
        found.append(f"{at}.effect: allow or deny{did_you_mean(raw.effect, ('allow', 'deny'))}")
    if raw.effect == "deny" and not raw.cosigner:
        found.append(f"{at}.cosigner: a deny rule signs nothing, so it asks no co-signer")
    when = None
    if raw.when is not None:
        try:
            when = compile_condition(raw.when)
        except ConditionError as exc:
            found.append(f"{at}.when: {exc}")
    listed: list[str] | None = getattr(raw, words.lists) if words.lists else None
    for j, item in enumerate(listed or ()):
        if not item.strip():
            found.append(f"{at}.{words.lists}[{j}]: empty")
    recipients = None
    if raw.recipients is not None:
        recipients = frozenset(
            r
            for j, text in enumerate(raw.recipients)
            if (r := _recipient(fam, network, text, f"{at}.recipients[{j}]", found)) is not None
        )
    max_per_tx = _caps(raw.max_per_tx, f"{at}.max_per_tx", found)
    max_per_day = _caps(raw.max_per_day, f"{at}.max_per_day", found)
    approval = _approval(raw.approval, f"{at}.approval", found)
    above = _caps(raw.above, f"{at}.above", found)
    limits = read_limits(raw.limits, f"{at}.limits", found, _caps)
    if raw.limits and raw.effect == "deny":
        found.append(f"{at}.limits: a deny rule signs nothing, so it counts nothing")
    if len(found) > before:
        return None
    return Rule(
        index,
        raw.family,
        raw.network,
        raw.name,
        recipients,
        max_per_tx,
        max_per_day,
        frozenset(listed if listed is not None else words.default),
        listed is not None,
        raw.raw_messages,
        raw.ibc_memo,
        approval,
        above,
        when,
        raw.effect,
        raw.cosigner,
        limits,
    )


MAX_QUORUM = 20
MAX_TTL_MS = 30 * 86_400_000


def _approval(raw: ApprovalFile | None, at: str, found: list[str]) -> Approval | None:
    if raw is None:
        return None
    before = len(found)
    if not 1 <= raw.quorum <= MAX_QUORUM:
        found.append(f"{at}.quorum: from 1 to {MAX_QUORUM} people")
    if not GROUP.fullmatch(raw.group):
        found.append(f"{at}.group: 1 to 64 of A-Z a-z 0-9 . _ -")
    ttl_ms = 0
    try:
        ttl_ms = parse_duration(raw.ttl)
    except BadRequest:
        found.append(f"{at}.ttl: {raw.ttl!r} is not a duration such as 30s, 15m, 24h, 7d")
    else:
        if not 1000 <= ttl_ms <= MAX_TTL_MS:
            found.append(f"{at}.ttl: from 1s to 30d")
    if len(found) > before:
        return None
    return Approval(raw.quorum, raw.group, ttl_ms, raw.passkey)


def _caps(raw: dict[str, Any] | None, at: str, found: list[str]) -> Mapping[str, int] | None:
    """The amounts of a denom map (caps, `above`); each invalid one added to `found`."""
    if raw is None:
        return None
    caps = {}
    for denom, text in raw.items():
        if not denom.strip():
            found.append(f"{at}: a denom is empty")
        elif not isinstance(text, str):
            found.append(
                f"{at}.{denom}: {text!r} is not a string; amounts are decimal strings "
                'of the smallest unit, such as "1000000"'
            )
        elif not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
            found.append(
                f"{at}.{denom}: {text!r} is not a whole number of the smallest unit "
                '(a decimal string such as "1000000")'
            )
        elif int(text) >= MAX_AMOUNT:
            found.append(f"{at}.{denom}: larger than any amount a chain can move")
        else:
            caps[denom] = int(text)
    return caps


def _recipient(
    fam: Family[Any], network: str | None, text: str, at: str, found: list[str]
) -> str | None:
    """The canonical form of an allow-listed recipient, as summaries carry them (the
    family's `canonical_recipient`: Cosmos recipients may be on another chain, an IBC
    receiver; UTXO addresses must be of the rule's network, any of the family's when it
    names none); None, its problem added to `found`, when it is not one."""
    try:
        return fam.canonical_recipient(text, fam.network(network) if network else None)
    except ChainError as exc:
        found.append(f"{at}: {text!r} is not a valid recipient: {exc.message}")
        return None
