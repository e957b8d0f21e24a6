"""Answers (and sign requests) as msgspec Structs.

Sign requests and answers keep the ecosystem's own field names and casing
(cosmjs, Core, eosjs), exactly as the service takes and returns them. Account
answers, which the service shapes per family (Cosmos nests them twice), are
read into one `Account` for every family. Unknown fields in answers are
ignored, so a newer server does not break an older client.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
from msgspec import Struct

# ---- accounts -------------------------------------------------------------------------


class Account(Struct, kw_only=True):
    """One account, the same for every family.

    `name` is what get/delete/sign take: the address (Cosmos, Dogecoin,
    Litecoin) or the 12-character EOS account name. `public_key` is compressed
    SEC hex (Cosmos: decoded from the keyring `pubkey`; an uncompressed-key
    import is 65 bytes) or the legacy `EOS…` form. `private_key` is present
    once, in the create answer of a generated key, and in an export.
    `replayed` is True when an Idempotency-Key replayed the first answer.
    """

    family: str
    name: str
    address: str
    public_key: str | None = None
    network: str | None = None
    created_at: str | None = None
    private_key: str | None = None
    pubkey: str | None = None  # Cosmos: the keyring JSON string the list gives
    public_key_k1: str | None = None  # EOS: PUB_K1_…
    private_key_k1: str | None = None  # EOS export: PVT_K1_…
    path: str | None = None  # export of a mnemonic import: its BIP32 path
    message: str | None = None
    replayed: bool = False

    def __repr__(self) -> str:  # never print a key by accident
        hidden = ", private_key=<hidden>" if self.private_key or self.private_key_k1 else ""
        return (
            f"Account(family={self.family!r}, name={self.name!r}, address={self.address!r}, "
            f"network={self.network!r}{hidden})"
        )

    __str__ = __repr__


class ListedKey(Struct, kw_only=True):
    """One entry of a list: its name and, for Cosmos, the keyring `pubkey` JSON string."""

    name: str
    pubkey: str | None = None


class AccountPage(Struct, kw_only=True):
    """One page of a family's accounts; pass `next_cursor` back for the next one."""

    family: str
    keys: list[ListedKey]
    next_cursor: str | None = None

    @property
    def names(self) -> list[str]:
        return [k.name for k in self.keys]


# ---- service --------------------------------------------------------------------------


class NetworkInfo(Struct, kw_only=True):
    name: str
    testnet: bool
    coin_type: int
    chain_id: str | None = None
    bech32_prefix: str | None = None


class FamilyNetworks(Struct, kw_only=True):
    default: str
    networks: list[NetworkInfo]


class Networks(Struct, kw_only=True):
    families: dict[str, FamilyNetworks]


class AuditEvent(Struct, kw_only=True):
    id: int
    time_ms: int
    action: str
    outcome: str
    family: str | None = None
    account_name: str | None = None
    request_id: str | None = None
    client_request_id: str | None = None
    token_id: str | None = None
    details: dict[str, Any] | None = None


class AuditPage(Struct, kw_only=True):
    events: list[AuditEvent]
    next_cursor: str | None = None


# ---- signing: requests ----------------------------------------------------------------


class CosmosSignDoc(Struct, kw_only=True, omit_defaults=True):
    """cosmjs `SignDoc` in proto3 JSON: bytes base64, accountNumber a decimal string."""

    bodyBytes: str
    authInfoBytes: str
    chainId: str
    accountNumber: str


class CosmosTransfer(Struct, kw_only=True, omit_defaults=True):
    """Moon's `CosmosTransferInput`: counts as integers, amounts as decimal strings."""

    fromAddress: str
    toAddress: str
    amount: str
    denom: str
    chainId: str
    sequence: int
    accountNumber: int
    feeDenom: str
    feeAmount: str
    gasLimit: int
    memo: str = ""
    timeoutHeight: int = 0


class CosmosIbcTransfer(CosmosTransfer, kw_only=True, omit_defaults=True):
    """Moon's `CosmosIBCTransferInput` (timeoutTimestamp in nanoseconds since the epoch)."""

    sourceChannel: str
    timeoutTimestamp: int
    sourcePort: str = "transfer"


class PrevTx(Struct, kw_only=True, omit_defaults=True):
    """Core's `prevtxs` entry; `hex` (the whole previous transaction) is required for
    legacy (P2PKH) inputs. `amount` is in coins (Decimal or string: exact)."""

    txid: str
    vout: int
    scriptPubKey: str
    amount: Decimal | str | None = None
    redeemScript: str | None = None
    witnessScript: str | None = None
    hex: str | None = None


# ---- signing: answers -----------------------------------------------------------------


class PubKey(Struct, kw_only=True):
    type: str
    value: str


class StdSignature(Struct, kw_only=True):
    """Amino `StdSignature`: the compressed public key and the base64 64-byte signature."""

    pub_key: PubKey
    signature: str


class CosmosDirectSigned(Struct, kw_only=True):
    signed: CosmosSignDoc
    signature: StdSignature


class CosmosAminoSigned(Struct, kw_only=True):
    signed: dict[str, Any]
    signature: StdSignature


class CosmosMessageSigned(Struct, kw_only=True):
    """ADR-036: `signedMessage` is the base64 signature; `signed` the document signed."""

    signedMessage: str
    signature: StdSignature
    signed: dict[str, Any]


class CosmosTx(Struct, kw_only=True):
    """A signed transaction ready to broadcast: base64 TxRaw and its upper-case sha256."""

    signedTx: str
    txHash: str


class PsbtSigned(Struct, kw_only=True):
    psbt: str
    complete: bool
    hex: str | None = None
    txid: str | None = None


class RawInputError(Struct, kw_only=True):
    txid: str
    vout: int
    witness: list[str]
    scriptSig: str
    sequence: int
    error: str


class RawTransactionSigned(Struct, kw_only=True):
    """Core's `signrawtransactionwithkey` result."""

    hex: str
    complete: bool
    errors: list[RawInputError] = msgspec.field(default_factory=list)


class MessageSignature(Struct, kw_only=True):
    """Core `signmessage` (base64 65-byte compact) or eosjs-ecc `sign` (`SIG_K1_…`)."""

    signature: str


class EosTransactionSigned(Struct, kw_only=True):
    signatures: list[str]
    serializedTransaction: str
    serializedContextFreeData: str | None = None
