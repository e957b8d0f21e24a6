"""Every sign answer is checked: through a real HTTP proxy in front of the real server,
the honest answer passes, and each altered one (another key's signature, a swapped
pub_key, a flipped byte, another document or transaction) raises AnswerMismatch.
Cosmos and Dogecoin/Litecoin here; EOS, async and approvals in
test_answer_checks_more.py."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ckc_helpers import (
    amino_bytes,
    dsha256,
    legacy_tx,
    message_digest,
    p2pkh_script,
    proto_varint,
    sign_doc_bytes,
    txid,
)
from ckc_proxy import TamperProxy
from ckc_tamper import (
    mismatch,
    ACCOUNT,
    OTHER,
    OTHER_PUB,
    b64,
    compact,
    extracted,
    flip,
    flip_b64,
    flip_final_signature,
    in_data,
    other_key_partial_sig,
    psbt_b64,
    psbt_of,
    recoverable,
    replaced_by,
    with_output_value,
)
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import Client, Conflict, PrevTx

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
UTXO = json.loads((SIGNING_VECTORS / "utxo_signing.json").read_text())
ONE_HEX = "00" * 31 + "01"
ADDRESS: str = COSMOS["address"]
PUBKEY_TYPE = "tendermint/PubKeySecp256k1"


@pytest.fixture
def cosmos(server: Server, proxy: TamperProxy) -> Iterator[tuple[Client, Client, TamperProxy]]:
    token = server.token("check-cosmos")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        try:
            direct.accounts.create("cosmos", private_key=ONE_HEX)
        except Conflict:
            pass
        yield via, direct, proxy


# ---- Cosmos: direct, amino, ADR-036 ---------------------------------------------------------

DIRECT = COSMOS["sign-direct"]["request"]["signDoc"]
AMINO = COSMOS["sign-amino"]["request"]["signDoc"]
MESSAGE = COSMOS["sign-message"]["request"]["message"]
SIGNED = {  # the exact bytes each kind signs
    "direct": sign_doc_bytes(base64.b64decode(DIRECT["bodyBytes"]),
                             base64.b64decode(DIRECT["authInfoBytes"]), DIRECT["chainId"],
                             int(DIRECT["accountNumber"])),
    "amino": amino_bytes(AMINO),
    "message": amino_bytes(COSMOS["sign-message"]["signed"]),
}  # fmt: skip
CALLS: dict[str, Callable[[Client], Any]] = {
    "direct": lambda ck: ck.signing.sign_direct(ADDRESS, DIRECT),
    "amino": lambda ck: ck.signing.sign_amino(ADDRESS, AMINO),
    "message": lambda ck: ck.signing.sign_message("cosmos", ADDRESS, MESSAGE),
}


def other_key(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Another key's valid signature of the same bytes, with that key as pub_key."""

    def rewrite(data: dict[str, Any]) -> dict[str, Any]:
        sig = b64(compact(OTHER, hashlib.sha256(SIGNED[kind]).digest()))
        data["signature"] = {"pub_key": {"type": PUBKEY_TYPE, "value": b64(OTHER_PUB)},
                             "signature": sig}  # fmt: skip
        if kind == "message":
            data["signedMessage"] = sig
        return data

    return rewrite


def swapped_pub_key(data: dict[str, Any]) -> dict[str, Any]:
    data["signature"]["pub_key"]["value"] = b64(OTHER_PUB)
    return data


def flipped(data: dict[str, Any]) -> dict[str, Any]:
    data["signature"]["signature"] = flip_b64(data["signature"]["signature"], 5)
    return data


def another_document(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The `signed` document changed, and signed by the account's own key."""

    def rewrite(data: dict[str, Any]) -> dict[str, Any]:
        if kind == "direct":
            data["signed"]["accountNumber"] = "100"
            doc = dict(DIRECT, accountNumber="100")
            signed = sign_doc_bytes(base64.b64decode(doc["bodyBytes"]),
                                    base64.b64decode(doc["authInfoBytes"]), doc["chainId"], 100)  # fmt: skip
        else:
            data["signed"]["memo"] = "pay someone else"
            signed = amino_bytes(data["signed"])
        sig = b64(compact(ACCOUNT, hashlib.sha256(signed).digest()))
        data["signature"]["signature"] = sig
        if kind == "message":
            data["signedMessage"] = sig
        return data

    return rewrite


@pytest.mark.parametrize("kind", ["direct", "amino", "message"])
def test_cosmos_std_signatures(kind: str, cosmos: tuple[Client, Client, TamperProxy]) -> None:
    via, _, proxy = cosmos
    honest = CALLS[kind](via)  # through the proxy, unaltered: passes
    assert honest.signature.pub_key.value == COSMOS["pubkey"]
    cases: list[tuple[Any, tuple[str, ...]]] = [
        (other_key(kind), ("not the key of", ADDRESS)),
        (swapped_pub_key, ("not the key of",)),
        (flipped, ("does not verify",)),
        (another_document(kind), ("not the one",)),
    ]
    for rewrite, fragments in cases:
        with proxy.rewriting(in_data(rewrite)) as changed:
            mismatch(lambda: CALLS[kind](via), *fragments)
        assert changed, "the proxy altered the answer"
    if kind == "message":  # the two copies of the signature disagree
        with proxy.rewriting(
            in_data(lambda d: {**d, "signedMessage": flip_b64(d["signedMessage"], 3)})
        ):
            mismatch(lambda: CALLS[kind](via), "signedMessage")


def test_cosmos_sign_bytes_are_cosmjs(cosmos: tuple[Client, Client, TamperProxy]) -> None:
    """amino bytes with &, <, > (escaped as cosmjs does) and snake_case direct docs check."""
    via, _, _ = cosmos
    doc = {**AMINO, "memo": "a <b> & c"}
    assert via.signing.sign_amino(ADDRESS, doc).signed == doc
    snake = {"body_bytes": DIRECT["bodyBytes"], "auth_info_bytes": DIRECT["authInfoBytes"],
             "chain_id": DIRECT["chainId"], "account_number": DIRECT["accountNumber"]}  # fmt: skip
    assert (
        via.signing.sign_direct(ADDRESS, snake).signature.signature
        == COSMOS["sign-direct"]["signature"]
    )
    assert via.signing.sign_message("cosmos", ADDRESS, data=b"\x00\xff").signed["msgs"]


# ---- Cosmos: transfers (a TxRaw) -------------------------------------------------------------

TRANSFER: dict[str, Any] = COSMOS["sign-transfer"]["request"]
IBC: dict[str, Any] = COSMOS["sign-ibc-transfer"]["request"]


def tx_raw(body: bytes, auth: bytes, signature: bytes) -> str:
    def field(tag: int, value: bytes) -> bytes:
        return bytes((tag,)) + proto_varint(len(value)) + value

    return b64(field(0x0A, body) + field(0x12, auth) + field(0x1A, signature))


def parts(signed_tx: str) -> tuple[bytes, bytes, bytes]:
    """(body, auth info, signature) of a TxRaw whose fields are each < 16 KiB."""
    raw, out, pos = base64.b64decode(signed_tx), [], 0
    while pos < len(raw):
        pos += 1
        size, n = raw[pos], 1
        if size & 0x80:
            size, n = (size & 0x7F) | raw[pos + 1] << 7, 2
        out.append(raw[pos + n : pos + n + size])
        pos += n + size
    return out[0], out[1], out[2]


def resigned(body: bytes, auth: bytes, request: dict[str, Any]) -> dict[str, str]:
    """A TxRaw the account's key validly signs: only the client's reading can refuse it."""
    doc = sign_doc_bytes(body, auth, request["chainId"], request["accountNumber"])
    signed = tx_raw(body, auth, compact(ACCOUNT, hashlib.sha256(doc).digest()))
    return {"signedTx": signed,
            "txHash": hashlib.sha256(base64.b64decode(signed)).hexdigest().upper()}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "fragment"),
    [({"toAddress": ADDRESS}, "recipient"), ({"amount": "1500001"}, "amount or denom"),
     ({"denom": "uother"}, "amount or denom"), ({"feeAmount": "50000"}, "fee"),
     ({"gasLimit": 400000}, "gas limit"), ({"sequence": 4}, "sequence"),
     ({"memo": "other"}, "memo"), ({"accountNumber": 12346}, "does not verify")],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else v,
)  # fmt: skip
def test_cosmos_transfer_is_the_one_asked(
    change: dict[str, Any], fragment: str, cosmos: tuple[Client, Client, TamperProxy]
) -> None:
    via, direct, proxy = cosmos
    assert (
        via.signing.sign_transfer(ADDRESS, TRANSFER).signedTx == COSMOS["sign-transfer"]["signedTx"]
    )
    other = direct.signing.sign_transfer(ADDRESS, {**TRANSFER, **change})  # honestly signed
    with proxy.rewriting(replaced_by({"signedTx": other.signedTx, "txHash": other.txHash})):
        mismatch(lambda: via.signing.sign_transfer(ADDRESS, TRANSFER), fragment)


def test_cosmos_transfer_signature_and_reading(cosmos: tuple[Client, Client, TamperProxy]) -> None:
    via, _, proxy = cosmos
    body, auth, sig = parts(COSMOS["sign-transfer"]["signedTx"])
    flipped_tx = tx_raw(body, auth, flip(sig, 7))
    cases = [
        ({"signedTx": flipped_tx,
          "txHash": hashlib.sha256(base64.b64decode(flipped_tx)).hexdigest().upper()},
         "does not verify"),
        ({"signedTx": COSMOS["sign-transfer"]["signedTx"], "txHash": "AB" * 32}, "txHash"),
        # an extension option (field 1023) the account's key did sign: never passed unread
        (resigned(body + proto_varint(1023 << 3 | 2) + b"\x02\x0a\x00", auth, TRANSFER),
         "does not read"),
        # a second signer (another key) beside the account
        (resigned(body, auth + b"\x0a\x00", TRANSFER), "signers"),
        ({"signedTx": "not base64!", "txHash": ""}, "base64"),
    ]  # fmt: skip
    for answer, fragment in cases:
        with proxy.rewriting(replaced_by(answer)):
            mismatch(lambda: via.signing.sign_transfer(ADDRESS, TRANSFER), fragment)


def test_cosmos_ibc_transfer_is_the_one_asked(cosmos: tuple[Client, Client, TamperProxy]) -> None:
    via, direct, proxy = cosmos
    assert (
        via.signing.sign_ibc_transfer(ADDRESS, IBC).signedTx
        == COSMOS["sign-ibc-transfer"]["signedTx"]
    )
    for change, fragment in (({"sourceChannel": "channel-7"}, "source channel"),
                             ({"timeoutTimestamp": IBC["timeoutTimestamp"] + 1}, "timeout"),
                             ({"amount": "1"}, "amount or denom")):  # fmt: skip
        other = direct.signing.sign_ibc_transfer(ADDRESS, {**IBC, **change})
        with proxy.rewriting(replaced_by({"signedTx": other.signedTx, "txHash": other.txHash})):
            mismatch(lambda: via.signing.sign_ibc_transfer(ADDRESS, IBC), fragment)
    plain = direct.signing.sign_transfer(ADDRESS, TRANSFER)  # a MsgSend for a MsgTransfer
    with proxy.rewriting(replaced_by({"signedTx": plain.signedTx, "txHash": plain.txHash})):
        mismatch(lambda: via.signing.sign_ibc_transfer(ADDRESS, IBC), "message type")


# ---- Dogecoin and Litecoin -------------------------------------------------------------------


def utxo_account(direct: Client, family: str, create: dict[str, Any]) -> str:
    try:
        return direct.accounts.create(family, **create).address
    except Conflict:
        raise AssertionError("each UTXO test imports into its own tenant") from None


PSBTS = {f"{c['family']}-{c['kind']}": c for c in UTXO["sign-psbt"]}


@pytest.mark.parametrize("case", ["litecoin-p2wpkh", "litecoin-p2sh-p2wpkh", "dogecoin-p2pkh"])
def test_psbt_answers(case: str, server: Server, proxy: TamperProxy) -> None:
    c = PSBTS[case]
    token = server.token(f"check-psbt-{case}")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        address = utxo_account(direct, c["family"], c["create"])
        psbt = c["request"]["psbt"]

        def sign(finalize: bool = True) -> Any:
            return via.signing.sign_psbt(c["family"], address, psbt, finalize=finalize)

        assert (sign().hex, sign().txid) == (c["hex"], c["txid"])  # honest: passes
        assert sign(finalize=False).complete is False

        def another_tx(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            p.outputs[0].value -= 1000
            return {**data, "psbt": psbt_b64(p)}

        def flipped_final(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            flip_final_signature(p, 0)
            hex_, tx_id = extracted(p)
            return {**data, "psbt": psbt_b64(p), "hex": hex_, "txid": tx_id}

        def other_final_tx(data: dict[str, Any]) -> dict[str, Any]:
            hex_ = with_output_value(data["hex"], -1)
            return {**data, "hex": hex_, "txid": dsha256(bytes.fromhex(hex_))[::-1].hex()}

        def dropped_utxo(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            p.inputs[0].witness_utxo = p.inputs[0].non_witness_utxo = None
            return {**data, "psbt": psbt_b64(p)}

        for rewrite, fragment in (
            (another_tx, "another transaction"), (flipped_final, "does not verify"),
            (dropped_utxo, "dropped"), (lambda d: {**d, "txid": "00" * 32}, "txid"),
            (lambda d: {**d, "complete": False}, "complete"),
            (lambda d: {**d, "psbt": b64(b"psbt\xff\x00")}, "unsigned transaction"),
        ):  # fmt: skip
            with proxy.rewriting(in_data(rewrite)):
                mismatch(sign, fragment)
        with proxy.rewriting(in_data(other_final_tx)):
            mismatch(sign, "not the PSBT's transaction")

        def no_redeem_push(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            p.inputs[0].final_scriptsig = None  # a P2SH-P2WPKH input spent as a P2WPKH one
            hex_, tx_id = extracted(p)
            return {**data, "psbt": psbt_b64(p), "hex": hex_, "txid": tx_id}

        if c["kind"] == "p2sh-p2wpkh":
            with proxy.rewriting(in_data(no_redeem_push)):
                mismatch(sign, "finished as a p2wpkh input")

        def other_key_sig(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            other_key_partial_sig(p, 0)
            return {**data, "psbt": psbt_b64(p)}

        with proxy.rewriting(in_data(other_key_sig)):
            mismatch(lambda: sign(finalize=False), "not the account's")


def test_raw_transaction_answers(
    server: Server, proxy: TamperProxy, vectors: dict[str, Any]
) -> None:
    token = server.token("check-rawtx")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        address = utxo_account(direct, "dogecoin", {"private_key": ONE_HEX})
        mine = p2pkh_script(bytes.fromhex(vectors["keys"][0]["hash160_hex"]))
        theirs = p2pkh_script(bytes.fromhex(vectors["keys"][1]["hash160_hex"]))
        fund = legacy_tx([(b"\x07" * 32, 0, b"")], [(1_000_000, mine)])
        spend = legacy_tx([(txid(fund), 0, b"")], [(900_000, theirs)])
        prev = PrevTx(txid=txid(fund).hex(), vout=0, scriptPubKey=mine.hex(), amount="0.01",
                      hex=fund.hex())  # fmt: skip

        def sign() -> Any:
            return via.signing.sign_raw_transaction("dogecoin", address, spend, [prev])

        assert sign().complete  # honest: passes
        sighash = dsha256(
            legacy_tx([(txid(fund), 0, mine)], [(900_000, theirs)]) + (1).to_bytes(4, "little")
        )
        der = OTHER.sign(sighash, hasher=None) + b"\x01"
        by_other = bytes((len(der),)) + der + bytes((33,)) + OTHER_PUB
        other_hex = legacy_tx([(txid(fund), 0, by_other)], [(900_000, theirs)]).hex()

        def flipped_sig(data: dict[str, Any]) -> dict[str, Any]:
            raw = bytes.fromhex(data["hex"])
            return {**data, "hex": flip(raw, 4 + 1 + 36 + 1 + 10).hex()}  # inside r

        for rewrite, fragment in (
            (lambda d: {**d, "hex": with_output_value(d["hex"], -1)}, "not the one sent"),
            (lambda d: {**d, "hex": other_hex}, "not the account's"),
            (flipped_sig, "does not verify"),
            (lambda d: {**d, "hex": spend.hex(), "complete": True}, "not signed"),
        ):  # fmt: skip
            with proxy.rewriting(in_data(rewrite)):
                mismatch(sign, fragment)


MAGIC = {"dogecoin": "Dogecoin Signed Message:\n", "litecoin": "Litecoin Signed Message:\n"}


@pytest.mark.parametrize(("family", "kind", "base"),
                         [("dogecoin", "p2pkh", 31), ("litecoin", "p2wpkh", 39),
                          ("litecoin", "p2sh-p2wpkh", 35)])  # fmt: skip
def test_utxo_message_answers(family: str, kind: str, base: int, server: Server,
                              proxy: TamperProxy) -> None:  # fmt: skip
    token = server.token(f"check-msg-{family}-{kind}")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        options = {"address_type": kind} if family == "litecoin" else {}
        address = utxo_account(direct, family, {"private_key": ONE_HEX, **options})

        def sign() -> Any:
            return via.signing.sign_message(family, address, "known answer")

        assert sign().signature  # honest: passes
        digest = message_digest(MAGIC[family], "known answer")
        by_other = b64(recoverable(OTHER, digest, base))
        wrong_header = b64(recoverable(ACCOUNT, digest, 31 if base != 31 else 39))
        for signature, fragment in ((by_other, "not the account's"),
                                    (wrong_header, "header byte")):  # fmt: skip
            with proxy.rewriting(replaced_by({"signature": signature})):
                mismatch(sign, fragment)
        with proxy.rewriting(in_data(lambda d: {"signature": flip_b64(d["signature"], 10)})):
            mismatch(sign)
