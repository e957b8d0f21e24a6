"""Valid values for the string formats the OpenAPI document names for rules a schema
cannot hold (api/params.py): addresses with their checksums, and the one cursor a
client can make (the first page's, empty). Registered with schemathesis so that the
data it calls valid is valid: a positive case refused is then a real disagreement
between the document and the service.

schemathesis imports this module as its hooks (SCHEMATHESIS_HOOKS=tests.fuzz_formats,
tests/test_fuzz.py): importing it registers the formats. Addresses are made from real keys by the families' own code, on every network and
(Litecoin) every address type, plus uppercase bech32 (BIP173 allows one case).
"""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret


def names(family: str, keys: int = 4) -> list[str]:
    fam = FAMILIES[family]
    types: list[str | None] = ["p2wpkh", "p2pkh", "p2sh-p2wpkh"] if family == "litecoin" else [None]
    out: list[str] = []
    for n in range(1, keys + 1):
        key = key_from_secret(n.to_bytes(32, "big"))
        for network in fam.networks.values():
            for kind in types:
                options = fam.options({"address_type": kind} if kind else {}, key)
                name = fam.account(key, network, options).name
                out.append(name)
                if name.islower() and family != "eos":  # bech32 in the other case
                    out.append(name.upper())
    return out


def register() -> None:
    schemathesis.openapi.format("chainkeys-cursor", st.just(""))
    for family in FAMILIES:
        schemathesis.openapi.format(f"chainkeys-{family}-name", st.sampled_from(names(family)))


register()
