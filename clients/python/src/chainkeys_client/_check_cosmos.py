"""Cosmos answers, checked before they are returned.

Every Cosmos answer carries a signature and the key that made it. The key must be
the one the account's address names (bech32 of its hash160: the address is the
account name the caller gave, so no lookup, which the same server would answer, is
needed), and the signature must verify with it over the sha256 of exactly what was
asked to be signed, rebuilt here from the request: the SignDoc protobuf (direct,
and the transfers), cosmjs `serializeSignDoc` (amino, ADR-036). A transfer's TxRaw
is decoded (strictly: a field this reader does not know is a mismatch) and must hold
the requested message, fee, sequence and key.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from chainkeys_client._check import cosmos_key_matches, fail, sha256, unb64, verify_compact
from chainkeys_client._models import (
    CosmosAminoSigned,
    CosmosDirectSigned,
    CosmosMessageSigned,
    CosmosTx,
    StdSignature,
)

SEND = "/cosmos.bank.v1beta1.MsgSend"
IBC = "/ibc.applications.transfer.v1.MsgTransfer"
PUBKEY = "/cosmos.crypto.secp256k1.PubKey"
PUBKEY_AMINO = "tendermint/PubKeySecp256k1"
SIGN_MODE_DIRECT = 1
VARINT, LEN = 0, 2


def as_json(value: Any) -> Any:
    """A request as the server reads it: what the client's encoder sends, decoded."""
    return json.loads(msgspec.json.encode(value))


# ---- a strict protobuf reader (only what these messages use) ---------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            fail("the transaction is not valid protobuf")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes, schema: Mapping[int, int], what: str) -> dict[int, list[Any]]:
    """Field number -> values (ints or bytes) of a message whose fields are `schema`
    (number -> wire type); any other field, or another wire type, is a mismatch."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if schema.get(number) != wire:
            fail(f"{what} holds a field ({number}) this client does not read")
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(data, pos)
        else:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                fail(f"{what} is truncated")
            value, pos = data[pos : pos + size], pos + size
        out.setdefault(number, []).append(value)
    return out


def one(found: dict[int, list[Any]], number: int, default: Any, what: str) -> Any:
    values = found.get(number, [])
    if len(values) > 1:
        fail(f"{what} repeats field {number}")
    return values[0] if values else default


def text(found: dict[int, list[Any]], number: int, what: str) -> str:
    value: bytes = one(found, number, b"", what)
    try:
        return value.decode()
    except UnicodeDecodeError:
        fail(f"{what} holds text that is not UTF-8")


def coin(data: bytes, what: str) -> tuple[str, str]:
    found = fields(data, {1: LEN, 2: LEN}, what)
    return text(found, 1, what), text(found, 2, what)


def _tag(number: int, wire: int) -> bytes:
    return _uvarint(number << 3 | wire)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sign_doc_bytes(body: bytes, auth_info: bytes, chain_id: str, account_number: int) -> bytes:
    """cosmos.tx.v1beta1.SignDoc as the SDK encodes it: fields 1-4 (bytes, bytes,
    string, uint64), each omitted when empty or zero."""
    out = b""
    for number, value in ((1, body), (2, auth_info), (3, chain_id.encode())):
        if value:
            out += _tag(number, LEN) + _uvarint(len(value)) + value
    if account_number:
        out += _tag(4, VARINT) + _uvarint(account_number)
    return out


# ---- amino JSON (cosmjs serializeSignDoc) ---------------------------------------------


def _js_sorted(value: Any) -> Any:
    """Object keys in JavaScript's sort order (UTF-16 code units), as cosmjs sortedObject."""
    if isinstance(value, dict):
        return {k: _js_sorted(value[k]) for k in sorted(value, key=lambda k: k.encode("utf-16-be"))}
    if isinstance(value, list):
        return [_js_sorted(v) for v in value]
    return value


def serialize_sign_doc(doc: Any) -> bytes:
    """Sorted, compact JSON with &, <, > escaped, UTF-8: the bytes an amino signature signs."""
    out = json.dumps(_js_sorted(doc), separators=(",", ":"), ensure_ascii=False)
    out = out.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return out.encode()


def adr036_doc(signer: str, data: bytes) -> dict[str, Any]:
    """Keplr's `makeADR36AminoSignDoc`."""
    return {
        "chain_id": "",
        "account_number": "0",
        "sequence": "0",
        "fee": {"gas": "0", "amount": []},
        "msgs": [{"type": "sign/MsgSignData",
                  "value": {"signer": signer, "data": base64.b64encode(data).decode()}}],
        "memo": "",
    }  # fmt: skip


# ---- the key and the signature --------------------------------------------------------


def account_key(address: str, pub: bytes, what: str) -> None:
    if len(pub) != 33 or not cosmos_key_matches(address, pub):
        fail(f"{what} is not the key of {address} (the address is not its hash)")


def std_signature(sig: StdSignature, address: str, signed: bytes) -> bytes:
    """The StdSignature's key is the account's and its signature verifies over sha256(signed)."""
    if sig.pub_key.type != PUBKEY_AMINO:
        fail(f"the answer's pub_key is a {sig.pub_key.type[:60]!r}, not a secp256k1 key")
    pub = unb64(sig.pub_key.value, "pub_key.value")
    account_key(address, pub, "the answer's pub_key")
    raw = unb64(sig.signature, "the signature")
    if not verify_compact(pub, raw, sha256(signed)):
        fail("the signature does not verify with the account's key over what was asked")
    return raw


def _doc_field(doc: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = doc.get(camel, doc.get(snake))
    if value is None:
        fail(f"the request's signDoc has no {camel}")
    return value


# Each check_* takes the request and returns the check of its answer; the request is
# read only there, once the server has signed it (a request the server refuses is never
# read here, so it fails as before: with the server's own error).


def check_direct(address: str, sign_doc: Any) -> Callable[[CosmosDirectSigned], None]:
    def check(answer: CosmosDirectSigned) -> None:
        doc = as_json(sign_doc)
        body = unb64(_doc_field(doc, "bodyBytes", "body_bytes"), "signDoc.bodyBytes")
        auth = unb64(_doc_field(doc, "authInfoBytes", "auth_info_bytes"), "signDoc.authInfoBytes")
        chain_id = str(_doc_field(doc, "chainId", "chain_id"))
        account_number = int(str(_doc_field(doc, "accountNumber", "account_number")))
        got = answer.signed
        if (unb64(got.bodyBytes, "signed.bodyBytes"), unb64(got.authInfoBytes, "signed.authInfoBytes"),
                got.chainId, got.accountNumber) != (body, auth, chain_id, str(account_number)):  # fmt: skip
            fail("the signed SignDoc is not the one sent")
        std_signature(
            answer.signature, address, sign_doc_bytes(body, auth, chain_id, account_number)
        )

    return check


def check_amino(address: str, sign_doc: Any) -> Callable[[CosmosAminoSigned], None]:
    def check(answer: CosmosAminoSigned) -> None:
        signed = serialize_sign_doc(as_json(sign_doc))
        if serialize_sign_doc(answer.signed) != signed:
            fail("the signed StdSignDoc is not the one sent")
        std_signature(answer.signature, address, signed)

    return check


def check_message(
    address: str, message: str | None, data: bytes | str | None
) -> Callable[[CosmosMessageSigned], None]:
    def check(answer: CosmosMessageSigned) -> None:
        raw = message.encode() if message is not None else (
            data if isinstance(data, bytes | bytearray) else unb64(data, "data"))  # fmt: skip
        signed = serialize_sign_doc(adr036_doc(address, bytes(raw)))
        if serialize_sign_doc(answer.signed) != signed:
            fail("the signed ADR-036 document is not the one for this message and account")
        sig = std_signature(answer.signature, address, signed)
        if unb64(answer.signedMessage, "signedMessage") != sig:
            fail("signedMessage is not the answer's signature")

    return check


# ---- transfers: a TxRaw ---------------------------------------------------------------


def _message(body: dict[int, list[Any]]) -> tuple[str, bytes]:
    messages = body.get(1, [])
    if len(messages) != 1:
        fail(f"the transaction holds {len(messages)} messages, not the one asked for")
    found = fields(messages[0], {1: LEN, 2: LEN}, "the message")
    return text(found, 1, "the message"), one(found, 2, b"", "the message")


def _expect(got: Any, want: Any, what: str) -> None:
    if got != want:
        fail(f"the transaction's {what} is not the one asked for")


def _send(value: bytes, req: Mapping[str, Any], amount: tuple[str, str]) -> None:
    found = fields(value, {1: LEN, 2: LEN, 3: LEN}, "MsgSend")
    _expect(text(found, 1, "MsgSend"), req["fromAddress"], "sender")
    _expect(text(found, 2, "MsgSend"), req["toAddress"], "recipient")
    _expect([coin(c, "MsgSend.amount") for c in found.get(3, [])], [amount], "amount or denom")


def _ibc(value: bytes, req: Mapping[str, Any], amount: tuple[str, str]) -> None:
    schema = {1: LEN, 2: LEN, 3: LEN, 4: LEN, 5: LEN, 6: LEN, 7: VARINT, 8: LEN}
    found = fields(value, schema, "MsgTransfer")
    _expect(text(found, 1, "MsgTransfer"), req.get("sourcePort", "transfer"), "source port")
    _expect(text(found, 2, "MsgTransfer"), req["sourceChannel"], "source channel")
    _expect(coin(one(found, 3, b"", "MsgTransfer"), "token"), amount, "amount or denom")
    _expect(text(found, 4, "MsgTransfer"), req["fromAddress"], "sender")
    _expect(text(found, 5, "MsgTransfer"), req["toAddress"], "recipient")
    height = fields(one(found, 6, b"", "MsgTransfer"), {1: VARINT, 2: VARINT}, "timeout_height")
    _expect((one(height, 1, 0, "height"), one(height, 2, 0, "height")), (0, 0), "timeout height")
    _expect(one(found, 7, 0, "MsgTransfer"), req["timeoutTimestamp"], "timeout timestamp")
    _expect(text(found, 8, "MsgTransfer"), "", "IBC memo")


def _signer_key(auth: dict[int, list[Any]], req: Mapping[str, Any], address: str) -> bytes:
    infos = auth.get(1, [])
    if len(infos) != 1:
        fail(f"the transaction has {len(infos)} signers, not the account alone")
    info = fields(infos[0], {1: LEN, 2: LEN, 3: VARINT}, "the signer info")
    key_any = fields(one(info, 1, b"", "the signer info"), {1: LEN, 2: LEN}, "the signer key")
    _expect(text(key_any, 1, "the signer key"), PUBKEY, "signer key type")
    key = fields(one(key_any, 2, b"", "the signer key"), {1: LEN}, "the signer key")
    pub: bytes = one(key, 1, b"", "the signer key")
    account_key(address, pub, "the transaction's signer key")
    mode = fields(one(info, 2, b"", "the signer info"), {1: LEN}, "the mode info")
    single = fields(one(mode, 1, b"", "the mode info"), {1: VARINT}, "the mode info")
    _expect(one(single, 1, 0, "the mode info"), SIGN_MODE_DIRECT, "sign mode")
    _expect(one(info, 3, 0, "the signer info"), req["sequence"], "sequence")
    return pub


def check_transfer(address: str, transfer: Any, ibc: bool) -> Callable[[CosmosTx], None]:
    def check(answer: CosmosTx) -> None:
        req = as_json(transfer)
        raw = unb64(answer.signedTx, "signedTx")
        if answer.txHash != sha256(raw).hex().upper():
            fail("txHash is not the hash of signedTx")
        tx = fields(raw, {1: LEN, 2: LEN, 3: LEN}, "the TxRaw")
        body_bytes: bytes = one(tx, 1, b"", "the TxRaw")
        auth_bytes: bytes = one(tx, 2, b"", "the TxRaw")
        body = fields(body_bytes, {1: LEN, 2: LEN, 3: VARINT}, "the TxBody")
        kind, value = _message(body)
        amount = (req["denom"], str(int(req["amount"])))
        _expect(kind, IBC if ibc else SEND, "message type")
        (_ibc if ibc else _send)(value, req, amount)
        _expect(text(body, 2, "the TxBody"), req.get("memo", ""), "memo")
        _expect(one(body, 3, 0, "the TxBody"), req.get("timeoutHeight", 0), "timeout height")
        auth = fields(auth_bytes, {1: LEN, 2: LEN}, "the AuthInfo")
        pub = _signer_key(auth, req, address)
        fee = fields(one(auth, 2, b"", "the AuthInfo"), {1: LEN, 2: VARINT}, "the fee")
        _expect([coin(c, "fee.amount") for c in fee.get(1, [])],
                [(req["feeDenom"], str(int(req["feeAmount"])))], "fee")  # fmt: skip
        _expect(one(fee, 2, 0, "the fee"), req["gasLimit"], "gas limit")
        signatures = tx.get(3, [])
        if len(signatures) != 1:
            fail(f"the transaction carries {len(signatures)} signatures, not one")
        doc = sign_doc_bytes(body_bytes, auth_bytes, req["chainId"], req["accountNumber"])
        if not verify_compact(pub, signatures[0], sha256(doc)):
            fail("the transaction's signature does not verify with the account's key over "
                 "its SignDoc for the requested chain id and account number")  # fmt: skip

    return check
