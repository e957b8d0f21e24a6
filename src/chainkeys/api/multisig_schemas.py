"""Request and response bodies of the multisig endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.schemas import Envelope
from chainkeys.chains.tx.utxo.multisig import MAX_KEYS, TYPES

PUBLIC_KEY = Annotated[
    str, Meta(pattern="^[0-9a-fA-F]{66}$", description="a compressed secp256k1 public key (hex)")
]


class MultisigCreate(Struct, kw_only=True, forbid_unknown_fields=True):
    """An m-of-n multisig of these keys (sorted as BIP67 sorts them: any order given)."""

    threshold: Annotated[int, Meta(ge=1, le=MAX_KEYS, description="m: signatures needed")]
    public_keys: Annotated[
        list[PUBLIC_KEY],
        Meta(min_length=2, max_length=MAX_KEYS,
             description="n keys, at least one held by an account of this tenant"),
    ]  # fmt: skip
    network: str | None = None
    address_type: (
        Annotated[
            str,
            Meta(
                extra_json_schema={"enum": list(TYPES)},
                description="Litecoin: p2wsh (default), p2sh-p2wsh, p2sh; Dogecoin: p2sh; "
                "Cosmos: none (a LegacyAminoPubKey)",
            ),
        ]
        | None
    ) = None


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
