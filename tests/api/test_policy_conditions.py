"""Policy conditions (CEL) and deny rules through real HTTP on both engines: deny over
allow and over approval, file order, fail closed, type errors refused with their
position, the dry run agreeing with the real decision, tenants reading their policy,
and properties over random expressions and requests."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, IBC_TRANSFER, OTHER, PRIVATE, TRANSFER
from tests.api.test_sign_utxo import VECTORS

from chainkeys import clock
from chainkeys.policies.document import PolicyError, parse

OSMO = VECTORS["keys"][1]["cosmos"]["addresses"]["osmo"]
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
IBC = f"/cosmos/{ADDRESS}/sign-ibc-transfer"
COSMOS = {"family": "cosmos", "network": "cosmoshub"}
MONDAY_NOON = 1_795_521_600_000  # 2026-11-23T12:00:00Z (a Monday)
SATURDAY_NOON = MONDAY_NOON + 5 * 86_400_000


def send(amount: int, sequence: int = 1, to: str = OTHER, fee: int = 5000) -> dict[str, Any]:
    return {
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "toAddress": to,
        "feeAmount": str(fee),
    }


@pytest.fixture
def cosmos(tenant: Tenant) -> Tenant:
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    return tenant


def at(ms: int) -> Any:
    """The server's clock (it runs in this process) moved to `ms`."""
    return clock.shift(ms - clock.now_ms())


def dry_run(t: Tenant, path: str, body: dict[str, Any]) -> dict[str, Any]:
    kind = path.rsplit("/", 1)[1]
    r = t.client.post(
        "/policy/test", json={"family": "cosmos", "account": ADDRESS, "kind": kind, "request": body}
    )
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def test_deny_wins_over_allow_and_over_approval(cosmos: Tenant) -> None:
    cosmos.policy(
        {
            **COSMOS,
            "effect": "deny",
            "name": "no-osmosis-channel",
            "when": "tx.ibc.exists(p, p.channel != 'channel-141')",
        },
        {
            **COSMOS,
            "approval": {"quorum": 2, "group": "treasury"},
            "messages": [
                "/cosmos.bank.v1beta1.MsgSend",
                "/ibc.applications.transfer.v1.MsgTransfer",
            ],
        },
    )
    ok = {**IBC_TRANSFER, "toAddress": OSMO, "amount": "10"}
    r = cosmos.sign(IBC, ok)
    assert r.status_code == 202  # channel-141: the deny rule does not apply; approval asked
    denied = cosmos.denied(
        IBC, {**ok, "sourceChannel": "channel-7"}, "rule 0", "no-osmosis-channel", "deny"
    )
    assert "approval" not in denied
    run = dry_run(cosmos, IBC, {**ok, "sourceChannel": "channel-7"})
    assert (run["decision"], run["rule"], run["rules"][0]["value"]) == ("deny", 0, True)
    assert dry_run(cosmos, IBC, ok)["decision"] == "approval"
    events = cosmos.sign_events()
    assert events[-1]["outcome"] == "policy_denied" and "deny" in events[-1]["details"]["reason"]


def test_weekday_payouts_for_one_token_label(cosmos: Tenant) -> None:
    cosmos.policy(
        {
            **COSMOS,
            "name": "payouts",
            "when": "token.label == 'test' && now.getDayOfWeek('UTC') in [1, 2, 3, 4, 5]",
            "max_per_tx": {"uatom": "1000000"},
        }
    )
    with at(MONDAY_NOON):
        cosmos.allowed(SEND, send(10))
        assert dry_run(cosmos, SEND, send(10))["rules"][0]["value"] is True
    with at(SATURDAY_NOON):
        cosmos.denied(SEND, send(10, sequence=2), "no rule allows")
        assert dry_run(cosmos, SEND, send(10, sequence=2))["decision"] == "deny"


def test_first_applying_allow_rule_decides_in_file_order(cosmos: Tenant) -> None:
    cosmos.policy(
        {
            **COSMOS,
            "name": "big",
            "when": "'uatom' in tx.total && tx.total['uatom'] > 100000",
            "approval": {"quorum": 1, "group": "treasury"},
        },
        {**COSMOS, "name": "small", "max_per_tx": {"uatom": "100000"}},
    )
    cosmos.allowed(SEND, send(10))  # small: the second rule decides
    assert cosmos.sign(SEND, send(200_000, sequence=2)).status_code == 202  # big: the first
    run = dry_run(cosmos, SEND, send(10))
    assert run["decision"] == "allow" and run["rule"] == 1 and run["rule_name"] == "small"


def test_fail_closed(cosmos: Tenant) -> None:
    """A `when` that errors (a missing map key) never lets an allow rule apply, and
    makes a deny rule apply."""
    cosmos.policy({**COSMOS, "when": "tx.total['uosmo'] > 0"})
    cosmos.denied(SEND, send(10), "no rule allows")
    run = dry_run(cosmos, SEND, send(10))
    assert run["rules"][0]["value"].startswith("error")
    cosmos.policy({**COSMOS, "effect": "deny", "when": "tx.total['uosmo'] > 0"}, {**COSMOS})
    cosmos.denied(SEND, send(10, sequence=2), "deny rule applies", "error")
    cosmos.policy(
        {**COSMOS, "effect": "deny", "when": "has(tx.memo) && tx.memo.contains('x')"}, {**COSMOS}
    )
    cosmos.allowed(SEND, send(10, sequence=3))  # no memo: absent, not "" (has() says so)


def test_spent_reads_the_24h_window_and_leaves_the_caps_whole(cosmos: Tenant) -> None:
    """`spent` is what the window holds before this request; reading it for a condition
    removes nothing from the window: once old spends leave it, the cap counts the same."""
    cosmos.policy(
        {
            **COSMOS,
            "effect": "deny",
            "name": "slow-down",
            "when": "'uatom' in spent && spent['uatom'] >= 500",
        },
        {**COSMOS, "max_per_day": {"uatom": "1000"}},
    )
    with at(MONDAY_NOON):
        cosmos.allowed(SEND, send(400, fee=1))
        assert dry_run(cosmos, SEND, send(200, sequence=2, fee=1))["rules"][0]["value"] is False
        cosmos.allowed(SEND, send(200, sequence=2, fee=1))  # 401 + 201 = 602 in the window
        cosmos.denied(SEND, send(10, sequence=3, fee=1), "slow-down", "deny")
    cosmos.age_spends(25 * 3_600_000)  # both spends have left the window
    with at(MONDAY_NOON + 25 * 3_600_000):
        assert dry_run(cosmos, SEND, send(990, sequence=3, fee=1))["rules"][0]["value"] is False
        cosmos.allowed(SEND, send(990, sequence=3, fee=1))  # 991 of 1000: the cap is whole
        cosmos.denied(SEND, send(10, sequence=4, fee=1), "slow-down")


def test_each_rule_keeps_its_own_value_when_one_errors(cosmos: Tenant) -> None:
    """The covering rules' conditions are evaluated together; one that errors (and a
    comment at the end of another) changes no other rule's value or the decision."""
    cosmos.policy(
        {**COSMOS, "when": "tx.total['uosmo'] > 0 // no uosmo here: an error"},
        {**COSMOS, "when": "tx.kind == 'psbt' // not a PSBT"},
        {**COSMOS, "effect": "deny", "when": "token.label == 'nobody' // not this token"},
        {**COSMOS, "name": "transfers", "when": "tx.kind == 'transfer' // the one that decides"},
    )
    run = dry_run(cosmos, SEND, send(10))
    values = [rule["value"] for rule in run["rules"]]
    assert values[0].startswith("error") and "uosmo" in values[0]
    assert values[1:] == [False, False, True]
    assert (run["decision"], run["rule_name"]) == ("allow", "transfers")
    cosmos.allowed(SEND, send(10))


@pytest.mark.parametrize(
    ("when", "words"),
    [
        ("tx.fmaily == 'cosmos'", ["line 1, column 3", "fmaily"]),
        ("tx.family", ["not a bool"]),
        ("tx.total['uatom'] > 'big'", ["line 1", "no matching overload"]),
        ("nobody.knows", ["undeclared reference", "nobody"]),
        ("tx.outputs.exists(o, tx.outputs.all(p, p.amount > o.amount))", ["could cost", "60,000"]),
        ("tx.family == 'cosmos' &&\n  tx.kind ==", ["line 2"]),
        ("x" * 4097, ["4096"]),
    ],
)
def test_a_condition_that_does_not_check_is_refused_at_set_with_its_position(
    when: str, words: list[str]
) -> None:
    with pytest.raises(PolicyError) as refused:
        parse(json.dumps({"rules": [{**COSMOS, "when": when}]}))
    for word in words:
        assert word in refused.value.message, refused.value.message
    assert refused.value.message.startswith("rules[0].when:")


def test_tenants_read_their_policy_and_its_history(cosmos: Tenant) -> None:
    empty = cosmos.client.get("/policy").json()["data"]
    assert empty == {"version": None, "set": None, "policy": None, "units": {}}
    cosmos.policy({**COSMOS, "when": "tx.kind == 'transfer'"})
    cosmos.clear()
    cosmos.policy({**COSMOS})
    shown = cosmos.client.get("/policy").json()["data"]
    assert shown["version"] == 3 and shown["policy"]["rules"][0]["family"] == "cosmos"
    history = cosmos.client.get("/policy/history").json()["data"]["versions"]
    assert [v["version"] for v in history] == [1, 2, 3]
    assert history[0]["policy"]["rules"][0]["when"] == "tx.kind == 'transfer'"
    assert history[1]["policy"] is None  # cleared


def test_the_dry_run_signs_nothing_and_counts_no_cap(cosmos: Tenant) -> None:
    cosmos.policy({**COSMOS, "max_per_day": {"uatom": "100"}})
    for _ in range(3):
        assert dry_run(cosmos, SEND, send(90, fee=0))["decision"] == "allow"
    assert cosmos.sign_events() == []
    cosmos.allowed(SEND, send(90, fee=0))  # the cap was never counted by the dry runs
    over = dry_run(cosmos, SEND, send(20, sequence=2, fee=0))
    assert over["decision"] == "deny" and "over the cap" in over["reason"]
    cosmos.denied(SEND, send(20, sequence=2, fee=0), "over the cap")  # and so it is


# ---- properties --------------------------------------------------------------------------

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
ATOMS = st.sampled_from(
    [
        "true",
        "false",
        "tx.family == 'cosmos'",
        "tx.kind == 'transfer'",
        "has(tx.memo)",
        "tx.total['uatom'] > 5",
        "tx.fee['uatom'] == 5000",
        "token.label == 'test'",
        "account.index == -1",
        "tx.outputs.exists(o, o.amount > 100)",
        "tx.total['nope'] > 0",
        "now.getDayOfWeek('UTC') == 6",
        "size(tx.messages) > 0",
        "tx.fee_known",
    ]
)
EXPRS = st.recursive(
    ATOMS,
    lambda e: st.tuples(e, st.sampled_from([" && ", " || "]), e).map(
        lambda t: f"({t[0]}{t[1]}{t[2]})"
    )
    | e.map(lambda x: f"!({x})"),
    max_leaves=6,
)


@SETTINGS
@given(when=EXPRS, amount=st.integers(min_value=1, max_value=10**6))
def test_a_deny_rule_whose_when_is_true_always_refuses(
    cosmos: Tenant, when: str, amount: int
) -> None:
    cosmos.policy({**COSMOS, "effect": "deny", "when": when}, {**COSMOS})
    run = dry_run(cosmos, SEND, send(amount))
    value = run["rules"][0]["value"]
    r = cosmos.sign(SEND, send(amount))
    if value is False:
        assert r.status_code == 200, (when, r.text)
    else:  # true, or an error: refused, whatever the allow rule says
        assert r.status_code == 403 and r.json()["code"] == "policy_denied", (when, r.text)
    assert run["decision"] == ("allow" if value is False else "deny")


@SETTINGS
@given(when=EXPRS)
def test_an_allow_rule_whose_when_errors_never_allows(cosmos: Tenant, when: str) -> None:
    cosmos.policy({**COSMOS, "when": when})
    value = dry_run(cosmos, SEND, send(10))["rules"][0]["value"]
    r = cosmos.sign(SEND, send(10))
    assert (r.status_code == 200) == (value is True), (when, value, r.text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(max_size=300))
def test_any_text_as_a_condition_is_refused_or_compiled_quickly(text: str) -> None:
    try:
        parse(json.dumps({"rules": [{**COSMOS, "when": text}]}))
    except PolicyError as exc:
        assert exc.message.startswith("rules[0]")


def test_concurrent_requests_each_get_the_decision_on_their_own_request(cosmos: Tenant) -> None:
    """Decisions that arrive together run back to back (policies/decider.py): under
    concurrent sign requests each answer, and each audit row, is its own request's."""
    cosmos.policy(
        {**COSMOS, "effect": "deny", "name": "big", "when": "tx.total['uatom'] > 600"},
        {**COSMOS, "name": "transfers", "when": "tx.kind == 'transfer'"},
    )
    amounts = [10 * i + (700 if i % 3 == 0 else 0) for i in range(24)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda a: cosmos.sign(SEND, send(a, sequence=a, fee=1)), amounts))
    for amount, answer in zip(amounts, answers, strict=True):
        if amount + 1 > 600:
            assert answer.status_code == 403 and "big" in answer.json()["message"], answer.text
        else:
            assert answer.status_code == 200, answer.text
    signed = {
        int(e["details"]["summary"]["items"][0]["amounts"][0]["amount"])
        for e in cosmos.sign_events()
        if e["outcome"] == "ok"
    }
    assert signed == {a for a in amounts if a + 1 <= 600}
