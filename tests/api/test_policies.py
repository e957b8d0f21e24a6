"""Signing policies through real HTTP on both backends: every rule, allowed and refused,
for every family's sign endpoints. A refusal is 403 `policy_denied` naming the rule,
signs nothing and is audited with the summary."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.tenants import Tenant
from tests.api.test_governance import Governed, governed  # noqa: F401
from tests.api.test_sign_cosmos import ADDRESS, IBC_TRANSFER, OTHER, PRIVATE, TRANSFER, direct_doc
from tests.api.test_sign_eos import CHAIN, NAME, build, transfer
from tests.api.test_sign_utxo import KEY, RECIPIENT, VECTORS
from tests.conftest import Server
from tests.node import require_node, run_node

from chainkeys import clock

OSMO = VECTORS["keys"][1]["cosmos"]["addresses"]["osmo"]
STRANGER = VECTORS["keys"][2]["cosmos"]["addresses"]["cosmos"]
IBC_BODY = {**IBC_TRANSFER, "toAddress": OSMO}


@pytest.fixture
def cosmos(tenant: Tenant) -> Tenant:
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    return tenant


SEND = f"/cosmos/{ADDRESS}/sign-transfer"
IBC = f"/cosmos/{ADDRESS}/sign-ibc-transfer"


def send(amount: int, sequence: int = 1, to: str = OTHER, fee: int = 5000) -> dict[str, Any]:
    return {
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "toAddress": to,
        "feeAmount": str(fee),
    }


def test_no_policy_signs_as_scopes_allow_and_a_cleared_policy_too(cosmos: Tenant) -> None:
    cosmos.allowed(SEND, send(10))
    cosmos.policy({"family": "eos"})
    cosmos.denied(SEND, send(10), "no rule allows signing for cosmos on cosmoshub")
    cosmos.clear()
    cosmos.allowed(SEND, send(10))


def test_recipient_allow_list(cosmos: Tenant) -> None:
    cosmos.policy({"family": "cosmos", "network": "cosmoshub", "recipients": [OTHER, OSMO]})
    cosmos.allowed(SEND, send(10))
    cosmos.allowed(IBC, {**IBC_BODY, "amount": "10"})  # the IBC receiver is what counts
    stranger = STRANGER
    message = cosmos.denied(SEND, send(10, to=stranger), "rule 0", "allow-list", stranger)
    assert "cosmos/cosmoshub" in message
    denied = cosmos.sign_events()[-1]
    assert denied["outcome"] == "policy_denied"
    summary = denied["details"]["summary"]
    assert summary["items"][0]["recipient"] == stranger
    assert denied["details"]["reason"].startswith("recipient")


def test_per_transaction_cap_is_inclusive_and_counts_the_fee(cosmos: Tenant) -> None:
    cosmos.policy({"family": "cosmos", "name": "payouts", "max_per_tx": {"uatom": "10000"}})
    cosmos.allowed(SEND, send(5000, fee=5000))  # 5,000 + 5,000 fee = the cap
    cosmos.denied(SEND, send(5001, fee=5000), "payouts", "10001 uatom", "per-transaction cap")
    cosmos.denied(SEND, {**send(10), "denom": "uosmo"}, "uosmo is not in max_per_tx")


def test_rolling_daily_cap_counts_a_digest_once(server: Server, cosmos: Tenant) -> None:
    cosmos.policy({"family": "cosmos", "network": "cosmoshub", "max_per_day": {"uatom": "30000"}})
    first = cosmos.allowed(SEND, send(5000, sequence=1))  # 10,000 with its fee
    again = cosmos.allowed(SEND, send(5000, sequence=1))  # the same bytes: free
    assert again["signedTx"] == first["signedTx"]
    cosmos.allowed(SEND, send(5000, sequence=2))  # 20,000
    cosmos.allowed(SEND, send(5000, sequence=3))  # 30,000: the cap, inclusive
    cosmos.denied(SEND, send(1, sequence=4, fee=0), "30001", "over the cap of 30000")
    cosmos.allowed(SEND, send(5000, sequence=3))  # a retry of counted bytes stays free
    outcomes = [e["outcome"] for e in cosmos.sign_events()]
    assert outcomes == ["ok", "ok", "ok", "ok", "policy_denied", "ok"]


def test_messages_and_raw_signing(cosmos: Tenant) -> None:
    require_node()
    cosmos.policy({"family": "cosmos", "messages": ["/ibc.applications.transfer.v1.MsgTransfer"]})
    direct = f"/cosmos/{ADDRESS}/sign-direct"
    cosmos.denied(direct, {"signDoc": direct_doc()}, "/cosmos.bank.v1beta1.MsgSend")
    cosmos.allowed(IBC, IBC_BODY)
    message = f"/cosmos/{ADDRESS}/sign-message"
    cosmos.denied(message, {"message": "login"}, "raw message signing is not allowed")
    amino = {
        "signDoc": {
            "chain_id": "cosmoshub-4",
            "account_number": "1",
            "sequence": "0",
            "fee": {"amount": [], "gas": "1"},
            "memo": "",
            "msgs": [{"type": "cosmos-sdk/MsgDelegate", "value": {"delegator_address": ADDRESS}}],
        }
    }
    cosmos.denied(f"/cosmos/{ADDRESS}/sign-amino", amino, "cosmos-sdk/MsgDelegate")
    cosmos.policy({"family": "cosmos", "raw_messages": True})
    cosmos.allowed(message, {"message": "login"})
    cosmos.allowed(f"/cosmos/{ADDRESS}/sign-amino", amino)
    cosmos.allowed(direct, {"signDoc": direct_doc()})  # MsgSend: a default message type


def test_eos_actions_recipients_and_caps(tenant: Tenant) -> None:
    require_node()
    assert (
        tenant.client.post("/eos", json={"private_key": PRIVATE, "name": NAME}).status_code == 200
    )
    path = f"/eos/{NAME}/sign-transaction"

    def tx(*actions: dict[str, Any]) -> dict[str, Any]:
        built = build(*actions)
        return {"chainId": CHAIN, "serializedTransaction": built["serializedTransaction"]}

    tenant.policy(
        {
            "family": "eos",
            "network": "eos",
            "recipients": ["exchange1234"],
            "max_per_tx": {"eosio.token:EOS": "20000"},
        }
    )
    tenant.allowed(path, tx(transfer(quantity="2.0000 EOS")))
    tenant.denied(
        path,
        tx(transfer(quantity="2.0001 EOS")),
        "20001 units of 0.0001 EOS (2.0001 EOS) is over the per-transaction cap of "
        "20000 units of 0.0001 EOS (2 EOS)",
    )
    other = transfer()
    other["data"] = {**other["data"], "to": "someoneelse1"}
    tenant.denied(path, tx(other), "someoneelse1")
    vote = {
        "account": "eosio",
        "name": "voteproducer",
        "authorization": [{"actor": NAME, "permission": "active"}],
        "data_hex": "00",
    }
    tenant.denied(path, tx(vote), "eosio::voteproducer")
    tenant.denied(f"/eos/{NAME}/sign-message", {"message": "hi"}, "raw message")


@pytest.mark.parametrize("family", ["dogecoin", "litecoin"])
def test_utxo_recipients_change_and_fee(tenant: Tenant, family: str) -> None:
    require_node()
    made = tenant.client.post(f"/{family}", json={"private_key": KEY["private_key_hex"]})
    address, pubkey = made.json()["address"], made.json()["data"]["public_key"]
    network = f"{family}/mainnet"
    kind = "p2pkh" if family == "dogecoin" else "p2wpkh"
    ticker, base = ("DOGE", "koinu") if family == "dogecoin" else ("LTC", "litoshi")
    over = (
        f"610001 {base} (0.00610001 {ticker}) is over the per-transaction cap of "
        f"610000 {base} (0.0061 {ticker})"
    )

    def psbt(to: str, value: int, change: int) -> dict[str, Any]:
        built = run_node(
            "utxo.mjs",
            {
                "action": "build_psbt",
                "network": network,
                "kind": kind,
                "pubkey": pubkey,
                "amountIn": 1_000_000,
                "witness": family == "litecoin",
                "outputs": [{"address": to, "value": value}, {"address": address, "value": change}],
            },
        )
        return {"psbt": built["psbt"]}

    path = f"/{family}/{address}/sign-psbt"
    # 600,000 out + 10,000 fee; the 390,000 change back to the account does not count.
    tenant.policy(
        {
            "family": family,
            "network": "mainnet",
            "recipients": [RECIPIENT[family]],
            "max_per_tx": {ticker: "610000"},
        }
    )
    tenant.allowed(path, psbt(RECIPIENT[family], 600_000, 390_000))
    tenant.denied(path, psbt(RECIPIENT[family], 600_000, 389_999), over)
    stranger = VECTORS["keys"][1][family]["mainnet"]["p2pkh"]
    tenant.denied(path, psbt(stranger, 600_000, 390_000), "allow-list", stranger)
    tenant.denied(f"/{family}/{address}/sign-message", {"message": "hi"}, "raw message")

    def raw(to: str, value: int, change: int) -> dict[str, Any]:
        built = run_node(
            "utxo.mjs",
            {
                "action": "build_rawtx",
                "network": network,
                "kind": kind,
                "pubkey": pubkey,
                "amountIn": 1_000_000,
                "outputs": [{"address": to, "value": value}, {"address": address, "value": change}],
            },
        )
        prev = {
            "txid": built["fundTxid"],
            "vout": 0,
            "scriptPubKey": built["scriptPubKey"],
            "amount": 0.01,
        }
        if kind == "p2pkh":
            prev["hex"] = built["fundHex"]
        return {"hex": built["hex"], "prevtxs": [prev]}

    path = f"/{family}/{address}/sign-raw-transaction"
    assert tenant.allowed(path, raw(RECIPIENT[family], 600_000, 390_000))["complete"] is True
    tenant.denied(path, raw(RECIPIENT[family], 600_000, 389_999), over)
    tenant.denied(path, raw(stranger, 600_000, 390_000), "allow-list", stranger)


def test_a_refusal_opens_no_key_and_leaves_caps_untouched(cosmos: Tenant) -> None:
    cosmos.policy({"family": "cosmos", "recipients": [OTHER], "max_per_day": {"uatom": "20000"}})
    stranger = STRANGER
    for seq in range(5):
        cosmos.denied(SEND, send(5000, sequence=seq, to=stranger), "allow-list")
    cosmos.allowed(SEND, send(5000, sequence=10))
    cosmos.allowed(SEND, send(5000, sequence=11))
    cosmos.denied(SEND, send(1, sequence=12), "over the cap")
    ok = [e for e in cosmos.sign_events() if e["outcome"] == "ok"]
    assert len(ok) == 2 and all(e["details"]["policy_rule"] == 0 for e in ok)


def test_the_window_is_24_hours_to_the_second(server: Server, cosmos: Tenant) -> None:
    """A spend leaves the window exactly 24 h after it was signed, on the database's
    clock (the row's age is moved back in the database; no replica's clock decides)."""
    from sqlalchemy import update

    from chainkeys.store.tables import policy_spends

    cosmos.policy({"family": "cosmos", "max_per_day": {"uatom": "10000"}})
    cosmos.allowed(SEND, send(5000, sequence=1))  # 10,000: the cap
    cosmos.denied(SEND, send(1, sequence=2, fee=0), "over the cap")
    assert server.services is not None
    db = server.services.db

    digest = cosmos.sign_events()[0]["details"]["digest"]

    async def age(ms: int) -> None:
        async with db.write() as tx:
            spends = policy_spends.c
            await tx.execute(
                update(policy_spends)
                .where(spends.digest == digest)
                .values(created_ms=spends.created_ms - ms)
            )

    server.call(age(24 * 3600 * 1000 - 60_000))  # it leaves the window in 60 s
    cosmos.denied(SEND, send(1, sequence=2, fee=0), "over the cap")
    with clock.shift(3_600_000):  # this server's clock an hour ahead: the window is the same
        cosmos.denied(SEND, send(1, sequence=2, fee=0), "over the cap")
    server.call(age(61_000))  # now 24 h and a second old
    cosmos.allowed(SEND, send(1, sequence=2, fee=0))
    cosmos.allowed(SEND, send(4999, sequence=3, fee=5000))  # the window is empty but for 1
    cosmos.denied(SEND, send(1, sequence=4, fee=0), "10001")


def test_a_policy_proposed_over_http_is_refused_with_every_problem(governed: Governed) -> None:  # noqa: F811
    """POST /changes {"kind": "policy"} (how a policy reaches the service over HTTP;
    operators set one with the CLI): one 400 `invalid_policy` names every problem with
    its path, a near-miss of a key with "did you mean", and nothing is filed."""
    alice = governed.admins["alice"]
    document = {
        "rule": [],
        "rules": [
            {
                "family": "cosmos",
                "network": "cosmoshub",
                "max_per_tx": {"uatom": "1000"},
                "recipents": [OTHER],
            },
            {
                "family": "cosmos",
                "network": "osmosis",
                "max_per_day": {"uatom": "-5"},
                "effect": "deny ",
                "approval": {"quorum": 0, "group": "treasury", "tll": "1h"},
            },
            {"family": "doge"},
        ],
    }
    r = alice.client.post("/changes", json={"kind": "policy", "document": document})
    assert r.status_code == 400 and r.json()["code"] == "invalid_policy", r.text
    said = r.json()["message"].split("; ")
    assert said == [
        'rule: not a key of a policy ({"rules": [...]}) (did you mean "rules"?)',
        'rules[0].recipents: not a key of a rule (did you mean "recipients"?)',
        'rules[1].approval.tll: not a key of an approval (did you mean "ttl"?)',
        'rules[1].effect: allow or deny (did you mean "deny"?)',
        "rules[1].max_per_day.uatom: '-5' is not a whole number of the smallest unit "
        '(a decimal string such as "1000000")',
        "rules[1].approval.quorum: from 1 to 20 people",
        "rules[2].family: 'doge' is not one of cosmos, dogecoin, eos, litecoin "
        '(did you mean "dogecoin"?)',
    ], said
    assert alice.client.get("/changes").json()["data"]["changes"] == []
