"""Hierarchical deterministic keys: BIP32 paths per family, extended public keys, descriptors.

Pure, like the rest of `chains/`. Every family derives at
m/purpose'/coin_type'/account'/change/index (BIP44; BIP49/84 purposes for
Litecoin's segwit address types; testnets use coin type 1). Extended keys are
serialised here (BIP32: version, depth, parent fingerprint, child number,
chain code, key) with version bytes chosen per call: bip_utils' alternate
Litecoin versions are a process-wide switch, which a server answering many
tenants at once must never flip.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Final

from bip_utils import (  # type: ignore[import-untyped]
    Bip32KeyError,
    Bip32Slip10Secp256k1,
    Bip39Languages,
    Bip39MnemonicEncoder,
)
from embit.descriptor.checksum import add_checksum  # type: ignore[import-untyped]

from chainkeys.chains import encoding
from chainkeys.chains.mnemonic import WORD_COUNTS, normalise_mnemonic, seed_from_mnemonic
from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.chains.spec import ChainError, Family, Key, Network

HARDENED: Final = 2**31
INVALID_INDEX: Final = "invalid_index"

# BIP32 public version bytes by name: Bitcoin's xpub/tpub (what BIP380 descriptors and
# Litecoin Core use), SLIP-132's ypub/zpub, Litecoin's Ltub/Mtub, Dogecoin Core's dgub.
VERSIONS: Final = {
    "xpub": 0x0488B21E,
    "tpub": 0x043587CF,
    "ypub": 0x049D7CB2,
    "zpub": 0x04B24746,
    "Ltub": 0x019DA462,
    "Mtub": 0x01B26EF6,
    "dgub": 0x02FACAFD,
}


def hd_path(purpose: int, coin_type: int, account: int = 0, change: int = 0, index: int = 0) -> str:
    """m/purpose'/coin_type'/account'/change/index, each part checked.

    Raises:
        ChainError: code "invalid_index": an account or index outside 0..2^31-1
            (indices are never hardened), or a change other than 0 or 1.
    """
    for name, value in (("account", account), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < HARDENED:
            raise ChainError(f"{name} must be a whole number from 0 to 2147483647", INVALID_INDEX)
    if change not in (0, 1) or isinstance(change, bool):
        raise ChainError("change must be 0 (receive) or 1 (change)", INVALID_INDEX)
    return f"m/{purpose}'/{coin_type}'/{account}'/{change}/{index}"


def account_path(fam: Family[Any], network: Network, options: Any, account: int = 0) -> str:
    """The account-level path (what an extended public key is exported at)."""
    return hd_path(fam.purpose(options), network.coin_type, account).rsplit("/", 2)[0]


def key_from_mnemonic(
    fam: Family[Any], mnemonic: str, passphrase: str, index: int, network: Network, options: Any
) -> Key:
    """An account imported from a phrase: account 0, receive chain, `index`.

    Raises:
        ChainError: "invalid_mnemonic" for the phrase, "invalid_account_index"
            for an index outside 0..2^31-1.
    """
    try:
        path = hd_path(fam.purpose(options), network.coin_type, 0, 0, index)
    except ChainError:
        raise ChainError(
            "account_index must be an integer from 0 to 2147483647", "invalid_account_index"
        ) from None
    return Seed(seed_from_mnemonic(mnemonic, passphrase)).key(path)


def generate_mnemonic(words: int = 24) -> str:
    """A new English BIP39 phrase from the OS CSPRNG (12, 15, 18, 21 or 24 words).

    Raises:
        ChainError: code "invalid_words" for another word count.
    """
    if isinstance(words, bool) or words not in WORD_COUNTS:
        raise ChainError("words must be 12, 15, 18, 21 or 24", "invalid_words")
    entropy = secrets.token_bytes(words * 4 // 3)
    phrase = Bip39MnemonicEncoder(Bip39Languages.ENGLISH).Encode(entropy)
    return normalise_mnemonic(str(phrase))


@dataclass(frozen=True, slots=True)
class ExtendedKey:
    """An account-level extended public key, serialised for one format."""

    xpub: str
    format: str
    path: str
    fingerprint: str  # the master key's, hex (the key origin of a descriptor)


class Seed:
    """A BIP32 root from a BIP39 seed; derives keys and extended public keys."""

    def __init__(self, seed: bytes) -> None:
        self._root = Bip32Slip10Secp256k1.FromSeed(seed)

    def __repr__(self) -> str:
        return "Seed(***)"

    @property
    def fingerprint(self) -> str:
        """The master public key's hash160, first 4 bytes, hex (BIP32 key origin)."""
        return encoding.hash160(bytes(self._root.PublicKey().RawCompressed().ToBytes()))[:4].hex()

    def _node(self, path: str) -> Any:
        try:
            return self._root.DerivePath(path)
        except Bip32KeyError:
            raise ChainError("this path yields no valid key; use another index",
                             INVALID_INDEX) from None  # fmt: skip

    def key(self, path: str) -> Key:
        """The compressed private key at `path`, with the path recorded on it."""
        node = self._node(path)
        return key_from_secret(bytes(node.PrivateKey().Raw().ToBytes()), compressed=True, path=path)

    def xpub(self, path: str, fmt: str) -> ExtendedKey:
        """The extended public key at `path` with the version bytes of `fmt`."""
        node = self._node(path)
        parts = path.split("/")[1:]
        parent = self._node("/".join(["m", *parts[:-1]])) if parts else None
        parent_fp = (
            encoding.hash160(bytes(parent.PublicKey().RawCompressed().ToBytes()))[:4]
            if parent is not None else bytes(4)
        )  # fmt: skip
        last = parts[-1] if parts else "0"
        child = int(last.rstrip("'")) + (HARDENED if last.endswith("'") else 0) if parts else 0
        payload = (
            VERSIONS[fmt].to_bytes(4, "big")
            + bytes((len(parts),))
            + parent_fp
            + child.to_bytes(4, "big")
            + bytes(node.ChainCode().ToBytes())
            + bytes(node.PublicKey().RawCompressed().ToBytes())
        )
        return ExtendedKey(encoding.base58check_encode(payload), fmt, path, self.fingerprint)


def formats(family: str, network: Network, address_type: str | None) -> tuple[str, ...]:
    """The extended-key formats that fit; the first is the default."""
    if network.testnet:
        return ("tpub",)
    if family == "litecoin":
        return {
            "p2pkh": ("xpub", "Ltub"),
            "p2sh-p2wpkh": ("xpub", "Ltub", "ypub", "Mtub"),
            "p2wpkh": ("xpub", "Ltub", "zpub"),
        }[address_type or "p2wpkh"]
    if family == "dogecoin":
        return ("dgub", "xpub")
    return ("xpub",)


def check_format(family: str, network: Network, address_type: str | None, fmt: str | None) -> str:
    """`fmt`, or the default, when it fits the family, network and address type.

    Raises:
        ChainError: code "invalid_format", naming the formats that fit.
    """
    allowed = formats(family, network, address_type)
    if fmt is None:
        return allowed[0]
    if fmt not in allowed:
        kind = f" {address_type}" if address_type else ""
        raise ChainError(f"the format asked does not fit {family}{kind} on {network.name}; "
                         f"use {', '.join(allowed)}", "invalid_format")  # fmt: skip
    return fmt


SCRIPTS: Final = {"p2pkh": "pkh({})", "p2sh-p2wpkh": "sh(wpkh({}))", "p2wpkh": "wpkh({})"}


def descriptor(seed: Seed, path: str, network: Network, address_type: str, change: int) -> str:
    """A BIP380 output descriptor with key origin and checksum for one chain of the
    account at `path`: `wpkh([fingerprint/84'/2'/0']xpub…/0/*)#checksum`. The key inside
    is always xpub or tpub, whatever format the answer's own `xpub` uses (BIP380)."""
    key = seed.xpub(path, "tpub" if network.testnet else "xpub")
    origin = f"[{key.fingerprint}/{path.removeprefix('m/')}]{key.xpub}/{change}/*"
    return str(add_checksum(SCRIPTS[address_type].format(origin)))
