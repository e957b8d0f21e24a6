"""The policy bypasses of issue 22, replayed through real HTTP on both backends.

Each attack that once got a signature the policy refuses is refused now, and
audited; where a signature is still produced (the honest variant), cosmjs,
bitcoinjs or wharfkit checks it. The classes behind them are tested with
variants the original attack did not use: unknown protobuf fields at every
depth, message data shaped as any Antelope chain's transaction, claimed
segwit amounts, unknown fees, forwarding memos, amounts past 64 bits.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from tests.api.tenants import Tenant
from tests.api.test_policies import OSMO
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, PUBKEY, TRANSFER, direct_doc
from tests.api.test_sign_eos import CHAIN, NAME, build, transfer
from tests.api.test_sign_utxo import KEY, RECIPIENT, VECTORS
from tests.conftest import Server
from tests.node import require_node, run_node

pytestmark = pytest.mark.long(55)  # seconds (busy run): scheduled first

STRANGER_LTC = VECTORS["keys"][2]["litecoin"]["mainnet"]["p2wpkh"]
LTC = 100_000_000


def proto_field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2), as any newer schema would add one."""
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sign_events(t: Tenant) -> list[dict[str, Any]]:
    """The tenant's sign events, oldest first."""
    return t.sign_events()


def refused(t: Tenant, path: str, body: Any, code: str, *words: str) -> str:
    """A 400 naming `code`, nothing signed, and an audit row saying so."""
    before = len(sign_events(t))
    r = t.client.post(path, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == code, r.text
    message: str = r.json()["message"]
    for word in words:
        assert word in message, message
    events = sign_events(t)
    assert len(events) == before + 1 and events[-1]["outcome"] == code
    return message


# ---- 1. EOS sign-message is never a transaction signer ------------------------------


def test_eos_message_data_shaped_as_a_transaction_is_refused(tenant: Tenant) -> None:
    require_node()
    assert (
        tenant.client.post("/eos", json={"private_key": PRIVATE, "name": NAME}).status_code == 200
    )
    tenant.policy({"family": "eos", "recipients": ["exchange1234"], "raw_messages": True})
    theft = transfer(quantity="1000000.0000 EOS")
    theft["data"] = {**theft["data"], "to": "attacker1234"}
    tx = build(theft)["serializedTransaction"]
    tenant.denied(
        f"/eos/{NAME}/sign-transaction",
        {"chainId": CHAIN, "serializedTransaction": tx},
        "attacker1234",
    )
    path = f"/eos/{NAME}/sign-message"
    cfd_hash = hashlib.sha256(b"context free data").hexdigest()
    for data in (
        CHAIN + tx + "00" * 32,  # the attack: a known chain id, the tx, no context-free data
        CHAIN + tx + cfd_hash,  # with a context-free data hash
        CHAIN + tx,  # a prefix: its signature is no transaction's, still refused
        "ab" * 32 + tx + "00" * 32,  # any other chain id: the transaction's shape
        "11" * 32,  # a digest's shape: sha256 of it is a Bitcoin-family sighash
    ):
        refused(tenant, path, {"data": data}, "message_is_transaction")
    cosmos_doc = direct_doc()
    sign_doc = _sign_doc_bytes(cosmos_doc)
    refused(tenant, path, {"data": sign_doc.hex()}, "message_is_transaction", "Cosmos")
    amino = json.dumps({"chain_id": "cosmoshub-4", "msgs": [], "fee": {}}).encode()
    refused(tenant, path, {"data": amino.hex()}, "message_is_transaction", "Cosmos")
    # What a login page signs still signs, and wharfkit and eosjs-ecc verify it.
    public = tenant.client.get(f"/eos/{NAME}").json()["data"]["public_key"]
    for body in ({"message": "login nonce 8c1f"}, {"data": "00ff10" * 20}):
        sig = tenant.allowed(path, body)["signature"]
        check = run_node(
            "eos.mjs", {"action": "verify_message", **body, "signature": sig, "publicKey": public}
        )
        assert check == {"valid": True, "canonical": True, "ecc": True}


def _sign_doc_bytes(doc: dict[str, Any]) -> bytes:
    from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2

    return bytes(
        tx_pb2.SignDoc(
            body_bytes=base64.b64decode(doc["bodyBytes"]),
            auth_info_bytes=base64.b64decode(doc["authInfoBytes"]),
            chain_id=doc["chainId"],
            account_number=int(doc["accountNumber"]),
        ).SerializeToString()
    )


def test_every_registry_chain_id_is_refused_as_message_data() -> None:
    from chainkeys.chains.eos import NETWORKS
    from chainkeys.chains.tx.eos import KNOWN_CHAIN_IDS

    assert {bytes.fromhex(n.chain_id or "") for n in NETWORKS.values()} <= KNOWN_CHAIN_IDS


# ---- 2. Negative spends and claimed segwit amounts never switch a cap off -----------


def _ltc(tenant: Tenant) -> tuple[str, str]:
    made = tenant.client.post("/litecoin", json={"private_key": KEY["private_key_hex"]})
    assert made.status_code == 200, made.text
    return made.json()["address"], made.json()["data"]["public_key"]


def _ltc_psbt(pubkey: str, real: int, claimed: int, outputs: list[dict[str, Any]]) -> str:
    built = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": "litecoin/mainnet",
            "kind": "p2wpkh",
            "pubkey": pubkey,
            "amountIn": real,
            "witness": True,
            "nonWitness": False,
            "witnessValue": claimed,
            "outputs": outputs,
        },
    )
    psbt: str = built["psbt"]
    return psbt


def test_negative_fees_and_out_of_range_amounts_are_refused(tenant: Tenant) -> None:
    require_node()
    address, pubkey = _ltc(tenant)
    tenant.policy({"family": "litecoin", "max_per_day": {"LTC": str(2 * LTC + 5000)}})
    path = f"/litecoin/{address}/sign-psbt"
    # the attack: an input claimed at 1 litoshi, 10^18 paid back to the account itself
    psbt = _ltc_psbt(pubkey, 3 * LTC, 1, [{"address": address, "value": 10**18}])
    refused(tenant, path, {"psbt": psbt}, "invalid_amount", "out of range")
    psbt = _ltc_psbt(pubkey, 3 * LTC, 1, [{"address": address, "value": LTC}])
    refused(tenant, path, {"psbt": psbt}, "invalid_amount", "negative fee")
    # the window is untouched: two payouts of 1 LTC fit the 2 LTC cap with their fees, a
    # third does not (each spends a new funding output: the digests differ)
    for n, outcome in ((1, 200), (2, 200), (3, 403)):
        real = LTC + 1000 * n
        psbt = _ltc_psbt(pubkey, real, real, [{"address": RECIPIENT["litecoin"], "value": LTC - n}])
        r = tenant.sign(path, {"psbt": psbt})
        assert r.status_code == outcome, r.text


def test_a_claimed_segwit_amount_is_another_digest(tenant: Tenant) -> None:
    """The sighash commits to the input's amount: the same unsigned transaction with
    another claimed amount is another signature, counted again, never 'already seen'."""
    require_node()
    address, pubkey = _ltc(tenant)
    tenant.policy({"family": "litecoin", "max_per_day": {"LTC": str(2 * LTC)}})
    path = f"/litecoin/{address}/sign-psbt"
    real = int(1.5 * LTC) + 1000
    outputs = [
        {"address": RECIPIENT["litecoin"], "value": LTC},
        {"address": address, "value": LTC // 2},
    ]
    over = _ltc_psbt(pubkey, real, real + 1000, outputs)  # overclaimed: 1 LTC + 2,000 counted
    signed = tenant.allowed(path, {"psbt": over, "finalize": False})
    check = run_node(
        "utxo.mjs", {"action": "check_psbt", "network": "litecoin/mainnet", "psbt": signed["psbt"]}
    )
    assert check["valid"] is True  # valid for the amount it claims (and only for that one)
    honest = _ltc_psbt(pubkey, real, real, outputs)  # the same tx, the real amount
    tenant.denied(path, {"psbt": honest}, "over the cap")  # 2 LTC + 3,000 > 2 LTC
    tenant.allowed(path, {"psbt": over, "finalize": False})  # the same digest: free
    digests = [e["details"]["digest"] for e in sign_events(tenant)]
    assert len(set(digests)) == 2 and digests[0] == digests[2]


# ---- 3. An unknown fee is never spent under a cap -----------------------------------


def test_an_unknown_fee_is_refused_under_a_cap(tenant: Tenant) -> None:
    require_node()
    made = tenant.client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]})
    address, pubkey = made.json()["address"], made.json()["data"]["public_key"]
    doge = 100_000_000
    tenant.policy({"family": "dogecoin", "max_per_tx": {"DOGE": str(1000 * doge)}})
    spec = {
        "network": "dogecoin/mainnet",
        "kind": "p2pkh",
        "pubkey": pubkey,
        "amountIn": 10_000 * doge,
        "foreign": 1,
        "outputs": [{"address": RECIPIENT["dogecoin"], "value": doge}],
    }
    built = run_node("utxo.mjs", {"action": "build_rawtx", **spec})
    prev = {
        "txid": built["fundTxid"],
        "vout": 0,
        "scriptPubKey": built["scriptPubKey"],
        "amount": "10000",
        "hex": built["fundHex"],
    }
    raw = {"hex": built["hex"], "prevtxs": [prev]}
    tenant.denied(f"/dogecoin/{address}/sign-raw-transaction", raw, "fee is unknown")
    psbt = run_node("utxo.mjs", {"action": "build_psbt", **spec})["psbt"]
    tenant.denied(f"/dogecoin/{address}/sign-psbt", {"psbt": psbt}, "fee is unknown")
    # the foreign input priced: 9,999 DOGE of fee is over the 1,000 DOGE cap
    foreign = {
        "txid": "42" * 32,
        "vout": 0,
        "scriptPubKey": "76a914" + "00" * 20 + "88ac",
        "amount": "0.5",
    }
    tenant.denied(
        f"/dogecoin/{address}/sign-raw-transaction",
        {**raw, "prevtxs": [prev, foreign]},
        "per-transaction cap",
    )
    # without a cap an unknown fee may be signed (a coinjoin); the audit says it is unknown
    tenant.clear()
    data = tenant.allowed(f"/dogecoin/{address}/sign-raw-transaction", raw)
    assert data["complete"] is False  # the foreign input is someone else's to sign
    check = run_node(
        "utxo.mjs",
        {
            "action": "check_rawtx",
            "network": "dogecoin/mainnet",
            "hex": data["hex"],
            "kind": "p2pkh",
            "pubkey": pubkey,
            "scriptPubKey": built["scriptPubKey"],
            "value": 0,
        },
    )
    assert check["valid"] is True and check["lowS"] is True
    assert sign_events(tenant)[-1]["details"]["summary"]["fee"] is None
    # under an approval threshold an unknown total is never "below" it: people look
    tenant.policy(
        {
            "family": "dogecoin",
            "approval": {"quorum": 1, "group": "ops"},
            "above": {"DOGE": str(1000 * doge)},
        }
    )
    held = tenant.sign(f"/dogecoin/{address}/sign-raw-transaction", raw)
    assert held.status_code == 202 and held.json()["data"]["summary"]["fee"] is None


# ---- 4. Cosmos bytes the decoder does not read are refused -------------------------


IBC_MSG = "/ibc.applications.transfer.v1.MsgTransfer"


def _transfer_doc(memo: str = "", receiver: str = OSMO, extra: bytes = b"") -> dict[str, Any]:
    built = run_node(
        "cosmos.mjs",
        {
            "action": "build_direct",
            "pubkey": PUBKEY,
            "sequence": 7,
            "gas": "200000",
            "fee": [{"denom": "uatom", "amount": "500"}],
            "memo": "",
            "msgs": [
                {
                    "typeUrl": IBC_MSG,
                    "value": {
                        "sourcePort": "transfer",
                        "sourceChannel": "channel-141",
                        "token": {"denom": "uatom", "amount": "1"},
                        "sender": ADDRESS,
                        "receiver": receiver,
                        "timeoutHeight": {"revisionNumber": "0", "revisionHeight": "0"},
                        "timeoutTimestamp": "1800000000000000000",
                        "memo": memo,
                    },
                }
            ],
        },
    )
    doc = {**built, "chainId": "cosmoshub-4", "accountNumber": "99"}
    if extra:
        doc["bodyBytes"] = _with_message_extra(doc["bodyBytes"], extra)
    return doc


def _with_message_extra(body_b64: str, extra: bytes) -> str:
    """The TxBody with `extra` appended to its first message's bytes (inside the Any)."""
    from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2

    body = tx_pb2.TxBody.FromString(base64.b64decode(body_b64))
    body.messages[0].value = body.messages[0].value + extra
    return base64.b64encode(body.SerializeToString(deterministic=True)).decode()


@pytest.fixture
def cosmos_tenant(tenant: Tenant) -> Tenant:
    require_node()
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    return tenant


def test_unknown_protobuf_fields_at_any_depth_are_refused(cosmos_tenant: Tenant) -> None:
    t = cosmos_tenant
    path = f"/cosmos/{ADDRESS}/sign-direct"
    # (a) ibc-go v9 `tokens` (field 9) carrying 10^12 uatom beside a 1 uatom `token`
    coin = proto_field(1, b"uatom") + proto_field(2, b"1000000000000")
    doc = _transfer_doc(extra=proto_field(9, coin))
    refused(t, path, {"signDoc": doc}, "invalid_sign_request", "does not read")
    # (b) the SDK 0.46 `tip` (AuthInfo field 3)
    doc = _transfer_doc()
    tip = proto_field(1, coin) + proto_field(2, ADDRESS.encode())
    auth = base64.b64decode(doc["authInfoBytes"]) + proto_field(3, tip)
    refused(
        t,
        path,
        {"signDoc": {**doc, "authInfoBytes": base64.b64encode(auth).decode()}},
        "invalid_sign_request",
        "does not read",
    )
    # deeper: an unknown field inside the token's Coin, inside the message, inside the Any
    from cosmospy_protobuf.ibc.applications.transfer.v1 import (
        tx_pb2 as ibc,  # type: ignore[import-untyped]
    )

    msg = ibc.MsgTransfer(
        source_port="transfer",
        source_channel="channel-141",
        sender=ADDRESS,
        receiver=OSMO,
        timeout_timestamp=1800000000000000000,
    )
    deep = msg.SerializeToString(deterministic=True) + proto_field(3, coin + proto_field(7, b"x"))
    doc = _transfer_doc()
    body = _replace_message(doc["bodyBytes"], deep)
    refused(t, path, {"signDoc": {**doc, "bodyBytes": body}}, "invalid_sign_request")
    # extension options, critical or not
    for field in (1023, 2047):
        anything = proto_field(1, b"/cosmos.anything") + proto_field(2, b"\x08\x01")
        extended = base64.b64decode(doc["bodyBytes"]) + proto_field(field, anything)
        body = base64.b64encode(extended).decode()
        refused(
            t,
            path,
            {"signDoc": {**doc, "bodyBytes": body}},
            "invalid_sign_request",
            "extension options",
        )
    # the same document without the extra bytes signs, and cosmjs verifies it
    sig = t.allowed(path, {"signDoc": doc})["signature"]["signature"]
    verdict = run_node(
        "cosmos.mjs",
        {"action": "verify_direct", "signDoc": doc, "signature": sig, "pubkey": PUBKEY},
    )
    assert verdict["valid"] is True


def _replace_message(body_b64: str, value: bytes) -> str:
    from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2

    body = tx_pb2.TxBody.FromString(base64.b64decode(body_b64))
    body.messages[0].value = value
    return base64.b64encode(body.SerializeToString(deterministic=True)).decode()


FORWARD = json.dumps(
    {"forward": {"receiver": "osmo1attacker", "port": "transfer", "channel": "channel-0"}}
)


def _amino_transfer(memo: str | None, **extra: Any) -> dict[str, Any]:
    value = {
        "source_port": "transfer",
        "source_channel": "channel-141",
        "token": {"denom": "uatom", "amount": "1"},
        "sender": ADDRESS,
        "receiver": OSMO,
        "timeout_height": {},
        "timeout_timestamp": "1800000000000000000",
        **extra,
    }
    if memo is not None:
        value["memo"] = memo
    return {
        "signDoc": {
            "chain_id": "cosmoshub-4",
            "account_number": "99",
            "sequence": "7",
            "memo": "",
            "fee": {"amount": [{"denom": "uatom", "amount": "500"}], "gas": "200000"},
            "msgs": [{"type": "cosmos-sdk/MsgTransfer", "value": value}],
        }
    }


def test_ibc_memos_that_forward_are_refused_under_an_allow_list(cosmos_tenant: Tenant) -> None:
    t = cosmos_tenant
    direct, amino = f"/cosmos/{ADDRESS}/sign-direct", f"/cosmos/{ADDRESS}/sign-amino"
    t.policy({"family": "cosmos", "recipients": [OSMO]})
    for memo in (
        FORWARD,
        '{"wasm": {"contract": "osmo1x", "msg": {}}}',
        '{"src_callback": {"address": "osmo1x"}}',
        "[1]",
        ' {"forward": 1}',
    ):
        t.denied(direct, {"signDoc": _transfer_doc(memo=memo)}, "memo")
        t.denied(amino, _amino_transfer(memo), "memo")
    # (d) amino fields the decoder does not read
    tokens = [{"denom": "uatom", "amount": "1000000000000"}]
    refused(t, amino, _amino_transfer(None, tokens=tokens), "invalid_sign_request", "tokens")
    # a plain-text memo is no instruction: signed, and cosmjs verifies both
    doc = _transfer_doc(memo="invoice 42")
    sig = t.allowed(direct, {"signDoc": doc})["signature"]["signature"]
    assert (
        run_node(
            "cosmos.mjs",
            {"action": "verify_direct", "signDoc": doc, "signature": sig, "pubkey": PUBKEY},
        )["valid"]
        is True
    )
    body = _amino_transfer("invoice 42")
    sig = t.allowed(amino, body)["signature"]["signature"]
    assert (
        run_node(
            "cosmos.mjs",
            {
                "action": "verify_amino",
                "signDoc": body["signDoc"],
                "signature": sig,
                "pubkey": PUBKEY,
            },
        )["valid"]
        is True
    )
    # the operator may allow memos explicitly
    t.policy({"family": "cosmos", "recipients": [OSMO], "ibc_memo": True})
    doc = _transfer_doc(memo=FORWARD)
    sig = t.allowed(direct, {"signDoc": doc})["signature"]["signature"]
    assert (
        run_node(
            "cosmos.mjs",
            {"action": "verify_direct", "signDoc": doc, "signature": sig, "pubkey": PUBKEY},
        )["valid"]
        is True
    )


def test_undecoded_messages_are_refused_under_caps_or_recipients(cosmos_tenant: Tenant) -> None:
    t = cosmos_tenant
    exec_msg = {"type": "cosmos-sdk/MsgExec", "value": {"grantee": ADDRESS, "msgs": []}}
    doc = _amino_transfer("")["signDoc"]
    doc["msgs"] = [exec_msg]
    t.policy({"family": "cosmos", "raw_messages": True, "max_per_day": {"uatom": "10"}})
    t.denied(f"/cosmos/{ADDRESS}/sign-amino", {"signDoc": doc}, "cannot be decoded")
    t.policy({"family": "cosmos", "raw_messages": True})
    t.allowed(f"/cosmos/{ADDRESS}/sign-amino", {"signDoc": doc})


# ---- 5 and 6. Malformed requests and huge amounts: 400s, always audited ------------


def test_malformed_sign_bodies_are_400_and_audited(cosmos_tenant: Tenant) -> None:
    t = cosmos_tenant
    made = t.client.post("/litecoin", json={"private_key": KEY["private_key_hex"]})
    ltc = made.json()["address"]
    amino = _amino_transfer("")["signDoc"]
    send: dict[str, Any] = {
        "type": "cosmos-sdk/MsgSend",
        "value": {
            "from_address": ADDRESS,
            "to_address": OTHER,
            "amount": [{"denom": "uatom", "amount": "1"}],
        },
    }
    deep = Raw(b"[" * 900 + b'"x"' + b"]" * 900)  # a memo nested 900 deep
    prev = {"txid": "11" * 32, "vout": 0, "scriptPubKey": "0014" + "00" * 20}
    raw_tx = "02000000" + "01" + "11" * 32 + "00000000" + "00" + "ffffffff" + "00" + "00000000"
    cases: list[tuple[str, Any]] = [
        (
            "cosmos",
            {"signDoc": {**amino, "msgs": [{**send, "value": {**send["value"], "to_address": 5}}]}},
        ),
        (
            "cosmos",
            {
                "signDoc": {
                    **amino,
                    "msgs": [
                        {
                            **send,
                            "value": {
                                **send["value"],
                                "amount": [{"denom": ["uatom"], "amount": "1"}],
                            },
                        }
                    ],
                }
            },
        ),
        ("cosmos", {"signDoc": {**amino, "msgs": [{"type": {"a": 1}, "value": {}}]}}),
        ("cosmos", {"signDoc": {**amino, "msgs": [{"type": ["x"], "value": {}}]}}),
        ("cosmos", {"signDoc": {**amino, "memo": deep}}),
        ("cosmos", {"signDoc": {**direct_doc(), "accountNumber": str(2**64)}}),
        ("cosmos", {"signDoc": {**amino, "account_number": str(2**64)}}),
        ("litecoin", {"hex": raw_tx, "prevtxs": [{**prev, "hex": "00", "amount": "1"}]}),
        ("litecoin", {"hex": raw_tx, "prevtxs": [{**prev, "amount": "1e999999"}]}),
        ("litecoin", {"hex": raw_tx, "prevtxs": [{**prev, "amount": "1e20"}]}),
        ("litecoin", {"hex": raw_tx, "prevtxs": [{**prev, "amount": "-1"}]}),
        ("litecoin", {"hex": raw_tx, "prevtxs": "nope"}),
        ("cosmos", "not an object"),
        ("cosmos", {"signDoc": {**amino, "surprise": "field"}}),
    ]
    paths = {
        "cosmos": f"/cosmos/{ADDRESS}/sign-amino",
        "litecoin": f"/litecoin/{ltc}/sign-raw-transaction",
    }
    before = len(sign_events(t))
    for family, body in cases:
        path = paths[family]
        if (
            family == "cosmos"
            and isinstance(body, dict)
            and "accountNumber" in body.get("signDoc", {})
        ):
            path = f"/cosmos/{ADDRESS}/sign-direct"
        content = _dumps(body)
        r = t.client.post(path, content=content, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        assert len(r.text) < 2000 and "Traceback" not in r.text
    oversized = t.client.post(
        paths["cosmos"], content=b" " * 20_000, headers={"content-type": "application/json"}
    )
    assert oversized.status_code == 413
    events = sign_events(t)
    assert len(events) == before + len(cases) + 1
    assert all(e["outcome"] != "ok" for e in events[before:])
    assert events[-1]["outcome"] == "payload_too_large"


class Raw(bytes):
    """JSON text sent as it is (a nesting too deep for json.dumps to write)."""


def _dumps(value: Any) -> bytes:
    if isinstance(value, Raw):
        return bytes(value)
    if isinstance(value, list):
        return b"[" + b",".join(_dumps(v) for v in value) + b"]"
    if isinstance(value, dict):
        return (
            b"{"
            + b",".join(json.dumps(k).encode() + b":" + _dumps(v) for k, v in value.items())
            + b"}"
        )
    return json.dumps(value).encode()


def test_amounts_beyond_64_bits_sign_and_their_refusals_are_audited(
    cosmos_tenant: Tenant,
) -> None:
    t = cosmos_tenant
    path = f"/cosmos/{ADDRESS}/sign-transfer"
    big = str(20 * 10**18)  # 20 INJ in its 18-decimal unit: past 2^64
    body = {**TRANSFER, "amount": big, "denom": "inj"}
    data = t.allowed(path, body)
    check = run_node(
        "cosmos.mjs",
        {
            "action": "verify_tx",
            "signedTx": data["signedTx"],
            "chainId": "cosmoshub-4",
            "accountNumber": "12345",
            "pubkey": PUBKEY,
        },
    )
    assert check["verdict"]["valid"] is True
    t.policy({"family": "cosmos", "max_per_tx": {"uatom": "10000", "inj": "1"}})
    t.denied(path, body, f"{big} inj is over the per-transaction cap")
    denied = sign_events(t)[-1]
    assert denied["outcome"] == "policy_denied"
    assert denied["details"]["summary"]["items"][0]["amounts"] == [
        {"denom": "inj", "amount": big, "base_unit": "inj"}
    ]
    refused(t, path, {**body, "amount": str(2**256)}, "invalid_amount")
    refused(t, path, {**body, "amount": "-5"}, "invalid_amount")


# ---- 7. Native segwit recipients are the addresses wallets show ---------------------


def test_litecoin_native_segwit_recipients_match_their_addresses(tenant: Tenant) -> None:
    require_node()
    address, pubkey = _ltc(tenant)
    allowed = VECTORS["keys"][1]["litecoin"]["mainnet"]["p2wpkh"]
    tenant.policy({"family": "litecoin", "recipients": [allowed]})
    path = f"/litecoin/{address}/sign-psbt"
    ok = _ltc_psbt(pubkey, LTC, LTC, [{"address": allowed, "value": LTC - 1000}])
    data = tenant.allowed(path, {"psbt": ok})
    assert (
        run_node(
            "utxo.mjs", {"action": "extract", "network": "litecoin/mainnet", "psbt": data["psbt"]}
        )["hex"]
        == data["hex"]
    )
    assert sign_events(tenant)[-1]["details"]["summary"]["items"][0]["recipient"] == allowed
    stranger = _ltc_psbt(pubkey, LTC, LTC, [{"address": STRANGER_LTC, "value": LTC - 1000}])
    tenant.denied(path, {"psbt": stranger}, STRANGER_LTC)
    # P2WSH and taproot outputs are named by their real addresses (bech32, bech32m)
    tenant.clear()
    scripts = {"0020" + "aa" * 32: "ltc1q", "5120" + "bb" * 32: "ltc1p"}
    outputs = [{"script": s, "value": 1000} for s in scripts]
    tenant.allowed(path, {"psbt": _ltc_psbt(pubkey, LTC, LTC, outputs)})
    named = [i["recipient"] for i in sign_events(tenant)[-1]["details"]["summary"]["items"]]
    assert [n[:5] for n in named] == list(scripts.values()) and len(named[0]) == 63


# ---- 8. A family-limited token reads only its families' audit events ---------------


def test_a_family_limited_token_reads_only_its_families(server: Server) -> None:
    assert server.services is not None
    name = "fam-audit-" + hashlib.sha256(str(id(server)).encode()).hexdigest()[:8]
    _, token = server.call(
        server.services.tokens.create(
            name, "doge only", frozenset({"read"}), None, frozenset({"dogecoin"})
        )
    )
    with server.client(server.new_token(name)) as full, server.client(token) as limited:
        assert full.post("/cosmos", json={}).status_code == 200
        assert full.post("/dogecoin", json={}).status_code == 200
        events = limited.get("/audit").json()["data"]["events"]
        assert events and {e.get("family") for e in events} == {"dogecoin"}
        everything = full.get("/audit").json()["data"]["events"]
        assert {e.get("family") for e in everything} >= {"cosmos", "dogecoin", None}


# ---- A message signature is never a transaction signature (per family) ------------


def test_a_cosmos_message_signature_signs_the_adr036_wrapper_only(client: Any) -> None:
    """Keplr's ADR-036 wraps the data in a document no chain takes as a transaction (an
    empty chain id, a sign/MsgSignData message): a transaction's own sign bytes sent as
    the data give a signature cosmjs accepts for the wrapper and not for the transaction."""
    require_node()
    assert client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    doc = direct_doc()
    data = base64.b64encode(_sign_doc_bytes(doc)).decode()
    sig = client.post(f"/cosmos/{ADDRESS}/sign-message", json={"data": data}).json()["data"]
    wrapper = run_node(
        "cosmos.mjs",
        {
            "action": "adr036_doc",
            "signer": ADDRESS,
            "data": data,
            "signature": sig["signedMessage"],
            "pubkey": PUBKEY,
        },
    )
    assert wrapper["verdict"]["valid"] is True and wrapper["doc"]["chain_id"] == ""
    as_tx = run_node(
        "cosmos.mjs",
        {
            "action": "verify_direct",
            "signDoc": doc,
            "signature": sig["signedMessage"],
            "pubkey": PUBKEY,
        },
    )
    assert as_tx["ok"] is False


def test_a_utxo_message_signature_is_no_input_signature(client: Any) -> None:
    """Core's message magic is hashed in front of the message, so no message hashes to a
    sighash (that would need the magic to be a transaction's start). The transaction
    itself sent as the message is signed, bitcoinjs-message accepts it as a message
    signature, and bitcoinjs finds it invalid for the transaction's input."""
    require_node()
    made = client.post("/litecoin", json={"private_key": KEY["private_key_hex"]})
    address, pubkey = made.json()["address"], made.json()["data"]["public_key"]
    psbt = _ltc_psbt(pubkey, LTC, LTC, [{"address": RECIPIENT["litecoin"], "value": LTC - 1000}])
    message = base64.b64decode(psbt).hex()  # the whole unsigned transaction, as text
    sig = client.post(f"/litecoin/{address}/sign-message", json={"message": message})
    signature = sig.json()["data"]["signature"]
    verdict = run_node(
        "utxo.mjs",
        {
            "action": "verify_message",
            "network": "litecoin/mainnet",
            "message": message,
            "address": address,
            "signature": signature,
        },
    )
    assert verdict["matches"] is True
    as_input = run_node(
        "utxo.mjs",
        {
            "action": "verify_message_as_input",
            "network": "litecoin/mainnet",
            "psbt": psbt,
            "pubkey": pubkey,
            "value": LTC,
            "signature": signature,
        },
    )
    assert as_input == {"valid": False}
