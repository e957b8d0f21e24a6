"""The Bitcoin-derived family class Dogecoin and Litecoin are instances of, and their
address types (P2PKH, P2SH-P2WPKH, P2WPKH) as data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from chainkeys.chains import patterns
from chainkeys.chains.encoding import (
    INVALID_ADDRESS,
    INVALID_KEY,
    INVALID_NAME,
    INVALID_OPTION,
    MAX_KEY_CHARS,
    _looks_bech32,
    decode_base58_address,
    decode_segwit_v0,
    decode_wif,
    encode_wif,
    network_param,
    p2pkh_address,
    p2sh_p2wpkh_address,
    p2wpkh_address,
    reject_foreign_options,
    select_network,
)
from chainkeys.chains.secp256k1 import parse_hex_key
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


@dataclass(frozen=True, slots=True)
class AddressType:
    """One address form of a base58/WIF chain and the BIP44-style purpose it derives at."""

    name: str
    purpose: int  # 44 p2pkh, 49 p2sh-p2wpkh, 84 p2wpkh
    segwit: bool  # needs a compressed key
    encode: Callable[[bytes, Network], str]


def _p2pkh(public_key: bytes, network: Network) -> str:
    return p2pkh_address(public_key, network_param(network.p2pkh, network, "p2pkh version"))


def _p2sh_p2wpkh(public_key: bytes, network: Network) -> str:
    return p2sh_p2wpkh_address(public_key, network_param(network.p2sh, network, "p2sh version"))


def _p2wpkh(public_key: bytes, network: Network) -> str:
    return p2wpkh_address(public_key, network_param(network.hrp, network, "bech32 prefix"))


P2PKH: Final = AddressType("p2pkh", 44, False, _p2pkh)
P2SH_P2WPKH: Final = AddressType("p2sh-p2wpkh", 49, True, _p2sh_p2wpkh)
P2WPKH: Final = AddressType("p2wpkh", 84, True, _p2wpkh)


@dataclass(frozen=True, slots=True)
class AddressOptions:
    """Base58 family create options: the address type, always filled (the family's
    default, or P2PKH for an uncompressed key, when the caller sent none)."""

    address_type: AddressType


# WIFs are 51-52 characters; anything hex-key sized is read as hex so that a
# mistyped hex key is told what is wrong with it as hex.
_HEX_SIZED: Final = 60


@dataclass(frozen=True, slots=True)
class Base58Family:
    """A Bitcoin-derived chain: WIF or hex keys, base58 (and optionally segwit) addresses.

    Dogecoin and Litecoin are instances; they differ only in their network
    table and which address types they offer (`address_type` is a create
    option where there is more than one; otherwise the one type is used).
    """

    name: str
    networks: Mapping[str, Network]
    default_network: str
    address_types: Mapping[str, AddressType]
    default_address_type: str
    signers: tuple[Any, ...] = ()  # SignKinds (chains/tx/), filled when the family can sign
    never_sign: NeverSign = signs_nothing_raw  # filled with the signers (chains/registry.py)
    vocabulary: Vocabulary = SIGNS_NOTHING  # likewise
    multisig: MultisigForms | None = None  # likewise, where the family has multisigs
    units: Units = NO_UNITS  # likewise
    # extended public key formats by address type, the default first (xpub_formats)
    xpubs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    response_shape: str = ACCOUNT_SHAPE

    @property
    def option_specs(self) -> tuple[OptionSpec, ...]:
        if len(self.address_types) < 2:
            return ()
        others = [t for t in self.address_types if t != self.default_address_type]
        text = f"{self.name} address type: {self.default_address_type} (default), "
        return (
            OptionSpec(
                "address_type",
                text + " or ".join(others),
                (self.default_address_type, *others),
            ),
        )

    def network(self, name: str | None) -> Network:
        """The named network (None: the default); ChainError listing accepted names."""
        return select_network(self.name, self.networks, self.default_network, name)

    def export_other_forms(self, key: Key) -> Mapping[str, str]:
        return {}

    def public_key_bytes(self, display: str) -> bytes:
        return bytes.fromhex(display)

    def public_key_text(self, public: bytes) -> str:
        return public.hex()

    def public_key_forms(self, display: str) -> Mapping[str, str]:
        return {}

    @property
    def names(self) -> NameForm:
        """A base58 address; with segwit, a witness v0 ('q') program too: a p2wpkh (20
        bytes) or p2wsh (32), with one of the networks' prefixes."""
        if "p2wpkh" not in self.address_types:
            return NameForm(patterns.whole(patterns.BASE58_ADDRESS), self._named)
        segwit = patterns.bech32(
            patterns.hrps(self.networks.values()), "q", patterns.HASH20, patterns.HASH32
        )
        return NameForm(patterns.whole(patterns.BASE58_ADDRESS, segwit), self._named)

    @property
    def _named(self) -> str:
        return f"the account's {self.name} address"

    def options(self, given: Mapping[str, str], key: Key | None) -> AddressOptions:
        """The address type asked for, or the default for `key`.

        An uncompressed key (from a WIF without the 0x01 flag) defaults to
        P2PKH and cannot take a segwit type: its funds are at its P2PKH address.

        Raises:
            ChainError: code "invalid_option" for an option the family does not
                take, an unknown address type, or segwit with an uncompressed key.
        """
        reject_foreign_options(self.name, given, self.option_specs)
        return AddressOptions(self._address_type(given.get("address_type"), key))

    def _address_type(self, requested: str | None, key: Key | None) -> AddressType:
        uncompressed = key is not None and not key.compressed
        if requested is None:
            return self.address_types["p2pkh" if uncompressed else self.default_address_type]
        kind = self.address_types.get(requested)
        if kind is None:
            raise ChainError(
                f"unknown address_type; accepted: {', '.join(self.address_types)}", INVALID_OPTION
            )
        if kind.segwit and uncompressed:
            raise ChainError(
                "segwit needs a compressed key; this key is uncompressed, use p2pkh", INVALID_OPTION
            )
        return kind

    def parse_private_key(self, text: str, network: Network) -> Key:
        """Decode a WIF (network from its version byte) or a 64-digit hex key.

        Raises:
            ChainError: code "invalid_private_key", saying which rule failed.
        """
        if len(text) > MAX_KEY_CHARS:
            raise ChainError("private key text is too long", INVALID_KEY)
        if not text or text.startswith("0x") or len(text) >= _HEX_SIZED:
            return parse_hex_key(text)
        return decode_wif(text, network, self.networks, self.name)

    def xpub_formats(self, address_type: str | None) -> tuple[str, ...]:
        return self.xpubs.get(address_type or self.default_address_type, ("xpub",))

    def purpose(self, options: AddressOptions) -> int:
        return options.address_type.purpose

    def account(self, key: Key, network: Network, options: AddressOptions) -> Account:
        """Address of the requested type; public key as hex SEC (65 bytes if uncompressed).

        Raises:
            ChainError: code "invalid_option" for a segwit type and an uncompressed key.
        """
        kind = options.address_type
        if kind.segwit and not key.compressed:
            raise ChainError(
                "segwit needs a compressed key; this key is uncompressed, use p2pkh", INVALID_OPTION
            )
        address = kind.encode(key.public, network)
        return Account(address, address, key.public.hex(), address_type=kind.name)

    def export_private_key(self, key: Key, network: Network) -> str:
        """WIF for `network`, with the compression flag when the key is compressed."""
        return encode_wif(key, network_param(network.wif, network, "WIF version"))

    def check_name(self, name: str) -> str:
        """An address of any of the family's networks; bech32 comes back lowercased.

        Raises:
            ChainError: code "invalid_account_name".
        """
        return self._check(name, self.networks.values(), INVALID_NAME)

    def check_address(self, text: str, network: Network) -> str:
        """An address of exactly `network` (a testnet address for mainnet is refused).

        Raises:
            ChainError: code "invalid_address".
        """
        return self._check(text, (network,), INVALID_ADDRESS)

    def canonical_recipient(self, text: str, network: Network | None) -> str:
        """An address of `network` (any of the family's when None), as `check_address`
        gives it."""
        error: ChainError | None = None
        for net in [network] if network else self.networks.values():
            try:
                return self.check_address(text, net)
            except ChainError as exc:
                error = exc
        raise error or ChainError("no network to check the address against")

    def _check(self, text: str, networks: Iterable[Network], code: str) -> str:
        networks = tuple(networks)
        what = f"{self.name} address"
        hrps = {n.hrp for n in networks if n.hrp} if "p2wpkh" in self.address_types else set()
        if hrps and _looks_bech32(text):
            _, program = decode_segwit_v0(text, hrps, what=what, code=code)
            if len(program) not in (20, 32):  # a key hash (p2wpkh) or a script hash (p2wsh)
                raise ChainError(f"{what} is neither a p2wpkh nor a p2wsh address", code)
            return text.lower()
        versions = {v for n in networks for v in (n.p2pkh, n.p2sh) if v}
        decode_base58_address(text, versions, what=what, code=code)
        return text
