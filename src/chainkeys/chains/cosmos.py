"""Cosmos SDK chains: bech32(hrp, hash160(compressed key)), hex private keys, coin type 118."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from chainkeys.chains import encoding, patterns
from chainkeys.chains.secp256k1 import parse_hex_key
from chainkeys.chains.spec import (
    KEYRING,
    NO_UNITS,
    SIGNS_NOTHING,
    Account,
    ChainError,
    Key,
    MultisigForms,
    NameForm,
    Network,
    NeverSign,
    NoOptions,
    OptionSpec,
    Units,
    Vocabulary,
    signs_nothing_raw,
)

NETWORKS: Final = encoding.network_table(
    Network("cosmoshub", 118, chain_id="cosmoshub-4", hrp="cosmos"),
    # The Cosmos Hub public testnet is the ICS provider testnet, chain id
    # "provider"; theta-testnet-001 was sunset on 2024-12-01.
    Network("cosmoshub-testnet", 118, testnet=True, chain_id="provider", hrp="cosmos"),
    Network("osmosis", 118, chain_id="osmosis-1", hrp="osmo"),
    Network("osmosis-testnet", 118, testnet=True, chain_id="osmo-test-5", hrp="osmo"),
    Network("juno", 118, chain_id="juno-1", hrp="juno"),
    Network("akash", 118, chain_id="akashnet-2", hrp="akash"),
    Network("stargaze", 118, chain_id="stargaze-1", hrp="stars"),
    Network("celestia", 118, chain_id="celestia", hrp="celestia"),
)

# The `pubkey` string of `keys list --output json`: compact, "@type" first.
_KEYRING_HEAD: Final = '{"@type":"/cosmos.crypto.secp256k1.PubKey","key":"'
_KEYRING_TAIL: Final = '"}'


def keyring_pubkey(public_key: str) -> str:
    """The keyring `pubkey` string of a base64 compressed key (what `account` stores)."""
    return _KEYRING_HEAD + public_key + _KEYRING_TAIL


@dataclass(frozen=True, slots=True)
class CosmosFamily:
    """Cosmos SDK chains; networks differ only in bech32 prefix and chain id."""

    name: str
    networks: Mapping[str, Network]
    default_network: str
    option_specs: tuple[OptionSpec, ...] = ()  # Cosmos takes no create options
    signers: tuple[Any, ...] = ()  # SignKinds (chains/tx/), filled when the family can sign
    never_sign: NeverSign = signs_nothing_raw  # filled with the signers (chains/registry.py)
    vocabulary: Vocabulary = SIGNS_NOTHING  # likewise
    multisig: MultisigForms | None = None  # likewise, where the family has multisigs
    units: Units = NO_UNITS  # likewise
    response_shape: str = KEYRING

    def network(self, name: str | None) -> Network:
        """The named network (None: cosmoshub); ChainError listing accepted names."""
        return encoding.select_network(self.name, self.networks, self.default_network, name)

    def options(self, given: Mapping[str, str], key: Key | None) -> NoOptions:
        """Cosmos takes no create options."""
        encoding.reject_foreign_options(self.name, given, self.option_specs)
        return NoOptions()

    def parse_private_key(self, text: str, network: Network) -> Key:
        """64 hex digits (`keys export --unarmored-hex`), optional 0x."""
        if len(text) > encoding.MAX_KEY_CHARS:
            raise ChainError("private key text is too long", encoding.INVALID_KEY)
        return parse_hex_key(text)

    def xpub_formats(self, address_type: str | None) -> tuple[str, ...]:
        return ("xpub",)

    def purpose(self, options: NoOptions) -> int:
        return 44

    def account(self, key: Key, network: Network, options: NoOptions) -> Account:
        """Address bech32(hrp, hash160(key)); public key base64; keyring JSON in extra."""
        if not key.compressed:
            raise ChainError("cosmos addresses need a compressed key", encoding.INVALID_KEY)
        address = encoding.bech32_encode(
            encoding.network_param(network.hrp, network, "bech32 prefix"),
            encoding.hash160(key.public),
        )
        encoded = base64.b64encode(key.public).decode("ascii")
        return Account(
            name=address,
            address=address,
            public_key=encoded,
            extra={"pubkey": keyring_pubkey(encoded)},
        )

    def export_private_key(self, key: Key, network: Network) -> str:
        """64 lowercase hex digits, the form `keys import-hex` and wallets take."""
        return key.secret.hex()

    def check_name(self, name: str) -> str:
        """A bech32 address with a known prefix and a 20-byte hash; returned lowercased.

        Raises:
            ChainError: code "invalid_account_name".
        """
        return self._check(name, self.networks.values(), encoding.INVALID_NAME)

    def export_other_forms(self, key: Key) -> Mapping[str, str]:
        return {}

    def public_key_bytes(self, display: str) -> bytes:
        return base64.b64decode(display)

    def public_key_text(self, public: bytes) -> str:
        return base64.b64encode(public).decode("ascii")

    def public_key_forms(self, display: str) -> Mapping[str, str]:
        """The keyring `pubkey` JSON (Moon's), and the key as 66 hex digits beside it
        (`public_key`: the form Bitcoin tools and the other families' answers give)."""
        return {"pubkey": keyring_pubkey(display), "public_key": base64.b64decode(display).hex()}

    @property
    def names(self) -> NameForm:
        """A bech32 address of a 20-byte hash, with one of the networks' prefixes."""
        hrps = patterns.hrps(self.networks.values())
        return NameForm(
            patterns.whole(patterns.bech32(hrps, "", patterns.HASH20)),
            f"the account's {self.name} address",
        )

    def check_address(self, text: str, network: Network) -> str:
        """A bech32 address of exactly `network`'s prefix (osmo1… is refused for cosmoshub).

        Raises:
            ChainError: code "invalid_address".
        """
        return self._check(text, (network,), encoding.INVALID_ADDRESS)

    def canonical_recipient(self, text: str, network: Network | None) -> str:
        """Any bech32 address, lowercased: a recipient may be on another chain (an IBC
        receiver), so the prefix is not the network's."""
        lowered = text.lower()
        if lowered != text and text.upper() != text:
            raise ChainError("a bech32 address is all lower or all upper case")
        hrp = lowered.rpartition("1")[0]
        if not hrp:
            raise ChainError("not a bech32 address")
        encoding.decode_bech32(lowered, {hrp}, what="address", code=encoding.INVALID_ADDRESS)
        return lowered

    def _check(self, text: str, networks: Iterable[Network], code: str) -> str:
        hrps = {n.hrp for n in networks if n.hrp}
        _, data = encoding.decode_bech32(text, hrps, what="cosmos address", code=code)
        if len(data) != 20:
            raise ChainError(f"cosmos address holds {len(data)} bytes, not 20", code)
        return text.lower()


FAMILY: Final = CosmosFamily(
    name="cosmos",
    networks=NETWORKS,
    default_network="cosmoshub",
)
