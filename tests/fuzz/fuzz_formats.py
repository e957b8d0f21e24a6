"""Valid values for the string formats the OpenAPI document names for rules a schema
cannot hold (api/params.py): addresses with their checksums, and the one cursor a
client can make (the first page's, empty). Registered with schemathesis so that the
data it calls valid is valid: a positive case refused is then a real disagreement
between the document and the service.

schemathesis imports this module as its hooks (SCHEMATHESIS_HOOKS=tests.fuzz.fuzz_formats,
tests/fuzz/test_fuzz.py): importing it registers the formats. Addresses are made from real keys by the families' own code, on every network and
(Litecoin) every address type, plus uppercase bech32 (BIP173 allows one case).
"""

from __future__ import annotations

import schemathesis
from bip_utils import Bip39Languages, Bip39MnemonicEncoder  # type: ignore[import-untyped]
from coincurve.utils import GROUP_ORDER_INT as ORDER
from hypothesis import strategies as st

from chainkeys.chains import hd
from chainkeys.chains.mnemonic import WORD_COUNTS
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


def private_keys(family: str) -> st.SearchStrategy[str]:
    """Keys every network of the family reads: hex in its accepted spellings, and for EOS
    (whose key forms name no network) its WIF and PVT_K1_ forms too."""
    secrets = st.integers(1, ORDER - 1).map(lambda n: n.to_bytes(32, "big"))
    forms = [lambda s: s.hex(), lambda s: "0x" + s.hex().upper()]
    if family == "eos":
        eos = FAMILIES["eos"]
        net = eos.network(None)
        forms += [
            lambda s: eos.export_private_key(key_from_secret(s), net),
            lambda s: eos.export_other_forms(key_from_secret(s))["private_key_k1"],
        ]
    return st.tuples(secrets, st.sampled_from(forms)).map(lambda p: p[1](p[0]))


def mnemonics() -> st.SearchStrategy[str]:
    """Valid English phrases of every allowed length."""
    encoder = Bip39MnemonicEncoder(Bip39Languages.ENGLISH)
    sizes = st.sampled_from([n * 4 // 3 for n in WORD_COUNTS])  # entropy bytes per count
    return sizes.flatmap(lambda n: st.binary(min_size=n, max_size=n)).map(
        lambda e: str(encoder.Encode(e))
    )


def public_keys() -> st.SearchStrategy[str]:
    """Compressed points of the curve, as hex."""
    return st.integers(1, ORDER - 1).map(
        lambda n: key_from_secret(n.to_bytes(32, "big")).public.hex()
    )


def xpubs() -> st.SearchStrategy[str]:
    """Main-network BIP48 account keys (xpub, Ltub, zpub), with and without an origin."""
    seeds = st.binary(min_size=32, max_size=32).map(hd.Seed)
    forms = st.sampled_from(["xpub", "Ltub", "zpub"])

    def made(seed: hd.Seed, form: str, origin: bool) -> str:
        key = seed.xpub(PATH, form)
        return f"[{key.fingerprint}/{PATH[2:]}]{key.xpub}" if origin else key.xpub

    return st.builds(made, seeds, forms, st.booleans())


PATH = "m/48'/2'/0'/2'"


def register() -> None:
    schemathesis.openapi.format("chainkeys-public-key", public_keys())
    schemathesis.openapi.format("chainkeys-xpub", xpubs())
    schemathesis.openapi.format("chainkeys-cursor", st.just(""))
    schemathesis.openapi.format("chainkeys-mnemonic", mnemonics())
    for family in FAMILIES:
        schemathesis.openapi.format(f"chainkeys-{family}-name", st.sampled_from(names(family)))
        schemathesis.openapi.format(f"chainkeys-{family}-private-key", private_keys(family))


register()
