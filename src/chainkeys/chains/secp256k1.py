"""secp256k1 private keys: generate, validate, parse hex.

Pure: no I/O beyond the OS CSPRNG. Public keys come from libsecp256k1
(coincurve). Every key leaving this module satisfies 1 <= k < n.
"""

from __future__ import annotations

import re
import secrets
from typing import Final

from coincurve import PublicKey

from chainkeys.chains.spec import ChainError, Key

# Order n of the secp256k1 group (SEC 2, section 2.4.1).
CURVE_ORDER: Final = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

_INVALID: Final = "invalid_private_key"
# Literal ASCII ranges: int(s, 16) would also take "_" and surrounding
# whitespace, bytes.fromhex inner spaces, and \d other scripts' digits.
_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")


def generate_key() -> Key:
    """A new compressed key from the OS CSPRNG.

    libsecp256k1 rejects 0 and values >= n while computing the public key;
    the chance of drawing one is below 2**-127, so the loop never repeats in
    practice but never returns an invalid key either.
    """
    while True:
        secret = secrets.token_bytes(32)
        try:
            public = PublicKey.from_secret(secret)
        except ValueError:
            continue
        return Key(secret=secret, public=public.format(compressed=True))


def key_from_secret(secret: bytes, compressed: bool = True, path: str | None = None) -> Key:
    """Validate a 32-byte scalar and compute its public key.

    Args:
        secret: The private key, 32 big-endian bytes.
        compressed: Whether the key's wallet uses the 33-byte compressed
            public key (every modern wallet) or the 65-byte uncompressed one.
        path: The BIP32 path the key was derived at, if any.

    Returns:
        The key, its public key in the requested SEC1 form.

    Raises:
        ChainError: code "invalid_private_key" when the secret is not 32 bytes,
            is zero, or is not below the curve order (never reduced mod n).
    """
    secret = bytes(secret)
    if len(secret) != 32:
        raise ChainError(f"key is {len(secret)} bytes; a private key is 32", _INVALID)
    scalar = int.from_bytes(secret, "big")
    if scalar == 0:
        raise ChainError("key is zero", _INVALID)
    if scalar >= CURVE_ORDER:
        raise ChainError("key is not below the curve order", _INVALID)
    public = PublicKey.from_secret(secret).format(compressed=compressed)
    return Key(secret=secret, public=public, compressed=compressed, path=path)


def parse_hex_key(text: str) -> Key:
    """Parse exactly 64 hex digits, either case, with an optional 0x prefix.

    Raises:
        ChainError: code "invalid_private_key": empty, a non-hex character
            (spaces and "_" included), not 64 digits, or not in [1, n).
    """
    digits = text[2:] if text.startswith("0x") else text
    if not digits:
        raise ChainError("private key is empty", _INVALID)
    if not _HEX_DIGITS.fullmatch(digits):
        raise ChainError("hex private key has a character other than 0-9, a-f", _INVALID)
    if len(digits) != 64:
        raise ChainError(f"hex private key has {len(digits)} digits; it needs exactly 64", _INVALID)
    return key_from_secret(bytes.fromhex(digits))
