"""Known answers: chainkeys must give, byte for byte, what the reference gave for the same
key and the same request: cosmjs (tests/chains/vectors/cosmos_signing.json) and
bitcoinjs-lib / bitcoinjs-message (utxo_signing.json), each made by the reference itself
(make_cosmos_signing.py, make_utxo_signing.py). RFC 6979 makes each signature exact; no Node is needed
here, so a drift in either is caught even where the live verifiers do not run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.test_sign_cosmos import PRIVATE

VECTORS = Path(__file__).resolve().parents[1] / "chains/vectors"
KNOWN = json.loads((VECTORS / "cosmos_signing.json").read_text())
UTXO = json.loads((VECTORS / "utxo_signing.json").read_text())


@pytest.fixture
def signer(client: httpx.Client) -> httpx.Client:
    made = client.post("/cosmos", json={"private_key": PRIVATE})
    assert made.status_code == 200, made.text
    assert made.json()["data"]["data"]["address"] == KNOWN["address"]
    return client


def sign(client: httpx.Client, kind: str) -> dict[str, Any]:
    r = client.post(f"/cosmos/{KNOWN['address']}/{kind}", json=KNOWN[kind]["request"])
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


@pytest.mark.parametrize("kind", ["sign-direct", "sign-amino", "sign-message"])
def test_signatures_are_the_ones_cosmjs_made(signer: httpx.Client, kind: str) -> None:
    data = sign(signer, kind)
    assert data["signature"]["signature"] == KNOWN[kind]["signature"]
    assert data["signature"]["pub_key"]["value"] == KNOWN["pubkey"]
    if kind == "sign-message":
        assert data["signed"] == KNOWN[kind]["signed"]  # the ADR-036 document Keplr builds
        assert data["signedMessage"] == KNOWN[kind]["signature"]


@pytest.mark.parametrize("kind", ["sign-transfer", "sign-ibc-transfer"])
def test_transfers_are_the_transactions_cosmjs_made(signer: httpx.Client, kind: str) -> None:
    assert sign(signer, kind)["signedTx"] == KNOWN[kind]["signedTx"]


def utxo_case(case: dict[str, Any]) -> str:
    return f"{case['family']}-{case['kind']}-{len(json.dumps(case['request']))}"


@pytest.mark.parametrize("case", UTXO["sign-psbt"] + UTXO["sign-message"], ids=utxo_case)
def test_utxo_signatures_are_the_ones_bitcoinjs_made(
    client: httpx.Client, case: dict[str, Any]
) -> None:
    made = client.post(f"/{case['family']}", json=case["create"])
    assert made.status_code == 200, made.text
    address = made.json()["address"]
    kind = "sign-psbt" if "psbt" in case["request"] else "sign-message"
    r = client.post(f"/{case['family']}/{address}/{kind}", json=case["request"])
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    if kind == "sign-psbt":  # signed, finalized and extracted as bitcoinjs does it
        assert (data["hex"], data["txid"]) == (case["hex"], case["txid"])
    else:
        assert data["signature"] == case["signature"]
