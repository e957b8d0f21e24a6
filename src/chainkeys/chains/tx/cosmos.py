# mypy: disable-error-code="import-untyped"
"""Cosmos signers: cosmjs `OfflineDirectSigner`/`OfflineAminoSigner`, Keplr ADR-036,
and Moon's transfer shapes, decoded before anything is signed.

Protobuf types come from `cosmospy-protobuf` (the SDK's own .proto files,
compiled). Decoding is strict, because protobuf is lenient: a parser keeps
fields it does not know and writes them back, so a chain newer than this
decoder (ibc-go v9's `tokens`, the SDK 0.46 `tip`) would act on bytes the
policy never saw. Every message is parsed, every unknown field at any depth
is a refusal, every `Any` is unpacked and checked the same way (or marked
undecoded), extension options are refused, and the bytes must re-encode to
exactly what was sent. Amino documents get the same treatment: every key of
a known message is read, any other key is a refusal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json  # the standard library's on purpose: JSON.stringify's escapes; a lenient read
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import msgspec
from cosmospy_protobuf.cosmos.bank.v1beta1 import tx_pb2 as bank
from cosmospy_protobuf.cosmos.crypto.secp256k1 import keys_pb2
from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from cosmospy_protobuf.ibc.applications.transfer.v1 import tx_pb2 as ibc
from google.protobuf.message import DecodeError, Message

from chainkeys.chains.spec import Key
from chainkeys.chains.tx.base import (
    INVALID_AMOUNT,
    MAX_AMOUNT,
    Amount,
    Item,
    Owner,
    Signed,
    SignKind,
    Summary,
    refuse,
)
from chainkeys.chains.tx.ecdsa import sign_compact

SEND = "/cosmos.bank.v1beta1.MsgSend"
IBC = "/ibc.applications.transfer.v1.MsgTransfer"
PUBKEY = "/cosmos.crypto.secp256k1.PubKey"
U64 = 2**64
MAX_DEPTH = 32  # JSON nesting an amino document may have (a deeper one is refused unread)
# The SDK's denom rule (types/coin.go): a letter, then 2-127 of letters, digits, /:._-
DENOM = re.compile(r"[a-zA-Z][a-zA-Z0-9/:._-]{2,127}")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refuse(f"{what} is not standard base64") from None


def parse(kind: type[Message], data: bytes, what: str) -> Any:
    """Protobuf bytes read strictly: canonical encoding, and no field (at any depth)
    that the compiled type does not know. `Any` values inside stay bytes: callers
    unpack each one with this function too."""
    msg = kind()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError):
        raise refuse(f"{what} is not a valid protobuf message") from None
    if msg.SerializeToString(deterministic=True) != data:
        raise refuse(f"{what} is not canonically encoded (fields out of order or repeated)")
    msg.DiscardUnknownFields()  # recursive: what is left is what this decoder reads
    if msg.SerializeToString(deterministic=True) != data:
        raise refuse(f"{what} holds a protobuf field this signer does not read; it is "
                     "refused rather than signed unread")  # fmt: skip
    return msg


def integer(text: Any, what: str, bound: int = MAX_AMOUNT) -> int:
    """An exact non-negative integer below `bound`, given as a decimal string."""
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 80:
        raise refuse(f"{what} must be a whole number as a decimal string", INVALID_AMOUNT)
    value = int(text)
    if value >= bound:
        raise refuse(f"{what} is out of range", INVALID_AMOUNT)
    return value


def denom(text: Any, what: str) -> str:
    if not isinstance(text, str) or not DENOM.fullmatch(text):
        raise refuse(f"{what} is not a valid denom", INVALID_AMOUNT)
    return text


def coin(c: Any, what: str) -> Amount:
    """A Coin (protobuf or amino JSON) as an exact Amount."""
    if isinstance(c, dict):
        if set(c) != {"denom", "amount"}:
            raise refuse(f"{what} must be exactly {{denom, amount}}")
        return Amount(denom(c["denom"], f"{what}.denom"), integer(c["amount"], f"{what}.amount"))
    return Amount(denom(c.denom, f"{what}.denom"), integer(c.amount, f"{what}.amount"))


def coins(items: Any, what: str) -> tuple[Amount, ...]:
    if not isinstance(items, list):
        raise refuse(f"{what} must be a list of {{denom, amount}}")
    return tuple(coin(c, f"{what}[{i}]") for i, c in enumerate(items))


def cosmos_sign_bytes(data: bytes) -> bool:
    """Whether `data` reads as what a Cosmos transaction signature signs: a SignDoc
    with a body, or an amino StdSignDoc. Lenient on purpose: another family's
    message signer refuses anything that might be one (eos.not_a_transaction)."""
    if data[:1] == b"{":
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return False
        return isinstance(doc, dict) and "msgs" in doc and "chain_id" in doc
    doc = tx_pb2.SignDoc()
    body = tx_pb2.TxBody()
    try:
        doc.ParseFromString(data)
        body.ParseFromString(doc.body_bytes)
    except (DecodeError, RecursionError, ValueError):
        return False
    return bool(doc.chain_id) and len(body.messages) > 0


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
        """The field in either casing; both at once is a refusal (one would go unread)."""
        first, second = getattr(self, camel), getattr(self, snake)
        if first is not None and second is not None:
            raise refuse(f"signDoc has both {camel} and {snake}: send one")
        value = first if first is not None else second
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


def body_items(body: Any, owner: Owner) -> tuple[Item, ...]:
    """Each message of a TxBody, decoded strictly when this signer knows its type."""
    if len(body.extension_options) or len(body.non_critical_extension_options):
        raise refuse("signDoc.bodyBytes carries extension options, which this signer "
                     "does not read")  # fmt: skip
    items = []
    for n, any_msg in enumerate(body.messages):
        what = f"message {n} ({any_msg.type_url[:100]})"
        if any_msg.type_url == SEND:
            m = parse(bank.MsgSend, any_msg.value, what)
            _own(m.from_address, owner, f"{what}: from_address")
            items.append(Item(SEND, m.to_address, coins(list(m.amount), f"{what}.amount")))
        elif any_msg.type_url == IBC:
            m = parse(ibc.MsgTransfer, any_msg.value, what)
            _own(m.sender, owner, f"{what}: sender")
            items.append(Item(IBC, m.receiver, (coin(m.token, f"{what}.token"),), memo=m.memo))
        else:
            items.append(Item(any_msg.type_url, decoded=False))
    return tuple(items)


def _own(sender: str, owner: Owner, what: str) -> None:
    if sender != owner.address:
        raise refuse(f"{what} is not this account", "not_owner")


def signer_keys(auth: Any) -> list[bytes]:
    """The secp256k1 keys of every signer info; another key type is refused unread."""
    keys = []
    for n, info in enumerate(auth.signer_infos):
        type_url = info.public_key.type_url
        if type_url == PUBKEY:
            keys.append(parse(keys_pb2.PubKey, info.public_key.value, f"signer {n}'s key").key)
        elif type_url or info.public_key.value:
            raise refuse(f"signer {n}'s public key is a {type_url[:100]}, which this signer "
                         "does not read")  # fmt: skip
    return keys


@dataclass(frozen=True, slots=True)
class _CosmosDoc:
    summary: Summary
    message: bytes  # the exact bytes signed (their sha256 is the ECDSA digest)
    respond: Any  # (signature) -> Signed

    def sign(self, key: Key) -> Signed:
        result: Signed = self.respond(sign_bytes(key, self.message))
        return result


def prepare_direct(req: CosmosDirectRequest, owner: Owner) -> _CosmosDoc:
    doc = req.signDoc
    body_bytes = unb64(doc.get("bodyBytes", "body_bytes"), "signDoc.bodyBytes")
    auth_bytes = unb64(doc.get("authInfoBytes", "auth_info_bytes"), "signDoc.authInfoBytes")
    chain_id = doc.get("chainId", "chain_id")
    account_number = integer(doc.get("accountNumber", "account_number"), "accountNumber", U64)
    check_chain(chain_id, owner)
    body = parse(tx_pb2.TxBody, body_bytes, "signDoc.bodyBytes")
    auth = parse(tx_pb2.AuthInfo, auth_bytes, "signDoc.authInfoBytes")
    if owner.public_key not in signer_keys(auth):
        raise refuse("no signer info carries this account's public key", "not_owner")
    sign_doc = tx_pb2.SignDoc(
        body_bytes=body_bytes,
        auth_info_bytes=auth_bytes,
        chain_id=chain_id,
        account_number=account_number,
    ).SerializeToString(deterministic=True)
    summary = Summary(
        "cosmos", owner.network.name, "sign-direct", chain_id, body_items(body, owner),
        coins(list(auth.fee.amount), "fee.amount"), hashlib.sha256(sign_doc).hexdigest(),
        memo=body.memo,
    )  # fmt: skip
    signed = CosmosSignedDirectDoc(
        bodyBytes=b64(body_bytes), authInfoBytes=b64(auth_bytes), chainId=chain_id,
        accountNumber=str(account_number),
    )  # fmt: skip

    def respond(sig: bytes) -> Signed:
        return Signed(CosmosDirectResponse(signed=signed, signature=std_signature(owner, sig)))

    return _CosmosDoc(summary, sign_doc, respond)


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


def check_shape(doc: Any) -> None:
    """Amino documents nest a few levels and carry amounts and counts as strings: a
    document deeper than MAX_DEPTH is refused before anything recurses into it, and a
    JSON number (a float, or an integer JavaScript would round) would not serialize
    as the wallet's does. Iterative: no nesting can exhaust the stack."""
    todo: list[tuple[Any, str, int]] = [(doc, "signDoc", 0)]
    while todo:
        value, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise refuse(f"signDoc nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise refuse(f"{where[:200]} is a number; amino amounts and counts are decimal "
                         "strings", INVALID_AMOUNT)  # fmt: skip
        if isinstance(value, dict):
            todo.extend((v, f"{where}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))


class CosmosAminoRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    signDoc: dict[str, Any]


class CosmosAminoResponse(msgspec.Struct, kw_only=True):
    signed: dict[str, Any]
    signature: dict[str, Any]


def text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise refuse(f"{what} must be a string")
    return value


def fields(
    value: Any, what: str, required: AbstractSet[str], optional: AbstractSet[str] = frozenset()
) -> dict[str, Any]:
    """A JSON object with exactly the keys this signer reads (amino omits empty ones)."""
    if not isinstance(value, dict):
        raise refuse(f"{what} must be an object")
    missing, unknown = required - set(value), set(value) - required - optional
    if missing:
        raise refuse(f"{what} lacks {', '.join(sorted(missing))}")
    if unknown:
        names = ", ".join(sorted(k[:40] for k in unknown)[:5])
        raise refuse(f"{what} has fields this signer does not read ({names}); it is refused "
                     "rather than signed unread")  # fmt: skip
    return value


def _amino_send(value: Any, owner: Owner, what: str) -> Item:
    v = fields(value, what, {"from_address", "to_address", "amount"})
    _own(text(v["from_address"], f"{what}.from_address"), owner, f"{what}.from_address")
    return Item(SEND, text(v["to_address"], f"{what}.to_address"),
                coins(v["amount"], f"{what}.amount"))  # fmt: skip


def _amino_transfer(value: Any, owner: Owner, what: str) -> Item:
    v = fields(value, what, {"source_port", "source_channel", "token", "sender", "receiver"},
               {"timeout_height", "timeout_timestamp", "memo"})  # fmt: skip
    for key in ("source_port", "source_channel"):
        text(v[key], f"{what}.{key}")
    _own(text(v["sender"], f"{what}.sender"), owner, f"{what}.sender")
    if "timeout_height" in v:
        height = fields(v["timeout_height"], f"{what}.timeout_height", set(),
                        {"revision_height", "revision_number"})  # fmt: skip
        for key, count in height.items():
            integer(count, f"{what}.timeout_height.{key}", U64)
    if "timeout_timestamp" in v:
        integer(v["timeout_timestamp"], f"{what}.timeout_timestamp", U64)
    memo = text(v["memo"], f"{what}.memo") if "memo" in v else None
    return Item(IBC, text(v["receiver"], f"{what}.receiver"), (coin(v["token"], f"{what}.token"),),
                memo=memo)  # fmt: skip


AMINO_TYPES = {"cosmos-sdk/MsgSend": _amino_send, "cosmos-sdk/MsgTransfer": _amino_transfer}


def amino_items(msgs: Any, owner: Owner) -> tuple[Item, ...]:
    if not isinstance(msgs, list):
        raise refuse("signDoc.msgs must be a list")
    items = []
    for n, msg in enumerate(msgs):
        what = f"signDoc.msgs[{n}]"
        entry = fields(msg, what, {"type", "value"})
        kind = text(entry["type"], f"{what}.type")
        decode = AMINO_TYPES.get(kind)
        if decode is None:
            if not isinstance(entry["value"], dict):
                raise refuse(f"{what}.value must be an object")
            items.append(Item(kind[:200], decoded=False))
        else:
            items.append(decode(entry["value"], owner, f"{what}.value"))
    return tuple(items)


def prepare_amino(req: CosmosAminoRequest, owner: Owner) -> _CosmosDoc:
    doc = req.signDoc
    check_shape(doc)
    fields(doc, "signDoc", {"account_number", "chain_id", "fee", "memo", "msgs", "sequence"},
           {"timeout_height"})  # fmt: skip
    chain_id = text(doc["chain_id"], "signDoc.chain_id")
    check_chain(chain_id, owner)
    integer(doc["account_number"], "signDoc.account_number", U64)
    integer(doc["sequence"], "signDoc.sequence", U64)
    if "timeout_height" in doc:
        integer(doc["timeout_height"], "signDoc.timeout_height", U64)
    memo = text(doc["memo"], "signDoc.memo")
    fee = fields(doc["fee"], "signDoc.fee", {"amount", "gas"}, {"granter", "payer"})
    integer(fee["gas"], "signDoc.fee.gas", U64)
    for key in ("granter", "payer"):
        if key in fee:
            text(fee[key], f"signDoc.fee.{key}")
    fee_coins = coins(fee["amount"], "signDoc.fee.amount")
    items = amino_items(doc["msgs"], owner)
    message = serialize_sign_doc(doc)
    summary = Summary(
        "cosmos", owner.network.name, "sign-amino", chain_id, items, fee_coins,
        hashlib.sha256(message).hexdigest(), memo=memo,
    )  # fmt: skip
    return _CosmosDoc(
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


def prepare_message(req: CosmosMessageRequest, owner: Owner) -> _CosmosDoc:
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

    return _CosmosDoc(summary, message, respond)


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
