"""The one table of chain families; each family holds its own table of networks.

A family's signers (`chains/tx/`) are attached here, not in the family's module:
signers read a family's key forms and addresses, so the dependency runs one way,
tx -> family, and this table is the one place that joins them. So is what each
family's transactions forbid a raw message signer (`never_sign`): a message signer
asks the table (`never_signed`), never another family's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Final

from chainkeys.chains import cosmos, dogecoin, eos, litecoin
from chainkeys.chains.spec import ChainError, Family, NeverSign
from chainkeys.chains.tx import cosmos as cosmos_signers
from chainkeys.chains.tx import eos as eos_signers
from chainkeys.chains.tx import utxo

_UTXO: Final = (utxo.psbt.KIND, utxo.rawtx.KIND, utxo.message.KIND)


def never_signed(data: bytes, but: str = "") -> str | None:
    """Why no raw message signer may sign `data` (spec.py `NeverSign`): the first
    family's reason, in this table's order (each check once), leaving out `but` (the
    asking family, which checks its own first); None when no family's is at stake."""
    checks = dict.fromkeys(f.never_sign for name, f in FAMILIES.items() if name != but)
    for check in checks:
        reason = check(data)
        if reason is not None:
            return reason
    return None


def _others_than(name: str) -> NeverSign:
    return lambda data: never_signed(data, but=name)


FAMILIES: Final[Mapping[str, Family[Any]]] = MappingProxyType(
    {
        "cosmos": replace(
            cosmos.FAMILY,
            signers=cosmos_signers.KINDS,
            never_sign=cosmos_signers.never_sign,
            vocabulary=cosmos_signers.VOCABULARY,
            multisig=cosmos_signers.MULTISIG,
            units=cosmos_signers.UNITS,
        ),
        "dogecoin": replace(
            dogecoin.FAMILY,
            signers=_UTXO,
            never_sign=utxo.never_sign,
            vocabulary=utxo.VOCABULARY,
            multisig=utxo.multisig.LEGACY_FORMS,
            units=utxo.units("dogecoin"),
        ),
        "eos": replace(
            eos.FAMILY,
            signers=eos_signers.kinds(_others_than("eos")),
            never_sign=eos_signers.never_sign,
            vocabulary=eos_signers.VOCABULARY,
            units=eos_signers.UNITS,
        ),
        "litecoin": replace(
            litecoin.FAMILY,
            signers=_UTXO,
            never_sign=utxo.never_sign,
            vocabulary=utxo.VOCABULARY,
            multisig=utxo.multisig.SEGWIT_FORMS,
            units=utxo.units("litecoin"),
        ),
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
