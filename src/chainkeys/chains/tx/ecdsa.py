"""secp256k1 ECDSA as every family here needs it: RFC 6979, low-S, recoverable.

libsecp256k1 (coincurve) signs deterministically (RFC 6979) and always
returns a normalized (low-S) signature, which BIP 62 and the Cosmos SDK
require; `low_s` is checked again here so a library change cannot slip by.
"""

from __future__ import annotations

from typing import Final

from coincurve import PublicKey
from coincurve._libsecp256k1 import ffi, lib  # type: ignore[import-not-found]  # private_apis.py
from coincurve.context import GLOBAL_CONTEXT
from coincurve.ecdsa import cdata_to_der, deserialize_compact, serialize_recoverable

from chainkeys.chains.secp256k1 import CURVE_ORDER

HALF_ORDER: Final = CURVE_ORDER // 2
_DEFAULT_NONCE: Final = (ffi.NULL, ffi.NULL)  # RFC 6979, no extra data


def _sign(secret: bytes, digest32: bytes, nonce: tuple[object, object] = _DEFAULT_NONCE) -> bytes:
    """libsecp256k1's recoverable signature (65 bytes: r‖s‖recid) of a 32-byte digest.

    What coincurve's `PrivateKey(secret).sign_recoverable` does, without the two public
    keys (plain and x-only) its constructor computes first: two of the three curve
    multiplications a signature cost (~11 % of a sign request's CPU under load).
    """
    if len(secret) != 32 or len(digest32) != 32:
        raise ValueError("a secret and a digest are 32 bytes each")
    signature = ffi.new("secp256k1_ecdsa_recoverable_signature *")
    if not lib.secp256k1_ecdsa_sign_recoverable(
        GLOBAL_CONTEXT.ctx, signature, digest32, secret, *nonce
    ):
        raise ValueError("libsecp256k1 refused to sign: the private key is invalid")
    return bytes(serialize_recoverable(signature, GLOBAL_CONTEXT))


def sign_compact(secret: bytes, digest32: bytes) -> bytes:
    """64-byte r‖s over a 32-byte digest (no hashing), low-S.

    Args:
        secret: The 32-byte private key.
        digest32: The message digest (already hashed).

    Returns:
        r and s, 32 bytes each, big-endian; s <= n/2.
    """
    return checked(_sign(secret, digest32)[:64])


def sign_recoverable(secret: bytes, digest32: bytes) -> tuple[bytes, int]:
    """64-byte r‖s (low-S) and the recovery id 0..3, over a 32-byte digest."""
    sig = _sign(secret, digest32)
    return checked(sig[:64]), sig[64]


def sign_der(secret: bytes, digest32: bytes) -> bytes:
    """DER-encoded low-S signature over a 32-byte digest (Bitcoin-style scripts)."""
    rs = checked(_sign(secret, digest32)[:64])  # the same RFC 6979 nonce as a plain sign
    return bytes(cdata_to_der(deserialize_compact(rs)))


class HighS(RuntimeError):
    """libsecp256k1 returned a high-S signature: never handed out (a node refuses it)."""


def checked(rs: bytes) -> bytes:
    """`rs` when s <= n/2; HighS otherwise (checked at run time, never an assert)."""
    if not low_s(rs):
        raise HighS("libsecp256k1 returned a high-S signature")
    return rs


def low_s(rs: bytes) -> bool:
    """Whether a 64-byte r‖s signature has s <= n/2."""
    return 0 < int.from_bytes(rs[32:], "big") <= HALF_ORDER


def sign_recoverable_with_entropy(
    secret: bytes, digest32: bytes, extra: bytes
) -> tuple[bytes, int]:
    """As `sign_recoverable`, with 32 bytes of extra data in the RFC 6979 nonce
    (libsecp256k1's `ndata`): deterministic for the same `extra`, another signature
    for another one (how a signer retries until a signature is canonical)."""
    if len(extra) != 32:
        raise ValueError("extra nonce data is 32 bytes")
    nonce = (ffi.NULL, ffi.new("unsigned char [32]", extra))
    sig = _sign(secret, digest32, nonce)
    return checked(sig[:64]), sig[64]


def verify_compact(public: bytes, rs: bytes, digest32: bytes) -> bool:
    """Whether a 64-byte r‖s signature (low-S, as the Cosmos SDK requires) is `public`'s
    over a 32-byte digest. Never raises: a malformed signature is an invalid one."""
    if len(rs) != 64 or not low_s(rs):
        return False
    try:
        der = cdata_to_der(deserialize_compact(rs))
        return bool(PublicKey(public).verify(der, digest32, hasher=None))
    except Exception:  # coincurve: r or s out of range, a key that is not a point
        return False
