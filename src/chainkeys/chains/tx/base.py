"""Shapes every family's signers share: the owner, the summary, a prepared request.

Pure: no I/O. The summary is what policies and the audit log read, so every
family fills the same fields the same way (integers of the smallest unit,
never floats), and the summary itself refuses what no chain can mean: a
negative or unbounded amount, a recipient that is not text. A family's
decoder cannot forget those checks, because it cannot build a summary
without them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from chainkeys.chains.spec import ChainError, Key, Network, ThresholdKey, Unit
from chainkeys.chains.tx.fields import MAX_MESSAGE_BYTES, MAX_MESSAGE_CHARS

BAD: Final = "invalid_sign_request"
INVALID_AMOUNT: Final = "invalid_amount"
MAX_AMOUNT: Final = 2**256  # Cosmos amounts are sdk.Int (256 bits): no chain moves more


def refuse(message: str, code: str = BAD) -> ChainError:
    """The error every decoder raises for a request it will not sign (400, audited)."""
    return ChainError(message, code)


def unhex(text: object, what: str) -> bytes:
    """Hex text as bytes (either case), or a refusal naming `what`."""
    if not isinstance(text, str):
        raise refuse(f"{what} is not hex text")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise refuse(f"{what} is not hex") from None


def bounded_message(text: str | None, data: bytes | None = None) -> None:
    """A sign-message's text or bytes within the schema's bounds (fields.py), checked
    again for a request built without the decoder (an approval's, a test's)."""
    if text is not None and len(text) > MAX_MESSAGE_CHARS:
        raise refuse(f"message is too long to sign ({MAX_MESSAGE_CHARS:,} characters at most)")
    if data is not None and len(data) > MAX_MESSAGE_BYTES:
        raise refuse(f"data is too long to sign ({MAX_MESSAGE_BYTES:,} bytes at most)")


@dataclass(frozen=True, slots=True)
class Owner:
    """The stored account a request is signed for (public data only)."""

    family: str
    name: str  # the lookup name: the address, or the EOS account name
    address: str
    public_key: bytes  # SEC1: 33 bytes compressed, 65 for an uncompressed-key wallet
    network: Network
    address_type: str | None = None  # Litecoin: p2wpkh, p2pkh, p2sh-p2wpkh
    # a multisig account (its keys and threshold; public_key is empty): the family's own
    # kind, which its signers narrow (the neutral layer names no family's type)
    multisig: ThresholdKey | None = None


def in_display(amount: int, unit: str | None, decimals: int | None) -> str | None:
    """`amount` of the smallest unit in the display `unit` of `decimals` (`0.009 LTC`),
    exactly (no float); None when either is not known."""
    if unit is None or decimals is None:
        return None
    whole, part = divmod(amount, 10**decimals)
    frac = f"{part:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{whole}{'.' + frac if frac else ''} {unit}"


@dataclass(frozen=True, slots=True)
class Amount:
    """An exact amount of the smallest unit.

    `denom` is the Cosmos denom (`uatom`, `ibc/…`), the coin ticker for UTXO
    chains (`DOGE`, `LTC`; amounts in koinu/litoshi), or `contract:SYMBOL`
    for EOS (`eosio.token:EOS`; the asset's integer amount at its precision).
    The denom is what policies key caps by; `base` is what people read the
    integer in (the family's `Units`: litoshi, never LTC).
    """

    denom: str
    amount: int
    # For people (approvers, the console): the display unit and its decimals, when the
    # decoder knows them (ATOM 6, DOGE and LTC 8, an EOS asset's own precision).
    unit: str | None = field(default=None, compare=False)
    decimals: int | None = field(default=None, compare=False)
    # the name of the smallest unit the integer counts (None: the denom names it)
    base: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, denom: str, amount: int, unit: Unit) -> Amount:
        """`amount` of `denom` in the family's `unit` for it."""
        return cls(denom, amount, unit.display, unit.decimals, unit.base)

    @property
    def base_unit(self) -> str:
        """The name of the smallest unit the integer counts: `litoshi`, `uatom`."""
        return self.base if self.base is not None else self.denom

    def display(self) -> str | None:
        """`5000 ATOM` for 5000000000 uatom; None when the unit is not known."""
        return in_display(self.amount, self.unit, self.decimals)

    def words(self, amount: int | None = None) -> str:
        """For messages: `300000000 litoshi (3 LTC)`, the base unit first (what a policy
        counts), the display unit beside it when known; `amount` (another sum of the same
        denom: a cap, a total) in this amount's units."""
        value = self.amount if amount is None else amount
        shown = in_display(value, self.unit, self.decimals)
        return f"{value} {self.base_unit}" + (f" ({shown})" if shown else "")

    def __post_init__(self) -> None:
        if not isinstance(self.denom, str) or not self.denom:
            raise refuse("a denom is missing or not text", INVALID_AMOUNT)
        if type(self.amount) is not int or not 0 <= self.amount < MAX_AMOUNT:
            raise refuse(
                f"an amount of {self.denom[:64]} is negative or out of range", INVALID_AMOUNT
            )


@dataclass(frozen=True, slots=True)
class Item:
    """One message, action or output of what is signed.

    `type` is the Cosmos type URL, `contract::action` for EOS, `output` for a
    UTXO output. `recipient` is the address (IBC: the receiver on the other
    chain; EOS: the `to` account) when the item moves value, else None.
    `change` marks a UTXO output paying back to the signing account. `memo`
    is an IBC packet's memo (middleware on the receiving chain may act on it:
    packet-forward, wasm hooks, callbacks), None for everything else.
    """

    type: str
    recipient: str | None = None
    amounts: tuple[Amount, ...] = ()
    change: bool = False
    decoded: bool = True  # False: a message type the service cannot read
    memo: str | None = None
    ibc: Ibc | None = None  # an IBC transfer: where the funds go on the other chain

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not isinstance(self.recipient, str | None):
            raise refuse("a message type or recipient is not text")
        if not isinstance(self.memo, str | None):
            raise refuse("a memo is not text")
        if self.recipient is not None and not plain_text(self.recipient):
            raise refuse(
                "a recipient holds control or bidirectional-text characters (it "
                "could be shown to a person as another address)",
                "invalid_recipient",
            )


@dataclass(frozen=True, slots=True)
class Ibc:
    """What decides where an IBC transfer's funds go: the channel and port on this
    chain (the channel names the other chain), the timeouts, and (in Item) the receiver
    and memo."""

    channel: str
    port: str
    timeout_height: str | None  # "revision-height", None when not set
    timeout_timestamp: int | None  # nanoseconds since the epoch, None when not set

    def record(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "port": self.port,
            "timeout_height": self.timeout_height,
            "timeout_timestamp": self.timeout_timestamp,
        }


BIDI_AND_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain_text(text: str) -> bool:
    """No control character and no bidirectional formatting character: what a person
    reads is what the text is."""
    return BIDI_AND_CONTROL.search(text) is None


@dataclass(frozen=True, slots=True)
class Summary:
    """What a sign request would do, decoded before any key is opened.

    `kind` is the endpoint (`sign-direct`, `sign-psbt`, …). `raw` is True
    for arbitrary-message signing (nothing moves). `digest` is the sha256
    (hex) of what the signature commits to: the one signed digest, or for
    several signatures (one per UTXO input) all of them in input order, so
    a segwit request that claims other amounts is another digest. A retry
    of the same request has the same digest (policies count it once).
    `fee` is None when the decoder cannot price the transaction (an input
    whose previous output is unknown): a policy that caps amounts refuses it.
    """

    family: str
    network: str
    kind: str
    chain_id: str | None
    items: tuple[Item, ...]
    fee: tuple[Amount, ...] | None
    digest: str
    raw: bool = False
    memo: str | None = None
    message: bytes | None = None  # the bytes a sign-message signs (before any prefix)

    def words(self, denom: str, amount: int) -> str:
        """`amount` of `denom` for a message, in the units this request's own amounts of
        it carry (`100000000 litoshi (1 LTC)`: a cap, a total)."""
        for a in (*(a for item in self.items for a in item.amounts), *(self.fee or ())):
            if a.denom == denom:
                return a.words(amount)
        return f"{amount} base units of {denom}"

    def spent(self) -> dict[str, int]:
        """Amount leaving the account per denom: non-change items plus the fee."""
        out: dict[str, int] = {}
        for item in self.items:
            if not item.change:
                for a in item.amounts:
                    out[a.denom] = out.get(a.denom, 0) + a.amount
        for a in self.fee or ():
            out[a.denom] = out.get(a.denom, 0) + a.amount
        return out


def amount_record(a: Amount) -> dict[str, str]:
    """An amount as the audit log and API show it: the integer as a decimal string
    (JSON numbers lose precision past 2^53 in JavaScript; sdk.Int goes to 2^256), the
    name of the unit it counts (`base_unit`: litoshi, uatom), and in display units
    beside it when they are known."""
    out = {"denom": a.denom, "amount": str(a.amount), "base_unit": a.base_unit}
    shown = a.display()
    if shown is not None:
        out["display"] = shown
    return out


MESSAGE_SHOWN = 4096  # bytes of a signed message shown to people (the digest covers all)


def message_record(data: bytes) -> dict[str, Any]:
    """A signed message for people: its text when it is printable UTF-8, its hex always
    (at most MESSAGE_SHOWN bytes of either, with its full length)."""
    shown = data[:MESSAGE_SHOWN]
    out: dict[str, Any] = {"length": len(data), "hex": shown.hex()}
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        return out
    if plain_text(text.replace("\n", "").replace("\t", "")):
        out["text"] = text
    return out


def summary_record(summary: Summary) -> dict[str, Any]:
    """The summary as JSON-ready builtins (for the audit log and approval requests)."""
    items = []
    for item in summary.items:
        entry: dict[str, Any] = {
            "type": item.type,
            "recipient": item.recipient,
            "amounts": [amount_record(a) for a in item.amounts],
        }
        if item.change:
            entry["change"] = True
        if not item.decoded:
            entry["decoded"] = False
        if item.memo is not None:
            entry["memo"] = item.memo
        if item.ibc is not None:
            entry["ibc"] = item.ibc.record()
        items.append(entry)
    return {
        "family": summary.family,
        "network": summary.network,
        "kind": summary.kind,
        "chain_id": summary.chain_id,
        "items": items,
        "fee": None if summary.fee is None else [amount_record(a) for a in summary.fee],
        "digest": summary.digest,
        "raw": summary.raw,
        "memo": summary.memo,
        **({"message": message_record(summary.message)} if summary.message is not None else {}),
    }


@dataclass(frozen=True, slots=True)
class Signed:
    """A signer's answer: the response `data` and the tx hash/id when there is one."""

    data: Any  # a msgspec Struct: the ecosystem's own result shape
    tx_id: str | None = None


class Decoded(Protocol):
    """A decoded, checked request, ready to be signed with the owner's key."""

    @property
    def summary(self) -> Summary: ...

    def sign(self, key: Key) -> Signed:
        """Sign with `key` (the owner's; the caller opened it after every check)."""
        ...


@runtime_checkable
class CoSigned(Protocol):
    """A decoded request a multisig's members sign: each held member key adds its own
    signature over the same bytes (sign-psbt, Cosmos sign-amino)."""

    @property
    def summary(self) -> Summary: ...

    def cosign(self, keys: list[Key]) -> Signed:
        """Sign with every member key held here (the caller checked each is a member)."""
        ...


@dataclass(frozen=True, slots=True)
class SignKind:
    """One sign endpoint of one or more families: `POST /{family}/{name}/{path}`.

    `request` and `response` are msgspec Structs in the ecosystem's own JSON
    shape (names and casing included); the API decodes `request`, wraps
    `response` in the envelope and documents both. `prepare` decodes and
    checks without any secret (ChainError when refused).
    """

    path: str
    families: tuple[str, ...]
    request: type[Any]
    response: type[Any]
    prepare: Callable[[Any, Owner], Decoded]
    summary: str  # one line for the OpenAPI document
    description: str = ""
    examples: dict[str, Any] = field(default_factory=dict)  # name -> request example
    # an approval request for it as the API shows one (`account`, `summary`): the
    # document's example of an approval (one kind of one family declares it)
    approval_example: dict[str, Any] | None = None
