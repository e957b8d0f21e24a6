"""The members of an m-of-n multisig as a request names them, checked the same way for
every family that has one (Cosmos, Dogecoin, Litecoin); each family orders and encodes
them its own way."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Final

from coincurve import PublicKey

from chainkeys.chains.spec import ChainError

# At most 15 keys: a P2SH redeem script is at most 520 bytes (consensus) and 15
# compressed keys are 513; every form keeps the same bound (bitcoinjs-lib stops at 16).
MAX_KEYS: Final = 15
INVALID: Final = "invalid_multisig"


def compressed_key(text: object) -> bytes:
    """A compressed key's 33 bytes from either text form: 66 hex digits (SEC1, as
    Bitcoin tools and the UTXO families' answers give it) or 44 base64 characters (as the
    Cosmos SDK gives it: the `key` of a `pubkey`, amino's `value`). The lengths differ,
    so no text is read both ways; base64 must be canonical (what the SDK writes).

    Raises:
        ValueError: neither form, or not 33 bytes.
    """
    if isinstance(text, str) and len(text) == 2 * 33:
        return bytes.fromhex(text)
    if isinstance(text, str) and len(text) == 44:
        raw = base64.b64decode(text, validate=True)
        if len(raw) == 33 and base64.b64encode(raw).decode() == text:
            return raw
    raise ValueError("not a compressed key's hex or base64")


def members(threshold: object, public_keys: Sequence[object]) -> tuple[int, list[bytes]]:
    """(threshold, keys as given) once each is a compressed point, none twice, 2 to
    MAX_KEYS of them, the threshold from 1 to their number.

    Raises:
        ChainError: code "invalid_multisig", saying which (never quoting a key).
    """
    if not 2 <= len(public_keys) <= MAX_KEYS:
        raise ChainError(f"a multisig has 2 to {MAX_KEYS} public keys", INVALID)
    keys = []
    for i, text in enumerate(public_keys):
        try:
            raw = compressed_key(text)
            PublicKey(raw)
        except Exception:  # not hex nor base64, not 33 bytes, or not a point (coincurve)
            raise ChainError(
                f"public_keys[{i}] is not a compressed secp256k1 public key "
                "(66 hex digits or 44 base64 characters)",
                INVALID,
            ) from None
        keys.append(raw)
    if len(set(keys)) != len(keys):
        raise ChainError("the same public key is listed twice", INVALID)
    if type(threshold) is not int or not 1 <= threshold <= len(keys):
        raise ChainError(f"threshold is a whole number from 1 to {len(keys)}", INVALID)
    return threshold, keys
