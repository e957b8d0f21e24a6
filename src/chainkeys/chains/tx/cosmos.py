# mypy: disable-error-code="import-untyped"
"""Cosmos signers: cosmjs `OfflineDirectSigner`/`OfflineAminoSigner`, Keplr ADR-036,
and Moon's transfer shapes, decoded before anything is signed.

Protobuf types come from `cosmospy-protobuf` (the SDK's own .proto files,
compiled). Every request is decoded into a `Summary` and checked against the
account (chain id, signer) before a key is asked for; protobuf bytes must
re-encode to exactly what was sent, so nothing is signed that was not read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import msgspec
from cosmospy_protobuf.cosmos.bank.v1beta1 import tx_pb2 as bank
from cosmospy_protobuf.cosmos.crypto.secp256k1 import keys_pb2
from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from cosmospy_protobuf.ibc.applications.transfer.v1 import tx_pb2 as ibc
from google.protobuf.message import DecodeError, Message

from chainkeys.chains.spec import ChainError, Key
from chainkeys.chains.tx.base import Amount, Item, Owner, Signed, SignKind, Summary
from chainkeys.chains.tx.ecdsa import sign_compact

SEND = "/cosmos.bank.v1beta1.MsgSend"
IBC = "/ibc.applications.transfer.v1.MsgTransfer"
PUBKEY = "/cosmos.crypto.secp256k1.PubKey"
BAD = "invalid_sign_request"


def refuse(message: str, code: str = BAD) -> ChainError:
    return ChainError(message, code)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refuse(f"{what} is not standard base64") from None


def parse(kind: type[Message], data: bytes, what: str) -> Any:
    """Protobuf bytes that re-encode to themselves: nothing unread is signed."""
    msg = kind()
    try:
        msg.ParseFromString(data)
    except DecodeError:
        raise refuse(f"{what} is not a valid protobuf message") from None
    if msg.SerializeToString(deterministic=True) != data:
        raise refuse(f"{what} holds fields or encodings this signer does not read")
    return msg


def integer(text: Any, what: str) -> int:
    """An exact non-negative integer given as a decimal string (never a float)."""
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 40:
        raise refuse(f"{what} must be a whole number as a decimal string", "invalid_amount")
    return int(text)


def check_chain(chain_id: str, owner: Owner) -> None:
    if chain_id != owner.network.chain_id:
        raise refuse(
            f"chain id does not match the account's network {owner.network.name} "
            f"(expected {owner.network.chain_id})",
            "wrong_chain",
        )


def std_signature(owner: Owner, signature: bytes) -> dict[str, Any]:
    return {
        "pub_key": {"type": "tendermint/PubKeySecp256k1", "value": b64(owner.public_key)},
        "signature": b64(signature),
    }


def sign_bytes(key: Key, message: bytes) -> bytes:
    return sign_compact(key.secret, hashlib.sha256(message).digest())


# ---- sign-direct ---------------------------------------------------------------------


class CosmosDirectDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """cosmjs `SignDoc` in proto3 JSON: bytes as base64, accountNumber a decimal string."""

    bodyBytes: str | None = None
    authInfoBytes: str | None = None
    chainId: str | None = None
    accountNumber: str | None = None
    body_bytes: str | None = None
    auth_info_bytes: str | None = None
    chain_id: str | None = None
    account_number: str | None = None

    def get(self, camel: str, snake: str) -> str:
        value = getattr(self, camel) if getattr(self, camel) is not None else getattr(self, snake)
        if value is None:
            raise refuse(f"signDoc.{camel} is missing")
        return str(value)


class CosmosDirectRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    signDoc: CosmosDirectDoc


class CosmosSignedDirectDoc(msgspec.Struct, kw_only=True):
    bodyBytes: str
    authInfoBytes: str
    chainId: str
    accountNumber: str


class CosmosDirectResponse(msgspec.Struct, kw_only=True):
    signed: CosmosSignedDirectDoc
    signature: dict[str, Any]


def coins(items: Any) -> tuple[Amount, ...]:
    return tuple(Amount(c.denom, integer(c.amount, "an amount")) for c in items)


def body_items(body: Any) -> tuple[Item, ...]:
    items = []
    for any_msg in body.messages:
        if any_msg.type_url == SEND:
            m = parse(bank.MsgSend, any_msg.value, "a MsgSend")
            items.append(Item(SEND, m.to_address, coins(m.amount)))
        elif any_msg.type_url == IBC:
            m = parse(ibc.MsgTransfer, any_msg.value, "a MsgTransfer")
            items.append(Item(IBC, m.receiver, coins([m.token])))
        else:
            items.append(Item(any_msg.type_url, decoded=False))
    return tuple(items)


@dataclass(frozen=True, slots=True)
class _Prepared:
    summary: Summary
    message: bytes  # the exact bytes signed (their sha256 is the ECDSA digest)
    respond: Any  # (signature) -> Signed

    def sign(self, key: Key) -> Signed:
        result: Signed = self.respond(sign_bytes(key, self.message))
        return result


def prepare_direct(req: CosmosDirectRequest, owner: Owner) -> _Prepared:
    doc = req.signDoc
    body_bytes = unb64(doc.get("bodyBytes", "body_bytes"), "signDoc.bodyBytes")
    auth_bytes = unb64(doc.get("authInfoBytes", "auth_info_bytes"), "signDoc.authInfoBytes")
    chain_id = doc.get("chainId", "chain_id")
    account_number = integer(doc.get("accountNumber", "account_number"), "accountNumber")
    check_chain(chain_id, owner)
    body = parse(tx_pb2.TxBody, body_bytes, "signDoc.bodyBytes")
    auth = parse(tx_pb2.AuthInfo, auth_bytes, "signDoc.authInfoBytes")
    signers = [
        parse(keys_pb2.PubKey, s.public_key.value, "a signer's public key").key
        for s in auth.signer_infos
        if s.public_key.type_url == PUBKEY
    ]
    if owner.public_key not in signers:
        raise refuse("no signer info carries this account's public key", "not_owner")
    sign_doc = tx_pb2.SignDoc(
        body_bytes=body_bytes,
        auth_info_bytes=auth_bytes,
        chain_id=chain_id,
        account_number=account_number,
    ).SerializeToString(deterministic=True)
    summary = Summary(
        "cosmos", owner.network.name, "sign-direct", chain_id, body_items(body),
        coins(auth.fee.amount), hashlib.sha256(sign_doc).hexdigest(), memo=body.memo,
    )  # fmt: skip
    signed = CosmosSignedDirectDoc(
        bodyBytes=b64(body_bytes), authInfoBytes=b64(auth_bytes), chainId=chain_id,
        accountNumber=str(account_number),
    )  # fmt: skip

    def respond(sig: bytes) -> Signed:
        return Signed(CosmosDirectResponse(signed=signed, signature=std_signature(owner, sig)))

    return _Prepared(summary, sign_doc, respond)


# ---- sign-amino and sign-message (ADR-036) -------------------------------------------


def _js_sorted(value: Any) -> Any:
    """Object keys in JavaScript's order (UTF-16 code units), as cosmjs' sortedObject."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return {k: _js_sorted(value[k]) for k in keys}
    if isinstance(value, list):
        return [_js_sorted(v) for v in value]
    return value


def serialize_sign_doc(doc: Any) -> bytes:
    """cosmjs `serializeSignDoc`: sorted, compact JSON with &, <, > escaped, UTF-8."""
    text = json.dumps(_js_sorted(doc), separators=(",", ":"), ensure_ascii=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (a \\ud800 escape): not text a wallet shows
        raise refuse("signDoc holds text that is not valid Unicode") from None


def no_numbers(value: Any, where: str = "signDoc") -> None:
    """Amino documents carry amounts and counts as strings: a JSON number (a float, or an
    integer JavaScript would round) would not serialize as the wallet's does."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise refuse(f"{where} is a number; amino amounts and counts are decimal strings",
                     "invalid_amount")  # fmt: skip
    if isinstance(value, dict):
        for k, v in value.items():
            no_numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            no_numbers(v, f"{where}[{i}]")


class CosmosAminoRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    signDoc: dict[str, Any]


class CosmosAminoResponse(msgspec.Struct, kw_only=True):
    signed: dict[str, Any]
    signature: dict[str, Any]


AMINO_TYPES = {
    "cosmos-sdk/MsgSend": (SEND, "from_address", "to_address"),
    "cosmos-sdk/MsgTransfer": (IBC, "sender", "receiver"),
}


def amino_items(msgs: Any, owner: Owner) -> tuple[Item, ...]:
    if not isinstance(msgs, list):
        raise refuse("signDoc.msgs must be a list")
    items = []
    for msg in msgs:
        if not isinstance(msg, dict) or not isinstance(msg.get("value"), dict):
            raise refuse("each signDoc.msgs entry is {type, value}")
        known = AMINO_TYPES.get(msg.get("type", ""))
        if known is None:
            items.append(Item(str(msg.get("type")), decoded=False))
            continue
        url, sender, receiver = known
        value = msg["value"]
        if value.get(sender) != owner.address:
            raise refuse(f"the message's {sender} is not this account", "not_owner")
        raw = value.get("amount") if url == SEND else [value.get("token")]
        try:
            amounts = tuple(Amount(c["denom"], integer(c["amount"], "an amount")) for c in raw)
        except (TypeError, KeyError):
            raise refuse("a message's amount is not a list of {denom, amount}") from None
        items.append(Item(url, value.get(receiver), amounts))
    return tuple(items)


def prepare_amino(req: CosmosAminoRequest, owner: Owner) -> _Prepared:
    doc = req.signDoc
    no_numbers(doc)
    expected = {"account_number", "chain_id", "fee", "memo", "msgs", "sequence"}
    if set(doc) != expected:
        raise refuse(f"signDoc must have exactly {', '.join(sorted(expected))}")
    check_chain(str(doc["chain_id"]), owner)
    fee = doc["fee"]
    if not isinstance(fee, dict) or not isinstance(fee.get("amount"), list):
        raise refuse("signDoc.fee must be {amount, gas}")
    try:
        fee_coins = tuple(Amount(c["denom"], integer(c["amount"], "a fee")) for c in fee["amount"])
    except (TypeError, KeyError):
        raise refuse("signDoc.fee.amount is not a list of {denom, amount}") from None
    message = serialize_sign_doc(doc)
    summary = Summary(
        "cosmos", owner.network.name, "sign-amino", str(doc["chain_id"]),
        amino_items(doc["msgs"], owner), fee_coins, hashlib.sha256(message).hexdigest(),
        memo=str(doc["memo"]),
    )  # fmt: skip
    return _Prepared(
        summary, message,
        lambda sig: Signed(CosmosAminoResponse(signed=doc, signature=std_signature(owner, sig))),
    )  # fmt: skip


class CosmosMessageRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Moon's `{"message"}` (UTF-8 text) or Keplr's raw `{"data"}` (base64)."""

    message: str | None = None
    data: str | None = None


class CosmosMessageResponse(msgspec.Struct, kw_only=True):
    signedMessage: str
    signature: dict[str, Any]
    signed: dict[str, Any]


def adr036_doc(signer: str, data: bytes) -> dict[str, Any]:
    """Keplr's `makeADR36AminoSignDoc`: an amino doc that can never be a transaction."""
    return {
        "chain_id": "",
        "account_number": "0",
        "sequence": "0",
        "fee": {"gas": "0", "amount": []},
        "msgs": [{"type": "sign/MsgSignData", "value": {"signer": signer, "data": b64(data)}}],
        "memo": "",
    }


def prepare_message(req: CosmosMessageRequest, owner: Owner) -> _Prepared:
    if (req.message is None) == (req.data is None):
        raise refuse('send "message" (text) or "data" (base64), one of them')
    data = req.message.encode() if req.message is not None else unb64(req.data or "", "data")
    doc = adr036_doc(owner.address, data)
    message = serialize_sign_doc(doc)
    summary = Summary(
        "cosmos", owner.network.name, "sign-message", None, (), (),
        hashlib.sha256(message).hexdigest(), raw=True,
    )  # fmt: skip

    def respond(sig: bytes) -> Signed:
        return Signed(CosmosMessageResponse(
            signedMessage=b64(sig), signature=std_signature(owner, sig), signed=doc
        ))  # fmt: skip

    return _Prepared(summary, message, respond)


KINDS: tuple[SignKind, ...] = (
    SignKind(
        "sign-direct", ("cosmos",), CosmosDirectRequest, CosmosDirectResponse, prepare_direct,
        "sign a SignDoc (cosmjs OfflineDirectSigner.signDirect)",
        "The body and auth info are decoded first: the chain id must be the account's "
        "network's, a signer info must carry this account's public key.",
        {"cosmjs": {"signDoc": {"bodyBytes": "CpABCo0BChwvY29zbW9zLmJhbmsu…",
                                "authInfoBytes": "ClAKRgofL2Nvc21vcy5jcnlwdG8u…",
                                "chainId": "cosmoshub-4", "accountNumber": "12345"}}},
    ),
    SignKind(
        "sign-amino", ("cosmos",), CosmosAminoRequest, CosmosAminoResponse, prepare_amino,
        "sign a StdSignDoc (cosmjs OfflineAminoSigner.signAmino)",
        "Signed bytes are cosmjs serializeSignDoc's: sorted compact JSON.",
        {"send": {"signDoc": {
            "chain_id": "cosmoshub-4", "account_number": "12345", "sequence": "0", "memo": "",
            "fee": {"amount": [{"denom": "uatom", "amount": "5000"}], "gas": "200000"},
            "msgs": [{"type": "cosmos-sdk/MsgSend", "value": {
                "from_address": "cosmos1…", "to_address": "cosmos1…",
                "amount": [{"denom": "uatom", "amount": "1000"}]}}]}}},
    ),
    SignKind(
        "sign-message", ("cosmos",), CosmosMessageRequest, CosmosMessageResponse, prepare_message,
        "sign arbitrary data (ADR-036, Keplr signArbitrary; Moon's signedMessage)",
        "",
        {"text": {"message": "I own this address"}, "bytes": {"data": "AAEC/w=="}},
    ),
)  # fmt: skip
