"""secp256k1.py and encoding.py: key validation, hex parsing, WIF rules, hashes."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import pytest
from bip_utils import Ripemd160  # type: ignore[import-untyped]
from coincurve import PublicKey
from tests.chains.chain_vectors import DOGECOIN, LITECOIN, assert_no_echo

from chainkeys.chains import encoding
from chainkeys.chains.secp256k1 import CURVE_ORDER, generate_key, key_from_secret, parse_hex_key
from chainkeys.chains.spec import ChainError, Family, Key

WIKI_HEX = "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d"


def _scalar(value: int) -> bytes:
    return value.to_bytes(32, "big")


# ---------------------------------------------------------------- generate_key


def test_generated_keys_are_distinct_valid_and_compressed() -> None:
    keys = [generate_key() for _ in range(200)]
    assert len({k.secret for k in keys}) == 200
    for key in keys:
        assert 1 <= int.from_bytes(key.secret, "big") < CURVE_ORDER
        assert key.compressed and key.path is None
        assert key.public == PublicKey.from_secret(key.secret).format(compressed=True)


def test_generate_key_draws_again_on_an_invalid_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = iter([bytes(32), _scalar(CURVE_ORDER), _scalar(7)])
    monkeypatch.setattr(secrets, "token_bytes", lambda n: next(draws))
    assert generate_key().secret == _scalar(7)


def test_key_repr_hides_the_secret() -> None:
    key = key_from_secret(_scalar(1))
    assert key.secret.hex() not in repr(key) and "***" in repr(key)


# ---------------------------------------------------------------- key_from_secret

VALID_SCALARS = [
    pytest.param(1, id="one"),
    pytest.param(CURVE_ORDER - 1, id="n-minus-1"),
    pytest.param(2**128, id="2^128"),
]
INVALID_SECRETS = [
    pytest.param(bytes(32), "key is zero", id="zero"),
    pytest.param(_scalar(CURVE_ORDER), "not below the curve order", id="n"),
    pytest.param(_scalar(CURVE_ORDER + 1), "not below the curve order", id="n-plus-1"),
    pytest.param(b"\xff" * 32, "not below the curve order", id="2^256-1"),
    pytest.param(b"\x01" * 31, "31 bytes", id="31-bytes"),
    pytest.param(b"\x00" + _scalar(1), "33 bytes", id="33-bytes"),
]


@pytest.mark.parametrize("scalar", VALID_SCALARS)
@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
def test_valid_scalars(scalar: int, compressed: bool) -> None:
    key = key_from_secret(_scalar(scalar), compressed=compressed, path="m/0")
    assert key == Key(
        secret=_scalar(scalar),
        public=PublicKey.from_secret(_scalar(scalar)).format(compressed=compressed),
        compressed=compressed,
        path="m/0",
    )
    assert len(key.public) == (33 if compressed else 65)


@pytest.mark.parametrize(("secret", "message"), INVALID_SECRETS)
def test_invalid_scalars_say_which_rule(secret: bytes, message: str) -> None:
    with pytest.raises(ChainError, match=message) as caught:
        key_from_secret(secret)
    assert caught.value.code == "invalid_private_key"


# ---------------------------------------------------------------- parse_hex_key

VALID_HEX = [
    pytest.param(WIKI_HEX, id="lower"),
    pytest.param(WIKI_HEX.upper(), id="upper"),
    pytest.param(WIKI_HEX[:32] + WIKI_HEX[32:].upper(), id="mixed-case"),
    pytest.param("0x" + WIKI_HEX, id="0x-prefix"),
    pytest.param("0x" + WIKI_HEX.upper(), id="0x-prefix-upper-digits"),
]
INVALID_HEX = [
    pytest.param("", "empty", id="empty"),
    pytest.param("0x", "empty", id="prefix-only"),
    pytest.param(" " + WIKI_HEX, "character", id="leading-space"),
    pytest.param(WIKI_HEX + "\n", "character", id="trailing-newline"),
    pytest.param(WIKI_HEX[:32] + " " + WIKI_HEX[32:], "character", id="inner-space"),
    pytest.param(WIKI_HEX[:32] + "_" + WIKI_HEX[32:], "character", id="underscore"),
    pytest.param("0X" + WIKI_HEX, "character", id="capital-0X"),
    pytest.param("+" + WIKI_HEX, "character", id="plus-sign"),
    pytest.param("0x0x" + WIKI_HEX, "character", id="double-prefix"),
    pytest.param(WIKI_HEX[:-1] + "\uff11", "character", id="fullwidth-digit"),
    pytest.param(WIKI_HEX[:-1] + "\u0661", "character", id="arabic-indic-digit"),
    pytest.param(WIKI_HEX[:62], "62 digits", id="62-digits"),
    pytest.param(WIKI_HEX + "00", "66 digits", id="66-digits"),
    pytest.param("00" * 32, "key is zero", id="zero"),
    pytest.param(f"{CURVE_ORDER:064x}", "curve order", id="order"),
]


@pytest.mark.parametrize("text", VALID_HEX)
def test_valid_hex(text: str) -> None:
    assert parse_hex_key(text).secret.hex() == WIKI_HEX


@pytest.mark.parametrize(("text", "message"), INVALID_HEX)
def test_invalid_hex(text: str, message: str) -> None:
    with pytest.raises(ChainError, match=message) as caught:
        parse_hex_key(text)
    assert caught.value.code == "invalid_private_key"
    assert_no_echo(caught.value.message, text)


# ---------------------------------------------------------------- WIF across networks


def test_wif_round_trips_on_every_network() -> None:
    key = key_from_secret(bytes.fromhex(WIKI_HEX))
    old = key_from_secret(bytes.fromhex(WIKI_HEX), compressed=False)
    for family in (DOGECOIN, LITECOIN):
        for network in family.networks.values():
            for k in (key, old):
                assert family.parse_private_key(family.export_private_key(k, network), network) == k


WRONG_NETWORK = [
    pytest.param(
        DOGECOIN,
        "testnet",
        "regtest",
        "WIF is for dogecoin testnet, not regtest",
        id="doge-test-on-regtest",
    ),
    pytest.param(
        DOGECOIN,
        "regtest",
        "mainnet",
        "WIF is for dogecoin regtest, not mainnet",
        id="doge-regtest-on-main",
    ),
    pytest.param(
        LITECOIN,
        "testnet",
        "mainnet",
        "WIF is for litecoin testnet or regtest, not mainnet",
        id="ltc-test-on-main",
    ),
    pytest.param(
        LITECOIN,
        "mainnet",
        "regtest",
        "WIF is for litecoin mainnet, not regtest",
        id="ltc-main-on-regtest",
    ),
]


@pytest.mark.parametrize(("family", "written_for", "imported_on", "message"), WRONG_NETWORK)
def test_wif_network_comes_from_its_version_byte(
    family: Family[Any], written_for: str, imported_on: str, message: str
) -> None:
    key = generate_key()
    wif = family.export_private_key(key, family.network(written_for))
    with pytest.raises(ChainError) as caught:
        family.parse_private_key(wif, family.network(imported_on))
    assert caught.value.message == message
    assert caught.value.code == "invalid_private_key"


def test_litecoin_testnet_and_regtest_share_the_wif_byte() -> None:
    key = generate_key()
    wif = LITECOIN.export_private_key(key, LITECOIN.network("testnet"))
    assert LITECOIN.parse_private_key(wif, LITECOIN.network("regtest")) == key


def test_overlong_key_text_is_refused_before_decoding() -> None:
    for family in (DOGECOIN, LITECOIN):
        with pytest.raises(ChainError, match="too long"):
            family.parse_private_key("5" * 10_000, family.network(None))


# ---------------------------------------------------------------- hashes

HASH_INPUTS = [b"", b"abc", bytes(range(256)), b"K1" * 100]


@pytest.mark.parametrize("data", HASH_INPUTS, ids=["empty", "abc", "bytes", "long"])
def test_ripemd160_implementations_agree(data: bytes) -> None:
    expected = bytes(Ripemd160.QuickDigest(data))
    assert encoding.ripemd160(data) == expected
    assert encoding._ripemd160_bip_utils(data) == expected


def test_ripemd160_known_answer() -> None:
    # RIPEMD-160 test vector from the algorithm's authors: "abc".
    assert encoding.ripemd160(b"abc").hex() == "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc"


def test_ripemd160_falls_back_to_bip_utils_without_openssl_support(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_ripemd(name: str, data: bytes = b"") -> object:
        raise ValueError(f"unsupported hash type {name}")

    monkeypatch.setattr(hashlib, "new", no_ripemd)
    assert encoding._pick_ripemd160() is encoding._ripemd160_bip_utils
