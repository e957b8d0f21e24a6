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

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "tests/chains/vectors/vectors.json").read_text()
)
KEY = VECTORS["keys"][0]

CASES = [
    ("dogecoin", {"private_key": KEY["private_key_hex"]}, "dogecoin/mainnet", "p2pkh"),
    ("dogecoin", {"private_key": KEY["dogecoin"]["testnet"]["uncompressed_key"]["wif"],
                  "network": "testnet"}, "dogecoin/testnet", "p2pkh"),
    ("litecoin", {"private_key": KEY["private_key_hex"]}, "litecoin/mainnet", "p2wpkh"),
    ("litecoin", {"private_key": KEY["private_key_hex"], "address_type": "p2sh-p2wpkh"},
     "litecoin/mainnet", "p2sh-p2wpkh"),
    ("litecoin", {"private_key": KEY["private_key_hex"], "address_type": "p2pkh"},
     "litecoin/mainnet", "p2pkh"),
]  # fmt: skip


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
        check = run_node("utxo.mjs", {"action": "verify_message", "network": network,
                                      "message": message, "address": address, "signature": sig})  # fmt: skip
        assert check == {"kind": kind, "recovered": address, "matches": True,
                         "library": True, "lowS": True}  # fmt: skip
        again = client.post(f"/{family}/{address}/sign-message", json={"message": message})
        assert again.json()["data"]["signature"] == sig


def test_sign_message_refusals(client: httpx.Client) -> None:
    made = client.post("/dogecoin", json={})
    address = made.json()["address"]
    r = client.post(f"/dogecoin/{address}/sign-message", json={"message": "x" * 70_000})
    assert r.status_code in (400, 413)
    r = client.post(f"/dogecoin/{address}/sign-message", json={"msg": "x"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_field"
