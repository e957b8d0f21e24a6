"""secp256k1 ECDSA as every family here needs it: RFC 6979, low-S, recoverable.

libsecp256k1 (coincurve) signs deterministically (RFC 6979) and always
returns a normalized (low-S) signature, which BIP 62 and the Cosmos SDK
require; `low_s` is checked again here so a library change cannot slip by.
"""

from __future__ import annotations

from typing import Final

from coincurve import PrivateKey
from coincurve._libsecp256k1 import ffi  # type: ignore[import-not-found]  # private: pinned

from chainkeys.chains.keys import CURVE_ORDER

WRITTEN_FOR: Final = {"coincurve": "21.0.0"}  # the private ffi import above was read for it

HALF_ORDER: Final = CURVE_ORDER // 2


def sign_compact(secret: bytes, digest32: bytes) -> bytes:
    """64-byte r‖s over a 32-byte digest (no hashing), low-S.

    Args:
        secret: The 32-byte private key.
        digest32: The message digest (already hashed).

    Returns:
        r and s, 32 bytes each, big-endian; s <= n/2.
    """
    sig = PrivateKey(secret).sign_recoverable(digest32, hasher=None)
    rs = sig[:64]
    assert low_s(rs), "libsecp256k1 returned a high-S signature"
    return rs


def sign_recoverable(secret: bytes, digest32: bytes) -> tuple[bytes, int]:
    """64-byte r‖s (low-S) and the recovery id 0..3, over a 32-byte digest."""
    sig = PrivateKey(secret).sign_recoverable(digest32, hasher=None)
    assert low_s(sig[:64]), "libsecp256k1 returned a high-S signature"
    return sig[:64], sig[64]


def sign_der(secret: bytes, digest32: bytes) -> bytes:
    """DER-encoded low-S signature over a 32-byte digest (Bitcoin-style scripts)."""
    return PrivateKey(secret).sign(digest32, hasher=None)


def low_s(rs: bytes) -> bool:
    """Whether a 64-byte r‖s signature has s <= n/2."""
    return 0 < int.from_bytes(rs[32:], "big") <= HALF_ORDER


def sign_recoverable_with_entropy(
    secret: bytes, digest32: bytes, extra: bytes
) -> tuple[bytes, int]:
    """As `sign_recoverable`, with 32 bytes of extra data in the RFC 6979 nonce
    (libsecp256k1's `ndata`): deterministic for the same `extra`, another signature
    for another one (how a signer retries until a signature is canonical)."""
    assert len(extra) == 32
    nonce = (ffi.NULL, ffi.new("unsigned char [32]", extra))
    sig = PrivateKey(secret).sign_recoverable(digest32, hasher=None, custom_nonce=nonce)
    assert low_s(sig[:64]), "libsecp256k1 returned a high-S signature"
    return sig[:64], sig[64]
