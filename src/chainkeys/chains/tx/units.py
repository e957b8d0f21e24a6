"""Display units of denoms, for people (the console's cap bars): each family's own table
(its registry row's `units`), looked up by denom alone. EOS assets carry their precision
in the transaction, not in the denom (`eosio.token:EOS`), so they have none here."""

from __future__ import annotations

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import Amount


def with_unit(denom: str, amount: int) -> Amount:
    """`amount` of `denom`, with its display unit when the denom alone says it."""
    for fam in FAMILIES.values():
        found = fam.units.get(denom)
        if found is not None:
            return Amount(denom, amount, *found)
    return Amount(denom, amount)
