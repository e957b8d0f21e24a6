"""Where people approve money, amounts are named by the unit they count (issue 55, item
1): an approval's summary, a refusal, the policy's caps and their usage, through real
HTTP on both engines. `900000 litoshi (0.009 LTC)`, never `900000 LTC`."""

from __future__ import annotations

from typing import Any

import httpx
from tests.api.tenants import Tenant
from tests.api.test_sign_utxo import KEY, RECIPIENT
from tests.node import require_node, run_node

RULE = {
    "family": "litecoin",
    "network": "mainnet",
    "name": "payouts",
    "max_per_tx": {"LTC": "100000000"},
    "max_per_day": {"LTC": "200000000"},
    "approval": {"quorum": 2, "group": "treasury"},
    "above": {"LTC": "500000"},
}


def data(r: httpx.Response) -> Any:
    assert r.status_code in (200, 202), r.text
    return r.json()["data"]


def test_litecoin_amounts_are_litoshi_beside_ltc(tenant: Tenant) -> None:
    require_node()
    c = tenant.client
    made = data(c.post("/litecoin", json={"private_key": KEY["private_key_hex"]}))
    address, pubkey = made["address"], made["public_key"]

    def psbt(value: int, held: int) -> dict[str, Any]:
        built = run_node(
            "utxo.mjs",
            {
                "action": "build_psbt",
                "network": "litecoin/mainnet",
                "kind": "p2wpkh",
                "pubkey": pubkey,
                "amountIn": held,
                "witness": True,
                "outputs": [{"address": RECIPIENT["litecoin"], "value": value}],
            },
        )
        return {"psbt": built["psbt"]}

    tenant.policy(RULE)
    path = f"/litecoin/{address}/sign-psbt"
    # an approval: 0.009 LTC out and 0.001 LTC of fee, each in litoshi beside LTC
    waiting = data(c.post(path, json=psbt(900_000, 1_000_000)))
    summary = data(c.get(f"/approvals/{waiting['id']}"))["summary"]
    [item] = summary["items"]
    assert item["amounts"] == [
        {"denom": "LTC", "amount": "900000", "base_unit": "litoshi", "display": "0.009 LTC"}
    ]
    assert summary["fee"] == [
        {"denom": "LTC", "amount": "100000", "base_unit": "litoshi", "display": "0.001 LTC"}
    ]
    # a refusal names both units, the cap's too
    tenant.denied(
        path,
        psbt(300_000_000, 300_000_000),
        "policy rule 0 (payouts): 300000000 litoshi (3 LTC) is over the "
        "per-transaction cap of 100000000 litoshi (1 LTC)",
    )
    # the dry run's summary is the same record
    run = data(
        c.post(
            "/policy/test",
            json={
                "family": "litecoin",
                "account": address,
                "kind": "sign-psbt",
                "request": psbt(900_000, 1_000_000),
            },
        )
    )
    assert run["summary"]["fee"][0]["base_unit"] == "litoshi"
    # the policy as set, with the unit of each amount it names beside it
    shown = data(c.get("/policy"))
    assert shown["policy"]["rules"][0]["max_per_tx"] == {"LTC": "100000000"}  # as set
    assert shown["units"] == {
        "litecoin": {"LTC": {"base_unit": "litoshi", "unit": "LTC", "decimals": 8}}
    }
    [cap] = data(c.get("/policy/usage"))["caps"]
    assert (cap["denom"], cap["base_unit"], cap["cap"], cap["cap_display"]) == (
        "LTC",
        "litoshi",
        "200000000",
        "2 LTC",
    )
    assert (cap["spent_display"], cap["remaining_display"]) == ("0 LTC", "2 LTC")


def test_every_familys_caps_name_their_unit(tenant: Tenant) -> None:
    """GET /policy's units for each family's usual denom: none is the ticker alone."""
    tenant.policy(
        {"family": "cosmos", "max_per_tx": {"uatom": "1", "ibc/AB": "2"}},
        {"family": "dogecoin", "max_per_day": {"DOGE": "1"}},
        {"family": "eos", "max_per_tx": {"eosio.token:EOS": "1"}},
        {"family": "litecoin", "above": {"LTC": "1"}, "approval": {"quorum": 1, "group": "g"}},
    )
    units = data(tenant.client.get("/policy"))["units"]
    assert {f: {d: u["base_unit"] for d, u in m.items()} for f, m in units.items()} == {
        "cosmos": {"uatom": "uatom", "ibc/AB": "ibc/AB"},
        "dogecoin": {"DOGE": "koinu"},
        "eos": {"eosio.token:EOS": "base units of eosio.token:EOS"},
        "litecoin": {"LTC": "litoshi"},
    }
    caps = data(tenant.client.get("/policy/usage"))["caps"]
    assert [(u["denom"], u["base_unit"], u.get("cap_display")) for u in caps] == [
        ("DOGE", "koinu", "0.00000001 DOGE")
    ]
