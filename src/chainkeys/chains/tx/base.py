"""Shapes every family's signers share: the owner, the summary, a prepared request.

Pure: no I/O. The summary is what policies and the audit log read, so every
family fills the same fields the same way (integers of the smallest unit,
never floats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from chainkeys.chains.spec import Key, Network


@dataclass(frozen=True, slots=True)
class Owner:
    """The stored account a request is signed for (public data only)."""

    family: str
    name: str  # the lookup name: the address, or the EOS account name
    address: str
    public_key: bytes  # SEC1: 33 bytes compressed, 65 for an uncompressed-key wallet
    network: Network
    address_type: str | None = None  # Litecoin: p2wpkh, p2pkh, p2sh-p2wpkh


@dataclass(frozen=True, slots=True)
class Amount:
    """An exact amount of the smallest unit.

    `denom` is the Cosmos denom (`uatom`, `ibc/…`), the coin ticker for UTXO
    chains (`DOGE`, `LTC`; amounts in koinu/litoshi), or `contract:SYMBOL`
    for EOS (`eosio.token:EOS`; the asset's integer amount at its precision).
    """

    denom: str
    amount: int


@dataclass(frozen=True, slots=True)
class Item:
    """One message, action or output of what is signed.

    `type` is the Cosmos type URL, `contract::action` for EOS, `output` for a
    UTXO output. `recipient` is the address (IBC: the receiver on the other
    chain; EOS: the `to` account) when the item moves value, else None.
    `change` marks a UTXO output paying back to the signing account.
    """

    type: str
    recipient: str | None = None
    amounts: tuple[Amount, ...] = ()
    change: bool = False
    decoded: bool = True  # False: a message type the service cannot read


@dataclass(frozen=True, slots=True)
class Summary:
    """What a sign request would do, decoded before any key is opened.

    `kind` is the endpoint (`sign-direct`, `sign-psbt`, …). `raw` is True
    for arbitrary-message signing (nothing moves). `digest` is the sha256
    (hex) of the bytes that define what is signed: a retry of the same
    request has the same digest (policies count it once).
    """

    family: str
    network: str
    kind: str
    chain_id: str | None
    items: tuple[Item, ...]
    fee: tuple[Amount, ...]
    digest: str
    raw: bool = False
    memo: str | None = None

    def spent(self) -> dict[str, int]:
        """Amount leaving the account per denom: non-change items plus the fee."""
        out: dict[str, int] = {}
        for item in self.items:
            if not item.change:
                for a in item.amounts:
                    out[a.denom] = out.get(a.denom, 0) + a.amount
        for a in self.fee:
            out[a.denom] = out.get(a.denom, 0) + a.amount
        return out


@dataclass(frozen=True, slots=True)
class Signed:
    """A signer's answer: the response `data` and the tx hash/id when there is one."""

    data: Any  # a msgspec Struct: the ecosystem's own result shape
    tx_id: str | None = None


class Prepared(Protocol):
    """A decoded, checked request, ready to be signed with the owner's key."""

    @property
    def summary(self) -> Summary: ...

    def sign(self, key: Key) -> Signed:
        """Sign with `key` (the owner's; the caller opened it after every check)."""
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
    prepare: Callable[[Any, Owner], Prepared]
    summary: str  # one line for the OpenAPI document
    description: str = ""
    examples: dict[str, Any] = field(default_factory=dict)  # name -> request example
