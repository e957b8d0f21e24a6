"""`chainkeys approval verify FILE` (in process) on approvals as `GET /approvals/{id}`
gives them, through real HTTP on both engines: an honest approval of every kind of
every family, on a mainnet or a test network, is accepted; a tampered request, summary
or digest is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.api.test_sign_cosmos import PRIVATE
from tests.api.test_sign_eos import NAME
from tests.api.test_sign_properties import KINDS, Target, target
from tests.api.test_sign_utxo import KEY
from tests.conftest import Server, chainkeys_cli

__all__ = ["target"]  # the module fixture: one request every kind signs
FAMILIES = ("cosmos", "eos", "litecoin", "dogecoin")
POLICY = [
    {"family": f, "raw_messages": True, "approval": {"quorum": 1, "group": "g"}} for f in FAMILIES
]


@pytest.fixture(scope="module")
def waiting(server: Server, target: Target) -> Iterator[dict[str, dict[str, Any]]]:
    """An approval of every kind's request, as its requester reads it."""
    assert server.services is not None
    name = "verify-" + server.new_token()[-8:].lower()
    client = server.client(server.new_token(name))
    made = [
        client.post("/cosmos", json={"private_key": PRIVATE}),
        client.post("/eos", json={"private_key": PRIVATE, "name": NAME}),
        client.post("/litecoin", json={"private_key": KEY["private_key_hex"]}),
        client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]}),
    ]
    assert all(r.status_code == 200 for r in made), [r.text for r in made]
    server.call(server.services.policies.set(name, json.dumps({"rules": POLICY}), "json"))
    found = {}
    for kind in KINDS:
        ep = target.endpoints[kind]
        r = client.post(ep.path, json=ep.body)
        assert r.status_code == 202, (kind, r.text)
        got = client.get(f"/approvals/{r.json()['data']['id']}")
        found[kind] = got.json()
    yield found
    client.close()


def verify(tmp_path: Path, document: Any) -> tuple[int, str]:
    path = tmp_path / "approval.json"
    path.write_text(json.dumps(document))
    done = chainkeys_cli("approval", "verify", str(path))  # its context kept in the call
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_an_honest_approval_is_accepted(
    waiting: dict[str, dict[str, Any]], kind: str, tmp_path: Path
) -> None:
    document = waiting[kind]
    assert document["data"]["request"] is not None and "signer" in document["data"]
    code, out = verify(tmp_path, document)
    assert code == 0 and ": ok:" in out, out
    assert verify(tmp_path, document["data"])[0] == 0  # the approval alone, without envelope


def test_tampering_is_named(waiting: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    honest = waiting["sign-transfer"]["data"]
    shown = copy.deepcopy(honest)
    shown["summary"]["items"][0]["amounts"][0]["display"] = "0.009 ATOM"
    code, out = verify(tmp_path, shown)
    assert code == 1 and "summary.items[0].amounts[0].display" in out and "0.009 ATOM" in out
    digest = {**honest, "digest": "00" * 32}
    code, out = verify(tmp_path, digest)
    assert code == 1 and "digest: the file says " + "00" * 32 in out
    request = copy.deepcopy(honest)
    request["request"]["amount"] = str(int(request["request"]["amount"]) + 1)
    code, out = verify(tmp_path, request)
    assert code == 1 and "digest:" in out and "summary.items[0].amounts[0].amount" in out, out
    raw = copy.deepcopy(waiting["sign-raw-transaction"]["data"])
    raw["summary"]["items"][0]["recipient"] = "DAttackerAddressXXXXXXXXXXXXXXXXXX"
    code, out = verify(tmp_path, raw)
    assert code == 1 and "summary.items[0].recipient" in out, out
    code, out = verify(tmp_path, {"id": "apr_x"})
    assert code == 1 and "not an approval" in out


def test_the_approval_carries_its_raw_request(
    waiting: dict[str, dict[str, Any]], target: Target
) -> None:
    """The request as the server read it: every field sent, with the defaults it filled."""
    for kind in KINDS:
        assert _holds(waiting[kind]["data"]["request"], target.endpoints[kind].body), kind


def _holds(read: Any, sent: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(read, dict) and all(_holds(read.get(k), v) for k, v in sent.items())
    if isinstance(sent, list):
        return (
            isinstance(read, list)
            and len(read) == len(sent)
            and all(_holds(r, s) for r, s in zip(read, sent, strict=True))
        )
    return bool(read == sent)


VECTORS = Path(__file__).resolve().parents[1] / "chains" / "vectors"
ONE = "00" * 31 + "01"
# key 1's address and the vectors' recipient, written with Osmosis' prefix
OSMO_FROM, OSMO_TO = (
    "osmo1w508d6qejxtdg4y5r3zarvary0c5xw7kjxy2e2",
    "osmo1q6hag67dl53wl99vzg42z8eyzfz2xlkvcc4vq7",
)
JUNGLE4 = "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d"
# an eosio.token transfer of 1.2345 EOS from verifyjungle to exchange1234
JUNGLE_TX = (
    "000e0e6bd2042e160000000000000100a6823403ea3055000000572d3ccdcd01a0229bfaf9e5aeda00"
    "000000a8ed323222a0229bfaf9e5aeda4086088a4dd35057393000000000000004454f530000000001"
    "6d00"
)
# a spend of key 1's P2PKH output (any network's: a script names no network)
RAW = {
    "hex": "0100000001a705baa4ff5326976828b8fe90b3945c01112434daa6edd01eecabf2a6799c1d00000000"
    "00ffffffff01a0bb0d00000000001976a91491b24bf9f5288532960ac687abb035127b1d28a588ac"
    "00000000",
    "prevtxs": [
        {
            "txid": "1d9c79a6f2abec1ed0eda6da342411015c94b390feb82868972653ffa4ba05a7",
            "vout": 0,
            "scriptPubKey": "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac",
            "amount": "0.01",
            "hex": "010000000109090909090909090909090909090909090909090909090909090909"
            "090909090000000000ffffffff0140420f00000000001976a914751e76e8199196"
            "d454941c45d1b3a323f1433bd688ac00000000",
        }
    ],
}
TESTNETS = {
    "cosmos sign-transfer": "osmosis-testnet",
    "eos sign-transaction": "jungle4",
    "dogecoin sign-raw-transaction": "testnet",
    "litecoin sign-psbt": "testnet",
    "litecoin sign-message": "regtest",
}


@pytest.fixture(scope="module")
def on_testnets(server: Server) -> Iterator[dict[str, dict[str, Any]]]:
    """An approval of a request on a test network of each family, as its requester reads it."""
    assert server.services is not None
    name = "testnets-" + server.new_token()[-8:].lower()
    client = server.client(server.new_token(name))
    server.call(server.services.policies.set(name, json.dumps({"rules": POLICY}), "json"))

    def account(family: str, network: str, **body: Any) -> str:
        r = client.post(f"/{family}", json={"private_key": ONE, "network": network, **body})
        assert r.status_code == 200, r.text
        data = r.json()
        return str(data.get("address") or data["data"]["data"]["address"])

    osmo = account("cosmos", "osmosis-testnet")
    assert osmo == OSMO_FROM
    account("eos", "jungle4", name="verifyjungle")
    doge, ltc = account("dogecoin", "testnet"), account("litecoin", "testnet")
    rltc = account("litecoin", "regtest")
    cosmos = json.loads((VECTORS / "cosmos_signing.json").read_text())["sign-transfer"]
    utxo = json.loads((VECTORS / "utxo_signing.json").read_text())["sign-psbt"]
    psbt = next(c for c in utxo if c["family"] == "litecoin" and c["kind"] == "p2wpkh")
    asked = {
        "cosmos sign-transfer": (
            f"/cosmos/{osmo}/sign-transfer",
            {
                **cosmos["request"],
                "fromAddress": osmo,
                "toAddress": OSMO_TO,
                "denom": "uosmo",
                "feeDenom": "uosmo",
                "chainId": "osmo-test-5",
            },
        ),
        "eos sign-transaction": (
            "/eos/verifyjungle/sign-transaction",
            {"chainId": JUNGLE4, "serializedTransaction": JUNGLE_TX},
        ),
        "dogecoin sign-raw-transaction": (f"/dogecoin/{doge}/sign-raw-transaction", RAW),
        "litecoin sign-psbt": (f"/litecoin/{ltc}/sign-psbt", psbt["request"]),
        "litecoin sign-message": (f"/litecoin/{rltc}/sign-message", {"message": "hi"}),
    }
    found = {}
    for kind, (path, body) in asked.items():
        r = client.post(path, json=body)
        assert r.status_code == 202, (kind, r.text)
        found[kind] = client.get(f"/approvals/{r.json()['data']['id']}").json()
    yield found
    client.close()


@pytest.mark.parametrize("kind", list(TESTNETS))
def test_an_honest_approval_on_a_test_network_is_accepted(
    on_testnets: dict[str, dict[str, Any]], kind: str, tmp_path: Path
) -> None:
    document = on_testnets[kind]
    assert document["data"]["summary"]["network"] == TESTNETS[kind]
    code, out = verify(tmp_path, document)
    assert code == 0 and ": ok:" in out, out


def test_tampering_a_testnet_approval_is_named(
    on_testnets: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    psbt = on_testnets["litecoin sign-psbt"]["data"]
    shown = copy.deepcopy(psbt)  # the same output, shown as the mainnet address it is not
    shown["summary"]["items"][0]["recipient"] = "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9"
    code, out = verify(tmp_path, shown)
    assert code == 1 and "summary.items[0].recipient" in out and "ltc1qw508" in out, out
    mainnet = copy.deepcopy(on_testnets["cosmos sign-transfer"]["data"])
    mainnet["signer"]["network"] = mainnet["summary"]["network"] = "osmosis"
    code, out = verify(tmp_path, mainnet)  # a testnet request shown as the mainnet's
    assert code == 1 and "chain id" in out and "osmosis-1" in out, out
