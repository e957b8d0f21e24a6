"""Request and response bodies as msgspec Structs.

These are the schemas the code encodes and decodes with, and the same ones
`/openapi.json` is generated from, so the document cannot drift from the code.
Request structs are built from the chain registry: a new network or family
option appears in validation and in the document at once.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import OptionSpec
from chainkeys.together import Together

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


# Cosmos: the key as hex beside Moon's `pubkey` (not in Moon's shape; nothing of it removed)
PUBLIC_KEY_HEX = (
    "the compressed public key, 66 hex digits (`pubkey` holds it as base64); "
    "POST /{family}/multisig takes either form"
)


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
    public_key: Annotated[str, Meta(description=PUBLIC_KEY_HEX)]
    network: Annotated[str, Meta(description="the account's network")] | UnsetType = UNSET
    created_at: (
        Annotated[str, Meta(description="when it was created or imported (UTC, ISO 8601)")]
        | UnsetType
    ) = UNSET


class CosmosAccountData(Struct, kw_only=True):
    data: CosmosAccount


CosmosAccountResponse = Envelope[CosmosAccountData]


class CosmosKey(Struct, kw_only=True, omit_defaults=True):
    address: str
    pubkey: Annotated[
        str, Meta(description='keyring JSON: {"@type":…,"key":<base64>}; empty for a multisig')
    ]
    public_key: Annotated[str, Meta(description=PUBLIC_KEY_HEX + "; empty for a multisig")]
    kind: (
        Annotated[
            Literal["multisig"],
            Meta(
                description="a multisig account (POST "
                "/cosmos/multisig): no key of its own; GET /cosmos/{address} shows it"
            ),
        ]
        | UnsetType
    ) = UNSET


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
    if spec.pattern is not None:
        meta["pattern"] = spec.pattern
    if spec.choices:
        meta["extra_json_schema"] = {"enum": list(spec.choices)}
    return (spec.name, Annotated[str, Meta(**meta)] | None, None)


# A checked format's length is the format's (the service checks it with the rest): a
# maxLength beside it would make fuzzers draw from the length instead of the format.
MNEMONIC_META = Meta(
    extra_json_schema={"format": "chainkeys-mnemonic"},
    description="a BIP39 English phrase of 12, 15, 18, 21 or 24 words (its words and "
    "checksum are checked too: a phrase that fails them is a 400)",
)

CREATE_TOGETHER = Together(
    exclusive=(("private_key", "mnemonic"),),
    requires=(("passphrase", "mnemonic"), ("account_index", "mnemonic")),
)


def _create_struct(family: str) -> type[Struct]:
    fam = FAMILIES[family]
    networks = sorted(fam.networks)
    # the forms it reads, as the family says them (the first line of its docstring)
    forms = (fam.parse_private_key.__doc__ or "").strip().splitlines()[0].rstrip(".")
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
                    extra_json_schema={"format": f"chainkeys-{family}-private-key"},
                    description=f"import this key instead of generating one: {forms} (its "
                    "checksum and range are checked too: a key that fails them is a 400)",
                ),
            ]
            | None,
            None,
        ),
        (
            "mnemonic",
            Annotated[
                str,
                MNEMONIC_META,
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
        namespace={"together": CREATE_TOGETHER},
    )


CREATE_REQUESTS: dict[str, type[Struct]] = {name: _create_struct(name) for name in FAMILIES}


_SIGN_REQUESTS: dict[type[Struct], type[Struct]] = {}


def sign_request(request: type[Struct]) -> type[Struct]:
    """A sign kind's request type as the API decodes and documents it: the chain's Struct,
    or, when it declares pairs of fields of which exactly one is sent (`one_of`: chains/
    declares, it does not validate requests), a subclass of the same name that carries
    them as the `Together` the body decoder checks and the document states (made once:
    the sign route and the policy dry run name the same type)."""
    found = _SIGN_REQUESTS.get(request)
    if found is None:
        pairs: tuple[tuple[str, str], ...] = getattr(request, "one_of", ())
        found = (
            request
            if not pairs
            else msgspec.defstruct(
                request.__name__,
                (),
                bases=(request,),
                namespace={"together": Together(one_of=pairs), "__doc__": request.__doc__},
            )
        )
        _SIGN_REQUESTS[request] = found
    return found


def family_of(body: Struct) -> str:
    """The family a body of one of the unions tagged by `family` names (a derive request,
    a policy dry run)."""
    return str(body.__struct_config__.tag)


class Last24h(Struct, kw_only=True):
    since_ms: int
    signatures: Annotated[int, Meta(description="signatures made (action sign, outcome ok)")]
    refusals: Annotated[int, Meta(description="events whose outcome is not ok")]


class Overview(Struct, kw_only=True):
    """What a tenant holds and did, at a glance (the console's first page)."""

    accounts: Annotated[dict[str, int], Meta(description="per family the token may use")]
    wallets: int
    approvals_pending: Annotated[int, Meta(description="pending requests this token sees")]
    last_24h: Last24h


OverviewResponse = Envelope[Overview]
