"""Known answers: chainkeys must give, byte for byte, what cosmjs gave for the same key
and the same request (tests/chains/vectors/cosmos_signing.json, made by cosmjs itself
with make_cosmos_signing.py). RFC 6979 makes each signature exact; no Node is needed
here, so a drift in either is caught even where the live verifiers do not run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.test_sign_cosmos import PRIVATE

KNOWN = json.loads(
    (Path(__file__).resolve().parents[1] / "chains/vectors/cosmos_signing.json").read_text()
)


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
