"""What the answer checks share: hashes, base58 and bech32 decoding, the public key an
address commits to, and ECDSA verification and recovery through coincurve
(libsecp256k1: no curve arithmetic is written here).

A check raises `AnswerMismatch` (through `fail`); `run_check` turns anything else a
malformed answer makes a check raise (a bad base64, a truncated protobuf) into one
too, and names the request it answers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import coincurve
from coincurve.ecdsa import cdata_to_der, deserialize_compact

from chainkeys_client._errors import AnswerMismatch
from chainkeys_client._ripemd160 import ripemd160

T = TypeVar("T")
R = TypeVar("R")
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(B58)}
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_INDEX = {c: i for i, c in enumerate(BECH32)}


def fail(message: str) -> NoReturn:
    raise AnswerMismatch(message)


def run_check(
    check: Callable[[T], R], value: T, *, method: str, path: str, request_id: str | None
) -> R:
    """Run `check` over an answer: every failure is an AnswerMismatch naming the request."""
    try:
        return check(value)
    except AnswerMismatch as exc:
        exc.method, exc.path, exc.request_id = method, path, request_id
        raise
    except Exception as exc:  # a malformed answer: refused, never passed on
        raise AnswerMismatch(
            f"the answer could not be read to check it ({type(exc).__name__})",
            method=method, path=path, request_id=request_id,
        ) from exc  # fmt: skip


# ---- hashes and encodings -------------------------------------------------------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def dsha256(data: bytes) -> bytes:
    return sha256(sha256(data))


def hash160(data: bytes) -> bytes:
    return ripemd160(sha256(data))


def unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        fail(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        fail(f"{what} is not standard base64")


def unhex(text: Any, what: str) -> bytes:
    if isinstance(text, bytes | bytearray):
        return bytes(text)
    if not isinstance(text, str):
        fail(f"{what} is not hex")
    try:
        return bytes.fromhex(text)
    except ValueError:
        fail(f"{what} is not hex")


def b58decode(text: str) -> bytes:
    n = 0
    for ch in text:
        if ch not in _B58_INDEX:
            raise ValueError("not base58")
        n = n * 58 + _B58_INDEX[ch]
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * (len(text) - len(text.lstrip("1"))) + raw


def b58check_decode(text: str) -> bytes | None:
    """The payload of a Base58Check string (double-SHA-256 checksum), None if it is not one."""
    try:
        raw = b58decode(text)
    except ValueError:
        return None
    if len(raw) < 5 or dsha256(raw[:-4])[:4] != raw[-4:]:
        return None
    return raw[:-4]


def _polymod(values: list[int]) -> int:
    gen = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if (top >> i) & 1 else 0
    return chk


def _convert(data: list[int], frm: int, to: int) -> bytes | None:
    acc = bits = 0
    out = bytearray()
    for value in data:
        acc = (acc << frm) | value
        bits += frm
        while bits >= to:
            bits -= to
            out.append((acc >> bits) & ((1 << to) - 1))
    if bits >= frm or (acc << (to - bits)) & ((1 << to) - 1):
        return None  # padding longer than 4 bits, or not zero
    return bytes(out)


def bech32_decode(text: str) -> tuple[str, list[int]] | None:
    """(hrp, 5-bit data without the checksum) of a BIP173 bech32 string, else None."""
    if not text.isascii() or text.lower() != text and text.upper() != text or len(text) > 90:
        return None
    text = text.lower()
    pos = text.rfind("1")
    if pos < 1 or pos + 7 > len(text):
        return None
    hrp, rest = text[:pos], text[pos + 1 :]
    if any(c not in _BECH32_INDEX for c in rest):
        return None
    data = [_BECH32_INDEX[c] for c in rest]
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    if _polymod(expanded + data) != 1:  # bech32 (a bech32m string fails here)
        return None
    return hrp, data[:-6]


def bech32_payload(text: str) -> bytes | None:
    """The bytes a bech32 address carries (a Cosmos address: hash160 of the key)."""
    decoded = bech32_decode(text)
    return None if decoded is None else _convert(decoded[1], 5, 8)


def witness_v0_program(text: str, size: int = 20) -> bytes | None:
    """The program of a segwit v0 address (ltc1…) of `size` bytes (20: a key hash, 32: a
    script hash), else None."""
    decoded = bech32_decode(text)
    if decoded is None or not decoded[1] or decoded[1][0] != 0:
        return None
    program = _convert(decoded[1][1:], 5, 8)
    return program if program is not None and len(program) == size else None


# ---- keys and addresses ---------------------------------------------------------------


def p2wpkh_program(key_hash: bytes) -> bytes:
    return b"\x00\x14" + key_hash


def address_kind(address: str, pub: bytes) -> str | None:
    """How `address` pays `pub`: "p2pkh", "p2sh-p2wpkh" or "p2wpkh"; None if it does not.

    Base58 addresses are read without a version table: a payload equal to the key's
    hash160 is P2PKH, one equal to the hash160 of its P2WPKH program P2SH-P2WPKH
    (a key whose hash equals another's script hash would be a hash160 collision).
    """
    key_hash = hash160(pub)
    program = witness_v0_program(address)
    if program is not None:
        return "p2wpkh" if program == key_hash else None
    payload = b58check_decode(address)
    if payload is None or len(payload) != 21:
        return None
    if payload[1:] == key_hash:
        return "p2pkh"
    if payload[1:] == hash160(p2wpkh_program(key_hash)):
        return "p2sh-p2wpkh"
    return None


def cosmos_key_matches(address: str, pub: bytes) -> bool:
    """Whether `address` is bech32(hrp, hash160(pub)): the key the account's address names."""
    payload = bech32_payload(address)
    return payload is not None and len(payload) == 20 and payload == hash160(pub)


def public_key(data: bytes, what: str) -> coincurve.PublicKey:
    try:
        return coincurve.PublicKey(data)
    except Exception:  # coincurve: ValueError, or its own on a point off the curve
        fail(f"{what} is not a secp256k1 public key")


# ---- signatures (libsecp256k1: low S, strict DER) -------------------------------------


def verify_compact(pub: bytes, signature: bytes, digest: bytes) -> bool:
    """A 64-byte r||s signature of a 32-byte digest (Cosmos)."""
    if len(signature) != 64:
        return False
    try:
        der = cdata_to_der(deserialize_compact(signature))
        return bool(public_key(pub, "the key").verify(der, digest, hasher=None))
    except ValueError:
        return False


def verify_der(pub: bytes, der: bytes, digest: bytes) -> bool:
    """A strict-DER signature of a 32-byte digest (Dogecoin, Litecoin inputs)."""
    try:
        return bool(public_key(pub, "the key").verify(der, digest, hasher=None))
    except ValueError:
        return False


def recover(rs: bytes, recid: int, digest: bytes) -> coincurve.PublicKey:
    """The key whose signature of `digest` is (r||s, recid); AnswerMismatch if none is."""
    if len(rs) != 64 or recid not in range(4):
        fail("the signature is not a 65-byte recoverable signature")
    try:
        return coincurve.PublicKey.from_signature_and_message(
            rs + bytes((recid,)), digest, hasher=None
        )
    except Exception:  # no key recovers from it
        fail("no public key recovers from the signature")
