"""What differs between the UTXO coins for signing, as data (Dogecoin/Litecoin Core)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

COIN: Final = 100_000_000  # koinu per DOGE, litoshi per LTC
COIN_DECIMALS: Final = 8  # (the display unit: DOGE, LTC)


@dataclass(frozen=True, slots=True)
class CoinParams:
    magic: str  # Core's MESSAGE_MAGIC (strMessageMagic)
    ticker: str  # Amount.denom: amounts are in the smallest unit (koinu, litoshi)
    segwit: bool
    max_money: int  # Core's MAX_MONEY (amount.h): no output or input sum may exceed it


PARAMS: Final = {
    "dogecoin": CoinParams(
        "Dogecoin Signed Message:\n", "DOGE", segwit=False, max_money=10_000_000_000 * COIN
    ),
    "litecoin": CoinParams(
        "Litecoin Signed Message:\n", "LTC", segwit=True, max_money=84_000_000 * COIN
    ),
}


def units(family: str) -> dict[str, tuple[str, int]]:
    """The coin's display unit: its ticker, 8 decimals (a registry row's `units`)."""
    ticker = PARAMS[family].ticker
    return {ticker: (ticker, COIN_DECIMALS)}
