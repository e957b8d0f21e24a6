"""Each kind's decoder for `verify_approval` (_verify.py): the sign bytes rebuilt from
the raw request and hashed, and the summary's items, fee and memo, with this client's
own readers (the protobuf, amino, UTXO and EOS code of its answer checks; hashlib)."""

from __future__ import annotations

import base64
import hashlib
from decimal import Decimal
from typing import Any

from chainkeys_client._check import fail, hash160, unb64, unhex
from chainkeys_client._check_cosmos import (
    IBC, LEN, PUBKEY, SEND, SIGN_MODE_DIRECT, VARINT, _tag, _uvarint, adr036_doc, coin,
    fields, one, serialize_sign_doc, sign_doc_bytes, text,
)  # fmt: skip
from chainkeys_client._check_utxo import MAGIC, account_script, message_hash
from chainkeys_client._utxo_tx import (
    Reader, bip143_sighash, legacy_sighash, p2pkh_script, parse_psbt, parse_tx, psbt_prevout,
)  # fmt: skip
from chainkeys_client._verify_records import Decoder, Rebuilt, amount, item
from chainkeys_client._verify_networks import net_of, utxo_address

# ---- Cosmos ---------------------------------------------------------------------------

COSMOS_UNITS = {"uatom": "ATOM", "uosmo": "OSMO", "ujuno": "JUNO", "uakt": "AKT",
                "ustars": "STARS", "utia": "TIA"}  # fmt: skip
AMINO_SEND, AMINO_IBC = "cosmos-sdk/MsgSend", "cosmos-sdk/MsgTransfer"


def cosmos_amount(denom: str, value: Any) -> dict[str, Any]:
    n = int(value)
    if str(n) != str(value).lstrip("+") or n < 0:
        fail(f"an amount of {denom} is not a whole number")
    unit = COSMOS_UNITS.get(denom)
    return amount(denom, n, None, unit, 6 if unit else None)


def ibc_route(channel: str, port: str, height: tuple[int, int] | None, stamp: int | None
              ) -> dict[str, Any]:  # fmt: skip
    shown = None if height is None or height == (0, 0) else f"{height[0]}-{height[1]}"
    return {"channel": channel, "port": port, "timeout_height": shown,
            "timeout_timestamp": stamp or None}  # fmt: skip


def _proto_items(body: dict[int, list[Any]]) -> list[dict[str, Any]]:
    out = []
    for raw in body.get(1, []):
        msg = fields(raw, {1: LEN, 2: LEN}, "a message")
        type_url, value = text(msg, 1, "a message"), one(msg, 2, b"", "a message")
        if type_url == SEND:
            m = fields(value, {1: LEN, 2: LEN, 3: LEN}, "MsgSend")
            coins = [cosmos_amount(*coin(c, "MsgSend.amount")) for c in m.get(3, [])]
            out.append(item(SEND, text(m, 2, "MsgSend"), coins))
        elif type_url == IBC:
            schema = {1: LEN, 2: LEN, 3: LEN, 4: LEN, 5: LEN, 6: LEN, 7: VARINT, 8: LEN}
            m = fields(value, schema, "MsgTransfer")
            h = fields(one(m, 6, b"", "MsgTransfer"), {1: VARINT, 2: VARINT}, "timeout_height")
            route = ibc_route(text(m, 2, "MsgTransfer"), text(m, 1, "MsgTransfer"),
                              (one(h, 1, 0, "height"), one(h, 2, 0, "height")),
                              one(m, 7, 0, "MsgTransfer"))  # fmt: skip
            token = cosmos_amount(*coin(one(m, 3, b"", "MsgTransfer"), "token"))
            out.append(item(IBC, text(m, 5, "MsgTransfer"), [token],
                            memo=text(m, 8, "MsgTransfer"), ibc=route))  # fmt: skip
        else:
            out.append(item(type_url, None, [], decoded=False))
    return out


def _direct(body_bytes: bytes, auth_bytes: bytes, chain_id: str, number: int) -> Rebuilt:
    body = fields(body_bytes, {1: LEN, 2: LEN, 3: VARINT}, "the TxBody")
    auth = fields(auth_bytes, {1: LEN, 2: LEN}, "the AuthInfo")
    fee = fields(one(auth, 2, b"", "the AuthInfo"), {1: LEN, 2: VARINT, 3: LEN, 4: LEN}, "fee")
    doc = sign_doc_bytes(body_bytes, auth_bytes, chain_id, number)
    return Rebuilt(hashlib.sha256(doc).hexdigest(), _proto_items(body),
                   [cosmos_amount(*coin(c, "fee.amount")) for c in fee.get(1, [])],
                   chain_id, text(body, 2, "the TxBody"))  # fmt: skip


def cosmos_direct(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    doc = req["signDoc"]

    def pick(camel: str, snake: str) -> Any:
        return doc.get(camel) if doc.get(camel) is not None else doc.get(snake)

    return _direct(unb64(pick("bodyBytes", "body_bytes"), "bodyBytes"),
                   unb64(pick("authInfoBytes", "auth_info_bytes"), "authInfoBytes"),
                   str(pick("chainId", "chain_id")), int(pick("accountNumber", "account_number")))  # fmt: skip


def _field(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _tag(number, LEN) + _uvarint(len(data)) + data if data else b""


def _varint_field(number: int, value: int) -> bytes:
    return _tag(number, VARINT) + _uvarint(value) if value else b""


def _coin(denom: str, value: str) -> bytes:
    return _field(1, denom) + _field(2, value)


def cosmos_transfer(req: dict[str, Any], signer: dict[str, Any], account: str, ibc: bool = False
                    ) -> Rebuilt:  # fmt: skip
    """Moon's transfer: the TxBody and AuthInfo the request describes, protobuf-encoded
    here, and their SignDoc."""
    value = str(int(req["amount"]))
    if ibc:
        msg = (_field(1, req.get("sourcePort") or "transfer") + _field(2, req["sourceChannel"])
               + _field(3, _coin(req["denom"], value)) + _field(4, req["fromAddress"])
               + _field(5, req["toAddress"]) + _tag(6, LEN) + b"\x00"  # an empty Height
               + _varint_field(7, int(req["timeoutTimestamp"])))  # fmt: skip
        any_msg = _field(1, IBC) + _field(2, msg)
    else:
        msg = (
            _field(1, req["fromAddress"])
            + _field(2, req["toAddress"])
            + _field(3, _coin(req["denom"], value))
        )
        any_msg = _field(1, SEND) + _field(2, msg)
    body = (
        _field(1, any_msg)
        + _field(2, req.get("memo") or "")
        + _varint_field(3, int(req.get("timeoutHeight") or 0))
    )
    pub = base64.b64decode(signer["public_key"])
    key = _field(1, PUBKEY) + _field(2, _field(1, pub))
    mode = _field(1, _varint_field(1, SIGN_MODE_DIRECT))
    info = _field(1, key) + _field(2, mode) + _varint_field(3, int(req["sequence"]))
    fee = _field(1, _coin(req["feeDenom"], str(int(req["feeAmount"])))) + _varint_field(
        2, int(req["gasLimit"])
    )
    auth = _field(1, info) + _field(2, fee)
    rebuilt = _direct(body, auth, str(req["chainId"]), int(req["accountNumber"]))
    for entry in rebuilt.items:  # a transfer sets no IBC memo: none is shown
        if entry.get("memo") == "":
            del entry["memo"]
    return rebuilt


def cosmos_ibc_transfer(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    return cosmos_transfer(req, signer, account, ibc=True)


def _amino_item(msg: dict[str, Any]) -> dict[str, Any]:
    kind, v = msg["type"], msg["value"]
    if kind == AMINO_SEND:
        return item(SEND, v["to_address"], [cosmos_amount(c["denom"], c["amount"])
                                            for c in v["amount"]])  # fmt: skip
    if kind == AMINO_IBC:
        h = v.get("timeout_height")
        height = None if h is None else (int(h.get("revision_number", 0)),
                                         int(h.get("revision_height", 0)))  # fmt: skip
        stamp = int(v["timeout_timestamp"]) if "timeout_timestamp" in v else None
        extra: dict[str, Any] = {"memo": v["memo"]} if "memo" in v else {}
        token = cosmos_amount(v["token"]["denom"], v["token"]["amount"])
        return item(IBC, v["receiver"], [token], **extra,
                    ibc=ibc_route(v["source_channel"], v["source_port"], height, stamp))  # fmt: skip
    return item(str(kind)[:200], None, [], decoded=False)


def cosmos_amino(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    doc = req["signDoc"]
    digest = hashlib.sha256(serialize_sign_doc(doc)).hexdigest()
    fee = [cosmos_amount(c["denom"], c["amount"]) for c in doc["fee"]["amount"]]
    return Rebuilt(digest, [_amino_item(m) for m in doc["msgs"]], fee, doc["chain_id"],
                   doc.get("memo"))  # fmt: skip


def cosmos_message(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    data = req["message"].encode() if req.get("message") is not None else unb64(req["data"], "data")
    doc = serialize_sign_doc(adr036_doc(signer["address"], data))
    return Rebuilt(hashlib.sha256(doc).hexdigest(), [], [], raw=True, message=data)


# ---- Dogecoin, Litecoin ---------------------------------------------------------------

UTXO = {"dogecoin": ("DOGE", "koinu"), "litecoin": ("LTC", "litoshi")}  # ticker, base unit


def _utxo(family: str, signer: dict[str, Any], tx: Any, prevouts: list[tuple[bytes, int | None]]
          ) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]:  # fmt: skip
    ticker, base = UTXO[family]
    net = net_of(family, signer)  # _verify.py has checked it is one of the table's
    pub = unhex(signer["public_key"], "the signer's public key")
    kind = signer.get("address_type") or "p2pkh"
    mine = account_script(kind, pub)
    digests = []
    for n, (script, value) in enumerate(prevouts):
        if script != mine:
            continue
        if kind == "p2pkh":
            digests.append(legacy_sighash(tx, n, script))
        elif value is None:
            fail(f"input {n} is a segwit input whose amount the request does not give")
        else:
            digests.append(bip143_sighash(tx, n, p2pkh_script(hash160(pub)), value))
    if not digests:
        fail("no input spends an output of the account")
    items = []
    for value, script in tx.outputs:
        to = utxo_address(net, script)
        extra: dict[str, Any] = {"change": True} if script == mine else {}
        if to is None:
            extra["decoded"] = False
        items.append(item("output", to, [amount(ticker, value, base, ticker, 8)], **extra))
    values = [v for _, v in prevouts]
    fee = None
    if None not in values:
        held = sum(v or 0 for v in values) - sum(v for v, _ in tx.outputs)
        fee = [amount(ticker, held, base, ticker, 8)]
    return hashlib.sha256(b"".join(digests)).hexdigest(), items, fee


def utxo_raw(family: str) -> Decoder:
    def decode(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
        tx = parse_tx(unhex(req["hex"], "hex"), "the transaction")
        prevs = {(p["txid"], int(p["vout"])): p for p in req.get("prevtxs") or []}
        prevouts: list[tuple[bytes, int | None]] = []
        for n, txin in enumerate(tx.inputs):
            prev = prevs.get(txin.outpoint)
            if prev is None:
                fail(f"input {n}'s previous output is not in prevtxs")
            script = unhex(prev["scriptPubKey"], "scriptPubKey")
            if prev.get("hex") is not None:
                full = parse_tx(unhex(prev["hex"], "prevtxs[].hex"), "a previous transaction")
                value: int | None = full.outputs[txin.outpoint[1]][0]
            elif prev.get("amount") is not None:
                value = int(Decimal(str(prev["amount"])) * 100_000_000)
            else:
                value = None
            prevouts.append((script, value))
        digest, items, fee = _utxo(family, signer, tx, prevouts)
        return Rebuilt(digest, items, fee)

    return decode


def utxo_psbt(family: str) -> Decoder:
    def decode(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
        psbt = parse_psbt(base64.b64decode(req["psbt"]), "the PSBT")
        prevouts: list[tuple[bytes, int | None]] = [
            psbt_prevout(psbt, n) for n in range(len(psbt.tx.inputs))
        ]
        digest, items, fee = _utxo(family, signer, psbt.tx, prevouts)
        return Rebuilt(digest, items, fee)

    return decode


def utxo_message(family: str) -> Decoder:
    def decode(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
        data = str(req["message"]).encode()
        return Rebuilt(message_hash(MAGIC[family], data).hex(), [], [], raw=True, message=data)

    return decode


# ---- EOS ------------------------------------------------------------------------------

NAME_CHARS = ".12345abcdefghijklmnopqrstuvwxyz"


def eos_name(value: int) -> str:
    """An EOS name from its 64 bits: twelve 5-bit characters, then a 4-bit one."""
    out = [NAME_CHARS[(value >> (59 - 5 * i)) & 0x1F] for i in range(12)]
    out.append(NAME_CHARS[value & 0x0F])
    return "".join(out).rstrip(".")


def _varuint(r: Reader) -> int:
    value = shift = 0
    while True:
        byte = r.take(1)[0]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value


def _actions(r: Reader) -> list[tuple[str, str, list[str], bytes]]:
    out = []
    for _ in range(_varuint(r)):
        account, name = eos_name(r.uint(8)), eos_name(r.uint(8))
        actors = []
        for _ in range(_varuint(r)):
            actors.append(eos_name(r.uint(8)))
            r.uint(8)
        out.append((account, name, actors, r.take(_varuint(r))))
    return out


def _eos_item(account: str, name: str, data: bytes) -> dict[str, Any]:
    kind = f"{account}::{name}"
    if name != "transfer":
        return item(kind, None, [], decoded=False)
    r = Reader(data, kind)
    r.uint(8)
    to = eos_name(r.uint(8))
    value = int.from_bytes(r.take(8), "little", signed=True)
    symbol = r.take(8)
    precision, code = symbol[0], symbol[1:].rstrip(b"\0").decode()
    step = f"0.{'0' * (precision - 1)}1" if precision else "1"
    denom = f"{account}:{code}"
    return item(kind, to, [amount(denom, value, f"units of {step} {code}", code, precision)])


def eos_transaction(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    chain_id = unhex(req["chainId"], "chainId")
    tx = unhex(req["serializedTransaction"], "serializedTransaction")
    cfd = unhex(req.get("serializedContextFreeData") or "", "serializedContextFreeData")
    r = Reader(tx, "the transaction")
    r.take(4 + 2 + 4)  # expiration, ref_block_num, ref_block_prefix
    _varuint(r)
    r.take(1)
    _varuint(r)
    context_free, actions = _actions(r), _actions(r)
    digest = hashlib.sha256(chain_id + tx + (hashlib.sha256(cfd).digest() if cfd else bytes(32)))
    items = [item(f"{a}::{n}", None, [], decoded=False) for a, n, _, _ in context_free]
    items += [_eos_item(a, n, data) for a, n, _, data in actions]
    return Rebuilt(digest.hexdigest(), items, [], req["chainId"])


def eos_message(req: dict[str, Any], signer: dict[str, Any], account: str) -> Rebuilt:
    data = req["message"].encode() if req.get("message") is not None else unhex(req["data"], "data")
    return Rebuilt(hashlib.sha256(data).hexdigest(), [], [], raw=True, message=data)


DECODERS: dict[tuple[str, str], Decoder] = {
    ("cosmos", "sign-direct"): cosmos_direct,
    ("cosmos", "sign-amino"): cosmos_amino,
    ("cosmos", "sign-message"): cosmos_message,
    ("cosmos", "sign-transfer"): cosmos_transfer,
    ("cosmos", "sign-ibc-transfer"): cosmos_ibc_transfer,
    **{(f, "sign-raw-transaction"): utxo_raw(f) for f in UTXO},
    **{(f, "sign-psbt"): utxo_psbt(f) for f in UTXO},
    **{(f, "sign-message"): utxo_message(f) for f in UTXO},
    ("eos", "sign-transaction"): eos_transaction,
    ("eos", "sign-message"): eos_message,
}
