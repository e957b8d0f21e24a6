"""Request and response bodies of the HD-wallet endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.schemas import MAX_SECRET, MNEMONIC_META, Envelope, option_field
from chainkeys.chains.mnemonic import WORD_COUNTS
from chainkeys.chains.registry import FAMILIES
from chainkeys.together import Together
from chainkeys.wallets.service import NAME_PATTERN as WALLET_NAME

# ---- HD wallets --------------------------------------------------------------------


class WalletCreate(Struct, kw_only=True, forbid_unknown_fields=True):
    """Generate (`words`) or import (`mnemonic`, `passphrase`) a wallet."""

    together: ClassVar = Together(
        exclusive=(("words", "mnemonic"),), requires=(("passphrase", "mnemonic"),)
    )

    name: (
        Annotated[str, Meta(pattern=WALLET_NAME, description="default: the wallet's id")] | None
    ) = None
    words: (
        Annotated[
            int,
            Meta(
                description="12, 15, 18, 21 or 24 (default 24)",
                extra_json_schema={"enum": list(WORD_COUNTS)},
            ),
        ]
        | None
    ) = None
    mnemonic: Annotated[str, MNEMONIC_META] | None = None
    passphrase: (
        Annotated[str, Meta(max_length=MAX_SECRET, description="BIP39 passphrase")] | None
    ) = None


class Wallet(Struct, kw_only=True):
    id: str
    name: str
    fingerprint: Annotated[str, Meta(description="the master key's BIP32 fingerprint (hex)")]
    created_at: str
    exported: bool


WalletResponse = Envelope[Wallet]


class WalletList(Struct, kw_only=True, omit_defaults=True):
    wallets: list[Wallet]
    next_cursor: str | UnsetType = UNSET


WalletListResponse = Envelope[WalletList]


def _derive_struct(family: str) -> type[Struct]:
    """A derive request of one family, tagged by `family`: its networks and its own
    options (EOS: the account name; Litecoin: the address type) are the family's."""
    fam = FAMILIES[family]
    fields: list[Any] = [
        (
            "network",
            Annotated[
                str,
                Meta(
                    description=f"default {fam.default_network}",
                    extra_json_schema={"enum": sorted(fam.networks)},
                ),
            ]
            | None,
            None,
        ),
        *(option_field(spec) for spec in sorted(fam.option_specs, key=lambda o: o.name)),
        (
            "account",
            Annotated[int, Meta(ge=0, lt=2**31, description="BIP44 account (hardened)")],
            0,
        ),
        ("change", Annotated[int, Meta(ge=0, le=1, description="0 receive, 1 change")], 0),
        (
            "index",
            Annotated[int, Meta(ge=0, lt=2**31, description="default: the next index")] | None,
            None,
        ),
        ("count", Annotated[int, Meta(ge=1, le=100)], 1),
        ("preview", Annotated[bool, Meta(description="derive only: store nothing")], False),
    ]
    name = f"Derive{family.capitalize()}"
    names = [f[0] for f in fields]
    rules = Together(only_when=(("name", "count", 1),)) if "name" in names else None  # EOS
    return msgspec.defstruct(
        name,
        fields,
        kw_only=True,
        forbid_unknown_fields=True,
        tag_field="family",
        tag=family,
        namespace={"together": rules},
    )


DERIVES: tuple[type[Struct], ...] = tuple(_derive_struct(f) for f in sorted(FAMILIES))
DeriveBody: Any = Union[DERIVES]  # noqa: UP007  (built from the registry at import)


class DerivedAccount(Struct, kw_only=True, omit_defaults=True):
    family: str
    network: str
    name: str
    address: str
    public_key: str
    public_key_k1: str | UnsetType = UNSET
    pubkey: Annotated[str, Meta(description="Cosmos: the keyring pubkey JSON")] | UnsetType = UNSET
    address_type: str | UnsetType = UNSET
    wallet: str
    path: str
    index: int
    created_at: Annotated[str, Meta(description="absent in a preview")] | UnsetType = UNSET


class DerivedAccounts(Struct, kw_only=True):
    accounts: list[DerivedAccount]


DeriveResponse = Envelope[DerivedAccounts]


class WalletAccount(Struct, kw_only=True, omit_defaults=True):
    family: str
    network: str
    name: str
    address: str
    path: str
    index: int
    address_type: str | UnsetType = UNSET
    created_ms: int


class WalletAccounts(Struct, kw_only=True, omit_defaults=True):
    accounts: list[WalletAccount]
    next_cursor: str | UnsetType = UNSET


WalletAccountsResponse = Envelope[WalletAccounts]


class Xpub(Struct, kw_only=True, omit_defaults=True):
    xpub: str
    format: str
    formats: Annotated[
        list[str],
        Meta(
            description="every format this key may be asked in (`format=`), the default "
            "first: the family's for the address type (a native segwit type's zpub, which "
            "Electrum's forks take, beside xpub); tpub on a test network"
        ),
    ]
    path: str
    fingerprint: str
    descriptor: (
        Annotated[str, Meta(description="UTXO: BIP380, receive chain, with checksum")] | UnsetType
    ) = UNSET
    change_descriptor: Annotated[str, Meta(description="UTXO: the change chain")] | UnsetType = (
        UNSET
    )


XpubResponse = Envelope[Xpub]


class WalletSecret(Struct, kw_only=True, omit_defaults=True):
    mnemonic: str
    passphrase: str | UnsetType = UNSET
    wallet: Wallet


WalletExportResponse = Envelope[WalletSecret]
