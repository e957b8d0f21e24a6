"""Display units of denoms, for people (the console's cap bars): the decoders' own
tables, looked up by denom alone. EOS assets carry their precision in the
transaction, not in the denom (`eosio.token:EOS`), so they have none here."""

from __future__ import annotations

from chainkeys.chains.tx.base import Amount
from chainkeys.chains.tx.cosmos.common import DISPLAY
from chainkeys.chains.tx.utxo.params import COIN_DECIMALS, PARAMS


def with_unit(denom: str, amount: int) -> Amount:
    """`amount` of `denom`, with its display unit when the denom alone says it."""
    if denom in DISPLAY:
        unit, decimals = DISPLAY[denom]
        return Amount(denom, amount, unit, decimals)
    if denom in {p.ticker for p in PARAMS.values()}:
        return Amount(denom, amount, denom, COIN_DECIMALS)
    return Amount(denom, amount)
