"""Cosmos signing through real HTTP, every signature checked by cosmjs (tests/verifiers).

The account holds a public test key, so cosmjs' own wallets sign the same
documents with the same key: RFC 6979 makes the expected signature exact.
"""

from __future__ import annotations

import base64
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
KEY = VECTORS["keys"][0]
PRIVATE = KEY["private_key_hex"]
ADDRESS = KEY["cosmos"]["addresses"]["cosmos"]
PUBKEY = base64.b64encode(bytes.fromhex(KEY["public_key_compressed_hex"])).decode()
OTHER = VECTORS["keys"][1]["cosmos"]["addresses"]["cosmos"]


@pytest.fixture
def signer(client: httpx.Client) -> httpx.Client:
    require_node()
    r = client.post("/cosmos", json={"private_key": PRIVATE})
    assert r.status_code == 200, r.text
    return client


def direct_doc(
    chain_id: str = "cosmoshub-4", pubkey: str = PUBKEY, amount: str = "1234"
) -> dict[str, Any]:
    built = run_node(
        "cosmos.mjs",
        {
            "action": "build_direct",
            "pubkey": pubkey,
            "sequence": 7,
            "gas": "200000",
            "fee": [{"denom": "uatom", "amount": "500"}],
            "memo": "invoice 42",
            "msgs": [
                {
                    "typeUrl": "/cosmos.bank.v1beta1.MsgSend",
                    "from": ADDRESS,
                    "to": OTHER,
                    "amount": [{"denom": "uatom", "amount": amount}],
                }
            ],
        },
    )
    return {**built, "chainId": chain_id, "accountNumber": "99"}


def test_sign_direct_matches_cosmjs_and_verifies(signer: httpx.Client) -> None:
    doc = direct_doc()
    r = signer.post(f"/cosmos/{ADDRESS}/sign-direct", json={"signDoc": doc})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["signed"] == doc
    assert data["signature"]["pub_key"] == {"type": "tendermint/PubKeySecp256k1", "value": PUBKEY}
    sig = data["signature"]["signature"]
    verdict = run_node(
        "cosmos.mjs",
        {"action": "verify_direct", "signDoc": doc, "signature": sig, "pubkey": PUBKEY},
    )
    assert verdict == {"valid": True, "lowS": True, "ok": True}
    reference = run_node(
        "cosmos.mjs",
        {"action": "sign_direct", "signDoc": doc, "privateKey": PRIVATE, "prefix": "cosmos"},
    )
    assert reference["signature"] == sig  # RFC 6979: the same bytes as cosmjs
    again = signer.post(f"/cosmos/{ADDRESS}/sign-direct", json={"signDoc": doc})
    assert again.json()["data"]["signature"]["signature"] == sig
    snake = {
        "body_bytes": doc["bodyBytes"],
        "auth_info_bytes": doc["authInfoBytes"],
        "chain_id": doc["chainId"],
        "account_number": doc["accountNumber"],
    }
    assert (
        signer.post(f"/cosmos/{ADDRESS}/sign-direct", json={"signDoc": snake}).json()["data"][
            "signature"
        ]["signature"]
        == sig
    )
    events = signer.get("/audit").json()["data"]["events"]
    assert [e["outcome"] for e in events if e["action"] == "sign"] == ["ok", "ok", "ok"]


def test_sign_amino_matches_cosmjs_and_verifies(signer: httpx.Client) -> None:
    doc = {
        "chain_id": "cosmoshub-4",
        "account_number": "99",
        "sequence": "7",
        "fee": {"amount": [{"denom": "uatom", "amount": "500"}], "gas": "200000"},
        "msgs": [
            {
                "type": "cosmos-sdk/MsgSend",
                "value": {
                    "from_address": ADDRESS,
                    "to_address": OTHER,
                    "amount": [{"denom": "uatom", "amount": "1234"}],
                },
            }
        ],
        "memo": "a <b> & 'c' ü",
    }
    r = signer.post(f"/cosmos/{ADDRESS}/sign-amino", json={"signDoc": doc})
    assert r.status_code == 200, r.text
    sig = r.json()["data"]["signature"]["signature"]
    assert r.json()["data"]["signed"] == doc
    verdict = run_node(
        "cosmos.mjs", {"action": "verify_amino", "signDoc": doc, "signature": sig, "pubkey": PUBKEY}
    )
    assert verdict["valid"] is True
    reference = run_node(
        "cosmos.mjs",
        {"action": "sign_amino", "signDoc": doc, "privateKey": PRIVATE, "prefix": "cosmos"},
    )
    assert reference["signature"] == sig


@pytest.mark.parametrize("body", [{"message": "hello custody"}, {"data": "AAEC/w=="}])
def test_sign_message_is_adr036_as_keplr_builds_it(
    signer: httpx.Client, body: dict[str, str]
) -> None:
    r = signer.post(f"/cosmos/{ADDRESS}/sign-message", json=body)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["signedMessage"] == data["signature"]["signature"]
    raw = body["message"].encode() if "message" in body else base64.b64decode(body["data"])
    checked = run_node(
        "cosmos.mjs",
        {
            "action": "adr036_doc",
            "signer": ADDRESS,
            "data": base64.b64encode(raw).decode(),
            "signature": data["signedMessage"],
            "pubkey": PUBKEY,
        },
    )
    assert checked["doc"] == data["signed"]
    assert checked["verdict"]["valid"] is True


@pytest.mark.parametrize("field", ["message", "data"])
def test_sign_message_at_the_schemas_maximum_is_signed_and_one_more_is_refused(
    signer: httpx.Client, field: str
) -> None:
    """Text at its maximum, 12 bytes a character in ASCII-only JSON, and data at its
    maximum, base64 with every "/" escaped as "\\/" (PHP's json_encode): each fits the
    default body cap and is signed as Keplr's ADR-036; one more is a 400, audited."""
    path = f"/cosmos/{ADDRESS}/sign-message"
    if field == "message":
        text = FACE * MAX_MESSAGE_CHARS
        raw, wire = text.encode(), json.dumps({"message": text}).encode()
        over, words = json.dumps({"message": text + "x"}).encode(), f"at most {MAX_MESSAGE_CHARS}"
    else:
        raw = b"\xff" * MAX_MESSAGE_BYTES  # base64 "////…": the most escapes
        wire = json.dumps({"data": base64.b64encode(raw).decode()}).replace("/", "\\/").encode()
        longer = base64.b64encode(raw + b"\xff").decode()
        over, words = json.dumps({"data": longer}).encode(), f"at most {len(longer) - 4}"
    r = post_wire(signer, path, wire)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    checked = run_node(
        "cosmos.mjs",
        {
            "action": "adr036_doc",
            "signer": ADDRESS,
            "data": base64.b64encode(raw).decode(),
            "signature": data["signedMessage"],
            "pubkey": PUBKEY,
        },
    )
    assert checked["doc"] == data["signed"] and checked["verdict"]["valid"] is True
    refused_over_the_limit(signer, "cosmos", path, over, words)


def refused(client: httpx.Client, path: str, body: Any, code: str) -> str:
    before = [e for e in client.get("/audit").json()["data"]["events"] if e["outcome"] == "ok"]
    r = client.post(f"/cosmos/{ADDRESS}/{path}", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == code, r.text
    assert PRIVATE not in r.text
    after = [e for e in client.get("/audit").json()["data"]["events"] if e["outcome"] == "ok"]
    assert after == before  # nothing signed
    return str(r.json()["message"])


def test_refusals(signer: httpx.Client) -> None:
    doc = direct_doc()
    assert "cosmoshub-4" in refused(
        signer, "sign-direct", {"signDoc": direct_doc("osmosis-1")}, "wrong_chain"
    )
    other_pub = base64.b64encode(
        bytes.fromhex(VECTORS["keys"][1]["public_key_compressed_hex"])
    ).decode()
    refused(signer, "sign-direct", {"signDoc": direct_doc(pubkey=other_pub)}, "not_owner")
    tampered = base64.b64encode(base64.b64decode(doc["bodyBytes"]) + b"\x00").decode()
    refused(
        signer, "sign-direct", {"signDoc": {**doc, "bodyBytes": tampered}}, "invalid_sign_request"
    )
    refused(
        signer,
        "sign-direct",
        {"signDoc": {**doc, "bodyBytes": "not base64!"}},
        "invalid_field",  # its shape: the document's pattern
    )
    refused(signer, "sign-direct", {"signDoc": {**doc, "accountNumber": "1.5"}}, "invalid_amount")
    amino = {
        "chain_id": "cosmoshub-4",
        "account_number": "1",
        "sequence": "0",
        "memo": "",
        "fee": {"amount": [], "gas": "1"},
        "msgs": [
            {
                "type": "cosmos-sdk/MsgSend",
                "value": {
                    "from_address": ADDRESS,
                    "to_address": OTHER,
                    "amount": [{"denom": "uatom", "amount": 1.5}],
                },
            }
        ],
    }
    refused(signer, "sign-amino", {"signDoc": amino}, "invalid_amount")
    foreign = json.loads(json.dumps(amino).replace(ADDRESS, OTHER).replace("1.5", '"1"'))
    refused(signer, "sign-amino", {"signDoc": foreign}, "not_owner")
    refused(signer, "sign-amino", {"signDoc": {**foreign, "chain_id": "juno-1"}}, "wrong_chain")
    refused(signer, "sign-message", {"message": "a", "data": "AA=="}, "invalid_input")
    as_int = json.loads(json.dumps(amino).replace("1.5", '"1"').replace('"gas": "1"', '"gas": 1'))
    refused(signer, "sign-amino", {"signDoc": as_int}, "invalid_amount")  # a number, not a string
    lone = {**json.loads(json.dumps(amino).replace("1.5", '"1"')), "memo": "\ud800"}
    r = signer.post(
        f"/cosmos/{ADDRESS}/sign-amino",
        headers={"content-type": "application/json"},
        content=json.dumps({"signDoc": lone}).encode(),
    )  # the escape, as a client sends it
    assert r.status_code == 400 and r.json()["code"] == "invalid_json", r.text  # msgspec refuses it


def test_amino_keys_sort_as_javascript_does(signer: httpx.Client) -> None:
    """Keys beyond the Basic Multilingual Plane sort by UTF-16 units, as in cosmjs."""
    doc = {
        "chain_id": "cosmoshub-4",
        "account_number": "1",
        "sequence": "0",
        "memo": "",
        "fee": {"amount": [], "gas": "1"},
        "msgs": [{"type": "custom/Msg", "value": {"\U0001f600": "a", "\uffff": "b", "z": "c"}}],
    }
    r = signer.post(f"/cosmos/{ADDRESS}/sign-amino", json={"signDoc": doc})
    assert r.status_code == 200, r.text
    verdict = run_node(
        "cosmos.mjs",
        {
            "action": "verify_amino",
            "signDoc": doc,
            "signature": r.json()["data"]["signature"]["signature"],
            "pubkey": PUBKEY,
        },
    )
    assert verdict["valid"] is True


def test_sign_needs_the_sign_scope_and_an_own_account(server: Any, signer: httpx.Client) -> None:
    from tests.api.test_scopes import token

    with server.client(token(server, "sign-scope-test", "read")) as c:
        r = c.post(f"/cosmos/{ADDRESS}/sign-message", json={"message": "x"})
    assert r.status_code == 403 and "'sign' scope" in r.json()["message"]
    with server.client(server.new_token()) as stranger:
        assert (
            stranger.post(f"/cosmos/{ADDRESS}/sign-message", json={"message": "x"}).status_code
            == 404
        )


TRANSFER = {
    "fromAddress": ADDRESS,
    "toAddress": OTHER,
    "amount": "1500000",
    "denom": "uatom",
    "chainId": "cosmoshub-4",
    "sequence": 3,
    "accountNumber": 12345,
    "feeDenom": "uatom",
    "feeAmount": "5000",
    "gasLimit": 200000,
    "memo": "payout 7",
    "timeoutHeight": 0,
}
IBC_TRANSFER = {
    **TRANSFER,
    "toAddress": "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5helwsw",
    "sourcePort": "transfer",
    "sourceChannel": "channel-141",
    "timeoutTimestamp": 1_800_000_000_000_000_000,
}


@pytest.mark.parametrize(
    ("path", "body", "ibc"),
    [
        ("sign-transfer", TRANSFER, False),
        ("sign-ibc-transfer", IBC_TRANSFER, True),
    ],
)
def test_transfers_are_the_bytes_cosmjs_builds(
    signer: httpx.Client, path: str, body: dict[str, Any], ibc: bool
) -> None:
    r = signer.post(f"/cosmos/{ADDRESS}/{path}", json=body)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    reference = run_node(
        "cosmos.mjs",
        {
            "action": "sign_transfer",
            "transfer": body,
            "ibc": ibc,
            "privateKey": PRIVATE,
            "prefix": "cosmos",
        },
    )
    assert data["signedTx"] == reference["signedTx"]
    raw = base64.b64decode(data["signedTx"])
    import hashlib

    assert data["txHash"] == hashlib.sha256(raw).hexdigest().upper()
    checked = run_node(
        "cosmos.mjs",
        {
            "action": "verify_tx",
            "signedTx": data["signedTx"],
            "chainId": "cosmoshub-4",
            "accountNumber": "12345",
            "pubkey": PUBKEY,
        },
    )
    assert checked["verdict"]["valid"] is True
    url = "/ibc.applications.transfer.v1.MsgTransfer" if ibc else "/cosmos.bank.v1beta1.MsgSend"
    assert checked["messages"] == [url]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"chainId": "osmosis-1"}, "wrong_chain"),
        ({"fromAddress": OTHER}, "not_owner"),
        ({"toAddress": "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5helwsw"}, "wrong_chain"),
        ({"amount": "1.5"}, "invalid_amount"),
        ({"amount": "-5"}, "invalid_amount"),
        ({"gasLimit": 1.5}, "invalid_amount"),  # a count, checked as the amounts are
        ({"sequence": -1}, "invalid_amount"),
    ],
)
def test_transfer_refusals(signer: httpx.Client, change: dict[str, Any], code: str) -> None:
    r = signer.post(f"/cosmos/{ADDRESS}/sign-transfer", json={**TRANSFER, **change})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == code


def test_a_stored_key_that_is_not_the_accounts_key_signs_nothing(
    server: Any, client: httpx.Client
) -> None:
    """A row whose public key was altered (or whose sealed key belongs to another key):
    the opened key is compared with the stored public key before anything is signed.
    A writer without the master key is stopped earlier, by the row's MAC
    (tests/api/test_integrity.py); this is the check behind it, so the row here is
    altered with a valid MAC, as only a holder of the integrity key could."""
    from sqlalchemy import select, update

    from chainkeys.store.integrity import ACCOUNTS
    from chainkeys.store.tables import accounts

    address = client.post("/cosmos", json={}).json()["data"]["data"]["address"]
    alien = base64.b64encode(bytes.fromhex(VECTORS["keys"][1]["public_key_compressed_hex"]))

    async def tamper() -> None:
        integrity = server.services.barrier.integrity
        async with server.services.db.write() as tx:
            where = accounts.c.address == address
            row = dict((await tx.execute(select(accounts).where(where))).first()._mapping)
            row["public_key"] = alien.decode()
            await tx.execute(
                update(accounts)
                .where(where)
                .values(public_key=row["public_key"], mac=integrity.mac(ACCOUNTS, row))
            )

    server.call(tamper())
    r = client.post(f"/cosmos/{address}/sign-message", json={"message": "pay 5 atom"})
    assert r.status_code == 500
    assert r.json() == {
        "success": False,
        "code": "key_mismatch",
        "message": "this account's stored key does not match its public key; nothing was signed",
    }
    transfer = {**TRANSFER, "fromAddress": address}
    r = client.post(f"/cosmos/{address}/sign-transfer", json=transfer)
    assert r.status_code == 500 and r.json()["code"] == "key_mismatch"
    events = [e for e in client.get("/audit").json()["data"]["events"] if e["action"] == "sign"]
    assert [e["outcome"] for e in events] == ["key_mismatch", "key_mismatch"]
    assert all(e["account_name"] == address for e in events)
