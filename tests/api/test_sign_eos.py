"""EOS signing through real HTTP, every signature checked by @wharfkit/antelope and
eosjs-ecc (tests/verifiers/eos.mjs); the transactions themselves are built by wharfkit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.test_sign_utxo import FACE, post_wire, refused_over_the_limit
from tests.node import require_node, run_node

from chainkeys.chains.tx.fields import MAX_MESSAGE_BYTES, MAX_MESSAGE_CHARS

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "tests/chains/vectors/vectors.json").read_text()
)
PRIVATE = VECTORS["keys"][0]["private_key_hex"]
NAME = "custodytest1"
CHAIN = "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906"  # EOS mainnet


@pytest.fixture
def signer(client: httpx.Client) -> tuple[httpx.Client, str]:
    require_node()
    r = client.post("/eos", json={"private_key": PRIVATE, "name": NAME})
    assert r.status_code == 200, r.text
    return client, r.json()["data"]["public_key"]


def transfer(
    frm: str = NAME, actor: str = NAME, quantity: str = "1.2345 EOS", **kw: Any
) -> dict[str, Any]:
    return {
        "account": "eosio.token",
        "name": "transfer",
        "authorization": [{"actor": actor, "permission": "active"}],
        "data": {"from": frm, "to": "exchange1234", "quantity": quantity, "memo": "m"},
        **kw,
    }


def build(*actions: dict[str, Any], cfa: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    built: dict[str, Any] = run_node(
        "eos.mjs",
        {
            "action": "build_tx",
            "chainId": CHAIN,
            "actions": list(actions),
            "context_free_actions": cfa or [],
        },
    )
    return built


def test_sign_transaction_verifies_with_wharfkit(signer: tuple[httpx.Client, str]) -> None:
    client, public = signer
    built = build(transfer())
    body = {
        "chainId": CHAIN,
        "serializedTransaction": built["serializedTransaction"],
        "requiredKeys": [public],
        "abis": [],
    }
    r = client.post(f"/eos/{NAME}/sign-transaction", json=body)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["serializedTransaction"] == built["serializedTransaction"]
    [sig] = data["signatures"]
    assert sig.startswith("SIG_K1_")
    check = run_node(
        "eos.mjs",
        {
            "action": "verify_tx",
            "chainId": CHAIN,
            "signature": sig,
            "serializedTransaction": built["serializedTransaction"],
            "publicKey": public,
        },
    )
    assert check["valid"] and check["canonical"]
    assert check["recovered"] == public
    assert check["digest"] == built["signingDigest"]  # wharfkit's own signing digest
    again = client.post(f"/eos/{NAME}/sign-transaction", json=body).json()["data"]["signatures"]
    assert again == [sig]  # deterministic
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert [e["outcome"] for e in events] == ["ok", "ok"]


def test_context_free_data_is_in_the_digest(signer: tuple[httpx.Client, str]) -> None:
    client, public = signer
    cfa = [{"account": "eosio.null", "name": "nonce", "authorization": [], "data_hex": "01"}]
    built = build(transfer(), cfa=cfa)
    cfd = "68656c6c6f"
    body = {
        "chainId": CHAIN,
        "serializedTransaction": built["serializedTransaction"],
        "serializedContextFreeData": cfd,
    }
    r = client.post(f"/eos/{NAME}/sign-transaction", json=body)
    assert r.status_code == 200, r.text
    [sig] = r.json()["data"]["signatures"]
    check = run_node(
        "eos.mjs",
        {
            "action": "verify_tx",
            "chainId": CHAIN,
            "signature": sig,
            "serializedTransaction": built["serializedTransaction"],
            "serializedContextFreeData": cfd,
            "publicKey": public,
        },
    )
    assert check["valid"] and check["canonical"]
    assert check["digest"] != built["signingDigest"]  # wharfkit's ignores the cfd; ours does not


@pytest.mark.parametrize("body", [{"message": "hello custody"}, {"data": "00ff10"}])
def test_sign_message_verifies_with_wharfkit_and_eosjs_ecc(
    signer: tuple[httpx.Client, str], body: dict[str, str]
) -> None:
    client, public = signer
    r = client.post(f"/eos/{NAME}/sign-message", json=body)
    assert r.status_code == 200, r.text
    sig = r.json()["data"]["signature"]
    check = run_node(
        "eos.mjs", {"action": "verify_message", "signature": sig, "publicKey": public, **body}
    )
    assert check == {"valid": True, "canonical": True, "ecc": True}


@pytest.mark.parametrize(
    ("field", "at_most", "one_more"),
    [
        ("message", FACE * MAX_MESSAGE_CHARS, "x"),
        ("data", "ff" * MAX_MESSAGE_BYTES, "ff"),
    ],
)
def test_sign_message_at_the_schemas_maximum_is_signed_and_one_more_is_refused(
    signer: tuple[httpx.Client, str], field: str, at_most: str, one_more: str
) -> None:
    """Text at its maximum (12 bytes a character in ASCII-only JSON) and data at its
    maximum (hex) fit the default body cap and are signed; one more is a 400, audited."""
    client, public = signer
    path = f"/eos/{NAME}/sign-message"
    r = post_wire(client, path, json.dumps({field: at_most}).encode())
    assert r.status_code == 200, r.text
    check = run_node(
        "eos.mjs",
        {
            "action": "verify_message",
            "signature": r.json()["data"]["signature"],
            "publicKey": public,
            field: at_most,
        },
    )
    assert check == {"valid": True, "canonical": True, "ecc": True}
    over = json.dumps({field: at_most + one_more}).encode()
    refused_over_the_limit(client, "eos", path, over, f"at most {len(at_most)}")


def test_refusals(signer: tuple[httpx.Client, str]) -> None:
    client, _ = signer
    ok_tx = build(transfer())["serializedTransaction"]

    def refused(body: dict[str, Any], code: str) -> None:
        r = client.post(f"/eos/{NAME}/sign-transaction", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == code
        assert PRIVATE not in r.text

    jungle = "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d"
    refused({"chainId": jungle, "serializedTransaction": ok_tx}, "wrong_chain")
    refused({"chainId": CHAIN, "serializedTransaction": ok_tx + "00"}, "invalid_sign_request")
    refused({"chainId": CHAIN, "serializedTransaction": ok_tx[:-6]}, "invalid_sign_request")
    refused({"chainId": CHAIN, "serializedTransaction": "zz"}, "invalid_field")  # not hex
    other = build(transfer(frm="someoneelse1", actor="someoneelse1"))["serializedTransaction"]
    refused({"chainId": CHAIN, "serializedTransaction": other}, "not_owner")
    mixed = build(transfer(), transfer(frm="someoneelse1", actor="someoneelse1"))
    refused(
        {"chainId": CHAIN, "serializedTransaction": mixed["serializedTransaction"]}, "not_owner"
    )
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert events and all(e["outcome"] != "ok" for e in events)  # nothing signed
