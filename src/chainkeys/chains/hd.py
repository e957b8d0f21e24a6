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
    Bip32KeyData,
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
            raise ChainError(
                "this path yields no valid key; use another index", INVALID_INDEX
            ) from None

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
            if parent is not None
            else bytes(4)
        )
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


def formats(fam: Family[Any], network: Network, address_type: str | None) -> tuple[str, ...]:
    """The extended-key formats that fit (the family's); the first is the default."""
    if network.testnet:
        return ("tpub",)
    return fam.xpub_formats(address_type)


def check_format(
    fam: Family[Any], network: Network, address_type: str | None, fmt: str | None
) -> str:
    """`fmt`, or the default, when it fits the family, network and address type.

    Raises:
        ChainError: code "invalid_format", naming the formats that fit.
    """
    allowed = formats(fam, network, address_type)
    if fmt is None:
        return allowed[0]
    if fmt not in allowed:
        kind = f" {address_type}" if address_type else ""
        raise ChainError(
            f"the format asked does not fit {fam.name}{kind} on {network.name}; "
            f"use {', '.join(allowed)}",
            "invalid_format",
        )
    return fmt


SCRIPTS: Final = {"p2pkh": "pkh({})", "p2sh-p2wpkh": "sh(wpkh({}))", "p2wpkh": "wpkh({})"}


def descriptor(seed: Seed, path: str, network: Network, address_type: str, change: int) -> str:
    """A BIP380 output descriptor with key origin and checksum for one chain of the
    account at `path`: `wpkh([fingerprint/84'/2'/0']xpub…/0/*)#checksum`. The key inside
    is always xpub or tpub, whatever format the answer's own `xpub` uses (BIP380)."""
    key = seed.xpub(path, "tpub" if network.testnet else "xpub")
    origin = f"[{key.fingerprint}/{path.removeprefix('m/')}]{key.xpub}/{change}/*"
    return str(add_checksum(SCRIPTS[address_type].format(origin)))


# ---- multisig (BIP48) ------------------------------------------------------------------

# BIP48 script types: m/48'/coin'/account'/script' (1' P2SH-P2WSH, 2' P2WSH)
BIP48_SCRIPT: Final = {"p2sh-p2wsh": 1, "p2wsh": 2}
# Extended public keys a co-signer may hand over: those above and SLIP-132's multisig
# versions (Ypub/Zpub, Upub/Vpub), which Electrum and Sparrow export for BIP48 keys.
ACCEPTED: Final = {*VERSIONS.values(), 0x0295B43F, 0x02AA7ED3, 0x024289EF, 0x02575483}
_TESTNET_VERSIONS: Final = {0x043587CF, 0x024289EF, 0x02575483}
INVALID_XPUB: Final = "invalid_xpub"


def multisig_path(network: Network, account: int, address_type: str) -> str:
    """The wallet's own member key of a multisig: m/48'/coin'/account'/script'."""
    if not 0 <= account < HARDENED:
        raise ChainError("account is from 0 to 2^31-1", INVALID_INDEX)
    return f"m/48'/{network.coin_type}'/{account}'/{BIP48_SCRIPT[address_type]}'"


@dataclass(frozen=True, slots=True)
class PublicNode:
    """A co-signer's extended public key, as given, with its key origin if it had one."""

    origin: str | None  # "fingerprint/48'/2'/0'/2'" (BIP380 key origin, without brackets)
    public: bytes
    chain_code: bytes
    depth: int
    parent: bytes
    child: int
    testnet: bool

    def descriptor_key(self) -> str:
        """`[origin]xpub…` as BIP380 writes it (xpub or tpub versions, whatever was given)."""
        payload = (
            VERSIONS["tpub" if self.testnet else "xpub"].to_bytes(4, "big")
            + bytes((self.depth,))
            + self.parent
            + self.child.to_bytes(4, "big")
            + self.chain_code
            + self.public
        )
        key = encoding.base58check_encode(payload)
        return f"[{self.origin}]{key}" if self.origin else key

    def derive(self, change: int, index: int) -> bytes:
        """The compressed public key at …/change/index (non-hardened: BIP32 public)."""
        data = Bip32KeyData(
            depth=self.depth,
            index=self.child,
            chain_code=self.chain_code,
            parent_fprint=self.parent,
        )
        try:
            node = Bip32Slip10Secp256k1.FromPublicKey(self.public, data)
            child = node.ChildKey(change).ChildKey(index)
        except Bip32KeyError:
            raise ChainError(
                "this index yields no valid key; use another index", INVALID_INDEX
            ) from None
        return bytes(child.PublicKey().RawCompressed().ToBytes())


def own_node(seed: Seed, path: str, testnet: bool) -> PublicNode:
    """The wallet's own member key at a BIP48 path, with its key origin."""
    key = seed.xpub(path, "tpub" if testnet else "xpub")
    node = parse_xpub(key.xpub, testnet)
    return PublicNode(
        f"{key.fingerprint}/{path.removeprefix('m/')}",
        node.public,
        node.chain_code,
        node.depth,
        node.parent,
        node.child,
        testnet,
    )


def parse_xpub(text: object, testnet: bool) -> PublicNode:
    """An extended public key (`[fingerprint/path]` origin optional), checked: base58check,
    78 bytes, an accepted version of this kind of network, a point on the curve.

    Raises:
        ChainError: code "invalid_xpub".
    """
    if not isinstance(text, str) or not 100 <= len(text) <= 300:
        raise ChainError(
            "an extended public key is 111 base58 characters, with an optional "
            "[fingerprint/path] origin before it",
            INVALID_XPUB,
        )
    origin = None
    if text.startswith("["):
        origin, _, text = text[1:].partition("]")
        parts = origin.split("/")
        if not (
            len(parts[0]) == 8
            and all(c in "0123456789abcdef" for c in parts[0])
            and all(p.rstrip("'h").isdigit() for p in parts[1:])
        ):
            raise ChainError("a key origin is [8 hex digits/path]", INVALID_XPUB)
    raw = encoding.base58check_decode(text, what="extended public key", code=INVALID_XPUB)
    version = int.from_bytes(raw[:4], "big") if len(raw) == 78 else -1
    if version not in ACCEPTED or (version in _TESTNET_VERSIONS) != testnet:
        raise ChainError(
            "not an extended public key of this network (xpub, Ltub, Zpub…; "
            "tpub, Vpub… on test networks)",
            INVALID_XPUB,
        )
    public = raw[45:78]
    try:
        Bip32Slip10Secp256k1.FromPublicKey(public)
    except Exception:  # bip_utils: not a point
        raise ChainError("the extended key's public key is not a point", INVALID_XPUB) from None
    return PublicNode(
        origin, public, raw[13:45], raw[4], raw[5:9], int.from_bytes(raw[9:13], "big"), testnet
    )
