"""`verify_approval` on approvals the server gives, for every family: an honest one
is accepted (its digest and summary rebuilt here from its raw request, with this
client's own decoders), and a tampered request, summary or digest is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from ckc_helpers import EOS_MAINNET, eos_transfer_tx, legacy_tx, p2pkh_script, txid
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import ApprovalPending, Client, PrevTx, verify_approval

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
UTXO = json.loads((SIGNING_VECTORS / "utxo_signing.json").read_text())
ONE = "0000000000000000000000000000000000000000000000000000000000000001"
TENANT = "verify-approvals"
FAMILIES = ("cosmos", "eos", "litecoin", "dogecoin")


def pending(sign: Callable[[], Any]) -> Any:
    with pytest.raises(ApprovalPending) as caught:
        sign()
    return caught.value.approval


@pytest.fixture(scope="module")
def approvals(server: Server) -> dict[str, dict[str, Any]]:
    """One approval per kind asked here, as `GET /approvals/{id}` gives it."""
    token = server.token(TENANT, "read,create,sign")  # the tenant exists from here
    server.policy(TENANT, *({"family": f, "raw_messages": True,
                             "approval": {"quorum": 1, "group": "g"}} for f in FAMILIES))  # fmt: skip
    vectors = json.loads((SIGNING_VECTORS / "vectors.json").read_text())
    found: dict[str, dict[str, Any]] = {}
    with Client(server.url, token) as ck:
        cosmos = ck.accounts.create("cosmos", private_key=ONE).address
        eos = ck.accounts.create("eos", private_key=ONE, name="verifyeos123").name
        doge = ck.accounts.create("dogecoin", private_key=ONE).address
        asked = {
            "cosmos sign-transfer": lambda: ck.signing.sign_transfer(
                cosmos, COSMOS["sign-transfer"]["request"]),
            "cosmos sign-direct": lambda: ck.signing.sign_direct(
                cosmos, COSMOS["sign-direct"]["request"]["signDoc"]),
            "cosmos sign-amino": lambda: ck.signing.sign_amino(
                cosmos, COSMOS["sign-amino"]["request"]["signDoc"]
            ),
            "cosmos sign-ibc-transfer": lambda: ck.signing.sign_ibc_transfer(
                cosmos, COSMOS["sign-ibc-transfer"]["request"]
            ),
            "cosmos sign-message": lambda: ck.signing.sign_message("cosmos", cosmos, "I agree"),
            "eos sign-transaction": lambda: ck.signing.sign_eos_transaction(
                eos, EOS_MAINNET, eos_transfer_tx("verifyeos123", "exchange1234", 12345)),
            "eos sign-message": lambda: ck.signing.sign_message("eos", eos, "I own this"),
            "dogecoin sign-message": lambda: ck.signing.sign_message("dogecoin", doge, "hi"),
        }  # fmt: skip
        mine = p2pkh_script(bytes.fromhex(vectors["keys"][0]["hash160_hex"]))
        theirs = p2pkh_script(bytes.fromhex(vectors["keys"][1]["hash160_hex"]))
        fund = legacy_tx([(b"\x07" * 32, 0, b"")], [(1_000_000, mine)])
        spend = legacy_tx([(txid(fund), 0, b"")], [(900_000, theirs)])
        prev = PrevTx(txid=txid(fund).hex(), vout=0, scriptPubKey=mine.hex(), amount="0.01",
                      hex=fund.hex())  # fmt: skip
        asked["dogecoin sign-raw-transaction"] = lambda: ck.signing.sign_raw_transaction(
            "dogecoin", doge, spend, [prev])  # fmt: skip
        case = next(c for c in UTXO["sign-psbt"] if c["family"] == "litecoin")
        ltc = ck.accounts.create("litecoin", **case["create"]).address
        asked["litecoin sign-psbt"] = lambda: ck.signing.sign_psbt(
            "litecoin", ltc, case["request"]["psbt"])  # fmt: skip
        for name, sign in asked.items():
            approval = ck.approvals.get(pending(sign))
            found[name] = msgspec.to_builtins(approval)
    return found


NAMES = [
    "cosmos sign-transfer",
    "cosmos sign-direct",
    "cosmos sign-amino",
    "cosmos sign-ibc-transfer",
    "cosmos sign-message",
    "eos sign-transaction",
    "eos sign-message",
    "dogecoin sign-message",
    "dogecoin sign-raw-transaction",
    "litecoin sign-psbt",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_an_honest_approval_is_accepted(approvals: dict[str, dict[str, Any]], name: str) -> None:
    approval = approvals[name]
    assert approval["request"] is not None and approval["signer"]["public_key"]
    check = verify_approval(approval)
    assert check.ok and check.differences == [], check.differences


def test_a_tampered_approval_is_named(approvals: dict[str, dict[str, Any]]) -> None:
    honest = approvals["cosmos sign-transfer"]
    shown = copy.deepcopy(honest)
    shown["summary"]["items"][0]["amounts"][0]["display"] = "0.009 ATOM"
    check = verify_approval(shown)
    assert not check.ok
    assert check.differences == [
        "summary.items[0].amounts[0].display: the approval says '0.009 ATOM', the request "
        f"says {honest['summary']['items'][0]['amounts'][0]['display']!r}"
    ]
    digest = {**honest, "digest": "00" * 32}
    assert [d.split(":")[0] for d in verify_approval(digest).differences] == ["digest"]
    request = copy.deepcopy(honest)
    request["request"]["toAddress"] = COSMOS["sign-transfer"]["request"]["fromAddress"]
    named = verify_approval(request).differences
    assert any(d.startswith("digest:") for d in named)
    assert any(d.startswith("summary.items[0].recipient:") for d in named), named
    raw = copy.deepcopy(approvals["dogecoin sign-raw-transaction"])
    raw["request"]["hex"] = raw["request"]["hex"][:-20] + "00" * 10
    assert not verify_approval(raw).ok
    eos = copy.deepcopy(approvals["eos sign-transaction"])
    eos["summary"]["items"][0]["recipient"] = "attacker1234"
    assert any("recipient" in d for d in verify_approval(eos).differences)
    unknown = {**honest, "kind": "sign-something"}
    assert verify_approval(unknown).differences == [
        "cosmos sign-something: not verified by this client"
    ]
    assert not verify_approval({"id": "apr_x"}).ok


# ---- every network the server serves, testnets too -------------------------------------

JUNGLE4 = "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d"
# key 1's address and the vectors' recipient, written with Osmosis' prefix
OSMO_FROM, OSMO_TO = ("osmo1w508d6qejxtdg4y5r3zarvary0c5xw7kjxy2e2",
                      "osmo1q6hag67dl53wl99vzg42z8eyzfz2xlkvcc4vq7")  # fmt: skip
TESTNETS = {"cosmos sign-transfer": "osmosis-testnet", "eos sign-transaction": "jungle4",
            "dogecoin sign-raw-transaction": "testnet", "litecoin sign-psbt": "testnet",
            "litecoin sign-message": "regtest"}  # fmt: skip


@pytest.fixture(scope="module")
def testnet_approvals(server: Server) -> dict[str, dict[str, Any]]:
    """An approval of a request on a test network of each family, as the server gives it."""
    tenant = "verify-testnets"
    token = server.token(tenant, "read,create,sign")
    server.policy(tenant, *({"family": f, "raw_messages": True,
                             "approval": {"quorum": 1, "group": "g"}} for f in FAMILIES))  # fmt: skip
    vectors = json.loads((SIGNING_VECTORS / "vectors.json").read_text())
    found: dict[str, dict[str, Any]] = {}
    with Client(server.url, token) as ck:
        osmo = ck.accounts.create("cosmos", private_key=ONE, network="osmosis-testnet").address
        assert osmo == OSMO_FROM
        eos = ck.accounts.create("eos", private_key=ONE, name="verifyjungle", network="jungle4")
        doge = ck.accounts.create("dogecoin", private_key=ONE, network="testnet").address
        case = next(c for c in UTXO["sign-psbt"] if c["family"] == "litecoin")
        ltc = ck.accounts.create("litecoin", **case["create"], network="testnet").address
        rltc = ck.accounts.create("litecoin", private_key=ONE, network="regtest").address
        assert ltc.startswith("tltc1") and rltc.startswith("rltc1") and doge.startswith("n")
        transfer = {**COSMOS["sign-transfer"]["request"], "fromAddress": osmo, "toAddress": OSMO_TO,
                    "denom": "uosmo", "feeDenom": "uosmo", "chainId": "osmo-test-5"}  # fmt: skip
        mine = p2pkh_script(bytes.fromhex(vectors["keys"][0]["hash160_hex"]))
        theirs = p2pkh_script(bytes.fromhex(vectors["keys"][1]["hash160_hex"]))
        fund = legacy_tx([(b"\x07" * 32, 0, b"")], [(1_000_000, mine)])
        spend = legacy_tx([(txid(fund), 0, b"")], [(900_000, theirs)])
        prev = PrevTx(txid=txid(fund).hex(), vout=0, scriptPubKey=mine.hex(), amount="0.01",
                      hex=fund.hex())  # fmt: skip
        asked = {
            "cosmos sign-transfer": lambda: ck.signing.sign_transfer(osmo, transfer),
            "eos sign-transaction": lambda: ck.signing.sign_eos_transaction(
                eos.name, JUNGLE4, eos_transfer_tx("verifyjungle", "exchange1234", 12345)),
            "dogecoin sign-raw-transaction": lambda: ck.signing.sign_raw_transaction(
                "dogecoin", doge, spend, [prev]),
            "litecoin sign-psbt": lambda: ck.signing.sign_psbt(
                "litecoin", ltc, case["request"]["psbt"]),
            "litecoin sign-message": lambda: ck.signing.sign_message("litecoin", rltc, "hi"),
        }  # fmt: skip
        for name, sign in asked.items():
            found[name] = msgspec.to_builtins(ck.approvals.get(pending(sign)))
    return found


@pytest.mark.parametrize("name", list(TESTNETS))
def test_an_honest_approval_on_a_test_network_is_accepted(
    testnet_approvals: dict[str, dict[str, Any]], name: str
) -> None:
    approval = testnet_approvals[name]
    assert approval["summary"]["network"] == TESTNETS[name]
    check = verify_approval(approval)
    assert check.ok and check.differences == [], check.differences


def test_a_tampered_testnet_approval_is_named(testnet_approvals: dict[str, dict[str, Any]]) -> None:
    psbt = testnet_approvals["litecoin sign-psbt"]
    recipients = [i["recipient"] for i in psbt["summary"]["items"]]
    assert all(r.startswith(("tltc1", "m", "n", "Q")) for r in recipients), recipients
    shown = copy.deepcopy(psbt)  # the same output, shown as the mainnet address it is not
    shown["summary"]["items"][0]["recipient"] = "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9"
    named = verify_approval(shown).differences
    assert [d.split(":")[0] for d in named] == ["summary.items[0].recipient"], named
    transfer = testnet_approvals["cosmos sign-transfer"]
    mainnet = copy.deepcopy(transfer)  # a testnet request shown as the mainnet's
    mainnet["signer"]["network"] = mainnet["summary"]["network"] = "osmosis"
    assert [d.split(":")[0] for d in verify_approval(mainnet).differences] == ["chain_id"]
    relabelled = copy.deepcopy(psbt)
    relabelled["signer"]["network"] = "mainnet"
    named = verify_approval(relabelled).differences
    assert "account" in [d.split(":")[0] for d in named], named
    assert "summary.network" in [d.split(":")[0] for d in named], named
    strange = copy.deepcopy(transfer)
    strange["signer"]["network"] = "osmosis-devnet"
    assert verify_approval(strange).differences == [
        "network: cosmos 'osmosis-devnet' is not a network this client knows (cosmoshub, "
        "cosmoshub-testnet, osmosis, osmosis-testnet, juno, akash, stargaze, celestia)"
    ]
    eos = copy.deepcopy(testnet_approvals["eos sign-transaction"])
    eos["signer"]["network"] = eos["summary"]["network"] = "eos"
    assert [d.split(":")[0] for d in verify_approval(eos).differences] == ["chain_id"]


def test_the_verifiers_table_holds_every_network_the_server_serves(server: Server) -> None:
    """The client's own table (never read from a server) against `GET /networks`: a
    network added to the server and not here would be named unknown, never passed, but
    this says so before an approver meets it."""
    from chainkeys_client._verify_networks import NETWORKS

    with Client(server.url, server.token()) as ck:
        served = ck.networks().families
    for family, listed in served.items():
        assert {n.name for n in listed.networks} == set(NETWORKS[family]), family
        for n in listed.networks:
            mine = NETWORKS[family][n.name]
            assert (n.chain_id, n.bech32_prefix) == (mine.chain_id, mine.hrp), (family, n)
