"""Display units of a family's denoms, for people (a policy's caps on the console, in
/policy/usage and GET /policy): each family's own table (its registry row's `units`).
A decoded amount carries its unit already; a cap names only a denom, so an EOS asset's
precision, which only a transaction's symbol says, is not known here."""

from __future__ import annotations

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import Unit


def unit_of(family: str, denom: str) -> Unit:
    """The unit `family`'s amounts of `denom` count, and its display unit when the denom
    alone says it."""
    return FAMILIES[family].units.of(denom)
