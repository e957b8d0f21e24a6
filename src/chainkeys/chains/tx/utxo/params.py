"""What differs between the UTXO coins for signing, as data (Dogecoin/Litecoin Core)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from chainkeys.chains.spec import Unit, Units

COIN: Final = 100_000_000  # koinu per DOGE, litoshi per LTC
COIN_DECIMALS: Final = 8  # (the display unit: DOGE, LTC)


@dataclass(frozen=True, slots=True)
class CoinParams:
    magic: str  # Core's MESSAGE_MAGIC (strMessageMagic)
    ticker: str  # Amount.denom: amounts are in the smallest unit (koinu, litoshi)
    base_unit: str  # that unit's name, which people read amounts in
    segwit: bool
    max_money: int  # Core's MAX_MONEY (amount.h): no output or input sum may exceed it


PARAMS: Final = {
    "dogecoin": CoinParams(
        "Dogecoin Signed Message:\n", "DOGE", "koinu", segwit=False, max_money=10_000_000_000 * COIN
    ),
    "litecoin": CoinParams(
        "Litecoin Signed Message:\n", "LTC", "litoshi", segwit=True, max_money=84_000_000 * COIN
    ),
}


def unit(family: str) -> Unit:
    """The coin's amounts: integers of koinu/litoshi, shown in the ticker at 8 decimals."""
    params = PARAMS[family]
    return Unit(params.base_unit, params.ticker, COIN_DECIMALS)


def units(family: str) -> Units:
    """The coin's display units (a registry row's `units`): its one denom, the ticker."""
    return Units({PARAMS[family].ticker: unit(family)})
