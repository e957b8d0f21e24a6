"""`GET /policy` and `/policy/history` show a token limited to some families only the rules
of those families, on both backends (as /audit, /overview and /policy/usage show it
only its families): of the other rules nothing, not their names, recipients or caps,
nor how many there are."""

from __future__ import annotations

from typing import Any

import httpx
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import OTHER
from tests.api.test_sign_utxo import RECIPIENT
from tests.conftest import Server

COSMOS = {"family": "cosmos", "network": "cosmoshub"}
PAYOUTS = {**COSMOS, "name": "payouts", "recipients": [OTHER], "max_per_tx": {"uatom": "1000"}}
NO_MESSAGES = {
    "family": "cosmos",
    "name": "no-messages",
    "effect": "deny",
    "when": "tx.kind == 'message'",
}
LITECOIN = {
    "family": "litecoin",
    "name": "ltc-vault",
    "recipients": [RECIPIENT["litecoin"]],
    "max_per_day": {"LTC": "31415926535"},
}
DOGECOIN = {
    "family": "dogecoin",
    "network": "mainnet",
    "name": "doge-tips",
    "recipients": [RECIPIENT["dogecoin"]],
    "max_per_tx": {"DOGE": "27182818284"},
}
# what a cosmos-only token must never read
HIDDEN = (
    "litecoin",
    "ltc-vault",
    RECIPIENT["litecoin"],
    "31415926535",
    "dogecoin",
    "doge-tips",
    RECIPIENT["dogecoin"],
    "27182818284",
)


def limited(server: Server, tenant: Tenant, *families: str) -> httpx.Client:
    """A client with a token of the default scopes, limited to `families`."""
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(tenant.name, "-".join(families), families=frozenset(families))
    )
    return server.client(token)


def data(r: httpx.Response) -> Any:
    assert r.status_code == 200, r.text
    return r.json()["data"]


def only(document: dict[str, Any] | None, *families: str) -> dict[str, Any] | None:
    """The document with only the rules of `families` (None stays None: cleared)."""
    if document is None:
        return None
    return {**document, "rules": [r for r in document["rules"] if r["family"] in families]}


def test_a_family_limited_token_reads_only_its_families_rules(
    server: Server, tenant: Tenant
) -> None:
    tenant.policy(LITECOIN, PAYOUTS, DOGECOIN, NO_MESSAGES)  # version 1
    tenant.clear()  # 2
    tenant.policy(LITECOIN)  # 3: no rule of cosmos
    tenant.policy(PAYOUTS, LITECOIN, NO_MESSAGES)  # 4, in force
    full = data(tenant.client.get("/policy"))
    full_history = data(tenant.client.get("/policy/history"))["versions"]
    assert [r["name"] for r in full["policy"]["rules"]] == ["payouts", "ltc-vault", "no-messages"]
    assert [r["name"] for r in full_history[0]["policy"]["rules"]] == [
        "ltc-vault",
        "payouts",
        "doge-tips",
        "no-messages",
    ]

    with limited(server, tenant, "cosmos") as c:
        shown, history = c.get("/policy"), c.get("/policy/history")
    for r in (shown, history):
        for word in HIDDEN:
            assert word not in r.text, (word, r.text)
    # exactly what a policy of its rules alone would show: no count, no gap, no marker
    assert data(shown) == {
        **full,
        "policy": only(full["policy"], "cosmos"),
        "units": {"cosmos": full["units"]["cosmos"]},
    }
    assert [r["name"] for r in data(shown)["policy"]["rules"]] == ["payouts", "no-messages"]
    versions = data(history)["versions"]
    assert versions == [{**v, "policy": only(v["policy"], "cosmos")} for v in full_history]
    assert versions[1]["policy"] is None  # cleared
    # a policy with no rule of its families refuses them all: shown as such, not as none
    assert versions[2]["policy"] == {"rules": []}

    with limited(server, tenant, "cosmos", "dogecoin") as c:
        first = data(c.get("/policy/history"))["versions"][0]["policy"]["rules"]
        in_force = data(c.get("/policy"))["policy"]["rules"]
    assert [r["name"] for r in first] == ["payouts", "doge-tips", "no-messages"]
    assert [r["name"] for r in in_force] == ["payouts", "no-messages"]

    with limited(server, tenant, "cosmos", "dogecoin", "eos", "litecoin") as c:
        assert data(c.get("/policy")) == full  # every family: every rule
        assert data(c.get("/policy/history"))["versions"] == full_history


def test_the_dry_run_shows_a_family_limited_token_only_its_families_rules(
    server: Server, tenant: Tenant
) -> None:
    from tests.api.test_policy_conditions import SEND, send
    from tests.api.test_sign_cosmos import ADDRESS, PRIVATE

    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    tenant.policy(LITECOIN, PAYOUTS, DOGECOIN, NO_MESSAGES)
    with limited(server, tenant, "cosmos") as c:
        r = c.post(
            "/policy/test",
            json={
                "family": "cosmos",
                "account": ADDRESS,
                "kind": SEND.rsplit("/", 1)[1],
                "request": send(10),
            },
        )
        run = data(r)
    assert [rule.get("rule_name") or rule.get("name") for rule in run["rules"]] == [
        "payouts",
        "no-messages",
    ], run["rules"]
    assert not [word for word in HIDDEN if word in r.text], r.text
