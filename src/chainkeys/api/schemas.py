"""Request and response bodies as msgspec Structs.

These are the schemas the code encodes and decodes with, and the same ones
`/openapi.json` is generated from, so the document cannot drift from the code.
Request structs are built from the chain registry: a new network or family
option appears in validation and in the document at once.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import OptionSpec

T = TypeVar("T")
MAX_SECRET = 1024  # a 24-word mnemonic is < 250 chars; anything far longer is not a key


class ErrorBody(Struct, kw_only=True):
    """Every error: `success` false, a message for a person, a machine code."""

    success: bool = False
    message: str
    code: str


class MessageResponse(Struct, kw_only=True):
    success: bool
    message: str


class Envelope(Struct, Generic[T], kw_only=True):
    """Every answer with a payload: `success`, a message for a person, and `data`.

    The `…Response` names below are this envelope around each payload (one type,
    documented once per payload); `AccountResponse` alone adds a field (`address`).
    """

    success: bool
    message: str
    data: T


# Cosmos: payload nested twice, `data.data`.
class CosmosAccount(Struct, kw_only=True, omit_defaults=True):
    address: str
    private_key: (
        Annotated[
            str,
            Meta(
                description="64-char hex key: in the create response of a generated key, "
                "and in an export"
            ),
        ]
        | UnsetType
    ) = UNSET
    path: (
        Annotated[
            str,
            Meta(
                description="the BIP32 path: of a derived account, and in an export of a "
                "mnemonic import"
            ),
        ]
        | UnsetType
    ) = UNSET
    wallet: Annotated[str, Meta(description="the wallet it was derived from")] | UnsetType = UNSET
    index: Annotated[int, Meta(description="its index in the wallet's chain")] | UnsetType = UNSET
    pubkey: (
        Annotated[str, Meta(description='keyring JSON: {"@type":…,"key":<base64>}, as list gives')]
        | UnsetType
    ) = UNSET
    network: Annotated[str, Meta(description="the account's network")] | UnsetType = UNSET
    created_at: (
        Annotated[str, Meta(description="when it was created or imported (UTC, ISO 8601)")]
        | UnsetType
    ) = UNSET


class CosmosAccountData(Struct, kw_only=True):
    data: CosmosAccount


CosmosAccountResponse = Envelope[CosmosAccountData]


class CosmosKey(Struct, kw_only=True):
    address: str
    pubkey: Annotated[str, Meta(description='keyring JSON: {"@type":…,"key":<base64>}')]


class CosmosKeys(Struct, kw_only=True, omit_defaults=True):
    keys: list[CosmosKey]
    next_cursor: (
        Annotated[str, Meta(description="pass as ?cursor= for the next page")] | UnsetType
    ) = UNSET


class CosmosKeysData(Struct, kw_only=True):
    data: CosmosKeys


CosmosListResponse = Envelope[CosmosKeysData]


# Dogecoin, EOS and Litecoin share one shape.
class AccountFields(Struct, kw_only=True, omit_defaults=True):
    address: str
    public_key: Annotated[
        str, Meta(description="compressed SEC hex (Dogecoin/Litecoin); legacy EOS… form (EOS)")
    ]
    private_key: (
        Annotated[
            str,
            Meta(description="WIF (legacy WIF for EOS); only when the service generated the key"),
        ]
        | UnsetType
    ) = UNSET
    public_key_k1: Annotated[str, Meta(description="EOS only: PUB_K1_… form")] | UnsetType = UNSET
    private_key_k1: (
        Annotated[str, Meta(description="EOS export only: the PVT_K1_… form")] | UnsetType
    ) = UNSET
    path: (
        Annotated[
            str,
            Meta(
                description="the BIP32 path: of a derived account, and in an export of a "
                "mnemonic import"
            ),
        ]
        | UnsetType
    ) = UNSET
    wallet: Annotated[str, Meta(description="the wallet it was derived from")] | UnsetType = UNSET
    index: Annotated[int, Meta(description="its index in the wallet's chain")] | UnsetType = UNSET
    network: Annotated[str, Meta(description="the account's network")] | UnsetType = UNSET
    created_at: (
        Annotated[str, Meta(description="when it was created or imported (UTC, ISO 8601)")]
        | UnsetType
    ) = UNSET


class AccountData(AccountFields, kw_only=True):
    data: AccountFields


class AccountResponse(Struct, kw_only=True):
    success: bool
    message: str
    address: str
    data: AccountData


class KeyNames(Struct, kw_only=True, omit_defaults=True):
    keys: list[str]
    next_cursor: (
        Annotated[str, Meta(description="pass as ?cursor= for the next page")] | UnsetType
    ) = UNSET


class KeyNamesData(KeyNames, kw_only=True):
    data: KeyNames


ListResponse = Envelope[KeyNamesData]


class VersionData(Struct, kw_only=True, omit_defaults=True):
    version: str
    python: str
    commit: Annotated[str | None, Meta(description="the git commit it was built from")] = None


class TokenSelf(Struct, kw_only=True, omit_defaults=True):
    """The caller's own token: what it may do, never the token or its hash."""

    id: str
    tenant: str
    label: str
    scopes: list[str]
    families: Annotated[list[str] | None, Meta(description="absent: every family")] = None
    group: Annotated[str | None, Meta(description="an approve token's approver group")] = None
    created_ms: int
    expires_ms: Annotated[int | None, Meta(description="absent: never expires")] = None


TokenSelfResponse = Envelope[TokenSelf]


VersionResponse = Envelope[VersionData]


class NetworkInfo(Struct, kw_only=True, omit_defaults=True):
    name: str
    testnet: bool
    coin_type: int
    chain_id: str | None = None
    bech32_prefix: str | None = None


class FamilyNetworks(Struct, kw_only=True):
    default: str
    networks: list[NetworkInfo]


class NetworksData(Struct, kw_only=True):
    families: dict[str, FamilyNetworks]


NetworksResponse = Envelope[NetworksData]


class AuditItem(Struct, kw_only=True, omit_defaults=True):
    id: int
    time_ms: Annotated[int, Meta(description="milliseconds since the epoch")]
    action: Annotated[str, Meta(description="create, import, delete, token.create, token.revoke")]
    outcome: Annotated[str, Meta(description="ok, or the error code")]
    family: str | None = None
    account_name: str | None = None
    request_id: str | None = None
    client_request_id: str | None = None
    token_id: Annotated[str | None, Meta(description="the acting token's id")] = None
    details: Annotated[
        dict[str, Any] | None,
        Meta(description="what was done: for a signature, its kind, digest and summary"),
    ] = None


class AuditData(Struct, kw_only=True, omit_defaults=True):
    events: list[AuditItem]
    next_cursor: str | UnsetType = UNSET


AuditResponse = Envelope[AuditData]


def option_field(spec: OptionSpec) -> tuple[str, Any, Any]:
    """A create-request field from a family's option, as data (choices become the enum)."""
    meta: dict[str, Any] = {"description": spec.description}
    if spec.max_length is not None:
        meta["max_length"] = spec.max_length
    if spec.choices:
        meta["extra_json_schema"] = {"enum": list(spec.choices)}
    return (spec.name, Annotated[str, Meta(**meta)] | None, None)


def _create_struct(family: str) -> type[Struct]:
    fam = FAMILIES[family]
    networks = sorted(fam.networks)
    fields: list[tuple[str, Any, Any]] = [
        (
            "network",
            Annotated[
                str,
                Meta(
                    description=f"default {fam.default_network}",
                    extra_json_schema={"enum": networks},
                ),
            ]
            | None,
            None,
        ),
        (
            "private_key",
            Annotated[
                str,
                Meta(
                    max_length=MAX_SECRET, description="import this key instead of generating one"
                ),
            ]
            | None,
            None,
        ),
        (
            "mnemonic",
            Annotated[
                str,
                Meta(max_length=MAX_SECRET, description="import from a BIP39 English phrase"),
            ]
            | None,
            None,
        ),
        (
            "passphrase",
            Annotated[str, Meta(max_length=MAX_SECRET, description="BIP39 passphrase")] | None,
            None,
        ),
        (
            "account_index",
            Annotated[int, Meta(ge=0, lt=2**31, description="BIP44 address index (default 0)")]
            | None,
            None,
        ),
    ]
    fields += [option_field(spec) for spec in sorted(fam.option_specs, key=lambda o: o.name)]
    return msgspec.defstruct(
        f"Create{family.capitalize()}Account",
        fields,
        kw_only=True,
        forbid_unknown_fields=True,
    )


CREATE_REQUESTS: dict[str, type[Struct]] = {name: _create_struct(name) for name in FAMILIES}


# ---- HD wallets --------------------------------------------------------------------


class WalletCreate(Struct, kw_only=True, forbid_unknown_fields=True):
    """Generate (`words`) or import (`mnemonic`, `passphrase`) a wallet."""

    name: Annotated[str, Meta(max_length=64, description="default: the wallet's id")] | None = None
    words: Annotated[int, Meta(description="12, 15, 18, 21 or 24 (default 24)")] | None = None
    mnemonic: (
        Annotated[str, Meta(max_length=MAX_SECRET, description="import this BIP39 phrase")] | None
    ) = None
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


class DeriveBody(Struct, kw_only=True, forbid_unknown_fields=True):
    family: Annotated[str, Meta(extra_json_schema={"enum": sorted(FAMILIES)})]
    network: str | None = None
    address_type: (
        Annotated[str, Meta(description="Litecoin: p2wpkh (default), p2sh-p2wpkh, p2pkh")] | None
    ) = None
    account: Annotated[int, Meta(ge=0, lt=2**31, description="BIP44 account (hardened)")] = 0
    change: Annotated[int, Meta(ge=0, le=1, description="0 receive, 1 change")] = 0
    index: Annotated[int, Meta(ge=0, lt=2**31, description="default: the next index")] | None = None
    count: Annotated[int, Meta(ge=1, le=100)] = 1
    name: Annotated[str, Meta(max_length=12, description="EOS: the account name")] | None = None
    preview: Annotated[bool, Meta(description="derive only: store nothing")] = False


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


class Xpub(Struct, kw_only=True, omit_defaults=True):
    xpub: str
    format: str
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


# ---- approvals -------------------------------------------------------------------


class ApprovalVote(Struct, kw_only=True, omit_defaults=True):
    label: Annotated[str, Meta(description="the approver (a person)")]
    decision: Annotated[str, Meta(description="approve or reject")]
    time: str
    reason: str | UnsetType = UNSET


class Approval(Struct, kw_only=True, omit_defaults=True):
    id: str
    state: Annotated[
        str,
        Meta(
            extra_json_schema={
                "enum": [
                    "pending",
                    "approved",
                    "signed",
                    "failed",
                    "rejected",
                    "expired",
                    "cancelled",
                ]
            }
        ),
    ]
    family: str
    account: str
    kind: Annotated[str, Meta(description="the sign endpoint: sign-psbt, sign-transfer, …")]
    summary: Annotated[dict[str, Any], Meta(description="what it signs, decoded")]
    digest: Annotated[str, Meta(description="vote on this: the sha256 of what is signed")]
    required: Annotated[int, Meta(description="approvals needed (the quorum)")]
    group: str
    votes: list[ApprovalVote]
    created_at: str
    expires_at: str
    reason: Annotated[str, Meta(description="why it was rejected or failed")] | UnsetType = UNSET
    result: Annotated[Any, Meta(description="signed: the sign endpoint's own data")] | UnsetType = (
        UNSET
    )


ApprovalResponse = Envelope[Approval]


APPROVAL_EXAMPLE: dict[str, Any] = {  # the OpenAPI document's example of one
    "success": True,
    "message": "approval required: nothing is signed yet",
    "data": {
        "id": "apr_5c1f0e9a7b3d2c4e6f801a2b", "state": "pending", "family": "cosmos",
        "account": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c", "kind": "sign-transfer",
        "summary": {
            "family": "cosmos", "network": "cosmoshub", "kind": "sign-transfer",
            "chain_id": "cosmoshub-4", "memo": "payout 7", "raw": False,
            "digest": "1fb1a5dee5fcb6b2c2f6a38efea23ad623c57d50c5773b63434b8958b36780a1",
            "items": [{"type": "/cosmos.bank.v1beta1.MsgSend",
                       "recipient": "cosmos1q6hag67dl53wl99vzg42z8eyzfz2xlkvsrxukv",
                       "amounts": [{"denom": "uatom", "amount": "1500000"}]}],
            "fee": [{"denom": "uatom", "amount": "5000"}],
        },
        "digest": "1fb1a5dee5fcb6b2c2f6a38efea23ad623c57d50c5773b63434b8958b36780a1",
        "required": 2, "group": "treasury",
        "votes": [{"label": "bob", "decision": "approve", "time": "2026-11-25T15:02:11.204Z"}],
        "created_at": "2026-11-25T15:00:00.000Z", "expires_at": "2026-11-26T15:00:00.000Z",
    },
}  # fmt: skip


class ApprovalList(Struct, kw_only=True, omit_defaults=True):
    approvals: list[Approval]
    next_cursor: str | UnsetType = UNSET


ApprovalListResponse = Envelope[ApprovalList]


class ApproveBody(Struct, kw_only=True, forbid_unknown_fields=True):
    digest: Annotated[str, Meta(max_length=64, description="the digest you looked at")]


class RejectBody(Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, Meta(max_length=500)] | None = None
