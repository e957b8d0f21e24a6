"""The console (/ui) in headless Chromium, where a new user found it wrong (issue 55), on
both engines: an audit row's details read as lines (the layout is not escaped, only
what came from a request) in a row of their own, the other columns as wide as before;
a family's page by its address with a query after it; each account's network; create
asks once more on a main network, naming it, and EOS creates too; the empty Wallets
page names a call that exists; an approver's card after its vote offers no Approve;
amounts (a Litecoin approval, the policy's caps, the cap bars) in the unit they count;
the dry run's form (accounts to choose, the example prefilled, a deny naming its rule),
Cancel for the requester, and a wallet's key formats.
Screenshots go to build/test-artifacts/ with the other console tests'."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER
from tests.conftest import Server
from tests.node import chromium, run_node

pytestmark = [pytest.mark.slow, pytest.mark.long(55)]
ARTIFACTS = Path(os.environ.get("CHAINKEYS_TEST_ARTIFACTS", "build/test-artifacts"))
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
MEMO = "line one\nline two \u202eexe.txt"  # a newline and a bidi override, from a request
RULE = {
    "family": "cosmos",
    "network": "cosmoshub",
    "max_per_tx": {"uatom": "100000"},
    "approval": {"quorum": 2, "group": "treasury"},
    "above": {"uatom": "50000"},
}


def send(amount: int, sequence: int, memo: str = "") -> dict[str, Any]:
    return {
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "toAddress": OTHER,
        "feeAmount": "100",
        "memo": memo,
    }


def ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 202), r.text
    return r.json()["data"]


def names(c: httpx.Client, family: str) -> list[str]:
    listed: list[str] = ok(c.get(f"/{family}", params={"limit": 100}))["keys"]
    return listed


def test_what_a_new_user_met_in_the_console(
    server: Server, tenant: Tenant, request: pytest.FixtureRequest
) -> None:
    browser = chromium()
    assert server.services is not None
    c = tenant.client
    ok(c.post("/cosmos", json={"private_key": PRIVATE}))
    doge = {
        ok(c.post("/dogecoin", json=body))["address"]: body.get("network", "mainnet")
        for body in ({}, {"network": "testnet"}, {})
    }
    segwit = ok(c.post("/litecoin", json={}))["address"]
    legacy = ok(c.post("/litecoin", json={"address_type": "p2pkh"}))["address"]
    tenant.policy(RULE)
    refused = tenant.denied(SEND, send(200_000, 1, memo=MEMO), "per-transaction cap")
    [event] = ok(c.get("/audit", params={"outcome": "refused"}))["events"]
    assert event["details"]["summary"]["memo"] == MEMO and refused
    pending = ok(c.post(SEND, json=send(60_000, 2)))
    assert pending["state"] == "pending"
    approvers = [
        server.call(
            server.services.tokens.create(
                tenant.name, who, frozenset({"approve"}), None, None, "treasury"
            )
        )[1]
        for who in ("alice", "Bob")
    ]
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    seen = run_node(
        "console_pages.mjs",
        {
            "url": server.base_url,
            "chromium": browser,
            "shots": str(shots),
            "tag": request.node.callspec.id,
            "token": server.new_token(tenant.name),
            "approver": approvers[0],
            "approver2": approvers[1],
            "refused": event["id"],
            "pending": pending["id"],
        },
        timeout=300,
    )

    assert "failure" not in seen, json.dumps(seen)
    assert seen["failures"] == {}, "\n\n".join(f"{k}: {v}" for k, v in seen["failures"].items())
    assert seen["errors"] == []
    assert {page: found for page, found in seen["axe"].items() if found} == {}
    assert set(seen["axe"]) == {"audit-details", "create-confirm", "approvals-voted"}
    # Audit: the details are lines of JSON; only the memo's own characters are escaped
    assert seen["auditRows"] == 1 and seen["detailHiddenBefore"] and seen["expanded"] == "true"
    details = seen["details"]
    assert "⟨U+000A⟩" not in details and len(details.splitlines()) > 10, details
    assert '"memo": "line one\\nline two ⟨U+202E⟩exe.txt"' in details, details
    assert "\u202e" not in details
    assert f'"recipient": "{OTHER}"' in details
    # ...in a row of their own across the table; the columns keep their widths
    assert seen["detailSpan"] == "6"
    assert abs(seen["preBox"][1] - seen["tableBox"][1]) < 40, (seen["preBox"], seen["tableBox"])
    assert seen["widthsAfter"] == seen["widthsBefore"]
    assert (seen["timeLines"], seen["outcomeLines"]) == (1, 1), seen["outcome"]
    assert seen["outcome"] == "policy_denied" and seen["detailHiddenAgain"]
    document = seen["policyDocument"]
    assert "⟨U+000A⟩" not in document
    assert '"group": "treasury",' in [line.strip() for line in document.splitlines()], document
    # Accounts: #/accounts/litecoin?prefix=ltc1 is litecoin's tab, searched
    assert seen["tab"] == "litecoin" and seen["prefixValue"] == "ltc1"
    assert seen["litecoinRows"] == [segwit] and legacy not in seen["litecoinRows"]
    # each account's network, as the API has it
    assert seen["columns"] == ["Name (address)", "Network"]
    assert sorted(map(tuple, seen["networks"])) == sorted(doge.items())
    # create on a main network: a second step names it; Cancel made nothing
    assert (
        seen["mainnetConfirm"] is not None and "mainnet is a main network" in seen["mainnetConfirm"]
    )
    assert seen["confirmFocused"] == "Create on mainnet"
    assert seen["confirmHiddenAfterCancel"] and seen["hashAfterCancel"] == "#/accounts/litecoin"
    assert seen["mainnetConfirmAgain"] is not None
    made = seen["mainnetCreated"]["hash"].removeprefix("#/account/litecoin/")
    assert ok(c.get(f"/litecoin/{made}"))["network"] == "mainnet"
    assert seen["mainnetCreated"]["message"] == f"Created {made} on mainnet"
    # on a testnet at once; EOS too, after naming its main network
    assert seen["testnetConfirm"] is None
    made = seen["testnetCreated"]["hash"].removeprefix("#/account/litecoin/")
    assert ok(c.get(f"/litecoin/{made}"))["network"] == "testnet"
    assert len(names(c, "litecoin")) == 4  # two made here, none by the Cancel
    assert seen["eosForm"] == 1 and "eos is a main network" in (seen["eosConfirm"] or "")
    made = seen["eosCreated"]["hash"].removeprefix("#/account/eos/")
    assert names(c, "eos") == [made] and ok(c.get(f"/eos/{made}"))["network"] == "eos"
    # Wallets: the empty page names a call that exists
    assert "POST /wallets" in seen["walletsEmpty"]
    assert "chainkeys wallet create" not in seen["walletsEmpty"]
    # Approvals: voted, the card says so and offers no second vote; Bob still votes
    assert seen["approveBefore"] == 1
    assert "approved by you; now pending" in seen["approveMessage"]
    assert (seen["approveAfter"], seen["rejectAfter"]) == (0, 0)
    assert seen["voted"] == "You approved this request; it waits for 1 more approval."
    assert seen["stateAfter"] == "pending" and seen["otherApprove"] == 1
    assert [v["label"] for v in ok(c.get(f"/approvals/{pending['id']}"))["votes"]] == ["alice"]


def test_amounts_read_in_the_unit_they_count(
    server: Server, tenant: Tenant, request: pytest.FixtureRequest
) -> None:
    """A Litecoin approval's amounts, the policy's caps and the daily cap bars in
    Chromium: `0.009 LTC (900000 litoshi)`, never `900000 LTC` (issue 55, item 1)."""
    from tests.api.test_sign_utxo import KEY, RECIPIENT
    from tests.api.test_units import RULE

    browser = chromium()
    c = tenant.client
    made = ok(c.post("/litecoin", json={"private_key": KEY["private_key_hex"]}))
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": "litecoin/mainnet",
            "kind": "p2wpkh",
            "pubkey": made["public_key"],
            "amountIn": 1_000_000,
            "witness": True,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 900_000}],
        },
    )
    tenant.policy(RULE)
    pending = ok(c.post(f"/litecoin/{made['address']}/sign-psbt", json={"psbt": built["psbt"]}))
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    seen = run_node(
        "console_pages.mjs",
        {
            "walk": "units",
            "url": server.base_url,
            "chromium": browser,
            "shots": str(shots),
            "tag": request.node.callspec.id,
            "token": c.headers["Authorization"],  # the requester
            "pending": pending["id"],
        },
        timeout=300,
    )

    assert "failure" not in seen, json.dumps(seen)
    assert seen["failures"] == {}, "\n\n".join(f"{k}: {v}" for k, v in seen["failures"].items())
    assert seen["errors"] == [] and seen["axe"] == {"units-approvals": []}
    card = seen["card"]
    assert "0.009 LTC (900000 litoshi)" in card and "0.001 LTC (100000 litoshi)" in card, card
    assert "900000 LTC" not in card and "100000 LTC" not in card
    rules = seen["rules"]
    assert "100000000 litoshi (1 LTC)" in rules and "200000000 litoshi (2 LTC)" in rules, rules
    assert "500000 litoshi (0.005 LTC)" in rules and " LTC\n" not in rules
    assert "0 LTC (0 litoshi)" in seen["caps"] and "2 LTC (200000000 litoshi)" in seen["caps"]


def test_the_dry_run_cancel_and_key_formats(
    server: Server, tenant: Tenant, request: pytest.FixtureRequest
) -> None:
    """Issue 55, item 9: the dry run offers the tenant's accounts of the family and the
    endpoint's documented example (here the Litecoin sign-psbt example of key 1, which
    this tenant holds), its fields side by side, and a deny names its rule once; the
    requester cancels its own pending request (an approver is offered no Cancel); a
    wallet's Litecoin native segwit key is offered as zpub."""
    from tests.api.test_sign_utxo import KEY

    browser = chromium()
    assert server.services is not None
    c = tenant.client
    ltc = ok(c.post("/litecoin", json={"private_key": KEY["private_key_hex"]}))["address"]
    other = ok(c.post("/litecoin", json={}))["address"]
    ok(c.post("/cosmos", json={"private_key": PRIVATE}))
    tenant.policy(
        {
            "family": "litecoin",
            "effect": "deny",
            "name": "large-ltc",
            "when": "'LTC' in tx.total && tx.total['LTC'] > 500000",
        },
        {"family": "litecoin"},
        RULE,
    )
    pending = ok(c.post(SEND, json=send(60_000, 1)))
    assert pending["state"] == "pending" and pending["cancellable"] is True
    [approver] = [
        server.call(
            server.services.tokens.create(
                tenant.name, "alice", frozenset({"approve"}), None, None, "treasury"
            )
        )[1]
    ]
    with server.client(approver) as alice:
        assert ok(alice.get(f"/approvals/{pending['id']}"))["cancellable"] is False
    wallet = ok(c.post("/wallets", json={"name": "deposits"}))["id"]
    spec = httpx.get(f"{server.base_url}/openapi.json", verify=False).json()
    example = spec["paths"]["/litecoin/{accountName}/sign-psbt"]["post"]["requestBody"]
    example = next(iter(example["content"]["application/json"]["examples"].values()))["value"]
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    seen = run_node(
        "console_pages.mjs",
        {
            "walk": "more",
            "url": server.base_url,
            "chromium": browser,
            "shots": str(shots),
            "tag": request.node.callspec.id,
            "token": c.headers["Authorization"],
            "approver": approver,
            "pending": pending["id"],
            "wallet": wallet,
        },
        timeout=300,
    )

    assert "failure" not in seen, json.dumps(seen)
    assert seen["failures"] == {}, "\n\n".join(f"{k}: {v}" for k, v in seen["failures"].items())
    assert seen["errors"] == []
    assert {page: found for page, found in seen["axe"].items() if found} == {}
    # the dry run: a select of this tenant's Litecoin accounts, the family's endpoints
    assert seen["accountTag"] == "SELECT" and sorted(seen["accounts"]) == sorted([ltc, other])
    assert sorted(seen["kinds"]) == ["sign-message", "sign-psbt", "sign-raw-transaction"]
    assert json.loads(seen["body"]) == example  # the endpoint's documented example
    # side by side: the controls and their labels each on one line, the controls as tall
    assert len({top for top, _ in seen["controls"]}) == 1, seen["controls"]
    assert len({height for _, height in seen["controls"]}) == 1, seen["controls"]
    assert len({top for top, _ in seen["labels"]}) == 1, seen["labels"]
    # a deny names its rule, and says its reason once
    assert seen["decision"] == "The policy would deny: a deny rule applies", seen["decision"]
    assert seen["decidedBy"] == (
        "Decided by rule 0 “large-ltc” (a deny rule), whose condition "
        "'LTC' in tx.total && tx.total['LTC'] > 500000 is true."
    )
    assert "policy rule 0" not in seen["result"]
    assert seen["result"].count("a deny rule applies") == 1
    # Cancel: the requester's, not the approver's
    assert (seen["approverCancel"], seen["requesterCancel"]) == (0, 1)
    assert seen["cancelMessage"] == f"{pending['id']}: cancelled by you; now cancelled"
    assert seen["cardAfter"] == 0  # no longer pending
    assert ok(c.get(f"/approvals/{pending['id']}"))["state"] == "cancelled"
    # the wallet: each key in the formats the API offers for it
    formats = {(f, t): (fs, key) for f, t, fs, key in seen["formats"]}
    assert formats[("litecoin", "p2wpkh")][0] == ["xpub", "Ltub", "zpub"]
    assert formats[("dogecoin", "")][0] == ["dgub", "xpub"]
    assert formats[("cosmos", "")][0] is None  # one format: nothing to choose
    want = ok(
        c.get(
            f"/wallets/{wallet}/xpub",
            params={"family": "litecoin", "address_type": "p2wpkh", "format": "zpub"},
        )
    )
    assert want["formats"] == ["xpub", "Ltub", "zpub"]
    assert seen["zpub"] == want["xpub"] and seen["zpub"].startswith("zpub")
    assert seen["zpubButton"].startswith("Copy zpub")
