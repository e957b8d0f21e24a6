"""The text forms families share (bech32, base58) as JSON Schema patterns: what an
account name looks like, for the API's path parameters, built from each family's own
networks (a new network's prefix appears in the document at once).

A pattern says the shape only; the family's `check_name` checks the rest (a checksum).
Patterns end in `\\Z`, the end of the text for Python as `$` is for JSON Schema
(api/openapi.py `ecma_patterns`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from chainkeys.chains.spec import Network

# Bech32 (BIP173: one case, no 1, b, i, o after the separator); base58 (no 0, O, I, l).
BECH32: Final = "[02-9ac-hj-np-z]"
BECH32_UPPER: Final = "[02-9AC-HJ-NP-Z]"
BASE58: Final = "[1-9A-HJ-NP-Za-km-z]"
# a base58check address of 25 bytes (version, hash, checksum)
BASE58_ADDRESS: Final = f"{BASE58}{{25,35}}"
# data characters of a 20-byte (32 characters) and a 32-byte (52) bech32 payload with its
# 6 of checksum; a witness version character comes before them
HASH20: Final = "{38}"
HASH32: Final = "{58}"


def hrps(networks: Iterable[Network]) -> list[str]:
    """The bech32 prefixes of these networks, sorted, each once."""
    return sorted({n.hrp for n in networks if n.hrp})


def bech32(prefixes: list[str], version: str, *lengths: str) -> str:
    """Either case, never mixed (BIP173), for any of these prefixes: the separator, the
    witness version character (if any), then data of one of these lengths."""
    out = []
    for chars, names, v in (
        (BECH32, prefixes, version),
        (BECH32_UPPER, [h.upper() for h in prefixes], version.upper()),
    ):
        data = "|".join(f"{chars}{n}" for n in lengths)
        out.append(f"(?:{'|'.join(names)})1{v}(?:{data})")
    return "|".join(out)


def whole(*forms: str) -> str:
    """A pattern the whole text matches: one of these forms (grouped when there is a
    choice)."""
    text = "|".join(forms)
    return rf"^(?:{text})\Z" if "|" in text else rf"^{text}\Z"
