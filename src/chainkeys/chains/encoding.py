"""Shared encoders every family calls: hashes, base58check, WIF, bech32.

Pure: no I/O, no settings, no logging. The encoders themselves come from
bip-utils; this module adds the rules the families share (version bytes per
network, length caps, which error to report) so no family carries its own
copy. Error messages say which rule failed and never repeat the input.

Also here: the two helpers every family uses to resolve a network and to
refuse options it does not take (`Base58Family`, the one implementation
Dogecoin and Litecoin share, is in `base58.py`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final, TypeVar

from bip_utils import (  # type: ignore[import-untyped]
    Base58Decoder,
    Base58Encoder,
    Bech32ChecksumError,
    Bech32Decoder,
    Bech32Encoder,
    Ripemd160,
    SegwitBech32Decoder,
    SegwitBech32Encoder,
)

from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.chains.spec import ChainError, Key, Network, OptionSpec

INVALID_KEY: Final = "invalid_private_key"
INVALID_NAME: Final = "invalid_account_name"
INVALID_ADDRESS: Final = "invalid_address"
INVALID_OPTION: Final = "invalid_option"

# BIP173 caps a bech32 string at 90 characters; base58 addresses are far
# shorter. One cap for every name refuses absurd input before any decoding.
MAX_ADDRESS_CHARS: Final = 90
# Longest private-key text any family accepts (a 0x-prefixed hex key is 66);
# base58 decoding is quadratic, so refuse long input before it.
MAX_KEY_CHARS: Final = 128

_T = TypeVar("_T")
_BASE58 = re.compile(r"[1-9A-HJ-NP-Za-km-z]+")
_WIF_FLAG: Final = b"\x01"
_P2WPKH_PREFIX: Final = b"\x00\x14"  # witness v0, push 20 bytes

# ---------------------------------------------------------------- hashes


def _ripemd160_openssl(data: bytes) -> bytes:
    return hashlib.new("ripemd160", data).digest()


def _ripemd160_bip_utils(data: bytes) -> bytes:
    return bytes(Ripemd160.QuickDigest(data))


def _pick_ripemd160() -> Callable[[bytes], bytes]:
    """OpenSSL's RIPEMD-160 when this build has it (4x faster), else bip-utils'.

    OpenSSL 3 moved RIPEMD-160 to the legacy provider, so `hashlib` may lack it.
    """
    try:
        hashlib.new("ripemd160", b"")
    except ValueError:
        return _ripemd160_bip_utils
    return _ripemd160_openssl


ripemd160: Final = _pick_ripemd160()


def sha256(data: bytes) -> bytes:
    """SHA-256 digest."""
    return hashlib.sha256(data).digest()


def double_sha256(data: bytes) -> bytes:
    """SHA-256 of SHA-256: the base58check checksum hash."""
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


def hash160(data: bytes) -> bytes:
    """RIPEMD-160 of SHA-256: the 20-byte key hash in P2PKH, P2WPKH and Cosmos addresses."""
    return ripemd160(hashlib.sha256(data).digest())


# ---------------------------------------------------------------- base58


def base58_encode(data: bytes) -> str:
    """Base58 (Bitcoin alphabet) without a checksum."""
    return str(Base58Encoder.Encode(data))


def base58check_encode(payload: bytes) -> str:
    """Base58 of `payload` followed by the first 4 bytes of its double SHA-256."""
    return str(Base58Encoder.CheckEncode(payload))


def base58_decode(text: str, *, what: str, code: str) -> bytes:
    """Decode base58 text with no checksum.

    Args:
        text: The base58 string.
        what: What the text is meant to be, for the message ("WIF", "address").
        code: The ChainError code to raise with.

    Returns:
        The decoded bytes (leading '1's become zero bytes).

    Raises:
        ChainError: The text is empty or has a character outside the alphabet.
    """
    if not _BASE58.fullmatch(text):
        if not text:
            raise ChainError(f"{what} is empty", code)
        raise ChainError(f"{what} has a character outside the base58 alphabet", code)
    return bytes(Base58Decoder.Decode(text))


def base58check_decode(text: str, *, what: str, code: str) -> bytes:
    """Decode base58check text and verify its double-SHA-256 checksum.

    Args:
        text: The base58check string.
        what: What the text is meant to be, for the message.
        code: The ChainError code to raise with.

    Returns:
        The payload, checksum removed (version byte still first).

    Raises:
        ChainError: Not base58, too short to hold a checksum, or the checksum
            does not verify.
    """
    raw = base58_decode(text, what=what, code=code)
    if len(raw) < 5:
        raise ChainError(f"{what} is too short", code)
    # Decoded once and checked here: Base58Decoder.CheckDecode would decode
    # again, and its error message carries the checksums.
    payload, checksum = raw[:-4], raw[-4:]
    if double_sha256(payload)[:4] != checksum:
        raise ChainError(f"{what} checksum does not verify", code)
    return payload


# ---------------------------------------------------------------- WIF


def encode_wif(key: Key, version: bytes) -> str:
    """Wallet import format: base58check(version || secret [|| 0x01 if compressed]).

    The key is already validated, so this skips bip-utils' WifEncoder, which
    builds and re-checks a second private-key object (3x slower) for the same
    bytes.
    """
    payload = version + key.secret + _WIF_FLAG if key.compressed else version + key.secret
    return base58check_encode(payload)


def decode_wif(text: str, network: Network, networks: Mapping[str, Network], family: str) -> Key:
    """Decode a WIF private key for `network`, taking the network from its version byte.

    Args:
        text: The WIF string.
        network: The network the caller asked for.
        networks: The family's networks, to name the one a foreign WIF is for.
        family: The family name, for messages.

    Returns:
        The key; compressed when the payload carries the 0x01 flag, else
        uncompressed (its addresses are those of the uncompressed public key).

    Raises:
        ChainError: Bad base58 or checksum, a payload that is not 33 or 34
            bytes, a version byte of another network, a flag other than 0x01,
            or a scalar outside [1, n).
    """
    payload = base58check_decode(text, what="WIF", code=INVALID_KEY)
    if len(payload) not in (33, 34):
        raise ChainError(f"payload is {len(payload)} bytes; a WIF carries 33 or 34", INVALID_KEY)
    version = payload[:1]
    if version != network.wif:
        others = [n.name for n in networks.values() if n.wif == version]
        if others:
            raise ChainError(
                f"WIF is for {family} {' or '.join(others)}, not {network.name}", INVALID_KEY
            )
        raise ChainError(f"wrong version byte for a {family} {network.name} WIF", INVALID_KEY)
    if len(payload) == 34 and payload[33:] != _WIF_FLAG:
        raise ChainError("WIF compression flag must be 0x01", INVALID_KEY)
    return key_from_secret(payload[1:33], compressed=len(payload) == 34)


# ---------------------------------------------------------------- addresses


def p2pkh_address(public_key: bytes, version: bytes) -> str:
    """Pay-to-public-key-hash: base58check(version || hash160(public key))."""
    return base58check_encode(version + hash160(public_key))


def p2sh_p2wpkh_address(public_key: bytes, version: bytes) -> str:
    """P2WPKH nested in P2SH: base58check(version || hash160(0x0014 || hash160(key)))."""
    return base58check_encode(version + hash160(_P2WPKH_PREFIX + hash160(public_key)))


def p2wpkh_address(public_key: bytes, hrp: str) -> str:
    """Native segwit v0 key hash: bech32(hrp, 0, hash160(key))."""
    return str(SegwitBech32Encoder.Encode(hrp, 0, hash160(public_key)))


def bech32_encode(hrp: str, data: bytes) -> str:
    """Plain BIP173 bech32 of `data` (Cosmos addresses)."""
    return str(Bech32Encoder.Encode(hrp, data))


def _bech32_hrp(text: str, hrps: Iterable[str], *, what: str, code: str) -> str:
    """The (lowercased) prefix of a bech32 string if it is one of `hrps`."""
    if len(text) > MAX_ADDRESS_CHARS:
        raise ChainError(f"{what} is longer than {MAX_ADDRESS_CHARS} characters", code)
    # The separator is the last "1"; the data part after it holds at least
    # the 6-character checksum.
    hrp, sep, data = text.lower().rpartition("1")
    if not sep or not hrp or len(data) < 6:
        raise ChainError(f"{what} is not bech32 (prefix, '1', data and checksum)", code)
    if hrp not in hrps:
        raise ChainError(f"{what} prefix is not one of: {', '.join(sorted(hrps))}", code)
    return hrp


# bip_utils checks a bech32 checksum in pure Python (~40 µs); an address is checked
# again on every request that names it. Valid strings are remembered (a pure function of
# the text); a failure raises, and a raise is never remembered.
@functools.lru_cache(maxsize=32_768)
def _bech32_data(hrp: str, text: str) -> bytes:
    return bytes(Bech32Decoder.Decode(hrp, text))


@functools.lru_cache(maxsize=32_768)
def _segwit_program(hrp: str, text: str) -> tuple[int, bytes]:
    version, program = SegwitBech32Decoder.Decode(hrp, text)
    return int(version), bytes(program)


def is_bech32(text: str) -> bool:
    """Whether `text` is a BIP173 bech32 string of any prefix (an address on a chain
    this service may not know: an IBC receiver)."""
    if len(text) > MAX_ADDRESS_CHARS or not text.isascii():
        return False
    hrp = text.lower().rpartition("1")[0]
    if not hrp:
        return False
    try:
        decode_bech32(text, {hrp}, what="receiver", code="invalid_recipient")
    except ChainError:
        return False
    return True


def decode_bech32(text: str, hrps: Iterable[str], *, what: str, code: str) -> tuple[str, bytes]:
    """Decode a BIP173 bech32 string (not bech32m) whose prefix is one of `hrps`.

    Args:
        text: The bech32 string; all lowercase or all uppercase.
        hrps: Accepted human-readable prefixes (lowercase).
        what: What the text is meant to be, for the message.
        code: The ChainError code to raise with.

    Returns:
        The prefix and the decoded data bytes.

    Raises:
        ChainError: Too long, unknown prefix, mixed case, bad characters or
            padding, or the bech32 checksum does not verify.
    """
    hrps = frozenset(hrps)
    hrp = _bech32_hrp(text, hrps, what=what, code=code)
    try:
        return hrp, _bech32_data(hrp, text)
    except Bech32ChecksumError:
        raise ChainError(f"{what} checksum does not verify", code) from None
    except ValueError:
        raise ChainError(f"{what} is not valid bech32", code) from None


def decode_segwit_v0(text: str, hrps: Iterable[str], *, what: str, code: str) -> tuple[str, bytes]:
    """Decode a segwit v0 address (bech32, BIP173) whose prefix is one of `hrps`.

    Returns:
        The prefix and the witness program (20 or 32 bytes).

    Raises:
        ChainError: As `decode_bech32`, or a witness version other than 0.
    """
    hrps = frozenset(hrps)
    hrp = _bech32_hrp(text, hrps, what=what, code=code)
    try:
        version, program = _segwit_program(hrp, text)
    except Bech32ChecksumError:
        raise ChainError(f"{what} checksum does not verify", code) from None
    except ValueError:
        raise ChainError(f"{what} is not a valid segwit address", code) from None
    if version != 0:
        raise ChainError(f"{what} is not a segwit v0 address", code)
    return hrp, bytes(program)


@functools.lru_cache(maxsize=32_768)
def _address_payload(text: str) -> bytes:
    """An address's base58check payload, remembered like bech32's above (addresses
    only: a WIF is a secret, and no cache holds one)."""
    return base58check_decode(text, what="address", code="invalid_address")


def decode_base58_address(
    text: str, versions: Iterable[bytes], *, what: str, code: str
) -> tuple[bytes, bytes]:
    """Decode a base58check address whose version byte is one of `versions`.

    Returns:
        The version byte and the 20-byte hash.

    Raises:
        ChainError: Too long, bad base58 or checksum, not 21 bytes, or an
            unknown version byte.
    """
    if len(text) > MAX_ADDRESS_CHARS:
        raise ChainError(f"{what} is longer than {MAX_ADDRESS_CHARS} characters", code)
    try:
        payload = _address_payload(text)
    except ChainError:  # again, for the refusal in the caller's words
        payload = base58check_decode(text, what=what, code=code)
    if len(payload) != 21:
        raise ChainError(f"{what} payload is {len(payload)} bytes, not 21", code)
    if payload[:1] not in frozenset(versions):
        raise ChainError(f"{what} has a version byte this network does not use", code)
    return payload[:1], payload[1:]


def _looks_bech32(text: str) -> bool:
    """Letters, "1", then data, all in one case: meant as bech32, not base58.

    Only routes the text to the decoder whose message fits (a base58 address
    is mixed case); the decoder still checks everything.
    """
    hrp, sep, _ = text.rpartition("1")
    return bool(sep) and hrp.isalpha() and (text.islower() or text.isupper())


# ---------------------------------------------------------------- family helpers


def select_network(
    family: str, networks: Mapping[str, Network], default: str, name: str | None
) -> Network:
    """The named network of a family (None: its default).

    Raises:
        ChainError: code "unknown_network", listing the accepted names.
    """
    if name is None:
        return networks[default]
    network = networks.get(name)
    if network is None:
        raise ChainError(
            f"unknown {family} network; accepted: {', '.join(networks)}", "unknown_network"
        )
    return network


def reject_foreign_options(
    family: str, given: Mapping[str, str], specs: tuple[OptionSpec, ...]
) -> None:
    """Refuse any create option the family does not take.

    Raises:
        ChainError: code "invalid_option", naming the field (never its value).
    """
    accepted = {spec.name for spec in specs}
    for name in given:
        if name not in accepted:
            raise ChainError(f"{family} does not accept the option {name!r}", INVALID_OPTION)


def network_table(*networks: Network) -> Mapping[str, Network]:
    """Networks keyed by name, in declaration order (the order messages list them)."""
    return {n.name: n for n in networks}


# ---------------------------------------------------------------- base58/WIF family


def network_param(value: _T | None, network: Network, what: str) -> _T:
    """A network row's parameter; a row without it is a programming error, not bad input."""
    if value is None:
        raise ValueError(f"network {network.name} has no {what}")
    return value
