"""A rule's `limits` (issue 64): amounts and counts over any window, lifetime caps,
per tenant, account, wallet or token, counted on the serialized, pinned counters of
the 24 h caps. Real HTTP against the suite's server, on each engine.

Windows run on the database's clock (as the 24 h caps do): a window is moved by moving
the counted rows into the past in the database (`Tenant.age_spends`); the server's
clock (`chainkeys.clock`) moving ahead moves no window.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update
from tests.api.tenants import Tenant
from tests.api.test_governance import Governed, governed  # noqa: F401
from tests.api.test_policy_conditions import dry_run
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER, VECTORS
from tests.conftest import Server
from tests.process.test_replicas import Deployment, race_transfers, replicas  # noqa: F401

from chainkeys import clock
from chainkeys.api.body import storable
from chainkeys.governance.diff import policy_diff
from chainkeys.policies.document import PolicyError, parse
from chainkeys.store.tables import policy_totals, tenants

COSMOS = {"family": "cosmos", "network": "cosmoshub"}
SECOND = VECTORS["keys"][1]["private_key_hex"]  # its address is OTHER
HOUR = 3_600_000


@pytest.fixture
def cosmos(tenant: Tenant) -> Tenant:
    for key in (PRIVATE, SECOND):
        assert tenant.client.post("/cosmos", json={"private_key": key}).status_code == 200
    return tenant


def path(account: str = ADDRESS) -> str:
    return f"/cosmos/{account}/sign-transfer"


def send(amount: int, sequence: int = 1, account: str = ADDRESS) -> dict[str, Any]:
    to = OTHER if account == ADDRESS else ADDRESS
    return {
        **TRANSFER,
        "fromAddress": account,
        "toAddress": to,
        "amount": str(amount),
        "sequence": sequence,
        "feeAmount": "0",
    }


def limited(*limits: dict[str, Any]) -> dict[str, Any]:
    return {**COSMOS, "limits": list(limits)}


def test_an_account_window_cap_holds_each_account_alone_and_says_what_is_left(
    cosmos: Tenant,
) -> None:
    cosmos.policy(limited({"amount": {"uatom": "1000"}, "window": "1h", "per": "account"}))
    cosmos.allowed(path(), send(600, 1))
    message = cosmos.denied(
        path(), send(500, 2), "limits[0]", "per 1h per account", "400 uatom left"
    )
    assert "last 1h" in message
    cosmos.allowed(path(), send(400, 3))  # exactly the cap: inclusive
    cosmos.allowed(path(OTHER), send(1000, 1, OTHER))  # the other account has its own
    cosmos.denied(path(OTHER), send(1, 2, OTHER), "0 uatom left")
    denied = [e for e in cosmos.sign_events() if e["outcome"] == "policy_denied"]
    assert len(denied) == 2 and "limits[0]" in denied[0]["details"]["reason"]


def test_the_window_moves_with_the_database_clock_not_the_servers(cosmos: Tenant) -> None:
    cosmos.policy(limited({"amount": {"uatom": "1000"}, "window": "1h"}))
    cosmos.allowed(path(), send(1000, 1))
    cosmos.denied(path(), send(1, 2), "limits[0]")
    with clock.shift(2 * HOUR):  # this server's clock ahead: the window is the same
        cosmos.denied(path(), send(1, 2), "limits[0]")
    cosmos.age_spends(HOUR - 60_000)  # a minute short of leaving the window
    cosmos.denied(path(), send(1, 2), "limits[0]")
    cosmos.age_spends(60_000)  # now an hour old: it left
    cosmos.allowed(path(), send(1000, 2))
    cosmos.denied(path(), send(1, 3), "0 uatom left")


def test_a_count_cap_counts_signatures_and_a_retry_is_free(cosmos: Tenant) -> None:
    cosmos.policy(limited({"count": 2, "window": "10m"}))
    first = cosmos.allowed(path(), send(1, 1))
    cosmos.allowed(path(), send(1, 2))
    cosmos.denied(path(), send(1, 3), "limits[0] (signatures per 10m)", "2 of 2", "0 left")
    again = cosmos.allowed(path(), send(1, 1))  # the same bytes: counted once
    assert again["signedTx"] == first["signedTx"]
    cosmos.denied(path(OTHER), send(1, 1, OTHER), "2 of 2")  # per tenant: every account
    cosmos.age_spends(10 * 60_000)
    cosmos.allowed(path(), send(1, 3))


def test_a_lifetime_cap_never_frees(cosmos: Tenant) -> None:
    cosmos.policy(limited({"amount": {"uatom": "100"}, "lifetime": True}))
    cosmos.allowed(path(), send(100, 1))
    cosmos.denied(path(), send(1, 2), "in its lifetime", "would bring its lifetime", "0 uatom left")
    cosmos.age_spends(40 * 24 * HOUR)  # past any window
    cosmos.denied(path(), send(1, 2), "its lifetime")
    cosmos.denied(path(), send(101, 3), "alone is over")  # one request over it


def test_a_token_cap_holds_each_token_alone(server: Server, cosmos: Tenant) -> None:
    cosmos.policy(limited({"amount": {"uatom": "500"}, "window": "1d", "per": "token"}))
    cosmos.allowed(path(), send(500, 1))
    cosmos.denied(path(), send(1, 2), "per token", "0 uatom left")
    with server.client(server.new_token(cosmos.name)) as other:
        assert other.post(path(), json=send(500, 2)).status_code == 200
        r = other.post(path(), json=send(1, 3))
        assert r.status_code == 403 and "per token" in r.json()["message"], r.text


def test_a_wallet_cap_holds_its_accounts_together(cosmos: Tenant) -> None:
    made = cosmos.client.post("/wallets", json={"name": "treasury", "words": 12})
    assert made.status_code == 200, made.text
    r = cosmos.client.post("/wallets/treasury/accounts", json={"family": "cosmos", "count": 2})
    assert r.status_code == 200, r.text
    first, second = (a["address"] for a in r.json()["data"]["accounts"])
    cosmos.policy(limited({"amount": {"uatom": "1000"}, "window": "1d", "per": "wallet"}))
    cosmos.allowed(path(first), send(600, 1, first))
    cosmos.denied(path(second), send(500, 1, second), "per wallet", "400 uatom left")
    cosmos.allowed(path(second), send(400, 1, second))
    cosmos.allowed(path(), send(1000, 1))  # an account of no wallet counts alone


def test_the_dry_run_agrees_with_the_decision_and_counts_nothing(cosmos: Tenant) -> None:
    cosmos.policy(limited({"count": 1, "window": "1h", "per": "account"}))
    for _ in range(3):
        assert dry_run(cosmos, path(), send(5, 1))["decision"] == "allow"
    cosmos.allowed(path(), send(5, 1))
    run = dry_run(cosmos, path(), send(5, 2))
    message = cosmos.denied(path(), send(5, 2), "1 of 1")
    assert run["decision"] == "deny" and run["reason"] == message, (run, message)
    assert dry_run(cosmos, path(), send(5, 1))["decision"] == "allow"  # counted: free


def test_two_requests_at_the_edge_one_passes(server: Server, cosmos: Tenant) -> None:
    """Released together against the last unit: one transaction decides and counts,
    so exactly one signs (the lock is the 24 h caps')."""
    cosmos.policy(limited({"amount": {"uatom": "1000"}, "window": "30d"}))
    cosmos.allowed(path(), send(999, 1))
    start = threading.Barrier(2)
    answers: list[httpx.Response] = []

    def go(sequence: int) -> None:
        with server.client(server.new_token(cosmos.name)) as c:
            start.wait()
            answers.append(c.post(path(), json=send(1, sequence)))

    threads = [threading.Thread(target=go, args=(s,)) for s in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers) == [200, 403], [r.text for r in answers]


def test_a_lowered_counter_fails_closed(server: Server, cosmos: Tenant) -> None:
    cosmos.policy(limited({"count": 1, "lifetime": True}))
    cosmos.allowed(path(), send(1, 1))
    cosmos.denied(path(), send(1, 2), "1 of 1")
    assert server.services is not None
    db = server.services.db

    async def lower() -> None:
        async with db.write() as tx:
            mine = select(tenants.c.id).where(tenants.c.name == cosmos.name).scalar_subquery()
            await tx.execute(
                update(policy_totals)
                .where(policy_totals.c.tenant_id == mine, policy_totals.c.denom.startswith("#"))
                .values(total="0")
            )

    server.call(lower())
    r = cosmos.sign(path(), send(1, 2))
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text


# ---- the document --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ({"count": 1}, 'give either "window" (1m to 30d) or "lifetime": true'),
        ({"count": 1, "window": "1h", "lifetime": True}, 'or "lifetime": true'),
        ({"window": "1h"}, 'give either "amount"'),
        ({"count": 1, "amount": {"uatom": "1"}, "window": "1h"}, 'give either "amount"'),
        ({"count": 0, "window": "1h"}, "limits[0].count: from 1 to"),
        ({"count": 1, "window": "30s"}, "limits[0].window: from 1m to 30d"),
        ({"count": 1, "window": "31d"}, "limits[0].window: from 1m to 30d"),
        ({"count": 1, "window": "soon"}, "is not a duration"),
        ({"count": 1, "window": "1h", "per": "wallets"}, "limits[0].per: one of"),
        ({"amount": {"uatom": 5}, "window": "1h"}, "limits[0].amount.uatom: 5 is not a string"),
        ({"amount": {}, "window": "1h"}, "limits[0].amount: names no denom"),
        ({"count": 1, "window": "1h", "windw": "1h"}, 'did you mean "window"'),
    ],
)
def test_a_malformed_limit_is_named(limit: dict[str, Any], said: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse(json.dumps({"rules": [limited(limit)]}))
    assert all(p.startswith("rules[0].limits") for p in caught.value.problems)
    assert said in caught.value.message, caught.value.message


def test_every_problem_of_a_limit_is_named_at_once() -> None:
    bad = {"amount": {"uatom": 5}, "window": "1s", "per": "x", "lifetime": True, "bogus": 1}
    with pytest.raises(PolicyError) as caught:
        parse(json.dumps({"rules": [limited({"count": 1, "window": "1h"}, bad)]}))
    assert caught.value.problems == (
        "rules[0].limits[1].bogus: not a key of a limit (a limit has amount, count, "
        "lifetime, per, window)",
        'rules[0].limits[1]: give either "window" (1m to 30d) or "lifetime": true',
        "rules[0].limits[1].per: one of tenant, account, wallet, token, not 'x'",
        "rules[0].limits[1].amount.uatom: 5 is not a string; amounts are decimal strings "
        'of the smallest unit, such as "1000000"',
        "rules[0].limits[1].window: from 1m to 30d",
    )


LIMIT = st.dictionaries(
    st.sampled_from(["amount", "count", "window", "lifetime", "per", "other"]),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 10**10),
        st.text(max_size=8),
        st.sampled_from(["1m", "1h", "30d", "31d", "0m", "tenant", "account", "token"]),
        st.dictionaries(
            st.sampled_from(["uatom", "", "#x"]),
            st.one_of(st.text(max_size=5), st.integers(), st.just("10")),
        ),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(limits=st.one_of(st.lists(LIMIT, max_size=3), LIMIT, st.text(max_size=5)))
def test_any_limit_document_is_read_or_refused_by_path(limits: Any) -> None:
    try:
        policy = parse(json.dumps({"rules": [{**COSMOS, "limits": limits}]}))
    except PolicyError as exc:
        assert exc.problems and all(p.startswith("rules[0].limits") for p in exc.problems)
    else:
        assert len(policy.rules[0].limits) == len(limits)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(limits=st.lists(LIMIT, max_size=2))
def test_a_limit_document_over_http_is_never_a_server_error(
    governed: Governed,  # noqa: F811
    limits: Any,
) -> None:
    """POST /changes {"kind": "policy"} (how a policy reaches the service over HTTP):
    filed, or one 400 `invalid_policy` whose every problem is the limit's."""
    document = {"rules": [{**COSMOS, "limits": limits}]}
    r = governed.admins["alice"].client.post(
        "/changes", json={"kind": "policy", "document": document}
    )
    assert r.status_code in (202, 400), r.text
    if r.status_code == 400 and _unspeakable(limits):  # refused before any field is read
        assert r.json()["code"] == "invalid_text", r.text
    elif r.status_code == 400:
        assert r.json()["code"] == "invalid_policy", r.text
        assert r.json()["message"].startswith("rules[0].limits"), r.text


def _unspeakable(value: Any) -> bool:
    """Whether a text anywhere in `value` (a key too) holds NUL or an unpaired surrogate:
    no chainkeys field takes one (api/body.py `storable`), so the body is refused whole."""
    if isinstance(value, str):
        return not storable(value)
    if isinstance(value, dict):
        return any(_unspeakable(k) or _unspeakable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unspeakable(v) for v in value)
    return False


# ---- governance: what loosens ---------------------------------------------------------


def _diff(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[list[str], bool]:
    return policy_diff(
        parse(json.dumps({"rules": [limited(*old)]})), parse(json.dumps({"rules": [limited(*new)]}))
    )


HOURLY = {"amount": {"uatom": "1000"}, "window": "1h", "per": "account"}


def test_limits_reordered_are_no_change_to_them() -> None:
    words, loosens = _diff(
        [HOURLY, {"count": 3, "window": "1h"}], [{"count": 3, "window": "1h"}, HOURLY]
    )
    assert not any("limit" in w for w in words) and loosens is False, words


@pytest.mark.parametrize(
    ("old", "new", "loosens"),
    [
        ([], [HOURLY], False),  # a limit added
        ([HOURLY], [], True),  # removed
        ([HOURLY], [{**HOURLY, "amount": {"uatom": "999"}}], False),  # lowered
        ([HOURLY], [{**HOURLY, "amount": {"uatom": "1001"}}], True),  # raised
        ([HOURLY], [{**HOURLY, "window": "1d"}], False),  # the same over a longer window
        ([HOURLY], [{**HOURLY, "window": "59m"}], True),  # a shorter window lets more through
        ([HOURLY], [{**HOURLY, "per": "tenant"}], False),  # every account together
        ([{**HOURLY, "per": "tenant"}], [HOURLY], True),  # each account alone
        ([HOURLY], [{**HOURLY, "per": "token"}], True),
        ([HOURLY], [{"amount": {"uatom": "1000"}, "lifetime": True, "per": "account"}], False),
        ([{"count": 5, "lifetime": True}], [{"count": 5, "window": "30d"}], True),
        ([{"count": 5, "window": "1h"}], [{"count": 6, "window": "1h"}], True),
        ([{"count": 5, "window": "1h"}], [{"amount": {"uatom": "1"}, "window": "1h"}], True),
        ([HOURLY], [{**HOURLY, "amount": {"uatom": "1000", "uosmo": "5"}}], False),
    ],
)
def test_governance_knows_which_limit_changes_tighten(
    old: list[dict[str, Any]], new: list[dict[str, Any]], loosens: bool
) -> None:
    words, looser = _diff(old, new)
    assert looser is loosens, words
    assert any("limit" in w for w in words), words


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ({"count": 5, "window": "30d", "per": "account"}, "5 of 5 signatures"),
        ({"amount": {"uatom": "5"}, "window": "1h", "per": "account"}, "over 5; 0 uatom left"),
    ],
    ids=["count", "amount"],
)
def test_two_replicas_never_pass_a_limit_together(
    replicas: Deployment,  # noqa: F811
    tmp_path: Path,
    limit: dict[str, Any],
    said: str,
) -> None:
    """20 transfers of 1 uatom at once through two replicas on one PostgreSQL database
    against a limit of 5 per account (a count over 30 days, an amount over an hour):
    exactly 5 sign."""
    ops = race_transfers(replicas, tmp_path, [limited(limit)], 20, 20)
    codes = Counter(op.status for op in ops)
    assert codes == {200: 5, 403: 15}, (codes, [op.response for op in ops if op.status >= 500])
    assert all(said in op.response["message"] for op in ops if op.status == 403), [
        op.response["message"] for op in ops if op.status == 403
    ]
