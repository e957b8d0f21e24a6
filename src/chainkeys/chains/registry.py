"""The one table of chain families; each family holds its own table of networks."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from chainkeys.chains import cosmos, dogecoin, eos, litecoin
from chainkeys.chains.spec import ChainError, Family

FAMILIES: Final[Mapping[str, Family[Any]]] = MappingProxyType(
    {
        "cosmos": cosmos.FAMILY,
        "dogecoin": dogecoin.FAMILY,
        "eos": eos.FAMILY,
        "litecoin": litecoin.FAMILY,
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
