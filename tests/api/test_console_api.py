"""The endpoints the console reads, usable by scripts too, through real HTTP on both
engines: the overview's counts, the daily caps' usage matching what the caps count,
accounts searched by prefix across pages, and the audit log filtered by outcome and
time and downloaded as CSV or JSON Lines (spreadsheet formulas defused)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER
from tests.conftest import Server

from chainkeys import clock

SEND = f"/cosmos/{ADDRESS}/sign-transfer"
COSMOS = {"family": "cosmos", "network": "cosmoshub"}
HOUR = 3_600_000


def send(amount: int, sequence: int, fee: int = 1) -> dict[str, Any]:
    return {
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "toAddress": OTHER,
        "feeAmount": str(fee),
    }


def data(r: Any) -> Any:
    assert r.status_code == 200, r.text
    return r.json()["data"]


def test_overview_counts_what_the_tenant_holds_and_did(tenant: Tenant) -> None:
    c = tenant.client
    assert data(c.post("/cosmos", json={"private_key": PRIVATE}))
    for _ in range(2):
        data(c.post("/dogecoin", json={}))
    tenant.policy({**COSMOS, "max_per_tx": {"uatom": "100"}})
    tenant.allowed(SEND, send(10, 1))
    tenant.denied(SEND, send(1000, 2), "per-transaction cap")
    seen = data(c.get("/overview"))
    assert seen["accounts"] == {"cosmos": 1, "dogecoin": 2, "eos": 0, "litecoin": 0}
    assert seen["wallets"] == 0 and seen["approvals_pending"] == 0
    assert (seen["last_24h"]["signatures"], seen["last_24h"]["refusals"]) == (1, 1)
    with clock.shift(25 * HOUR):  # the day has passed: nothing in the last 24 h
        later = data(c.get("/overview"))
    assert (later["last_24h"]["signatures"], later["last_24h"]["refusals"]) == (0, 0)
    assert later["accounts"] == seen["accounts"]


def test_a_family_limited_token_sees_only_its_families(server: Server, tenant: Tenant) -> None:
    data(tenant.client.post("/cosmos", json={"private_key": PRIVATE}))
    data(tenant.client.post("/dogecoin", json={}))
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(tenant.name, "doge-only", families=frozenset({"dogecoin"}))
    )
    tenant.policy(
        {**COSMOS, "max_per_day": {"uatom": "100"}},
        {"family": "dogecoin", "max_per_day": {"DOGE": "500"}},
    )
    with server.client(token) as doge:
        assert data(doge.get("/overview"))["accounts"] == {"dogecoin": 1}
        caps = data(doge.get("/policy/usage"))["caps"]
    assert [(u["family"], u["denom"]) for u in caps] == [("dogecoin", "DOGE")]


def test_cap_usage_is_what_the_caps_count(tenant: Tenant) -> None:
    data(tenant.client.post("/cosmos", json={"private_key": PRIVATE}))
    tenant.policy({**COSMOS, "name": "payouts", "max_per_day": {"uatom": "1000"}})
    [cap] = data(tenant.client.get("/policy/usage"))["caps"]
    assert (cap["rule"], cap["name"], cap["network"], cap["cap"], cap["spent"]) == (
        0,
        "payouts",
        "cosmoshub",
        "1000",
        "0",
    )
    assert (cap["unit"], cap["decimals"]) == ("ATOM", 6)
    tenant.allowed(SEND, send(600, 1, fee=4))  # 604 counted: amount and fee
    [cap] = data(tenant.client.get("/policy/usage"))["caps"]
    assert (cap["spent"], cap["remaining"]) == ("604", "396")
    tenant.denied(SEND, send(400, 2, fee=1), "over the cap")  # 401 > 396: as the bar says
    tenant.allowed(SEND, send(395, 3, fee=1))
    [cap] = data(tenant.client.get("/policy/usage"))["caps"]
    assert (cap["spent"], cap["remaining"]) == ("1000", "0")
    tenant.age_spends(25 * HOUR)  # the windows run on the database's clock
    [cap] = data(tenant.client.get("/policy/usage"))["caps"]
    assert cap["spent"] == "0"


def test_search_by_prefix_pages_through_every_match(tenant: Tenant) -> None:
    c = tenant.client
    made = [data(c.post("/dogecoin", json={}))["address"] for _ in range(12)]
    prefix = made[0][:2]  # "D" and one more: several match, not all
    want = [a for a in made if a.startswith(prefix)]
    got: list[str] = []
    cursor = None
    while True:
        params = {"prefix": prefix, "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = data(c.get("/dogecoin", params=params))
        got += page["keys"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert got == want
    assert data(c.get("/dogecoin", params={"prefix": made[3]}))["keys"] == [made[3]]
    for bad in ("x" * 101, ""):
        r = c.get("/dogecoin", params={"prefix": bad})
        assert r.status_code == 400 and r.json()["code"] == "invalid_prefix"


def page_cursor(c: Any, prefix: str) -> str:
    """The next-page cursor of a search for `prefix`, one per page."""
    cursor: str = data(c.get("/dogecoin", params={"prefix": prefix, "limit": 1}))["next_cursor"]
    return cursor


def test_a_cursor_of_one_search_opens_no_other(tenant: Tenant) -> None:
    c = tenant.client
    for _ in range(3):
        data(c.post("/dogecoin", json={}))
    cursor = page_cursor(c, "D")
    r = c.get("/dogecoin", params={"cursor": cursor})  # the whole list, not the search
    assert r.status_code == 400 and r.json()["code"] == "invalid_cursor"


def test_audit_filters_by_outcome_and_time(tenant: Tenant) -> None:
    c = tenant.client
    data(c.post("/cosmos", json={"private_key": PRIVATE}))
    tenant.policy({**COSMOS, "max_per_tx": {"uatom": "100"}})
    start = clock.now_ms()
    tenant.allowed(SEND, send(10, 1))
    with clock.shift(2 * HOUR):
        tenant.denied(SEND, send(1000, 2), "per-transaction cap")
        refused = data(c.get("/audit", params={"outcome": "refused"}))["events"]
        assert [(e["action"], e["outcome"]) for e in refused] == [("sign", "policy_denied")]
        assert refused[0]["details"]["reason"]
        ok = data(c.get("/audit", params={"outcome": "ok", "action": "sign"}))["events"]
        assert len(ok) == 1
        early = data(c.get("/audit", params={"action": "sign", "until": start + HOUR}))
        assert [e["outcome"] for e in early["events"]] == ["ok"]
        late = data(c.get("/audit", params={"action": "sign", "since": start + HOUR}))
        assert [e["outcome"] for e in late["events"]] == ["policy_denied"]
    for bad, code in (
        ({"outcome": "NOT OK"}, "invalid_outcome"),
        ({"until": "yesterday"}, "invalid_until"),
    ):
        r = c.get("/audit", params=bad)
        assert r.status_code == 400 and r.json()["code"] == code


def test_audit_download_is_the_filtered_view(tenant: Tenant) -> None:
    c = tenant.client
    made = c.post("/eos", json={"name": "formula1"}, headers={"X-Request-ID": "-A1:A9"})
    assert made.status_code == 200, made.text  # a client's id a spreadsheet would run
    data(c.post("/dogecoin", json={}))
    r = c.get("/audit/export", params={"format": "csv", "action": "create"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    listed = data(c.get("/audit", params={"action": "create"}))["events"]
    assert [int(row["id"]) for row in rows] == [e["id"] for e in listed]  # newest first
    assert all(row["action"] == "create" for row in rows)
    assert {row["family"] for row in rows} == {"eos", "dogecoin"}
    lines = c.get("/audit/export", params={"format": "jsonl"}).text.splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["id"] for e in events] == sorted((e["id"] for e in events), reverse=True)
    assert len(events) == len(data(c.get("/audit", params={"limit": 100}))["events"])
    every = c.get("/audit/export", params={"format": "csv"}).text
    for row in csv.reader(io.StringIO(every)):
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row), row
    assert "'-A1:A9" in [row["client_request_id"] for row in rows]
    for bad in ("xlsx", ""):
        r = c.get("/audit/export", params={"format": bad})
        assert r.status_code == 400 and r.json()["code"] == "invalid_format"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "prefix",
                "outcome",
                "since",
                "until",
                "format",
                "action",
                "family",
                "account",
                "limit",
                "cursor",
            ]
        ),
        st.text(max_size=40),
    )
)
def test_any_query_is_an_answer_or_a_clear_400(tenant: Tenant, params: dict[str, str]) -> None:
    for path in ("/dogecoin", "/audit", "/audit/export", "/overview", "/policy/usage"):
        r = tenant.client.get(path, params=params)
        assert r.status_code in (200, 400), (path, params, r.status_code, r.text[:300])
        if r.status_code == 400:
            assert r.json()["success"] is False and r.json()["code"]


def test_a_wallet_lists_the_accounts_derived_from_it(server: Server, tenant: Tenant) -> None:
    c = tenant.client
    wallet = data(c.post("/wallets", json={"name": "deposits"}))["id"]
    other = data(c.post("/wallets", json={"name": "other"}))["id"]
    made = data(c.post(f"/wallets/{wallet}/accounts", json={"family": "cosmos", "count": 3}))
    data(c.post(f"/wallets/{wallet}/accounts", json={"family": "dogecoin"}))
    data(c.post(f"/wallets/{other}/accounts", json={"family": "cosmos"}))
    data(c.post("/cosmos", json={}))  # not derived
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = data(c.get("/wallets/deposits/accounts", params=params))
        listed += page["accounts"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert [(a["family"], a["index"]) for a in listed] == [
        ("cosmos", 0),
        ("cosmos", 1),
        ("cosmos", 2),
        ("dogecoin", 0),
    ]
    assert [a["address"] for a in listed[:3]] == [a["address"] for a in made["accounts"]]
    assert listed[0]["path"] == "m/44'/118'/0'/0/0"
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(tenant.name, "doge-only", families=frozenset({"dogecoin"}))
    )
    with server.client(token) as doge:
        seen = data(doge.get(f"/wallets/{wallet}/accounts"))["accounts"]
    assert [a["family"] for a in seen] == ["dogecoin"]
    assert c.get("/wallets/nobody/accounts").status_code == 404
