"""Answers (and sign requests) as msgspec Structs.

Sign requests and answers keep the ecosystem's own field names and casing
(cosmjs, Core, eosjs), exactly as the service takes and returns them. Account
answers, which the service shapes per family (Cosmos nests them twice), are
read into one `Account` for every family. Unknown fields in answers are
ignored, so a newer server does not break an older client.
"""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any, TypeVar

import msgspec
from msgspec import Struct

T = TypeVar("T")

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


# ---- wallets --------------------------------------------------------------------------


class Wallet(Struct, kw_only=True):
    """An HD wallet. Its phrase is never in an answer (but in an export)."""

    id: str
    name: str
    fingerprint: str  # the master key's BIP32 fingerprint (hex)
    created_at: str | None = None
    exported: bool = False


class WalletPage(Struct, kw_only=True):
    """One page of the tenant's wallets; pass `next_cursor` back for the next one."""

    wallets: list[Wallet]
    next_cursor: str | None = None


class DerivedAccount(Struct, kw_only=True):
    """An account derived from a wallet: `name` is what the account and signing methods
    take; `path` is its BIP32 path. `public_key` is as in `Account`: compressed SEC hex
    (Cosmos: decoded from `pubkey`), EOS the legacy `EOS…` form. `created_at` is absent
    in a preview."""

    family: str
    network: str
    name: str
    address: str
    public_key: str
    wallet: str
    path: str
    index: int
    public_key_k1: str | None = None  # EOS: PUB_K1_…
    pubkey: str | None = None  # Cosmos: the keyring pubkey JSON
    address_type: str | None = None  # Litecoin
    created_at: str | None = None


class Xpub(Struct, kw_only=True):
    """The account-level extended public key; UTXO families add BIP380 descriptors."""

    xpub: str
    format: str
    path: str
    fingerprint: str
    descriptor: str | None = None
    change_descriptor: str | None = None


class WalletSecret(Struct, kw_only=True):
    """A wallet export: its phrase and BIP39 passphrase. `repr` never shows them."""

    mnemonic: str
    wallet: Wallet
    passphrase: str | None = None

    def __repr__(self) -> str:
        hidden = ", passphrase=<hidden>" if self.passphrase else ""
        return f"WalletSecret(wallet={self.wallet!r}, mnemonic=<hidden>{hidden})"

    __str__ = __repr__

    def __rich_repr__(self) -> list[tuple[str, Any]]:  # rich would list the fields
        return [("wallet", self.wallet), ("mnemonic", "<hidden>")]


# ---- approvals ------------------------------------------------------------------------

TERMINAL_STATES = frozenset({"signed", "failed", "rejected", "expired", "cancelled"})


class ApprovalVote(Struct, kw_only=True):
    label: str  # the approver (a person)
    decision: str  # approve or reject
    time: str | None = None
    reason: str | None = None
    signed: str | None = None  # passkey or key: what signed it (None: the token alone)


class KeySignature(Struct, kw_only=True):
    """A script key's vote: its id (`apc_…`, from `chainkeys approver add-key`) and its
    signature of the challenge's 32 bytes, base64url (`KeySignature.of` makes one)."""

    credential: str
    value: str

    @classmethod
    def of(cls, credential: str, signature: bytes) -> KeySignature:
        """From raw signature bytes (Ed25519's 64, or ECDSA P-256 DER or r||s)."""
        return cls(credential=credential,
                   value=base64.urlsafe_b64encode(signature).rstrip(b"=").decode())  # fmt: skip


class Approval(Struct, kw_only=True):
    """An approval request (`GET /approvals/{id}`, and the 202 answer of a sign request
    that needs people to approve it). Every field but `id` may be absent.

    `state`: pending, approved (the quorum is reached, being signed), signed, failed,
    rejected, expired, cancelled. `digest` is what an approver votes on. `result`, once
    signed, is the sign endpoint's own answer (`result_as(CosmosTx)` reads it).
    """

    id: str
    state: str | None = None
    family: str | None = None
    account: str | None = None
    kind: str | None = None
    summary: dict[str, Any] | None = None
    digest: str | None = None
    required: int | None = None
    group: str | None = None
    votes: list[ApprovalVote] = msgspec.field(default_factory=list)
    passkey: bool | None = None  # votes count only signed (a passkey or script key)
    created_at: str | None = None
    expires_at: str | None = None
    reason: str | None = None
    result: Any = None
    request: Any = None  # the sign endpoint's body as the server read it
    signer: dict[str, Any] | None = None  # the account's public data (verify_approval)
    summary_error: str | None = None  # why there is no summary

    @property
    def terminal(self) -> bool:
        """True once nothing more will happen to it (signed, failed, rejected, …)."""
        return self.state in TERMINAL_STATES

    def result_as(self, type_: type[T]) -> T:
        """The signed answer as `type_` (e.g. `CosmosTx`); ValueError before it is signed."""
        if self.result is None:
            raise ValueError(f"approval {self.id} has no result (state {self.state})")
        return msgspec.convert(self.result, type_, strict=False)


class ApprovalPage(Struct, kw_only=True):
    """One page of approval requests, newest first."""

    approvals: list[Approval]
    next_cursor: str | None = None


# ---- tokens ---------------------------------------------------------------------------


class TokenInfo(Struct, kw_only=True):
    """The caller's own token (`GET /tokens/self`), never the token itself.

    `families` None: every family; `group`: an approve token's approver group;
    `expires_ms` None: never expires.
    """

    id: str
    tenant: str
    label: str
    scopes: list[str]
    created_ms: int
    families: list[str] | None = None
    group: str | None = None
    expires_ms: int | None = None


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
