"""What a policy change does in words, and whether it only tightens: a table of changes
side by side (governance/diff.py). Anything not known to tighten loosens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.api.test_sign_cosmos import OTHER

from chainkeys.governance.diff import policy_diff
from chainkeys.policies.document import Policy, parse

BASE: dict[str, Any] = {"family": "cosmos", "network": "cosmoshub", "max_per_tx": {"uatom": "1000"}}


def policy(*rules: dict[str, Any]) -> Policy:
    return parse(json.dumps({"rules": list(rules)}))


CASES = [
    ("a cap lowered", [BASE], [{**BASE, "max_per_tx": {"uatom": "500"}}], False, "lowered"),
    ("a cap raised", [BASE], [{**BASE, "max_per_tx": {"uatom": "5000"}}], True, "raised"),
    (
        "a denom a cap newly allows",
        [BASE],
        [{**BASE, "max_per_tx": {"uatom": "1000", "uosmo": "1"}}],
        True,
        "allows uosmo",
    ),
    ("a cap removed", [BASE], [{"family": "cosmos", "network": "cosmoshub"}], True, "removed"),
    ("a daily cap set", [BASE], [{**BASE, "max_per_day": {"uatom": "9000"}}], False, "set"),
    ("a rule removed", [BASE, {"family": "eos"}], [BASE], False, "removed"),
    ("an allow rule added", [BASE], [BASE, {"family": "eos"}], True, "added"),
    (
        "a deny rule added",
        [BASE],
        [BASE, {"family": "cosmos", "effect": "deny", "when": "tx.kind == 'message'"}],
        False,
        "deny rule",
    ),
    (
        "a deny rule removed",
        [BASE, {"family": "cosmos", "effect": "deny", "when": "tx.kind == 'message'"}],
        [BASE],
        True,
        "removed",
    ),
    ("recipients limited", [BASE], [{**BASE, "recipients": [OTHER]}], False, "limited"),
    ("recipients no longer limited", [{**BASE, "recipients": [OTHER]}], [BASE], True, "no longer"),
    ("raw messages allowed", [BASE], [{**BASE, "raw_messages": True}], True, "raw_messages"),
    ("raw messages refused", [{**BASE, "raw_messages": True}], [BASE], False, "raw_messages"),
    ("the co-signer skipped", [BASE], [{**BASE, "cosigner": False}], True, "cosigner"),
    (
        "an approval added",
        [BASE],
        [{**BASE, "approval": {"quorum": 2, "group": "treasury"}}],
        False,
        "approval added",
    ),
    (
        "an approval removed",
        [{**BASE, "approval": {"quorum": 2, "group": "treasury"}}],
        [BASE],
        True,
        "approval changed",
    ),
    ("rules reordered", [BASE, {"family": "eos"}], [{"family": "eos"}, BASE], True, "reordered"),
]


@pytest.mark.parametrize(
    ("what", "old", "new", "loosens", "word"), CASES, ids=[c[0] for c in CASES]
)
def test_a_change_in_words(
    what: str, old: list[dict[str, Any]], new: list[dict[str, Any]], loosens: bool, word: str
) -> None:
    words, looser = policy_diff(policy(*old), policy(*new))
    assert looser is loosens, (what, words)
    assert any(word in w for w in words), (what, words)


def test_setting_and_clearing_a_policy() -> None:
    assert policy_diff(None, policy(BASE))[1] is False  # no policy signs what scopes allow
    assert policy_diff(policy(BASE), None)[1] is True
    assert policy_diff(policy(BASE), policy(BASE)) == (["no change"], False)
