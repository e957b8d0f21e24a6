"""Request and response bodies of the multisig endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

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
                description="Litecoin: p2wsh (default), p2sh-p2wsh, p2sh; Dogecoin: p2sh",
            ),
        ]
        | None
    ) = None


class MultisigMember(Struct, kw_only=True):
    public_key: str
    held: bool
    account: Annotated[str, Meta(description="the account holding it here")] | None


class MultisigAccount(Struct, kw_only=True):
    family: str
    network: str
    name: str
    address: str
    address_type: str
    threshold: int
    members: list[MultisigMember]
    descriptor: Annotated[str, Meta(description="Core's output descriptor, with checksum")]
    created_at: str


MultisigResponse = Envelope[MultisigAccount]
