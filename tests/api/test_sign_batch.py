"""`POST /{family}/{name}/sign-batch` through real HTTP on both backends: every item is
answered in its place exactly as its sign endpoint alone answers the same body (signed,
waiting for approval, refused with the same code and message), each signature checked
by the reference verifiers the single endpoints' tests use, caps counted across the
batch in order, one audit row per item; a batch that is not one is refused whole,
audited, and signs nothing."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, PUBKEY, TRANSFER, direct_doc
from tests.api.test_sign_eos import CHAIN, NAME, build, transfer
from tests.api.test_sign_utxo import CAP, KEY, RECIPIENT
from tests.conftest import Server
from tests.node import require_node, run_node

from chainkeys.chains.tx.fields import MAX_MESSAGE_CHARS

STRANGER = "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"
COSMOS = f"/cosmos/{ADDRESS}"


def batch(client: httpx.Client, path: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch's results (200 asserted, one per item)."""
    r = client.post(f"{path}/sign-batch", json={"items": items})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["success"] is True and set(body) == {"success", "message", "data"}
    results: list[dict[str, Any]] = body["data"]["results"]
    assert len(results) == len(items)
    return results


def alone(client: httpx.Client, path: str, item: dict[str, Any]) -> dict[str, Any]:
    """The item sent to its own endpoint, as a batch result would say it."""
    body = {k: v for k, v in item.items() if k != "kind"}
    r = client.post(f"{path}/{item['kind']}", json=body)
    answer = r.json()
    if r.status_code in (200, 202):
        return {"status": r.status_code, "data": answer["data"]}
    return {"status": r.status_code, "code": answer["code"], "message": answer["message"]}


def sign_events(client: httpx.Client) -> list[dict[str, Any]]:
    """The tenant's sign events, oldest first."""
    events = client.get("/audit", params={"action": "sign", "limit": 1000}).json()["data"]
    return list(reversed(events["events"]))


def details(event: dict[str, Any]) -> dict[str, Any]:
    found = event["details"]
    return found if isinstance(found, dict) else json.loads(found)


@pytest.fixture
def cosmos(tenant: Tenant) -> Tenant:
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    return tenant


def send(amount: int, sequence: int, fee: int = 5000, to: str = OTHER) -> dict[str, Any]:
    return {
        "kind": "sign-transfer",
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "feeAmount": str(fee),
        "toAddress": to,
    }


# ---- every kind, each signature checked by the reference verifiers ------------------------


def test_utxo_kinds_in_one_batch_are_what_each_endpoint_signs(client: httpx.Client) -> None:
    require_node()
    made = client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]})
    address, pubkey = made.json()["address"], made.json()["data"]["public_key"]
    path, network = f"/dogecoin/{address}", "dogecoin/mainnet"
    items: list[dict[str, Any]]
    outputs = [
        {"address": RECIPIENT["dogecoin"], "value": 600_000},
        {"address": address, "value": 390_000},
    ]
    psbt = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": network,
            "kind": "p2pkh",
            "pubkey": pubkey,
            "amountIn": 1_000_000,
            "witness": False,
            "outputs": outputs,
        },
    )
    raw = run_node(
        "utxo.mjs",
        {
            "action": "build_rawtx",
            "network": network,
            "kind": "p2pkh",
            "pubkey": pubkey,
            "amountIn": 1_000_000,
            "outputs": outputs,
        },
    )
    prev = {
        "txid": raw["fundTxid"],
        "vout": 0,
        "scriptPubKey": raw["scriptPubKey"],
        "amount": 0.01,
        "hex": raw["fundHex"],
    }
    items = [
        {"kind": "sign-message", "message": "first"},
        {"kind": "sign-psbt", "psbt": psbt["psbt"], "finalize": False},
        {"kind": "sign-raw-transaction", "hex": raw["hex"], "prevtxs": [prev]},
        {"kind": "sign-psbt", "psbt": psbt["psbt"]},
        {"kind": "sign-message", "message": "ünïcödé ✓"},
    ]
    results = batch(client, path, items)
    assert [r["status"] for r in results] == [200, 200, 200, 200, 200]
    for item, result in zip(items, results, strict=True):
        if item["kind"] == "sign-message":
            check = run_node(
                "utxo.mjs",
                {
                    "action": "verify_message",
                    "network": network,
                    "message": item["message"],
                    "address": address,
                    "signature": result["data"]["signature"],
                },
            )
            assert check["matches"] and check["library"] and check["lowS"], check
    partial, final = results[1]["data"], results[3]["data"]
    assert partial["complete"] is False and final["complete"] is True
    check = run_node(
        "utxo.mjs", {"action": "check_psbt", "network": network, "psbt": partial["psbt"]}
    )
    assert check["valid"] is True
    assert (final["hex"], final["txid"]) == (check["hex"], check["txid"])  # bitcoinjs' own
    signed_raw = results[2]["data"]
    assert signed_raw["complete"] is True and signed_raw["errors"] == []
    check = run_node(
        "utxo.mjs",
        {
            "action": "check_rawtx",
            "network": network,
            "hex": signed_raw["hex"],
            "kind": "p2pkh",
            "pubkey": pubkey,
            "scriptPubKey": raw["scriptPubKey"],
            "value": 1_000_000,
        },
    )
    assert check["valid"] and check["lowS"] and check["hashType"] == 1
    events = sign_events(client)
    assert [(e["outcome"], details(e)["kind"]) for e in events] == [
        ("ok", i["kind"]) for i in items
    ]  # one audit row per item, in order, as alone
    assert len({e["request_id"] for e in events}) == 1  # the batch's one request
    for item, result in zip(items, results, strict=True):  # the same answers, one at a time
        assert alone(client, path, item) == result


def test_cosmos_kinds_in_one_batch_verify_with_cosmjs(client: httpx.Client) -> None:
    require_node()
    assert client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    doc = direct_doc()
    items: list[dict[str, Any]] = [
        {"kind": "sign-direct", "signDoc": doc},
        {"kind": "sign-message", "message": "hello custody"},
        {"kind": "sign-transfer", **TRANSFER},
    ]
    results = batch(client, COSMOS, items)
    assert [r["status"] for r in results] == [200, 200, 200]
    direct = results[0]["data"]
    verdict = run_node(
        "cosmos.mjs",
        {
            "action": "verify_direct",
            "signDoc": doc,
            "pubkey": PUBKEY,
            "signature": direct["signature"]["signature"],
        },
    )
    assert verdict == {"valid": True, "lowS": True, "ok": True}
    message = results[1]["data"]
    checked = run_node(
        "cosmos.mjs",
        {
            "action": "adr036_doc",
            "signer": ADDRESS,
            "data": "aGVsbG8gY3VzdG9keQ==",
            "pubkey": PUBKEY,
            "signature": message["signedMessage"],
        },
    )
    assert checked["doc"] == message["signed"] and checked["verdict"]["valid"] is True
    tx = results[2]["data"]
    checked = run_node(
        "cosmos.mjs",
        {
            "action": "verify_tx",
            "signedTx": tx["signedTx"],
            "chainId": "cosmoshub-4",
            "accountNumber": "12345",
            "pubkey": PUBKEY,
        },
    )
    assert checked["verdict"]["valid"] is True
    for item, result in zip(items, results, strict=True):
        assert alone(client, COSMOS, item) == result


def test_eos_kinds_in_one_batch_verify_with_wharfkit(client: httpx.Client) -> None:
    require_node()
    made = client.post("/eos", json={"private_key": PRIVATE, "name": NAME})
    public = made.json()["data"]["public_key"]
    built = build(transfer())
    items = [
        {
            "kind": "sign-transaction",
            "chainId": CHAIN,
            "serializedTransaction": built["serializedTransaction"],
        },
        {"kind": "sign-message", "data": "00ff10"},
    ]
    results = batch(client, f"/eos/{NAME}", items)
    assert [r["status"] for r in results] == [200, 200]
    [sig] = results[0]["data"]["signatures"]
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
    assert check["valid"] and check["canonical"] and check["recovered"] == public
    check = run_node(
        "eos.mjs",
        {
            "action": "verify_message",
            "publicKey": public,
            "data": "00ff10",
            "signature": results[1]["data"]["signature"],
        },
    )
    assert check == {"valid": True, "canonical": True, "ecc": True}


# ---- refusals in their place ------------------------------------------------------------


def test_a_refused_item_is_answered_as_alone_and_the_others_are_signed(cosmos: Tenant) -> None:
    cosmos.policy({"family": "cosmos", "network": "cosmoshub", "recipients": [OTHER]})
    items = [
        send(10, 1),
        send(10, 2, to=STRANGER),
        {"kind": "sign-message", "message": "hi"},
        send(10, 3),
    ]
    results = batch(cosmos.client, COSMOS, items)
    assert [r["status"] for r in results] == [200, 403, 403, 200]
    assert results[1]["code"] == "policy_denied" and STRANGER in results[1]["message"]
    assert results[2]["code"] == "policy_denied" and "raw message" in results[2]["message"]
    events = cosmos.sign_events()
    assert [e["outcome"] for e in events] == ["ok", "policy_denied", "policy_denied", "ok"]
    assert events[1]["details"]["summary"]["items"][0]["recipient"] == STRANGER
    for item, result in zip(items, results, strict=True):
        assert alone(cosmos.client, COSMOS, item) == result


def test_malformed_and_oversized_items_are_answered_as_alone(client: httpx.Client) -> None:
    address = client.post("/dogecoin", json={}).json()["address"]
    path = f"/dogecoin/{address}"
    items: list[dict[str, Any]] = [
        {"kind": "sign-message", "message": "ok"},
        {"kind": "sign-message", "msg": "x"},  # a field the endpoint does not have
        {"kind": "sign-message", "message": 7},  # a field of the wrong type
        {"kind": "sign-message", "message": "x" * (MAX_MESSAGE_CHARS + 1)},  # over the schema
        {"kind": "sign-message", "message": "x" * CAP},  # over the server's body limit
        {"kind": "sign-psbt", "psbt": "AAAA"},  # base64, but no PSBT: the decoder refuses it
        {"kind": "sign-message", "message": "still ok"},
    ]
    results = batch(client, path, items)
    assert [r["status"] for r in results] == [200, 400, 400, 400, 413, 400, 200]
    assert [r.get("code") for r in results] == [
        None,
        "invalid_field",
        "invalid_field",
        "invalid_field",
        "payload_too_large",
        "invalid_sign_request",
        None,
    ]
    events = sign_events(client)
    assert [e["outcome"] for e in events] == [
        "ok",
        "invalid_field",
        "invalid_field",
        "invalid_field",
        "payload_too_large",
        "invalid_sign_request",
        "ok",
    ]
    for item, result in zip(items, results, strict=True):
        assert alone(client, path, item) == result


def test_an_item_that_needs_approval_waits_in_its_place(server: Server, cosmos: Tenant) -> None:
    cosmos.policy(
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "approval": {"quorum": 1, "group": "treasury"},
            "above": {"uatom": "100000"},
        }
    )
    large = send(500_000, 2)
    results = batch(cosmos.client, COSMOS, [send(10, 1), large, send(10, 3)])
    assert [r["status"] for r in results] == [200, 202, 200]
    waiting = results[1]["data"]
    assert waiting["state"] == "pending" and waiting["kind"] == "sign-transfer"
    assert cosmos.client.get(f"/approvals/{waiting['id']}").json()["data"] == waiting
    assert [e["outcome"] for e in cosmos.sign_events()] == ["ok", "ok"]  # nothing more signed
    again = batch(cosmos.client, COSMOS, [large])  # the same request: the same approval
    assert again[0]["data"]["id"] == waiting["id"]
    assert alone(cosmos.client, COSMOS, large)["data"]["id"] == waiting["id"]
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(
            cosmos.name, "bob", frozenset({"approve"}), None, None, "treasury"
        )
    )
    with server.client(token) as bob:
        r = bob.post(f"/approvals/{waiting['id']}/approve", json={"digest": waiting["digest"]})
    assert r.status_code == 200 and r.json()["data"]["state"] == "signed", r.text
    assert cosmos.client.get(f"/approvals/{waiting['id']}").json()["data"]["result"]["signedTx"]
    assert [e["outcome"] for e in cosmos.sign_events()] == ["ok", "ok", "ok"]


# ---- caps across the batch ---------------------------------------------------------------


def test_a_cap_crossed_inside_the_batch(cosmos: Tenant) -> None:
    """Caps count in the items' order: the item that crosses is refused, those before it
    are signed, and those after are decided on what was spent (a retry of counted bytes
    is free, anything more is over)."""
    cosmos.policy({"family": "cosmos", "network": "cosmoshub", "max_per_day": {"uatom": "30000"}})
    items = [
        send(5000, 1),
        send(5000, 2),
        send(5001, 3),
        send(5000, 3),
        send(5000, 1),
        send(1, 4, fee=0),
    ]
    results = batch(cosmos.client, COSMOS, items)
    assert [r["status"] for r in results] == [200, 200, 403, 200, 200, 403]
    assert "30001" in results[2]["message"] and "over the cap of 30000" in results[2]["message"]
    assert results[4]["data"] == results[0]["data"]  # the same bytes: the same, and free
    assert [e["outcome"] for e in cosmos.sign_events()] == [
        "ok",
        "ok",
        "policy_denied",
        "ok",
        "ok",
        "policy_denied",
    ]
    refused = alone(cosmos.client, COSMOS, send(1, 5, fee=0))  # the window is full
    assert refused["status"] == 403 and "over the cap of 30000" in refused["message"]


def test_conditions_read_what_earlier_items_spent(cosmos: Tenant) -> None:
    cosmos.policy(
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "max_per_day": {"uatom": "10000000"},
            "when": "!('uatom' in spent) || spent['uatom'] < 20000",
        }
    )
    results = batch(cosmos.client, COSMOS, [send(5000, n) for n in (1, 2, 3)])
    assert [r["status"] for r in results] == [200, 200, 403]  # 10,000 each with the fee
    assert results[2]["code"] == "policy_denied"


def test_concurrent_batches_never_pass_a_cap_together(server: Server, cosmos: Tenant) -> None:
    """Two batches at once, each within the cap alone, together over it: what is signed
    in all stays within the cap (each item decided under the caps' lock)."""
    cosmos.policy({"family": "cosmos", "network": "cosmoshub", "max_per_day": {"uatom": "60000"}})
    start = threading.Barrier(2)
    answers: list[list[dict[str, Any]]] = []

    def run(first: int) -> None:
        with server.client(server.new_token(cosmos.name)) as c:
            start.wait()
            answers.append(batch(c, COSMOS, [send(5000, first + n) for n in range(5)]))

    threads = [threading.Thread(target=run, args=(s,)) for s in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    signed = sum(r["status"] == 200 for results in answers for r in results)
    assert signed == 6  # 6 x 10,000 = the cap; the other four refused
    assert [e["outcome"] for e in cosmos.sign_events()].count("ok") == 6


# ---- whole-batch refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"items": [{"kind": "sign-message", "message": "m"}] * 1001}, "invalid_batch", "1,001"),
        ({"items": []}, "invalid_batch", "1 to 1,000 items"),
        ({}, "invalid_field", "items"),
        ({"items": "x"}, "invalid_field", "items"),
        ({"items": [{"kind": "sign-message", "message": "m"}], "more": 1}, "invalid_field", "more"),
        ({"items": [{"kind": "sign-message", "message": "m"}, 7]}, "invalid_batch", "items[1]"),
        ({"items": [{"message": "m"}]}, "invalid_batch", "items[0] is not a sign request"),
        ({"items": [{"kind": "sign-direct", "signDoc": {}}]}, "invalid_batch", "no 'sign-direct'"),
        ({"items": [{"kind": "sign-everything"}]}, "invalid_batch", "sign-psbt, sign-raw"),
    ],
)
def test_a_batch_that_is_not_one_is_refused_whole_and_audited(
    client: httpx.Client, body: dict[str, Any], code: str, words: str
) -> None:
    address = client.post("/dogecoin", json={}).json()["address"]
    r = client.post(f"/dogecoin/{address}/sign-batch", json=body)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert set(answer) == {"success", "message", "code"} and answer["success"] is False
    assert answer["code"] == code and words in answer["message"], answer
    [event] = sign_events(client)  # nothing signed: the refusal, audited
    assert event["outcome"] == code and details(event)["kind"] == "sign-batch"


def test_not_json_an_unknown_account_and_the_body_cap(client: httpx.Client) -> None:
    address = client.post("/dogecoin", json={}).json()["address"]
    path = f"/dogecoin/{address}/sign-batch"
    r = client.post(path, content=b"{items", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_json"
    r = client.post(
        "/dogecoin/DJRU7MLhcPwCTNRZ4e8gJzDebtG1H5M7pc/sign-batch",
        json={"items": [{"kind": "sign-message", "message": "m"}]},
    )
    assert r.status_code == 404 and r.json()["code"] == "account_not_found"
    # its own cap, 1 MiB: a hundred of the longest messages (far over the server's 16 KiB)
    longest = {"kind": "sign-message", "message": "é" * MAX_MESSAGE_CHARS}
    wire = json.dumps({"items": [longest] * 100}).encode()
    assert CAP < len(wire) <= 1 << 20
    r = client.post(path, content=wire, headers={"content-type": "application/json"})
    assert (
        r.status_code == 200
        and r.json()["message"] == "100 signed, 0 waiting for approval, 0 refused"
    )
    over = json.dumps({"items": [longest] * 1000}).encode()
    assert len(over) > 1 << 20
    r = client.post(path, content=over, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["code"] == "payload_too_large"
    assert "1048576" in r.json()["message"]
    outcomes = [(e["outcome"], details(e)["kind"]) for e in sign_events(client)]
    assert outcomes == [
        ("invalid_json", "sign-batch"),
        ("account_not_found", "sign-batch"),
        *[("ok", "sign-message")] * 100,
        ("payload_too_large", "sign-batch"),
    ]


def test_the_document_states_the_batch_and_its_cap(server: Server) -> None:
    spec = httpx.get(f"{server.base_url}/openapi.json").json()
    op = spec["paths"]["/dogecoin/{accountName}/sign-batch"]["post"]
    assert op["requestBody"]["x-max-body-bytes"] == 1 << 20
    assert "1,048,576 bytes" in op["requestBody"]["description"]
    assert "`sign` scope" in op["description"]
    batch_body = spec["components"]["schemas"]["DogecoinSignBatch"]["properties"]["items"]
    assert (batch_body["minItems"], batch_body["maxItems"]) == (1, 1000)
    kinds = batch_body["items"]["discriminator"]["mapping"]
    assert sorted(kinds) == ["sign-message", "sign-psbt", "sign-raw-transaction"]
