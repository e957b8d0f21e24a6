"""Data shapes shared by every chain family.

Pure: no I/O, no settings, no logging. A family is parameters (`Network` rows)
plus calls into the shared encoders (`chains/encoding.py`); nothing here knows
about HTTP or storage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar


class ChainError(ValueError):
    """Input a chain cannot accept.

    The message is shown to the caller, so it says what is wrong with the
    input and never repeats the input itself (it may be a secret).
    """

    def __init__(self, message: str, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class Network:
    """One network of a family: the encodings and identifiers that differ per network."""

    name: str
    coin_type: int  # BIP44 coin type used for mnemonic derivation
    testnet: bool = False
    chain_id: str | None = None
    hrp: str | None = None  # bech32 prefix: Cosmos addresses, Litecoin segwit
    p2pkh: bytes | None = None  # base58 version byte(s)
    p2sh: bytes | None = None
    wif: bytes | None = None  # WIF version byte


@dataclass(frozen=True, slots=True)
class Key:
    """A validated secp256k1 private key (1 <= k < n)."""

    secret: bytes = field(repr=False)
    public: bytes = field(repr=False)  # SEC1: 33 bytes compressed, 65 uncompressed
    compressed: bool = True
    path: str | None = None  # BIP32 path when derived from a mnemonic

    def __repr__(self) -> str:
        return f"Key(***, compressed={self.compressed}, path={self.path!r})"


@dataclass(frozen=True, slots=True)
class NoOptions:
    """The create options of a family that takes none (Cosmos, Dogecoin)."""


NeverSign = Callable[[bytes], "str | None"]
"""Why a raw message signer (one that signs sha256(data) with a key of this family) must
not sign `data`, because its signature would also sign one of this family's
transactions; None when nothing of the family's is at stake (see `Family.never_sign`)."""


def signs_nothing_raw(data: bytes) -> str | None:
    """The `never_sign` of a family none of whose signatures is over sha256 of bytes a
    caller could hand another family's raw message signer."""
    return None


OptionsT = TypeVar("OptionsT")  # a family's own create options type (each family module defines it)
OptionsIn = TypeVar("OptionsIn", contravariant=True)
OptionsOut = TypeVar("OptionsOut", covariant=True)


@dataclass(frozen=True, slots=True)
class Account:
    """The public view of an account: everything a response may show."""

    name: str  # the lookup name: the address, or the EOS account name
    address: str
    public_key: str  # the family's display form
    extra: Mapping[str, str] = field(default_factory=dict)  # e.g. public_key_k1, pubkey
    address_type: str | None = None  # base58 families: p2pkh, p2wpkh, p2sh-p2wpkh (stored)


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """A create option a family takes, as data: request schemas and OpenAPI enums are
    built from it (a new address type appears in validation and documentation at once)."""

    name: str  # the create-request field, and the family's options attribute
    description: str
    choices: tuple[str, ...] = ()  # allowed values (empty: free text)
    max_length: int | None = None
    pattern: str | None = None  # JSON Schema pattern: what a value must look like
    example: str | None = None  # a value, for the document's examples


@dataclass(frozen=True, slots=True)
class NameForm:
    """What a family's account names look like, as data for the API's path parameter
    (its pattern, its words in the document)."""

    pattern: str  # JSON Schema pattern every name matches (chains/patterns.py builds them)
    description: str  # for people: "the account's cosmos address"
    checksummed: bool = True  # the pattern is not all: `check_name` checks a checksum too


# How the API answers for a family's accounts (DESIGN.md "Contract decisions"): as the
# Cosmos SDK keyring lists keys (`data.data`; `pubkey`, the keyring JSON, from
# `public_key_forms`), or the shape the other families share (`address`, `public_key`,
# `data` and `data.data` the same fields).
KEYRING: Final = "keyring"
ACCOUNT_SHAPE: Final = "account"


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What a family's policy rules say about the items of what it signs (each decoded
    `Item`): policies/document.py reads it to check a rule, policies/engine.py to apply
    one, so a new family's items need no code there."""

    lists: str | None  # the rule field that lists the item types a rule allows (Cosmos
    # "messages": type URLs; EOS "actions": contract::action); None: rules list none
    item: str  # one item, as a refusal names it ("message type", "action", "output")
    default: tuple[str, ...] = ()  # the types a rule that leaves `lists` out allows
    ibc: bool = False  # items may be IBC transfers whose memo the receiving chain acts on
    # (a rule may then set `ibc_memo`)
    outputs: bool = False  # items are UTXO outputs: change is not spent, an output with
    # no address pays a script (its amount known); there are no types to allow


SIGNS_NOTHING: Final = Vocabulary(None, "item")  # a family without signers


@dataclass(frozen=True, slots=True)
class Unit:
    """How people read amounts of one denom: `base` names what the integers count (the
    smallest unit: litoshi, koinu, uatom, `units of 0.0001 EOS`), never the coin's
    ticker when the integers are not whole coins; `display` and `decimals` are the unit
    people think in (LTC, 8), when known."""

    base: str
    display: str | None = None
    decimals: int | None = None


def denom_is_base(denom: str, decimals: int | None) -> Unit:
    """A denom that names its own smallest unit (a Cosmos denom: uatom, ibc/…)."""
    return Unit(denom, None, None)


@dataclass(frozen=True, slots=True)
class Units:
    """A family's table of display units (docs/families.md): the denoms it knows by name,
    and how it names the smallest unit of any other (`other`: a denom and the decimals
    the transaction carries, when it does, e.g. an EOS asset's precision)."""

    known: Mapping[str, Unit] = field(default_factory=dict)
    other: Callable[[str, int | None], Unit] = denom_is_base

    def of(self, denom: str, decimals: int | None = None) -> Unit:
        """The unit of `denom` (`decimals`: what the transaction says, if anything)."""
        found = self.known.get(denom)
        return found if found is not None else self.other(denom, decimals)


NO_UNITS: Final = Units()  # a family without signers: every denom its own base unit


class ThresholdKey(Protocol):
    """A multisig account's key: `threshold` of the member `keys` (public data only).
    Each family that has multisig accounts has its own (chains/tx/); the layers above
    and the neutral signing shapes (tx/base.py `Owner`) know it by this alone."""

    @property
    def threshold(self) -> int: ...

    @property
    def keys(self) -> tuple[bytes, ...]:
        """The members' compressed keys, in the family's own order."""
        ...

    @property
    def address_type(self) -> str: ...

    def address(self, network: Network) -> str:
        """Its address on `network`."""
        ...

    def descriptor(self) -> str | None:
        """Its output descriptor (BIP380), None where the family has none."""
        ...

    def public_json(self) -> dict[str, Any] | None:
        """The threshold key as the family's wallets write it (Cosmos: its amino JSON),
        None where the family has no such form."""
        ...


@dataclass(frozen=True, slots=True)
class MultisigForms:
    """How a family's m-of-n multisig accounts are made and kept: read by the account
    and wallet services and the API, so they name no family's multisig type."""

    types: tuple[str, ...]  # the address types its multisigs have; the first, the default
    # the multisig of a registration's fields (threshold, public keys, the address type
    # asked or None, the network), checked: ChainError "invalid_multisig" saying why
    register: Callable[[object, Sequence[object], str | None, Network], ThresholdKey]
    # the multisig of checked keys (a stored record, a wallet's index), in the family's
    # own order of its keys (so the same keys in any order are the same multisig)
    build: Callable[[int, Sequence[bytes], str], ThresholdKey]
    chosen: bool = True  # a registration may name its address type (False: one form)
    hd_types: tuple[str, ...] = ()  # the types a wallet's HD multisig (BIP48) may have,
    # the default first; empty: no HD multisig
    # the ranged descriptor an HD multisig's co-signers import: (threshold, every
    # member's [origin]xpub, address type) -> descriptor with checksum
    hd_descriptor: Callable[[int, Sequence[str], str], str] | None = None
    # the answer of POST /{family}/{name}/combine, which assembles the transaction its
    # members signed (None: the family has no such step)
    combined: type | None = None


class Networks(Protocol):
    """A family's networks: the one capability every other one needs."""

    @property
    def name(self) -> str: ...

    @property
    def networks(self) -> Mapping[str, Network]: ...

    @property
    def default_network(self) -> str: ...

    def network(self, name: str | None) -> Network:
        """The named network (None: the default); ChainError listing accepted names."""
        ...


class KeyForms(Protocol[OptionsIn]):
    """Reading and writing the family's private-key forms."""

    def parse_private_key(self, text: str, network: Network) -> Key:
        """Decode an imported private key in any of the family's forms."""
        ...

    def xpub_formats(self, address_type: str | None) -> tuple[str, ...]:
        """The extended public key formats (chains/hd.py VERSIONS) a mainnet account of
        this address type (None: the default) is shown in; the first is the default
        (test networks take tpub)."""
        ...

    def purpose(self, options: OptionsIn) -> int:
        """The BIP43 purpose its keys derive under: 44, or 49/84 for segwit address types
        (chains/hd.py builds every path from it)."""
        ...

    def export_private_key(self, key: Key, network: Network) -> str:
        """The private key in the form the family's wallets import."""
        ...

    def export_other_forms(self, key: Key) -> Mapping[str, str]:
        """Other import forms an export also gives (EOS: `private_key_k1`)."""
        ...


class Addresses(Protocol[OptionsIn]):
    """Names and addresses of accounts."""

    def account(self, key: Key, network: Network, options: OptionsIn) -> Account:
        """Name, address and public key forms of `key` on `network`."""
        ...

    def check_name(self, name: str) -> str:
        """Validate an account name syntactically (before any storage work).

        Returns the canonical form to look up (a bech32 address lowercased).
        """
        ...

    def check_address(self, text: str, network: Network) -> str:
        """Validate an address of exactly `network` (canonical form returned)."""
        ...

    def public_key_bytes(self, display: str) -> bytes:
        """The SEC1 public key from the form `account` stored (for signing checks)."""
        ...

    @property
    def names(self) -> NameForm:
        """What its account names look like (any network's), for the API."""
        ...

    def public_key_text(self, public: bytes) -> str:
        """A compressed public key in the form `account` stores (the inverse of
        `public_key_bytes`): how a multisig's member is found among the accounts."""
        ...

    def public_key_forms(self, display: str) -> Mapping[str, str]:
        """Other forms of a stored public key that responses show beside it, by response
        field (Cosmos: the keyring `pubkey` JSON); derived, so a listed row shows them."""
        ...

    def canonical_recipient(self, text: str, network: Network | None) -> str:
        """A recipient as a policy holds and compares it: the form the family's decoders
        give `Item.recipient` (a bech32 address lowercased; base58 and EOS names as they
        are). `network` is the rule's (None: any of the family's).

        Raises:
            ChainError: saying why `text` is no recipient of the family.
        """
        ...


class CreateOptions(Protocol[OptionsOut]):
    """The options a create request may carry for this family, typed per family."""

    @property
    def option_specs(self) -> tuple[OptionSpec, ...]:
        """The fields it takes, as data for request schemas and the OpenAPI document."""
        ...

    def options(self, given: Mapping[str, str], key: Key | None) -> OptionsOut:
        """The family's options from the request fields that were sent, validated, with
        defaults filled for `key` (None: not known yet, e.g. before a mnemonic is derived).

        Raises:
            ChainError: code "invalid_option" for a field the family does not take or a
                value it does not accept.
        """
        ...


class Family(
    Networks, KeyForms[OptionsT], Addresses[OptionsT], CreateOptions[OptionsT], Protocol[OptionsT]
):
    """Everything the services and the API need from a family: the narrow capabilities
    together, and what the layers above read instead of naming it. Its module declares
    `response_shape`; its registry row (chains/registry.py), where the module and its
    signers (chains/tx/) meet, fills `signers` (its `SignKind`s, empty until it can
    sign), `vocabulary`, `units`, `multisig` and `never_sign` (docs/families.md)."""

    @property
    def signers(self) -> tuple[Any, ...]: ...

    @property
    def response_shape(self) -> str:
        """How the API answers for its accounts: KEYRING or ACCOUNT_SHAPE."""
        ...

    @property
    def vocabulary(self) -> Vocabulary:
        """What its policy rules say about the items of what it signs."""
        ...

    @property
    def units(self) -> Units:
        """How people read its amounts: the name of each denom's smallest unit (never
        the coin's ticker) and its display unit where known (EOS: an asset's precision
        is in the transaction). Its decoders give every Amount its unit; the API reads
        it for a policy's caps (chains/tx/units.py)."""
        ...

    @property
    def multisig(self) -> MultisigForms | None:
        """How its multisig accounts are made; None: it has none."""
        ...

    @property
    def never_sign(self) -> NeverSign:
        """What a raw message signer must never sign, as this family's transactions are
        signed: every family's sign-message that signs sha256(bytes) checks every
        family's (chains/registry.py `never_signed`), so a new family's transactions are
        guarded on the others' message signers without reading them."""
        ...
