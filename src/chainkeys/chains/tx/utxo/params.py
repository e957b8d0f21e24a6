"""What differs between the UTXO coins for signing, as data (Dogecoin/Litecoin Core)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class CoinParams:
    magic: str  # Core's MESSAGE_MAGIC (strMessageMagic)
    ticker: str  # Amount.denom: amounts are in the smallest unit (koinu, litoshi)
    segwit: bool


PARAMS: Final = {
    "dogecoin": CoinParams("Dogecoin Signed Message:\n", "DOGE", segwit=False),
    "litecoin": CoinParams("Litecoin Signed Message:\n", "LTC", segwit=True),
}
