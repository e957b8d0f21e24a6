# mypy: disable-error-code="import-untyped"
"""sign-amino (cosmjs OfflineAminoSigner.signAmino: a StdSignDoc, every key of a known
message read, any other refused) and sign-message (ADR-036, Keplr signArbitrary)."""

from __future__ import annotations

import hashlib
import json  # the standard library's on purpose: JSON.stringify's escapes; a lenient read
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar

import msgspec

from chainkeys.chains.tx.base import (
    INVALID_AMOUNT,
    Item,
    Owner,
    Signed,
    SignKind,
    Summary,
    bounded_message,
    refuse,
)
from chainkeys.chains.tx.cosmos.common import (
    IBC,
    MAX_DEPTH,
    SEND,
    U64,
    CosmosDoc,
    b64,
    check_chain,
    coin,
    coins,
    ibc_packet,
    integer,
    own,
    recipient,
    std_signature,
    unb64,
)
from chainkeys.chains.tx.fields import MESSAGE_BASE64, MESSAGE_TEXT


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
            raise refuse(
                f"{where[:200]} is a number; amino amounts and counts are decimal strings",
                INVALID_AMOUNT,
            )
        if isinstance(value, dict):
            todo.extend((v, f"{where}.{k}", depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))


class CosmosAminoRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    signDoc: dict[str, Any]


class CosmosAminoResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    signed: dict[str, Any]
    signature: dict[str, Any]
    # a multisig account: every held member's signature (`signature` is the first)
    signatures: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET


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
        raise refuse(
            f"{what} has fields this signer does not read ({names}); it is refused "
            "rather than signed unread"
        )
    return value


def _amino_send(value: Any, owner: Owner, what: str) -> Item:
    v = fields(value, what, {"from_address", "to_address", "amount"})
    own(text(v["from_address"], f"{what}.from_address"), owner, f"{what}.from_address")
    to = recipient(text(v["to_address"], f"{what}.to_address"), f"{what}.to_address")
    return Item(SEND, to, coins(v["amount"], f"{what}.amount"))


def _amino_transfer(value: Any, owner: Owner, what: str) -> Item:
    v = fields(
        value,
        what,
        {"source_port", "source_channel", "token", "sender", "receiver"},
        {"timeout_height", "timeout_timestamp", "memo"},
    )
    port, channel = (text(v[key], f"{what}.{key}") for key in ("source_port", "source_channel"))
    own(text(v["sender"], f"{what}.sender"), owner, f"{what}.sender")
    revision = None
    if "timeout_height" in v:
        height = fields(
            v["timeout_height"],
            f"{what}.timeout_height",
            set(),
            {"revision_height", "revision_number"},
        )
        parts = {
            key: integer(count, f"{what}.timeout_height.{key}", U64)
            for key, count in height.items()
        }
        revision = (parts.get("revision_number", 0), parts.get("revision_height", 0))
    timestamp = None
    if "timeout_timestamp" in v:
        timestamp = integer(v["timeout_timestamp"], f"{what}.timeout_timestamp", U64)
    memo = text(v["memo"], f"{what}.memo") if "memo" in v else None
    receiver = text(v["receiver"], f"{what}.receiver")
    packet = ibc_packet(channel, port, receiver, revision, timestamp, what)
    receiver = recipient(receiver, f"{what}.receiver")
    return Item(IBC, receiver, (coin(v["token"], f"{what}.token"),), memo=memo, ibc=packet)


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


def prepare_amino(req: CosmosAminoRequest, owner: Owner) -> CosmosDoc:
    doc = req.signDoc
    check_shape(doc)
    fields(
        doc,
        "signDoc",
        {"account_number", "chain_id", "fee", "memo", "msgs", "sequence"},
        {"timeout_height"},
    )
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
        "cosmos",
        owner.network.name,
        "sign-amino",
        chain_id,
        items,
        fee_coins,
        hashlib.sha256(message).hexdigest(),
        memo=memo,
    )
    return CosmosDoc(
        summary,
        message,
        lambda sig: Signed(CosmosAminoResponse(signed=doc, signature=std_signature(owner, sig))),
        lambda sigs: Signed(CosmosAminoResponse(signed=doc, signature=sigs[0], signatures=sigs)),
    )


class CosmosMessageRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Moon's `{"message"}` (UTF-8 text) or Keplr's raw `{"data"}` (base64)."""

    # exactly one of each pair is sent: declared here, checked and documented by the
    # API's type for it (api/schemas.py `sign_request`); prepare_message checks it again
    one_of: ClassVar[tuple[tuple[str, str], ...]] = (("message", "data"),)

    message: MESSAGE_TEXT | None = None
    data: MESSAGE_BASE64 | None = None


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


def prepare_message(req: CosmosMessageRequest, owner: Owner) -> CosmosDoc:
    if (req.message is None) == (req.data is None):
        raise refuse('send "message" (text) or "data" (base64), one of them')
    data = req.message.encode() if req.message is not None else unb64(req.data or "", "data")
    bounded_message(req.message, data if req.message is None else None)  # built without the decoder
    doc = adr036_doc(owner.address, data)
    message = serialize_sign_doc(doc)
    summary = Summary(
        "cosmos",
        owner.network.name,
        "sign-message",
        None,
        (),
        (),
        hashlib.sha256(message).hexdigest(),
        raw=True,
        message=data,
    )

    def respond(sig: bytes) -> Signed:
        return Signed(
            CosmosMessageResponse(
                signedMessage=b64(sig), signature=std_signature(owner, sig), signed=doc
            )
        )

    return CosmosDoc(summary, message, respond)


KINDS = (
    SignKind(
        "sign-amino",
        ("cosmos",),
        CosmosAminoRequest,
        CosmosAminoResponse,
        prepare_amino,
        "sign a StdSignDoc (cosmjs OfflineAminoSigner.signAmino)",
        "Signed bytes are cosmjs serializeSignDoc's: sorted compact JSON.",
        {
            "send": {
                "signDoc": {
                    "chain_id": "cosmoshub-4",
                    "account_number": "12345",
                    "sequence": "0",
                    "memo": "",
                    "fee": {"amount": [{"denom": "uatom", "amount": "5000"}], "gas": "200000"},
                    "msgs": [
                        {
                            "type": "cosmos-sdk/MsgSend",
                            "value": {
                                "from_address": "cosmos1…",
                                "to_address": "cosmos1…",
                                "amount": [{"denom": "uatom", "amount": "1000"}],
                            },
                        }
                    ],
                }
            }
        },
    ),
    SignKind(
        "sign-message",
        ("cosmos",),
        CosmosMessageRequest,
        CosmosMessageResponse,
        prepare_message,
        "sign arbitrary data (ADR-036, Keplr signArbitrary; Moon's signedMessage)",
        "",
        {"text": {"message": "I own this address"}, "bytes": {"data": "AAEC/w=="}},
    ),
)
