"""EOSIO/Antelope chains: K1 keys in legacy and PUB_K1_/PVT_K1_ forms, 12-character names.

Formats (each with its own checksum, so converting one form into the other
is never a prefix swap):

- legacy public  "EOS"     + base58(pub33 || ripemd160(pub33)[:4])
- K1 public      "PUB_K1_" + base58(pub33 || ripemd160(pub33 || "K1")[:4])
- legacy private base58(0x80 || key || sha256d(0x80 || key)[:4]), no compression flag
- K1 private     "PVT_K1_" + base58(key || ripemd160(key || "K1")[:4])

Keys derive at m/44'/194'/0'/0/i on every network: coin type 194 is what
Anchor and most EOSIO wallets use, testnets included.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from coincurve import PublicKey

from chainkeys.chains import encoding
from chainkeys.chains.secp256k1 import key_from_secret, parse_hex_key
from chainkeys.chains.spec import (
    ACCOUNT_SHAPE,
    NO_UNITS,
    SIGNS_NOTHING,
    Account,
    ChainError,
    Key,
    MultisigForms,
    NameForm,
    Network,
    NeverSign,
    OptionSpec,
    Units,
    Vocabulary,
    signs_nothing_raw,
)

# Chain ids as published by each chain (wharfkit/common Chains, Anchor).
NETWORKS: Final = encoding.network_table(
    Network(
        "eos", 194, chain_id="aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906"
    ),
    Network(
        "jungle4",
        194,
        testnet=True,
        chain_id="73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d",
    ),
    Network(
        "wax", 194, chain_id="1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4"
    ),
    Network(
        "telos", 194, chain_id="4667b205c6838ef70ff7988f6e8257e8be0e1284a2f59699054a018f743b1d11"
    ),
)
_CHAIN_ID_BYTES: Final = {
    n.chain_id: bytes.fromhex(n.chain_id) for n in NETWORKS.values() if n.chain_id
}

LEGACY_PUBLIC_PREFIX: Final = "EOS"
K1_PUBLIC_PREFIX: Final = "PUB_K1_"
K1_PRIVATE_PREFIX: Final = "PVT_K1_"
_WIF_VERSION: Final = b"\x80"
_K1: Final = b"K1"
_INVALID_PUBLIC: Final = "invalid_public_key"

NAME_ALPHABET: Final = "abcdefghijklmnopqrstuvwxyz12345"
_LETTERS: Final = NAME_ALPHABET[:26]
_NAME = re.compile(r"[a-z1-5.]{0,11}[a-z1-5]")
NAME_PATTERN: Final = rf"^{_NAME.pattern}\Z"  # \Z: the end (api/openapi.py `ecma_patterns`)
_NAME_RULE: Final = (
    "EOS account names are 1 to 12 characters of a-z, 1-5 and '.', not ending in '.'"
)
NAMES: Final = NameForm(
    NAME_PATTERN,
    "the EOS account name (1 to 12 of a-z, 1-5 and '.', not ending in '.')",
    checksummed=False,
)


# ---------------------------------------------------------------- encoders


def _check4(data: bytes, suffix: bytes = b"") -> bytes:
    return encoding.ripemd160(data + suffix)[:4]


def public_key_legacy(pub33: bytes) -> str:
    """The legacy "EOS…" form of a compressed public key."""
    return LEGACY_PUBLIC_PREFIX + encoding.base58_encode(pub33 + _check4(pub33))


def public_key_k1(pub33: bytes) -> str:
    """The "PUB_K1_…" form of a compressed public key."""
    return K1_PUBLIC_PREFIX + encoding.base58_encode(pub33 + _check4(pub33, _K1))


def private_key_wif(secret: bytes) -> str:
    """The legacy WIF every EOS wallet imports: version 0x80, no compression flag."""
    return encoding.base58check_encode(_WIF_VERSION + secret)


def private_key_k1(secret: bytes) -> str:
    """The "PVT_K1_…" form of a private key."""
    return K1_PRIVATE_PREFIX + encoding.base58_encode(secret + _check4(secret, _K1))


def derive_account_name(chain_id: bytes, pub33: bytes) -> str:
    """A 12-character account name from sha256(chain id || public key).

    Deterministic per key and network, so the same key gets different names
    on different chains. The first character is a letter (some tools still
    require it); the other 11 come from a-z1-5. The 256-bit digest is read as
    one integer, so the mapping is uniform to within 2**-190.

    Args:
        chain_id: The network's 32-byte chain id.
        pub33: The compressed public key.

    Returns:
        Twelve characters of "abcdefghijklmnopqrstuvwxyz12345".
    """
    value = int.from_bytes(hashlib.sha256(chain_id + pub33).digest(), "big")
    value, first = divmod(value, 26)
    chars = [_LETTERS[first]]
    for _ in range(11):
        value, index = divmod(value, 31)
        chars.append(NAME_ALPHABET[index])
    return "".join(chars)


# ---------------------------------------------------------------- decoders


def _unsupported_type(prefix: str, what: str, code: str) -> ChainError:
    if prefix in ("R1", "WA"):
        return ChainError(
            f"only K1 (secp256k1) {what}s are supported; this is an {prefix} key", code
        )
    return ChainError(f"unknown {what} type; only K1 is supported", code)


@functools.lru_cache(maxsize=32_768)  # public, and decoded for every signature (~33 µs)
def parse_public_key(text: str) -> bytes:
    """Decode an "EOS…" or "PUB_K1_…" public key, verifying its own checksum (a valid
    one is remembered; a refusal raises and is not).

    Args:
        text: The public key string.

    Returns:
        The 33-byte compressed public key, checked to be a curve point.

    Raises:
        ChainError: code "invalid_public_key": unknown prefix or key type,
            bad base58, wrong length, checksum does not verify (including the
            other form's checksum under this prefix), or not a curve point.
    """
    if len(text) > encoding.MAX_KEY_CHARS:
        raise ChainError("public key text is too long", _INVALID_PUBLIC)
    if text.startswith(K1_PUBLIC_PREFIX):
        body, suffix = text[len(K1_PUBLIC_PREFIX) :], _K1
    elif text.startswith("PUB_"):
        raise _unsupported_type(text[4:6], "public key", _INVALID_PUBLIC)
    elif text.startswith(LEGACY_PUBLIC_PREFIX):
        body, suffix = text[len(LEGACY_PUBLIC_PREFIX) :], b""
    else:
        raise ChainError("public key must start with EOS or PUB_K1_", _INVALID_PUBLIC)
    raw = encoding.base58_decode(body, what="public key", code=_INVALID_PUBLIC)
    if len(raw) != 37:
        raise ChainError(f"public key holds {len(raw)} bytes, not 37", _INVALID_PUBLIC)
    pub33, checksum = raw[:33], raw[33:]
    if checksum != _check4(pub33, suffix):
        raise ChainError("public key checksum does not verify", _INVALID_PUBLIC)
    try:
        PublicKey(pub33)
    except ValueError:
        raise ChainError("public key is not a point on secp256k1", _INVALID_PUBLIC) from None
    return pub33


def _parse_k1_private(body: str) -> Key:
    raw = encoding.base58_decode(body, what="PVT_K1_ key", code=encoding.INVALID_KEY)
    if len(raw) != 36:
        raise ChainError(f"PVT_K1_ key holds {len(raw)} bytes, not 36", encoding.INVALID_KEY)
    secret, checksum = raw[:32], raw[32:]
    if checksum != _check4(secret, _K1):
        raise ChainError("PVT_K1_ key checksum does not verify", encoding.INVALID_KEY)
    return key_from_secret(secret)


def _parse_legacy_wif(text: str) -> Key:
    raw = encoding.base58_decode(text, what="EOS private key", code=encoding.INVALID_KEY)
    payload, checksum = raw[:-4], raw[-4:]
    if len(raw) < 5 or checksum != encoding.double_sha256(payload)[:4]:
        if len(raw) >= 5 and checksum == encoding.sha256(payload)[:4]:
            # nodeos takes this form; no wallet writes it, wharfkit refuses it.
            raise ChainError(
                "EOS private key checksum is single SHA-256; wallets use double SHA-256",
                encoding.INVALID_KEY,
            )
        raise ChainError("EOS private key checksum does not verify", encoding.INVALID_KEY)
    if len(payload) == 34 and payload[33:] == b"\x01":
        raise ChainError(
            "EOS private keys carry no compression flag (this is a compressed-key WIF)",
            encoding.INVALID_KEY,
        )
    if len(payload) != 33:
        raise ChainError(
            f"payload is {len(payload)} bytes; an EOS legacy key carries 33", encoding.INVALID_KEY
        )
    if payload[:1] != _WIF_VERSION:
        raise ChainError("wrong version byte; EOS legacy keys use 0x80", encoding.INVALID_KEY)
    return key_from_secret(payload[1:])


def parse_private_key(text: str) -> Key:
    """Decode a legacy WIF, a "PVT_K1_…" key or 64 hex digits.

    Raises:
        ChainError: code "invalid_private_key", saying which rule failed.
    """
    if len(text) > encoding.MAX_KEY_CHARS:
        raise ChainError("private key text is too long", encoding.INVALID_KEY)
    if text.startswith(K1_PRIVATE_PREFIX):
        return _parse_k1_private(text[len(K1_PRIVATE_PREFIX) :])
    if text.startswith("PVT_"):
        raise _unsupported_type(text[4:6], "private key", encoding.INVALID_KEY)
    if text[:4].upper() == "PVT_":
        raise ChainError("the PVT_K1_ prefix is case-sensitive", encoding.INVALID_KEY)
    if not text or text.startswith("0x") or len(text) >= 60:
        return parse_hex_key(text)
    return _parse_legacy_wif(text)


# ---------------------------------------------------------------- family


def check_name(name: str) -> str:
    """Validate an EOS account name (1-12 of a-z, 1-5, '.'; no trailing '.').

    Raises:
        ChainError: code "invalid_account_name".
    """
    if len(name) > 12 or not _NAME.fullmatch(name):
        raise ChainError(_NAME_RULE, encoding.INVALID_NAME)
    return name


def _chain_id_bytes(network: Network) -> bytes:
    chain_id = encoding.network_param(network.chain_id, network, "chain id")
    cached = _CHAIN_ID_BYTES.get(chain_id)
    return cached if cached is not None else bytes.fromhex(chain_id)


def _pub33(key: Key) -> bytes:
    # EOS only knows compressed keys; a 65-byte key can only come from
    # another family, and is re-encoded rather than refused.
    return key.public if key.compressed else PublicKey(key.public).format(compressed=True)


@dataclass(frozen=True, slots=True)
class EosOptions:
    """EOS create options: the account name, checked (None: derived from the key)."""

    name: str | None = None


@dataclass(frozen=True, slots=True)
class EosFamily:
    """EOSIO/Antelope chains: the account name is chosen by the caller or derived."""

    name: str
    networks: Mapping[str, Network]
    default_network: str
    signers: tuple[Any, ...] = ()  # SignKinds (chains/tx/), filled when the family can sign
    never_sign: NeverSign = signs_nothing_raw  # filled with the signers (chains/registry.py)
    vocabulary: Vocabulary = SIGNS_NOTHING  # likewise
    multisig: MultisigForms | None = None  # likewise, where the family has multisigs
    units: Units = NO_UNITS  # likewise
    response_shape: str = ACCOUNT_SHAPE
    names: NameForm = NAMES
    option_specs: tuple[OptionSpec, ...] = (
        OptionSpec(
            "name",
            "EOS account name (a-z, 1-5, '.'); derived from the key when omitted",
            max_length=12,
            pattern=NAME_PATTERN,
            example="deposit12345",
        ),
    )

    def network(self, name: str | None) -> Network:
        """The named network (None: eos); ChainError listing accepted names."""
        return encoding.select_network(self.name, self.networks, self.default_network, name)

    def options(self, given: Mapping[str, str], key: Key | None) -> EosOptions:
        """Only `name` is accepted, and it must be a valid account name."""
        encoding.reject_foreign_options(self.name, given, self.option_specs)
        name = given.get("name")
        return EosOptions(None if name is None else check_name(name))

    def parse_private_key(self, text: str, network: Network) -> Key:
        """Legacy WIF, PVT_K1_ or hex; the same on every network."""
        return parse_private_key(text)

    def xpub_formats(self, address_type: str | None) -> tuple[str, ...]:
        return ("xpub",)

    def purpose(self, options: EosOptions) -> int:
        return 44

    def account(self, key: Key, network: Network, options: EosOptions) -> Account:
        """Name (caller's, checked by `options`, or derived); legacy public key; PUB_K1_
        form in extra."""
        pub33 = _pub33(key)
        name = options.name or derive_account_name(_chain_id_bytes(network), pub33)
        return Account(
            name=name,
            address=name,
            public_key=public_key_legacy(pub33),
            extra={"public_key_k1": public_key_k1(pub33)},
        )

    def export_private_key(self, key: Key, network: Network) -> str:
        """Legacy WIF (0x80, double SHA-256 checksum, no compression flag)."""
        return private_key_wif(key.secret)

    def export_other_forms(self, key: Key) -> Mapping[str, str]:
        return {"private_key_k1": private_key_k1(key.secret)}

    def check_name(self, name: str) -> str:
        """See the module-level `check_name`."""
        return check_name(name)

    def public_key_bytes(self, display: str) -> bytes:
        return parse_public_key(display)

    def public_key_text(self, public: bytes) -> str:
        return public_key_legacy(public)

    def public_key_forms(self, display: str) -> Mapping[str, str]:
        return {}  # the PUB_K1_ form is stored with the account (`extra`)

    def check_address(self, text: str, network: Network) -> str:
        """An EOS "address" is its account name; names are not network-specific."""
        return check_name(text)

    def canonical_recipient(self, text: str, network: Network | None) -> str:
        """An account name (a transfer's `to`), as it is."""
        return check_name(text)


FAMILY: Final = EosFamily(
    name="eos",
    networks=NETWORKS,
    default_network="eos",
)
