"""The one table of chain families; each family holds its own table of networks.

A family's signers (`chains/tx/`) are attached here, not in the family's module:
signers read a family's key forms and addresses, so the dependency runs one way,
tx -> family, and this table is the one place that joins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Final

from chainkeys.chains import cosmos, dogecoin, eos, litecoin
from chainkeys.chains.spec import ChainError, Family
from chainkeys.chains.tx import cosmos as cosmos_signers
from chainkeys.chains.tx import eos as eos_signers
from chainkeys.chains.tx import utxo

_UTXO: Final = (utxo.psbt.KIND, utxo.rawtx.KIND, utxo.message.KIND)

FAMILIES: Final[Mapping[str, Family[Any]]] = MappingProxyType(
    {
        "cosmos": replace(cosmos.FAMILY, signers=cosmos_signers.KINDS),
        "dogecoin": replace(dogecoin.FAMILY, signers=_UTXO),
        "eos": replace(eos.FAMILY, signers=eos_signers.KINDS),
        "litecoin": replace(litecoin.FAMILY, signers=_UTXO),
    }
)


def family(name: str) -> Family[Any]:
    """The named family.

    Raises:
        ChainError: code "unknown_family", listing the accepted names.
    """
    found = FAMILIES.get(name)
    if found is None:
        raise ChainError(f"unknown chain family; accepted: {', '.join(FAMILIES)}", "unknown_family")
    return found
