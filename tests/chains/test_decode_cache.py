"""Address decodes are remembered (chains/encoding.py), and nothing secret is.

A valid address's decode is cached (each request that names an account checks its
name again); a refused one is not; a WIF private key, decoded by the same base58check
code, never enters a cache, and a refusal still speaks in the caller's words.
"""

from __future__ import annotations

import pytest

from chainkeys.chains import encoding, eos
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.chains.spec import ChainError

KEY = key_from_secret((7).to_bytes(32, "big"))


def address(family: str) -> str:
    fam = FAMILIES[family]
    net = fam.network(None)
    return fam.account(KEY, net, fam.options({}, KEY)).name


@pytest.mark.parametrize(
    ("family", "cache"),
    [
        ("dogecoin", encoding._address_payload),
        ("litecoin", encoding._segwit_program),
        ("cosmos", encoding._bech32_data),
    ],
)
def test_a_valid_address_is_decoded_once_and_answers_the_same(family: str, cache: object) -> None:
    name = address(family)
    first = FAMILIES[family].check_name(name)
    hits = cache.cache_info().hits  # type: ignore[attr-defined]
    assert FAMILIES[family].check_name(name) == first
    assert cache.cache_info().hits == hits + 1  # type: ignore[attr-defined]


def test_a_refused_address_is_not_remembered_and_says_why_in_its_own_words() -> None:
    name = address("dogecoin")
    broken = name[:-1] + ("1" if name[-1] != "1" else "2")
    size = encoding._address_payload.cache_info().currsize
    for _ in range(2):
        with pytest.raises(ChainError) as refused:
            FAMILIES["dogecoin"].check_name(broken)
        assert refused.value.code == "invalid_account_name"
    assert encoding._address_payload.cache_info().currsize == size


def test_an_eos_public_key_is_decoded_once() -> None:
    fam = FAMILIES["eos"]
    shown = fam.account(KEY, fam.network(None), fam.options({}, KEY)).public_key
    first = fam.public_key_bytes(shown)
    hits = eos.parse_public_key.cache_info().hits
    assert fam.public_key_bytes(shown) == first == KEY.public
    assert eos.parse_public_key.cache_info().hits == hits + 1


@pytest.mark.parametrize("family", ["dogecoin", "eos"])
def test_no_private_key_enters_a_cache(family: str) -> None:
    fam = FAMILIES[family]
    net = fam.network(None)
    wif = fam.export_private_key(KEY, net)
    caches = (
        encoding._address_payload,
        encoding._bech32_data,
        encoding._segwit_program,
        eos.parse_public_key,
    )
    before = [c.cache_info().currsize for c in caches]
    assert fam.parse_private_key(wif, net).secret == KEY.secret
    assert [c.cache_info().currsize for c in caches] == before
