"""Dogecoin and Litecoin message signing through real HTTP, checked by bitcoinjs-message
and by rebuilding the address from the recovered key with bitcoinjs-lib (bitcoinjs-message
alone ignores the address version byte)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.node import require_node, run_node

from chainkeys.chains.tx.fields import MAX_MESSAGE_CHARS
from chainkeys.config import Settings

pytestmark = pytest.mark.long(55)  # seconds (busy run): scheduled first

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "tests/chains/vectors/vectors.json").read_text()
)
KEY = VECTORS["keys"][0]

CASES = [
    ("dogecoin", {"private_key": KEY["private_key_hex"]}, "dogecoin/mainnet", "p2pkh"),
    (
        "dogecoin",
        {
            "private_key": KEY["dogecoin"]["testnet"]["uncompressed_key"]["wif"],
            "network": "testnet",
        },
        "dogecoin/testnet",
        "p2pkh",
    ),
    ("litecoin", {"private_key": KEY["private_key_hex"]}, "litecoin/mainnet", "p2wpkh"),
    (
        "litecoin",
        {"private_key": KEY["private_key_hex"], "address_type": "p2sh-p2wpkh"},
        "litecoin/mainnet",
        "p2sh-p2wpkh",
    ),
    (
        "litecoin",
        {"private_key": KEY["private_key_hex"], "address_type": "p2pkh"},
        "litecoin/mainnet",
        "p2pkh",
    ),
]


@pytest.mark.parametrize(("family", "body", "network", "kind"), CASES)
def test_sign_message_verifies_for_every_address_type(
    client: httpx.Client, family: str, body: dict[str, Any], network: str, kind: str
) -> None:
    require_node()
    made = client.post(f"/{family}", json=body)
    assert made.status_code == 200, made.text
    address = made.json()["address"]
    for message in ("hello custody", "ünïcödé ✓", ""):
        r = client.post(f"/{family}/{address}/sign-message", json={"message": message})
        assert r.status_code == 200, r.text
        sig = r.json()["data"]["signature"]
        check = run_node(
            "utxo.mjs",
            {
                "action": "verify_message",
                "network": network,
                "message": message,
                "address": address,
                "signature": sig,
            },
        )
        assert check == {
            "kind": kind,
            "recovered": address,
            "matches": True,
            "library": True,
            "lowS": True,
        }
        again = client.post(f"/{family}/{address}/sign-message", json={"message": message})
        assert again.json()["data"]["signature"] == sig


def test_sign_message_refusals(client: httpx.Client) -> None:
    made = client.post("/dogecoin", json={})
    address = made.json()["address"]
    r = client.post(f"/dogecoin/{address}/sign-message", json={"message": "x" * 70_000})
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"  # over the cap
    r = client.post(f"/dogecoin/{address}/sign-message", json={"msg": "x"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_field"


# the default request body cap: a message at its schema's maximum must fit under it
CAP = Settings.model_fields["max_body_bytes"].default
FACE = "\U0001f600"  # outside the BMP: 12 bytes as ASCII-only JSON ("\ud83d\ude00")


def post_wire(client: httpx.Client, path: str, wire: bytes) -> httpx.Response:
    """`wire` sent as it is (JSON as a client's encoder wrote it), within the default cap."""
    assert len(wire) <= CAP, len(wire)
    return client.post(path, content=wire, headers={"content-type": "application/json"})


def refused_over_the_limit(
    client: httpx.Client, family: str, path: str, wire: bytes, words: str
) -> None:
    """One character (or byte) over the schema's maximum: a 400 in the error envelope
    saying the bound, nothing signed, and the refusal audited."""
    r = post_wire(client, path, wire)
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"success", "message", "code"} and body["success"] is False
    assert body["code"] == "invalid_field" and words in body["message"], body
    last = client.get("/audit", params={"action": "sign"}).json()["data"]["events"][0]
    assert (last["family"], last["outcome"]) == (family, "invalid_field"), last
    details = last["details"] if isinstance(last["details"], dict) else json.loads(last["details"])
    assert details["kind"] == "sign-message" and words in details["reason"], details


def test_sign_message_at_the_schemas_maximum_is_signed_and_one_more_is_refused(
    client: httpx.Client,
) -> None:
    """The longest message the schema allows, written as Python's json (and requests,
    schemathesis) write it, 12 bytes a character, fits the default body cap and is
    signed; one character more is a 400 (not a 413), audited."""
    require_node()
    made = client.post("/litecoin", json={"private_key": KEY["private_key_hex"]})
    assert made.status_code == 200, made.text
    address = made.json()["address"]
    path = f"/litecoin/{address}/sign-message"
    message = FACE * MAX_MESSAGE_CHARS
    r = post_wire(client, path, json.dumps({"message": message}).encode())
    assert r.status_code == 200, r.text
    check = run_node(
        "utxo.mjs",
        {
            "action": "verify_message",
            "network": "litecoin/mainnet",
            "message": message,
            "address": address,
            "signature": r.json()["data"]["signature"],
        },
    )
    assert check["matches"] and check["library"], check
    over = json.dumps({"message": message + "x"}).encode()
    refused_over_the_limit(client, "litecoin", path, over, f"at most {MAX_MESSAGE_CHARS}")


PSBT_CASES = [
    ("dogecoin", {"private_key": KEY["private_key_hex"]}, "dogecoin/mainnet", "p2pkh", False),
    ("litecoin", {"private_key": KEY["private_key_hex"]}, "litecoin/mainnet", "p2wpkh", True),
    (
        "litecoin",
        {"private_key": KEY["private_key_hex"], "address_type": "p2sh-p2wpkh"},
        "litecoin/mainnet",
        "p2sh-p2wpkh",
        True,
    ),
    (
        "litecoin",
        {"private_key": KEY["private_key_hex"], "address_type": "p2pkh"},
        "litecoin/mainnet",
        "p2pkh",
        False,
    ),
]
RECIPIENT = {
    "dogecoin": "DJRU7MLhcPwCTNRZ4e8gJzDebtG1H5M7pc",
    "litecoin": "LYWKqJhtPeGyBAw7WC8R3F7ovxtzAiubdM",
}


def account(client: httpx.Client, family: str, body: dict[str, Any]) -> tuple[str, str]:
    made = client.post(f"/{family}", json=body)
    assert made.status_code == 200, made.text
    return made.json()["address"], made.json()["data"]["public_key"]


@pytest.mark.parametrize(("family", "body", "network", "kind", "witness"), PSBT_CASES)
def test_sign_psbt_verifies_and_finalizes_like_bitcoinjs(
    client: httpx.Client, family: str, body: dict[str, Any], network: str, kind: str, witness: bool
) -> None:
    require_node()
    address, pubkey = account(client, family, body)
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": network,
            "kind": kind,
            "pubkey": pubkey,
            "amountIn": 1_000_000,
            "witness": witness,
            "outputs": [
                {"address": RECIPIENT[family], "value": 600_000},
                {"address": address, "value": 390_000},
            ],
        },
    )
    partial = client.post(
        f"/{family}/{address}/sign-psbt", json={"psbt": built["psbt"], "finalize": False}
    )
    assert partial.status_code == 200, partial.text
    assert partial.json()["data"]["complete"] is False
    check = run_node(
        "utxo.mjs",
        {"action": "check_psbt", "network": network, "psbt": partial.json()["data"]["psbt"]},
    )
    assert check["valid"] is True
    final = client.post(f"/{family}/{address}/sign-psbt", json={"psbt": built["psbt"]})
    data = final.json()["data"]
    assert data["complete"] is True
    assert (
        data["hex"] == check["hex"] and data["txid"] == check["txid"]
    )  # bitcoinjs' own finalization
    assert (
        run_node("utxo.mjs", {"action": "extract", "network": network, "psbt": data["psbt"]})["hex"]
        == data["hex"]
    )
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert [e["outcome"] for e in events] == ["ok", "ok"]


def test_psbt_refusals(client: httpx.Client) -> None:
    require_node()
    address, pubkey = account(
        client, "litecoin", {"private_key": KEY["private_key_hex"], "address_type": "p2pkh"}
    )
    base = {
        "action": "build_psbt",
        "network": "litecoin/mainnet",
        "kind": "p2pkh",
        "pubkey": pubkey,
        "amountIn": 1_000_000,
        "outputs": [{"address": RECIPIENT["litecoin"], "value": 900_000}],
    }

    def refused(psbt: str, code: str) -> None:
        r = client.post(f"/litecoin/{address}/sign-psbt", json={"psbt": psbt})
        assert r.status_code == 400, r.text
        assert r.json()["code"] == code
        assert KEY["private_key_hex"] not in r.text

    refused(run_node("utxo.mjs", {**base, "tamperPrev": True})["psbt"], "prev_tx_mismatch")
    refused(
        run_node("utxo.mjs", {**base, "nonWitness": False, "witness": True})["psbt"],
        "missing_prev_tx",
    )
    refused(run_node("utxo.mjs", {**base, "sighashType": 0x83})["psbt"], "sighash_not_allowed")
    other = VECTORS["keys"][1]["public_key_compressed_hex"]
    refused(run_node("utxo.mjs", {**base, "pubkey": other})["psbt"], "not_owner")
    refused("not a psbt", "invalid_field")  # not base64: the document's pattern
    refused("AAAA", "invalid_sign_request")  # base64, but no PSBT
    d_address, d_pub = account(client, "dogecoin", {"private_key": KEY["private_key_hex"]})
    seg = run_node(
        "utxo.mjs",
        {
            **base,
            "network": "dogecoin/mainnet",
            "pubkey": d_pub,
            "witness": True,
            "outputs": [{"address": RECIPIENT["dogecoin"], "value": 900_000}],
        },
    )["psbt"]
    r = client.post(f"/dogecoin/{d_address}/sign-psbt", json={"psbt": seg})
    assert r.status_code == 400 and r.json()["code"] == "wrong_chain"
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert events and all(e["outcome"] != "ok" for e in events)


@pytest.mark.parametrize(("family", "body", "network", "kind", "witness"), PSBT_CASES)
def test_sign_raw_transaction_as_core_and_verified_by_bitcoinjs(
    client: httpx.Client, family: str, body: dict[str, Any], network: str, kind: str, witness: bool
) -> None:
    require_node()
    address, pubkey = account(client, family, body)
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_rawtx",
            "network": network,
            "kind": kind,
            "pubkey": pubkey,
            "amountIn": 1_000_000,
            "outputs": [
                {"address": RECIPIENT[family], "value": 600_000},
                {"address": address, "value": 390_000},
            ],
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
    raw = json.dumps({"hex": built["hex"], "prevtxs": [prev], "sighashtype": "ALL"})
    r = client.post(
        f"/{family}/{address}/sign-raw-transaction",
        content=raw,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["complete"] is True and data["errors"] == []
    check = run_node(
        "utxo.mjs",
        {
            "action": "check_rawtx",
            "network": network,
            "hex": data["hex"],
            "kind": kind,
            "pubkey": pubkey,
            "scriptPubKey": built["scriptPubKey"],
            "value": 1_000_000,
        },
    )
    assert check == {"valid": True, "lowS": True, "hashType": 1, "txid": check["txid"]}
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert events[-1]["outcome"] == "ok"


def test_raw_transaction_refusals(client: httpx.Client) -> None:
    require_node()
    address, pubkey = account(client, "dogecoin", {"private_key": KEY["private_key_hex"]})
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_rawtx",
            "network": "dogecoin/mainnet",
            "kind": "p2pkh",
            "pubkey": pubkey,
            "amountIn": 1_000_000,
            "outputs": [{"address": RECIPIENT["dogecoin"], "value": 900_000}],
        },
    )
    prev = {
        "txid": built["fundTxid"],
        "vout": 0,
        "scriptPubKey": built["scriptPubKey"],
        "amount": "0.01",
        "hex": built["fundHex"],
    }

    def refused(body: dict[str, Any], code: str) -> None:
        r = client.post(f"/dogecoin/{address}/sign-raw-transaction", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == code, r.text

    base = {"hex": built["hex"], "prevtxs": [prev]}
    refused({**base, "prevtxs": [{**prev, "hex": None}]}, "missing_prev_tx")
    refused({**base, "prevtxs": [{**prev, "amount": "0.02"}]}, "prev_tx_mismatch")
    refused({**base, "prevtxs": [{**prev, "amount": "0.000000001"}]}, "invalid_amount")
    refused({**base, "sighashtype": "NONE"}, "sighash_not_allowed")
    refused({**base, "prevtxs": []}, "not_owner")
    refused({**base, "hex": "00"}, "invalid_sign_request")
    # a float that is not exact in binary is still read exactly (0.1 DOGE = 10,000,000 koinu)
    r = client.post(
        f"/dogecoin/{address}/sign-raw-transaction",
        content=json.dumps({**base, "prevtxs": [{**prev, "amount": 0.01}]}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text
