"""Independent test helpers (no chainkeys code): Dogecoin raw transactions, EOS
transactions and names, base58, and signature checks with coincurve."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import coincurve
from coincurve.ecdsa import cdata_to_der, deserialize_compact

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
EOS_MAINNET = "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906"


def dsha256(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


def ripemd160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", data).digest()


def varint(n: int) -> bytes:
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    return b"\xfe" + n.to_bytes(4, "little")


def b58decode(text: str) -> bytes:
    n = 0
    for ch in text:
        n = n * 58 + B58.index(ch)
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * (len(text) - len(text.lstrip("1"))) + raw


# ---- Dogecoin/Litecoin legacy transactions -------------------------------------------------


def p2pkh_script(hash160: bytes) -> bytes:
    return b"\x76\xa9\x14" + hash160 + b"\x88\xac"


def legacy_tx(inputs: list[tuple[bytes, int, bytes]], outputs: list[tuple[int, bytes]]) -> bytes:
    """version 1; inputs (txid as shown reversed, vout, scriptSig); outputs (value, script)."""
    out = (1).to_bytes(4, "little") + varint(len(inputs))
    for txid, vout, script in inputs:
        out += txid[::-1] + vout.to_bytes(4, "little") + varint(len(script)) + script
        out += b"\xff\xff\xff\xff"
    out += varint(len(outputs))
    for value, script in outputs:
        out += value.to_bytes(8, "little") + varint(len(script)) + script
    return out + bytes(4)


def txid(raw: bytes) -> bytes:
    return dsha256(raw)[::-1]


def first_input_script(raw: bytes) -> bytes:
    """The scriptSig of input 0 of a one-byte-count legacy transaction."""
    pos = 4 + 1 + 32 + 4
    length = raw[pos]
    return raw[pos + 1 : pos + 1 + length]


def pushes(script: bytes) -> list[bytes]:
    items, pos = [], 0
    while pos < len(script):
        n = script[pos]
        items.append(script[pos + 1 : pos + 1 + n])
        pos += 1 + n
    return items


# ---- signatures ------------------------------------------------------------------------


def verify_compact(pubkey: bytes, signature64: bytes, digest: bytes) -> bool:
    der = cdata_to_der(deserialize_compact(signature64))
    return coincurve.PublicKey(pubkey).verify(der, digest, hasher=None)


def low_s(signature64: bytes) -> bool:
    n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    return int.from_bytes(signature64[32:], "big") <= n // 2


def recover(header_rs: bytes, digest: bytes, header_base: int) -> coincurve.PublicKey:
    """The public key of a 65-byte `header || r || s` signature."""
    recid = (header_rs[0] - header_base) & 3
    return coincurve.PublicKey.from_signature_and_message(
        header_rs[1:] + bytes((recid,)), digest, hasher=None
    )


def message_digest(magic: str, message: str) -> bytes:
    data = message.encode()
    return dsha256(varint(len(magic)) + magic.encode() + varint(len(data)) + data)


def amino_bytes(doc: dict[str, Any]) -> bytes:
    """cosmjs serializeSignDoc: sorted, compact JSON."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def proto_varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes((byte | (0x80 if n else 0),))
        if not n:
            return out


def sign_doc_bytes(body: bytes, auth_info: bytes, chain_id: str, account_number: int) -> bytes:
    """cosmos.tx.v1beta1.SignDoc, protobuf-encoded by hand (fields 1-4; zero values omitted)."""
    out = b""
    for tag, value in ((0x0A, body), (0x12, auth_info), (0x1A, chain_id.encode())):
        if value:
            out += bytes((tag,)) + proto_varint(len(value)) + value
    if account_number:
        out += b"\x20" + proto_varint(account_number)
    return out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ---- EOS -------------------------------------------------------------------------------


def eos_name(text: str) -> int:
    def symbol(c: str) -> int:
        if "a" <= c <= "z":
            return ord(c) - ord("a") + 6
        if "1" <= c <= "5":
            return ord(c) - ord("1") + 1
        return 0

    value = 0
    for i in range(13):
        c = symbol(text[i]) if i < len(text) else 0
        if i < 12:
            value |= (c & 0x1F) << (64 - 5 * (i + 1))
        else:
            value |= c & 0x0F
    return value


def name_bytes(text: str) -> bytes:
    return eos_name(text).to_bytes(8, "little")


def eos_transfer_tx(sender: str, to: str, amount: int, memo: str = "m") -> bytes:
    """A serialized transaction with one eosio.token::transfer of `amount` (4-decimal EOS)."""
    symbol = bytes((4,)) + b"EOS".ljust(7, b"\0")
    data = name_bytes(sender) + name_bytes(to) + amount.to_bytes(8, "little", signed=True)
    data += symbol + varint(len(memo)) + memo.encode()
    action = name_bytes("eosio.token") + name_bytes("transfer") + varint(1)
    action += name_bytes(sender) + name_bytes("active") + varint(len(data)) + data
    header = (1_900_000_000).to_bytes(4, "little") + (1234).to_bytes(2, "little")
    header += (0xDEADBEEF).to_bytes(4, "little") + varint(0) + bytes(1) + varint(0)
    return header + varint(0) + varint(1) + action + varint(0)


def eos_signature(sig: str) -> bytes:
    """The 65 bytes of a `SIG_K1_…` string, its checksum checked."""
    assert sig.startswith("SIG_K1_")
    raw = b58decode(sig[len("SIG_K1_") :])
    data, check = raw[:-4], raw[-4:]
    assert len(data) == 65
    assert ripemd160(data + b"K1")[:4] == check
    return data
