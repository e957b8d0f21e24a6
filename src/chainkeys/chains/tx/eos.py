"""EOS signers: eosjs `SignatureProvider.sign` and eosjs-ecc `sign`, decoded first.

No Python library reads Antelope's binary transaction format, so this is the
small codec (header, actions, authorizations, token transfers) it needs;
tests check it against @wharfkit/antelope. Signatures are canonical as
Antelope nodes require: RFC 6979, retried with extra nonce data until both r
and s need no leading zero byte (deterministic: the same digest, the same
signature).

eosjs-ecc's `sign(data)` signs sha256(data), and a transaction's digest is
sha256(chain id ‖ transaction ‖ 32 bytes): a message signer that took any
bytes would sign transactions unread. `prepare_message` refuses what every
family says a raw message signer must never sign (each family's `never_sign`,
asked through the registry, which hands them to `kinds`): EOS's own (`never_sign`
here: data that begins with a known Antelope chain id or that has a
transaction's shape whatever its chain id), and the other families' (the same
key may be a Cosmos, Dogecoin or Litecoin account's), without this module
knowing them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final

import msgspec
from msgspec import Meta

from chainkeys.chains import encoding
from chainkeys.chains.eos import parse_public_key
from chainkeys.chains.spec import ChainError, Key, Unit, Units, Vocabulary
from chainkeys.chains.tx.base import (
    INVALID_AMOUNT,
    Amount,
    Item,
    Owner,
    Signed,
    SignKind,
    Summary,
    bounded_message,
    refuse,
    unhex,
)
from chainkeys.chains.tx.ecdsa import sign_recoverable_with_entropy
from chainkeys.chains.tx.fields import HASH, HEX, MESSAGE_HEX, MESSAGE_TEXT

_CHARMAP = ".12345abcdefghijklmnopqrstuvwxyz"
MAX_ASSET = 2**62 - 1  # eosio::asset::max_amount
MAX_MEMO = 256  # eosio.token refuses a longer memo
# Antelope chains whose ids a message may never begin with: every network of the
# registry (a test checks) and other public chains; the shape check in
# `not_a_transaction` covers every other chain id.
KNOWN_CHAIN_IDS: frozenset[bytes] = frozenset(
    bytes.fromhex(h)
    for h in (
        "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906",  # EOS (Vaulta)
        "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d",  # Jungle 4
        "1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4",  # WAX
        "4667b205c6838ef70ff7988f6e8257e8be0e1284a2f59699054a018f743b1d11",  # Telos
        "21dcae42c0182200e93f954a074011f9048a7624c6fe81d3c9541a614a88bd1c",  # FIO
        "e70aaab8997e1dfce58fbfac80cbbb8fecec7b99cf982a9444273cbc64c41473",  # Jungle 2
        "5fff1dae8dc8e2fc4d5b23b2c7665c97f9e9d8edf2b6485a86ba311c25639191",  # Kylin
        "384da888112027f0321850a169f737c33e53b388aad48b5adace4bab97f437e0",  # XPR Network
    )
)


def name_of(value: int) -> str:
    """An Antelope name from its uint64 (the chain's own base-32 packing)."""
    chars = []
    for i in range(13):
        chars.append(_CHARMAP[value & (0x0F if i == 0 else 0x1F)])
        value >>= 4 if i == 0 else 5
    return "".join(reversed(chars)).rstrip(".")


class Reader:
    """Antelope's binary serialisation, read strictly (truncation is a refusal)."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise refuse(f"{self.what} is truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def varuint(self) -> int:
        value = shift = 0
        while True:
            byte = self.uint(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise refuse(f"{self.what} has an oversized length")

    def name(self) -> str:
        return name_of(self.uint(8))

    def bytes_(self) -> bytes:
        return self.take(self.varuint())

    def done(self) -> None:
        if self.pos != len(self.data):
            raise refuse(f"{self.what} has trailing bytes")


@dataclass(frozen=True, slots=True)
class Action:
    account: str
    name: str
    authorization: tuple[tuple[str, str], ...]
    data: bytes


def read_actions(r: Reader) -> tuple[Action, ...]:
    actions = []
    for _ in range(r.varuint()):
        account, name = r.name(), r.name()
        auth = tuple((r.name(), r.name()) for _ in range(r.varuint()))
        actions.append(Action(account, name, auth, r.bytes_()))
    return tuple(actions)


@dataclass(frozen=True, slots=True)
class Transaction:
    context_free: tuple[Action, ...]
    actions: tuple[Action, ...]
    extensions: int  # how many transaction extensions it carries


def read_transaction(data: bytes) -> Transaction:
    """A serialized transaction read to its last byte (ChainError if it is not one)."""
    r = Reader(data, "serializedTransaction")
    r.take(4 + 2 + 4)  # expiration, ref_block_num, ref_block_prefix
    r.varuint()  # max_net_usage_words
    r.take(1)  # max_cpu_usage_ms
    r.varuint()  # delay_sec
    cfa, actions = read_actions(r), read_actions(r)
    extensions = r.varuint()
    for _ in range(extensions):
        r.take(2)
        r.bytes_()
    r.done()
    return Transaction(cfa, actions, extensions)


def decode_transaction(data: bytes) -> tuple[tuple[Action, ...], tuple[Action, ...]]:
    """(context-free actions, actions) of a transaction this signer fully understands."""
    tx = read_transaction(data)
    if tx.extensions:
        raise refuse("the transaction carries extensions, which this signer does not read")
    if any(a.authorization for a in tx.context_free):
        raise refuse("a context-free action carries an authorization")
    return tx.context_free, tx.actions


def symbol_code(symbol: bytes, kind: str) -> str:
    """An asset symbol (precision byte, then 1-7 of A-Z zero-padded) as its code."""
    code = symbol[1:].rstrip(b"\0")
    if symbol[0] > 18 or not 1 <= len(code) <= 7 or not all(0x41 <= c <= 0x5A for c in code):
        raise refuse(f"{kind} has an invalid asset symbol", INVALID_AMOUNT)
    return code.decode()


def transfer_item(action: Action, owner: Owner) -> Item:
    """A token contract's standard `transfer` (from, to, quantity, memo), else undecoded."""
    kind = f"{action.account}::{action.name}"
    if action.name != "transfer":
        return Item(kind, decoded=False)
    r = Reader(action.data, f"the data of {kind}")
    sender, to = r.name(), r.name()
    amount = int.from_bytes(r.take(8), "little", signed=True)
    symbol = r.take(8)
    code = symbol_code(symbol, kind)
    precision = symbol[0]  # the asset's own decimals (checked by symbol_code)
    if len(r.bytes_()) > MAX_MEMO:
        raise refuse(f"{kind} has a memo over {MAX_MEMO} bytes")
    r.done()
    if sender != owner.name:
        raise refuse(f"{kind} sends from another account than this one", "not_owner")
    if not 0 < amount <= MAX_ASSET:
        raise refuse(f"{kind} moves a non-positive or out-of-range quantity", INVALID_AMOUNT)
    denom = f"{action.account}:{code}"
    return Item(kind, to, (Amount.of(denom, amount, asset_unit(denom, precision)),))


def asset_unit(denom: str, precision: int | None) -> Unit:
    """An asset's (`contract:SYMBOL`) amounts are integers of 10^-precision of its symbol:
    `units of 0.0001 EOS`, shown in EOS at 4 decimals. Only a transaction's symbol says
    the precision; without it (a policy's cap) the unit is `base units of <denom>`."""
    if precision is None:
        return Unit(f"base units of {denom}")
    code = denom.rpartition(":")[2]
    step = f"0.{'0' * (precision - 1)}1" if precision else "1"
    return Unit(f"units of {step} {code}", code, precision)


UNITS: Final = Units(other=asset_unit)  # no denom says its precision alone


def signature_k1(secret: bytes, digest: bytes) -> str:
    """A canonical `SIG_K1_…` signature of a 32-byte digest."""
    for attempt in range(1, 256):
        rs, recid = sign_recoverable_with_entropy(secret, digest, attempt.to_bytes(32, "big"))
        if (
            rs[0] < 0x80
            and rs[32] < 0x80
            and (rs[0] or rs[1] >= 0x80)
            and (rs[32] or rs[33] >= 0x80)
        ):
            data = bytes((27 + 4 + recid,)) + rs
            return "SIG_K1_" + encoding.base58_encode(data + encoding.ripemd160(data + b"K1")[:4])
    raise RuntimeError("no canonical signature in 255 attempts")  # p ~ 2**-500


class EosTransactionRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """eosjs `SignatureProviderArgs` with bytes as hex. `requiredKeys`, if given, must be
    this account's key (either form); `abis` are what eosjs hands a signer to show the
    actions to a person: no signature covers them, and this signer reads the actions
    from the transaction itself."""

    chainId: Annotated[HASH, Meta(description="the account's network's chain id")]
    serializedTransaction: HEX
    serializedContextFreeData: HEX | None = None
    requiredKeys: list[str] | None = None
    abis: list[Any] | None = None


class EosTransactionResponse(msgspec.Struct, kw_only=True):
    signatures: list[str]
    serializedTransaction: str
    serializedContextFreeData: str | None


@dataclass(frozen=True, slots=True)
class _EosDigest:
    summary: Summary
    digest: bytes
    respond: Any  # (SIG_K1_ string) -> Signed

    def sign(self, key: Key) -> Signed:
        result: Signed = self.respond(signature_k1(key.secret, self.digest))
        return result


def prepare_transaction(req: EosTransactionRequest, owner: Owner) -> _EosDigest:
    chain_id = unhex(req.chainId, "chainId")
    if len(chain_id) != 32 or req.chainId.lower() != owner.network.chain_id:
        raise refuse(
            f"chainId is not the account's network {owner.network.name} "
            f"(expected {owner.network.chain_id})",
            "wrong_chain",
        )
    for text in req.requiredKeys or ():
        try:
            required = parse_public_key(text)
        except ChainError:
            raise refuse("requiredKeys holds something that is not an EOS public key") from None
        if required != owner.public_key:
            raise refuse("requiredKeys names a key this account does not hold", "not_owner")
    tx = unhex(req.serializedTransaction, "serializedTransaction")
    cfd = unhex(req.serializedContextFreeData or "", "serializedContextFreeData")
    cfa, actions = decode_transaction(tx)
    if cfd and not cfa:
        raise refuse("context-free data without context-free actions")
    actors = {actor for a in actions for actor, _ in a.authorization}
    if owner.name not in actors:
        raise refuse("no action is authorized by this account", "not_owner")
    if actors - {owner.name}:
        raise refuse("an action is authorized by another account", "not_owner")
    digest = hashlib.sha256(
        chain_id + tx + (hashlib.sha256(cfd).digest() if cfd else bytes(32))
    ).digest()
    items = tuple(Item(f"{a.account}::{a.name}", decoded=False) for a in cfa) + tuple(
        transfer_item(a, owner) for a in actions
    )
    summary = Summary(
        "eos",
        owner.network.name,
        "sign-transaction",
        owner.network.chain_id,
        items,
        (),
        digest.hex(),
    )
    tx_id = hashlib.sha256(tx).hexdigest()

    def respond(sig: str) -> Signed:
        data = EosTransactionResponse(
            signatures=[sig],
            serializedTransaction=tx.hex(),
            serializedContextFreeData=cfd.hex() if cfd else None,
        )
        return Signed(data, tx_id)

    return _EosDigest(summary, digest, respond)


class EosMessageRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """eosjs-ecc `sign(data)`: UTF-8 `message` or hex `data`; the sha256 of the bytes is signed."""

    # exactly one of each pair is sent: declared here, checked and documented by the
    # API's type for it (api/schemas.py `sign_request`); prepare_message checks it again
    one_of: ClassVar[tuple[tuple[str, str], ...]] = (("message", "data"),)

    message: MESSAGE_TEXT | None = None
    data: MESSAGE_HEX | None = None


class EosMessageResponse(msgspec.Struct, kw_only=True):
    signature: str


Refusal = Callable[[bytes], "str | None"]  # spec.py `NeverSign`: why data is not signed


def never_sign(data: bytes) -> str | None:
    """What a raw message signer must never sign (spec.py `NeverSign`): an EOS
    transaction's digest is sha256(chain id ‖ transaction ‖ hash), so data that begins
    with a chain id or has that shape is refused (a prefix too, whatever follows)."""
    if data[:32] in KNOWN_CHAIN_IDS:
        return (
            "data begins with an Antelope chain id: its signature would sign a "
            "transaction; use sign-transaction"
        )
    if len(data) > 64:
        try:
            read_transaction(data[32:-32])
        except ChainError:
            pass
        else:
            return (
                "data is shaped as chain id, transaction and context-free data hash: "
                "its signature would sign that transaction; use sign-transaction"
            )
    return None


def prepare_message(req: EosMessageRequest, owner: Owner, others: Refusal) -> _EosDigest:
    """The sha256 of the bytes, unless EOS or another family (`others`: the registry
    asks each) says no raw message signer may sign them."""
    if (req.message is None) == (req.data is None):
        raise refuse('send "message" (text) or "data" (hex), one of them')
    raw = req.message.encode() if req.message is not None else unhex(req.data or "", "data")
    bounded_message(req.message, raw if req.message is None else None)  # built without the decoder
    reason = never_sign(raw) or others(raw)
    if reason is not None:
        raise refuse(reason, "message_is_transaction")
    digest = hashlib.sha256(raw).digest()
    summary = Summary(
        "eos", owner.network.name, "sign-message", None, (), (), digest.hex(), raw=True, message=raw
    )
    return _EosDigest(summary, digest, lambda sig: Signed(EosMessageResponse(signature=sig)))


# rules list contract::action; left out: token transfers only
VOCABULARY: Final = Vocabulary("actions", "action", ("eosio.token::transfer",))

TRANSACTION: Final = SignKind(
    "sign-transaction",
    ("eos",),
    EosTransactionRequest,
    EosTransactionResponse,
    prepare_transaction,
    "sign a transaction (eosjs SignatureProvider.sign)",
    "Digest: sha256(chainId || transaction || sha256(context-free data) or 32 zero "
    "bytes). Every action must be authorized by this account only.",
    {
        "eosjs": {
            "chainId": "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906",
            # custodytest1 sends 1.2345 EOS to exchange1234 (memo "m")
            "serializedTransaction": (
                "000e0e6bd2042e160000000000000100a6823403ea3055000000572d3ccdcd01103256d9279a"
                "b14600000000a8ed323222103256d9279ab1464086088a4dd35057393000000000000004454f"
                "5300000000016d00"
            ),
        }
    },
)


def kinds(others: Refusal) -> tuple[SignKind, ...]:
    """EOS's sign kinds; `others` says why another family forbids a raw message signer
    to sign some bytes (chains/registry.py `never_signed`: every other family's
    `never_sign`), so this module knows no other family."""

    def message(req: EosMessageRequest, owner: Owner) -> _EosDigest:
        return prepare_message(req, owner, others)

    return TRANSACTION, SignKind(
        "sign-message",
        ("eos",),
        EosMessageRequest,
        EosMessageResponse,
        message,
        "sign the sha256 of arbitrary bytes (eosjs-ecc sign)",
        "",
        {"text": {"message": "I own this account"}, "bytes": {"data": "00ff10"}},
    )
