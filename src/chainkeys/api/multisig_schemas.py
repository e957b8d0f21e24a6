"""Request and response bodies of the multisig endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.accounts.multisig import FAMILIES as MULTISIG_FAMILIES
from chainkeys.api.schemas import Envelope
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.threshold import MAX_KEYS
from chainkeys.wallets.multisig import FAMILIES as HD_FAMILIES

PUBLIC_KEY = Annotated[
    str,
    Meta(
        extra_json_schema={"format": "chainkeys-public-key"},
        description="a compressed secp256k1 public key: 66 hex digits, or its 44 base64 "
        "characters (the `key` in a Cosmos account's `pubkey`); a point of the curve "
        "(checked: one that is not is a 400)",
    ),
]


def _multisig_create(family: str) -> type[Struct]:
    """An m-of-n multisig of these keys (sorted as BIP67 sorts them: any order given), with
    the family's networks and address types as enums."""
    fam = FAMILIES[family]
    fields: list[Any] = [
        (
            "threshold",
            Annotated[int, Meta(ge=1, le=MAX_KEYS, description="m: signatures needed (at most n)")],
        ),
        (
            "public_keys",
            Annotated[
                list[PUBLIC_KEY],
                Meta(
                    min_length=2,
                    max_length=MAX_KEYS,
                    extra_json_schema={"uniqueItems": True},
                    description="n distinct keys, at least one held by an account of this tenant",
                ),
            ],
        ),
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
    ]
    forms = fam.multisig
    if forms is not None and forms.chosen:  # Cosmos's one form (LegacyAminoPubKey): none
        types = list(forms.types)
        fields.append(
            (
                "address_type",
                Annotated[
                    str, Meta(extra_json_schema={"enum": types}, description=f"default {types[0]}")
                ]
                | None,
                None,
            )
        )
    return msgspec.defstruct(
        f"{family.capitalize()}MultisigCreate", fields, kw_only=True, forbid_unknown_fields=True
    )


MULTISIG_CREATES: dict[str, type[Struct]] = {f: _multisig_create(f) for f in MULTISIG_FAMILIES}


class MultisigMember(Struct, kw_only=True):
    public_key: str
    held: bool
    account: Annotated[str, Meta(description="the account holding it here")] | None


class MultisigAccount(Struct, kw_only=True, omit_defaults=True):
    family: str
    network: str
    name: str
    address: str
    address_type: str
    threshold: int
    members: list[MultisigMember]
    descriptor: (
        Annotated[str, Meta(description="Dogecoin, Litecoin: Core's output descriptor")] | UnsetType
    ) = UNSET
    pubkey: (
        Annotated[dict[str, Any], Meta(description="Cosmos: the threshold key's amino JSON")]
        | UnsetType
    ) = UNSET
    created_at: str


MultisigResponse = Envelope[MultisigAccount]


class AminoPubKey(Struct, kw_only=True, forbid_unknown_fields=True):
    type: Annotated[str, Meta(extra_json_schema={"enum": ["tendermint/PubKeySecp256k1"]})]
    value: Annotated[str, Meta(max_length=64, description="the compressed key, base64")]


class StdSignature(Struct, kw_only=True, forbid_unknown_fields=True):
    pub_key: AminoPubKey
    signature: Annotated[str, Meta(max_length=128, description="r||s, base64")]


class CombineRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    """The amino StdSignDoc every member signed, and the members' signatures (chainkeys'
    from `sign-amino`, the others' from their wallets: cosmjs `signAmino`, `tx sign`)."""

    signDoc: dict[str, Any]
    signatures: Annotated[list[StdSignature], Meta(min_length=1, max_length=MAX_KEYS)]


# the families a wallet makes HD multisigs on, their networks and BIP48 address types
_HD = [FAMILIES[f] for f in HD_FAMILIES]
_HD_NETWORKS = sorted({n for f in _HD for n in f.networks})
_HD_TYPES = list(dict.fromkeys(t for f in _HD if f.multisig for t in f.multisig.hd_types))


class WalletMultisigCreate(Struct, kw_only=True, forbid_unknown_fields=True):
    """An HD multisig of this wallet's BIP48 key and the other co-signers' keys."""

    family: Annotated[str, Meta(extra_json_schema={"enum": list(HD_FAMILIES)})]
    threshold: Annotated[int, Meta(ge=1, le=MAX_KEYS, description="m: signatures needed")]
    xpubs: Annotated[
        list[
            Annotated[
                str,
                Meta(
                    min_length=100, max_length=300, extra_json_schema={"format": "chainkeys-xpub"}
                ),
            ]
        ],
        Meta(
            min_length=1,
            max_length=MAX_KEYS - 1,
            description="the other members' account-level extended public keys (xpub, Ltub, "
            "Zpub…), each with an optional [fingerprint/path] key origin",
        ),
    ]
    network: (
        Annotated[
            str,
            Meta(
                description="default " + ", ".join(sorted({f.default_network for f in _HD})),
                extra_json_schema={"enum": _HD_NETWORKS},
            ),
        ]
        | None
    ) = None
    address_type: (
        Annotated[
            str,
            Meta(
                extra_json_schema={"enum": _HD_TYPES},
                description=f"{_HD_TYPES[0]} (default) or {' or '.join(_HD_TYPES[1:])}",
            ),
        ]
        | None
    ) = None
    account: Annotated[int, Meta(ge=0, lt=2**31, description="BIP48 account (hardened)")] = 0


class WalletMultisig(Struct, kw_only=True):
    id: str
    wallet: str
    family: str
    network: str
    address_type: str
    threshold: int
    account: int
    path: Annotated[str, Meta(description="the wallet's own member key (BIP48)")]
    key: Annotated[str, Meta(description="that key, [origin]xpub…, for the other co-signers")]
    xpubs: list[str]
    descriptor: Annotated[str, Meta(description="the receive chain, ranged, with checksum")]
    created_at: str


WalletMultisigResponse = Envelope[WalletMultisig]


class WalletMultisigList(Struct, kw_only=True):
    multisigs: list[WalletMultisig]


WalletMultisigListResponse = Envelope[WalletMultisigList]


class WalletMultisigDerive(Struct, kw_only=True, forbid_unknown_fields=True):
    index: Annotated[int, Meta(ge=0, lt=2**31, description="default: the next index")] | None = None
    count: Annotated[int, Meta(ge=1, le=100)] = 1
    preview: Annotated[bool, Meta(description="derive only: store nothing")] = False


class MultisigAccounts(Struct, kw_only=True):
    accounts: list[MultisigAccount]


MultisigAccountsResponse = Envelope[MultisigAccounts]
