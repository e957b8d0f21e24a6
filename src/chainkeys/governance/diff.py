"""What a policy change does, in words, and whether it only tightens.

People sign the diff they are shown, so it is made from the two documents as the
service reads them (parsed: recipients in canonical form, amounts as integers), never
from the text a proposer typed. `loosens` is false only when every difference is one
this module knows to tighten: a rule removed, a deny rule added, a recipient removed,
a cap lowered or added, raw messages, IBC memos or a skipped co-signer turned off, an
approval added, a limit added or made stricter (`limits_diff`: a bound no higher over
a window no shorter, on a subject no narrower). Anything else (a rule added,
reordered or changed in a way not listed here) loosens: a change not understood
waits the delay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgspec

from chainkeys.policies.document import Policy, Rule
from chainkeys.policies.limits import Limit

# A rule's fields compared one by one below; any other field that differs is "changed".
_KNOWN = {
    "recipients",
    "max_per_tx",
    "max_per_day",
    "raw_messages",
    "ibc_memo",
    "cosigner",
    "limits",
}


def _raw(policy: Policy | None) -> list[dict[str, Any]]:
    if policy is None:
        return []
    rules: list[dict[str, Any]] = msgspec.json.decode(policy.canonical)["rules"]
    return rules


def _identity(raw: dict[str, Any]) -> tuple[Any, ...]:
    """Which rule of the other document a rule is the same rule as: its scope, name,
    effect and condition (two rules of one scope differ by their condition)."""
    return (
        raw.get("family"),
        raw.get("network"),
        raw.get("name"),
        raw.get("effect", "allow"),
        raw.get("when"),
    )


def _key(raw: dict[str, Any]) -> str:
    return msgspec.json.encode(raw, order="sorted").decode()


def describe(rule: Rule) -> str:
    kind = "deny rule" if rule.effect == "deny" else "rule"
    where = f"{rule.family}/{rule.network or '*'}"
    named = f" {rule.name!r}" if rule.name else ""
    return f"{kind}{named} ({where})"


def policy_diff(old: Policy | None, new: Policy | None) -> tuple[list[str], bool]:
    """(the differences in words, whether the change loosens anything)."""
    if old is None and new is None:
        return ["no change: the tenant has no policy"], False
    if new is None:
        return ["the policy is cleared: every request is signed as tokens' scopes allow"], True
    if old is None:
        return [f"a policy is set where there was none ({len(new.rules)} rules)"], False
    words: list[str] = []
    loosens = False
    old_raw, new_raw = _raw(old), _raw(new)
    same = {_key(r) for r in old_raw} & {_key(r) for r in new_raw}
    kept_old = [_key(r) for r in old_raw if _key(r) in same]
    kept_new = [_key(r) for r in new_raw if _key(r) in same]
    if kept_old != kept_new:
        words.append("rules are reordered (allow rules are tried in order)")
        loosens = True
    unmatched_old = {i: r for i, r in enumerate(old_raw) if _key(r) not in same}
    for j, raw in enumerate(new_raw):
        if _key(raw) in same:
            continue
        i = next((i for i, r in unmatched_old.items() if _identity(r) == _identity(raw)), None)
        if i is None:
            rule = new.rules[j]
            words.append(f"{describe(rule)} added")
            loosens = loosens or rule.effect != "deny"
            continue
        del unmatched_old[i]
        found, looser = _rule_diff(old.rules[i], new.rules[j], old_raw[i], raw)
        words.extend(found)
        loosens = loosens or looser
    for i in unmatched_old:
        rule = old.rules[i]
        words.append(f"{describe(rule)} removed")
        loosens = loosens or rule.effect == "deny"
    return words or ["no change"], loosens


def _rule_diff(
    old: Rule, new: Rule, old_raw: dict[str, Any], new_raw: dict[str, Any]
) -> tuple[list[str], bool]:
    """The differences of one rule kept from the old document to the new."""
    name, words, loosens = describe(new), [], False
    if old.recipients != new.recipients:
        if new.recipients is None:
            words.append(f"{name}: recipients no longer limited")
            loosens = True
        elif old.recipients is None:
            words.append(f"{name}: recipients limited to {len(new.recipients)}")
        else:
            added = sorted(new.recipients - old.recipients)
            removed = sorted(old.recipients - new.recipients)
            if added:
                words.append(f"{name}: recipients added: {', '.join(added)}")
                loosens = True
            if removed:
                words.append(f"{name}: recipients removed: {', '.join(removed)}")
    for field, label in (("max_per_tx", "per-transaction cap"), ("max_per_day", "24 h cap")):
        found, looser = _caps(name, label, getattr(old, field), getattr(new, field))
        words.extend(found)
        loosens = loosens or looser
    found, looser = limits_diff(name, old.limits, new.limits)
    words.extend(found)
    loosens = loosens or looser
    for field, off_tightens in (("raw_messages", True), ("ibc_memo", True), ("cosigner", False)):
        before, after = getattr(old, field), getattr(new, field)
        if before != after:
            words.append(f"{name}: {field} {str(before).lower()} -> {str(after).lower()}")
            loosens = loosens or (after if off_tightens else not after)
    for field in sorted((set(old_raw) | set(new_raw)) - _KNOWN):
        if old_raw.get(field) != new_raw.get(field):
            if field == "approval" and old_raw.get(field) is None:
                words.append(f"{name}: approval added")
                continue
            words.append(f"{name}: {field} changed")
            loosens = True
    return words, loosens


def _caps(
    name: str, label: str, old: Mapping[str, int] | None, new: Mapping[str, int] | None
) -> tuple[list[str], bool]:
    """A cap map's differences: a denom without a cap in a rule that caps is refused,
    so a denom added to the map loosens, and no map at all is no limit."""
    if old == new:
        return [], False
    if new is None:
        return [f"{name}: {label} removed"], True
    if old is None:
        caps = ", ".join(f"{d} {a}" for d, a in sorted(new.items()))
        return [f"{name}: {label} set ({caps})"], False
    words, loosens = [], False
    for denom in sorted(set(old) | set(new)):
        before, after = old.get(denom), new.get(denom)
        if before == after:
            continue
        if before is None:
            words.append(f"{name}: {label} allows {denom} (up to {after})")
            loosens = True
        elif after is None:
            words.append(f"{name}: {label} no longer allows {denom}")
        elif after > before:
            words.append(f"{name}: {label} raised for {denom}: {before} -> {after}")
            loosens = True
        else:
            words.append(f"{name}: {label} lowered for {denom}: {before} -> {after}")
    return words, loosens


def limits_diff(
    name: str, old: tuple[Limit, ...], new: tuple[Limit, ...]
) -> tuple[list[str], bool]:
    """A rule's limits' differences. Only tightens when every old limit is still held by
    a new one at least as strict (`_holds`); a limit added tightens."""
    before = [replace(limit, index=0) for limit in old]  # moved in the list: the same
    after = [replace(limit, index=0) for limit in new]
    if sorted(map(repr, before)) == sorted(map(repr, after)):
        return [], False
    words = [f"{name}: limit removed: {_words(o)}" for o in before if o not in after]
    words += [f"{name}: limit added: {_words(n)}" for n in after if n not in before]
    loosens = any(not any(_holds(n, o) for n in new) for o in old)
    return words, loosens


def _holds(new: Limit, old: Limit) -> bool:
    """Whether `new` refuses at least whatever `old` refused: the same kind, a bound no
    higher (every denom `old` bounded), a window no shorter (a shorter window with the
    same bound lets more through over the old one), and a subject no narrower (a
    tenant's counter holds every account's, wallet's and token's)."""
    if new.per not in (old.per, "tenant"):
        return False
    if old.window_ms is None:
        if new.window_ms is not None:
            return False
    elif new.window_ms is not None and new.window_ms < old.window_ms:
        return False
    if old.count is not None:
        return new.count is not None and new.count <= old.count
    if old.amount is None or new.amount is None:
        return False
    return all(d in new.amount and new.amount[d] <= bound for d, bound in old.amount.items())


def _words(limit: Limit) -> str:
    if limit.count is not None:
        what = f"{limit.count} signatures"
    else:
        what = ", ".join(f"{d} {a}" for d, a in sorted((limit.amount or {}).items()))
    window = "lifetime" if limit.window_ms is None else f"per {limit.span}"
    return f"{what} {window} per {limit.per}"
