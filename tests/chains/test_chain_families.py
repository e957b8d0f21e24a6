"""Registry, networks, options and name rules of each family."""

from __future__ import annotations

from typing import Any

import pytest
from tests.chains.chain_vectors import (
    COSMOS,
    DOGECOIN,
    EOS,
    KEYS,
    LITECOIN,
    NO_NAME,
    assert_no_echo,
    key_by_id,
)

from chainkeys.chains import eos
from chainkeys.chains.base58 import P2PKH, P2WPKH, AddressOptions
from chainkeys.chains.hd import key_from_mnemonic
from chainkeys.chains.registry import FAMILIES, family
from chainkeys.chains.secp256k1 import generate_key, parse_hex_key
from chainkeys.chains.spec import ChainError, Family, Network, NoOptions

ONE = key_by_id("scalar-one")
WIKI = key_by_id("bitcoin-wiki-wif-example")

# ---------------------------------------------------------------- registry and networks


def test_families() -> None:
    assert list(FAMILIES) == ["cosmos", "dogecoin", "eos", "litecoin"]
    for name, fam in FAMILIES.items():
        assert family(name) is fam and fam.name == name


def test_unknown_family_lists_the_accepted_names() -> None:
    with pytest.raises(ChainError) as caught:
        family("bitcoin")
    assert caught.value.code == "unknown_family"
    assert "cosmos, dogecoin, eos, litecoin" in caught.value.message


DEFAULTS = {"cosmos": "cosmoshub", "dogecoin": "mainnet", "eos": "eos", "litecoin": "mainnet"}


@pytest.mark.parametrize("name", FAMILIES)
def test_default_and_unknown_network(name: str) -> None:
    fam = FAMILIES[name]
    assert fam.network(None).name == fam.default_network == DEFAULTS[name]
    assert not fam.network(None).testnet
    for network in fam.networks.values():
        assert fam.network(network.name) is network
    with pytest.raises(ChainError) as caught:
        fam.network("no-such-net")
    assert caught.value.code == "unknown_network"
    for network_name in fam.networks:
        assert network_name in caught.value.message
    assert "no-such-net" not in caught.value.message


EOS_IDS = {
    "eos": "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906",
    "jungle4": "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d",
    "wax": "1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4",
    "telos": "4667b205c6838ef70ff7988f6e8257e8be0e1284a2f59699054a018f743b1d11",
}
NETWORK_TABLE = [
    ("cosmos", Network("cosmoshub", 118, chain_id="cosmoshub-4", hrp="cosmos")),
    ("cosmos", Network("cosmoshub-testnet", 118, True, chain_id="provider", hrp="cosmos")),
    ("cosmos", Network("osmosis", 118, chain_id="osmosis-1", hrp="osmo")),
    ("cosmos", Network("osmosis-testnet", 118, True, chain_id="osmo-test-5", hrp="osmo")),
    ("cosmos", Network("juno", 118, chain_id="juno-1", hrp="juno")),
    ("cosmos", Network("akash", 118, chain_id="akashnet-2", hrp="akash")),
    ("cosmos", Network("stargaze", 118, chain_id="stargaze-1", hrp="stars")),
    ("cosmos", Network("celestia", 118, chain_id="celestia", hrp="celestia")),
    ("dogecoin", Network("mainnet", 3, p2pkh=b"\x1e", p2sh=b"\x16", wif=b"\x9e")),
    ("dogecoin", Network("testnet", 1, True, p2pkh=b"\x71", p2sh=b"\xc4", wif=b"\xf1")),
    ("dogecoin", Network("regtest", 1, True, p2pkh=b"\x6f", p2sh=b"\xc4", wif=b"\xef")),
    ("litecoin", Network("mainnet", 2, hrp="ltc", p2pkh=b"\x30", p2sh=b"\x32", wif=b"\xb0")),
    ("litecoin", Network("testnet", 1, True, hrp="tltc", p2pkh=b"\x6f", p2sh=b"\x3a", wif=b"\xef")),
    ("litecoin", Network("regtest", 1, True, hrp="rltc", p2pkh=b"\x6f", p2sh=b"\x3a", wif=b"\xef")),
    ("eos", Network("eos", 194, chain_id=EOS_IDS["eos"])),
    ("eos", Network("jungle4", 194, True, chain_id=EOS_IDS["jungle4"])),
    ("eos", Network("wax", 194, chain_id=EOS_IDS["wax"])),
    ("eos", Network("telos", 194, chain_id=EOS_IDS["telos"])),
]


@pytest.mark.parametrize(("name", "expected"), NETWORK_TABLE, ids=lambda v: getattr(v, "name", v))
def test_network_rows(name: str, expected: Network) -> None:
    assert FAMILIES[name].network(expected.name) == expected


def test_network_table_is_complete() -> None:
    assert {(f, n.name) for f, n in NETWORK_TABLE} == {
        (f, n) for f, fam in FAMILIES.items() for n in fam.networks
    }


def test_params_agree_with_vectors() -> None:
    params = KEYS["params"]
    for name in ("dogecoin", "litecoin"):
        for network in ("mainnet", "testnet"):
            row, expected = FAMILIES[name].network(network), params[name][network]
            assert row.p2pkh == bytes.fromhex(expected["p2pkh"][2:])
            assert row.wif == bytes.fromhex(expected["wif"][2:])
    for network in ("mainnet", "testnet"):
        assert LITECOIN.network(network).p2sh == bytes.fromhex(
            params["litecoin"][network]["p2sh"][2:]
        )
        assert LITECOIN.network(network).hrp == params["litecoin"][network]["bech32_hrp"]


def test_regtest_accounts() -> None:
    key = parse_hex_key(ONE["private_key_hex"])
    ltc = LITECOIN.account(key, LITECOIN.network("regtest"), LITECOIN.options({}, key)).address
    assert ltc.startswith("rltc1q") and LITECOIN.check_name(ltc) == ltc
    doge = DOGECOIN.account(key, DOGECOIN.network("regtest"), DOGECOIN.options({}, key)).address
    # Regtest shares Bitcoin's testnet version bytes, so also the Litecoin testnet address.
    assert doge == ONE["litecoin"]["testnet"]["p2pkh"]
    assert DOGECOIN.check_name(doge) == doge


# ---------------------------------------------------------------- options

FOREIGN_OPTIONS = [
    pytest.param(COSMOS, {"name": "alice"}, "name", id="cosmos-name"),
    pytest.param(COSMOS, {"address_type": "p2pkh"}, "address_type", id="cosmos-address_type"),
    pytest.param(DOGECOIN, {"name": "alice"}, "name", id="dogecoin-name"),
    pytest.param(DOGECOIN, {"address_type": "p2pkh"}, "address_type", id="dogecoin-address_type"),
    pytest.param(LITECOIN, {"name": "alice"}, "name", id="litecoin-name"),
    pytest.param(EOS, {"address_type": "p2pkh"}, "address_type", id="eos-address_type"),
    pytest.param(EOS, {"memo": "x"}, "memo", id="eos-unknown"),
]


@pytest.mark.parametrize(("fam", "given", "field"), FOREIGN_OPTIONS)
def test_options_a_family_does_not_take(
    fam: Family[Any], given: dict[str, str], field: str
) -> None:
    for key in (generate_key(), None):
        with pytest.raises(ChainError) as caught:
            fam.options(given, key)
        assert caught.value.code == "invalid_option"
        assert field in caught.value.message
        assert given[field] not in caught.value.message  # the field is named, not its value


def test_each_family_has_its_own_options_type() -> None:
    key = generate_key()
    assert type(COSMOS.options({}, key)).__name__ == "NoOptions"
    assert EOS.options({"name": "alice"}, key) == eos.EosOptions(name="alice")
    assert EOS.options({}, key) == eos.EosOptions(name=None)
    assert DOGECOIN.options({}, key) == AddressOptions(P2PKH)
    assert DOGECOIN.account(
        key, DOGECOIN.network(None), DOGECOIN.options({}, key)
    ).address_type == ("p2pkh")
    assert COSMOS.account(key, COSMOS.network(None), COSMOS.options({}, key)).address_type is None


def test_litecoin_address_types() -> None:
    key = parse_hex_key(ONE["private_key_hex"])
    mainnet = LITECOIN.network(None)
    assert LITECOIN.options({}, key) == AddressOptions(P2WPKH)
    assert LITECOIN.options({}, None) == AddressOptions(P2WPKH)
    default = LITECOIN.account(key, mainnet, LITECOIN.options({}, key))
    assert default.address == ONE["litecoin"]["mainnet"]["p2wpkh"]
    assert default.address_type == "p2wpkh"
    for kind in ("p2wpkh", "p2pkh", "p2sh-p2wpkh"):
        options = LITECOIN.options({"address_type": kind}, key)
        assert options.address_type.name == kind
        assert LITECOIN.account(key, mainnet, options).address_type == kind


def test_litecoin_unknown_address_type_lists_accepted_values() -> None:
    with pytest.raises(ChainError) as caught:
        LITECOIN.options({"address_type": "p2tr"}, None)
    assert caught.value.code == "invalid_option"
    assert "p2wpkh, p2pkh, p2sh-p2wpkh" in caught.value.message


def test_litecoin_uncompressed_key_defaults_to_p2pkh() -> None:
    network = LITECOIN.network(None)
    old = LITECOIN.parse_private_key(ONE["litecoin"]["mainnet"]["uncompressed_key"]["wif"], network)
    assert LITECOIN.options({}, old) == AddressOptions(P2PKH)
    assert (
        LITECOIN.account(old, network, LITECOIN.options({}, old)).address
        == ONE["litecoin"]["mainnet"]["uncompressed_key"]["p2pkh"]
    )
    with pytest.raises(ChainError, match="segwit needs a compressed key"):
        LITECOIN.options({"address_type": "p2wpkh"}, old)
    with pytest.raises(ChainError, match="segwit needs a compressed key"):  # checked twice
        LITECOIN.account(old, network, AddressOptions(P2WPKH))


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("p2pkh", "m/44'/2'/0'/0/5"),
        ("p2sh-p2wpkh", "m/49'/2'/0'/0/5"),
        ("p2wpkh", "m/84'/2'/0'/0/5"),
        (None, "m/84'/2'/0'/0/5"),
    ],
    ids=["p2pkh", "p2sh-p2wpkh", "p2wpkh", "default"],
)
def test_litecoin_mnemonic_path_follows_address_type(kind: str | None, path: str) -> None:
    phrase = " ".join(["abandon"] * 11 + ["about"])
    given = {} if kind is None else {"address_type": kind}
    key = key_from_mnemonic(
        LITECOIN, phrase, "", 5, LITECOIN.network(None), LITECOIN.options(given, None)
    )
    assert key.path == path


@pytest.mark.parametrize(
    "index", [-1, 2**31, True, 1.0, "1"], ids=["negative", "2^31", "bool", "float", "str"]
)
def test_account_index_range(index: object) -> None:
    phrase = " ".join(["abandon"] * 11 + ["about"])
    with pytest.raises(ChainError) as caught:
        key_from_mnemonic(COSMOS, phrase, "", index, COSMOS.network(None), NoOptions())  # type: ignore[arg-type]
    assert caught.value.code == "invalid_account_index"


def test_largest_account_index() -> None:
    phrase = " ".join(["abandon"] * 11 + ["about"])
    key = key_from_mnemonic(EOS, phrase, "", 2**31 - 1, EOS.network(None), NO_NAME)
    assert key.path == "m/44'/194'/0'/0/2147483647"


# ---------------------------------------------------------------- EOS names


def test_eos_derived_names() -> None:
    key = generate_key()
    names = {n: EOS.account(key, net, NO_NAME).name for n, net in EOS.networks.items()}
    assert len(set(names.values())) == len(names)  # one key, one name per network
    for name in names.values():
        assert len(name) == 12 and set(name) <= set(eos.NAME_ALPHABET)
        assert name[0].isalpha()
        assert EOS.check_name(name) == name
    again = {n: EOS.account(key, net, NO_NAME).name for n, net in EOS.networks.items()}
    assert again == names


def test_eos_derived_names_spread_over_the_alphabet() -> None:
    seen = set()
    for _ in range(100):
        seen |= set(EOS.account(generate_key(), EOS.network(None), NO_NAME).name)
    assert seen == set(eos.NAME_ALPHABET)


def test_eos_chosen_name() -> None:
    key = generate_key()
    for network in EOS.networks.values():
        account = EOS.account(key, network, EOS.options({"name": "alice.bob"}, key))
        assert account.name == account.address == "alice.bob"
    with pytest.raises(ChainError) as caught:
        EOS.options({"name": "Alice"}, key)
    assert caught.value.code == "invalid_account_name"


def test_eos_derived_name_from_a_network_without_a_table_entry() -> None:
    key = generate_key()
    custom = Network("eos-local", 194, testnet=True, chain_id="11" * 32)
    name = EOS.account(key, custom, EOS.options({}, key)).name
    assert name == eos.derive_account_name(bytes.fromhex("11" * 32), key.public)


def test_eos_public_key_type_rules() -> None:
    for text, message in [
        ("PUB_R1_6UUbAGbTLLWfY2gAc8XmjGBz2c7WT4fYB5r1L1aHDwAY8Mg9dj", "only K1"),
        ("PUB_WA_6UUbAGbTLLWfY2gAc8XmjGBz2c7WT4fYB5r1L1aHDwAY8Mg9dj", "only K1"),
        ("pub_k1_6UUbAGbTLLWfY2gAc8XmjGBz2c7WT4fYB5r1L1aHDwAY8Mg9dj", "must start with"),
        ("EOS", "empty"),
        ("EOS111111111111111111111111111111111111111111111111", "bytes"),
    ]:
        with pytest.raises(ChainError, match=message) as caught:
            eos.parse_public_key(text)
        assert caught.value.code == "invalid_public_key"


def test_eos_public_key_must_be_a_curve_point() -> None:
    not_a_point = b"\x02" + b"\xff" * 32  # x >= field prime
    with pytest.raises(ChainError, match="not a point"):
        eos.parse_public_key(eos.public_key_legacy(not_a_point))
    with pytest.raises(ChainError, match="not a point"):
        eos.parse_public_key(eos.public_key_k1(not_a_point))


# ---------------------------------------- check_name: valid and invalid side by side

KEY_ONE = parse_hex_key(ONE["private_key_hex"])
COSMOS_ONE = ONE["cosmos"]["addresses"]["cosmos"]
STARS_ONE = COSMOS.account(KEY_ONE, COSMOS.network("stargaze"), COSMOS.options({}, KEY_ONE)).address
CELESTIA_ONE = COSMOS.account(
    KEY_ONE, COSMOS.network("celestia"), COSMOS.options({}, KEY_ONE)
).address
DOGE_ONE, LTC_ONE = ONE["dogecoin"], ONE["litecoin"]

VALID_NAMES = [
    # family, name, canonical form returned
    (COSMOS, COSMOS_ONE, COSMOS_ONE),
    (COSMOS, ONE["cosmos"]["addresses"]["osmo"], ONE["cosmos"]["addresses"]["osmo"]),
    (COSMOS, ONE["cosmos"]["addresses"]["juno"], ONE["cosmos"]["addresses"]["juno"]),
    (COSMOS, STARS_ONE, STARS_ONE),
    (COSMOS, CELESTIA_ONE, CELESTIA_ONE),
    (COSMOS, COSMOS_ONE.upper(), COSMOS_ONE),
    (DOGECOIN, DOGE_ONE["mainnet"]["p2pkh"], DOGE_ONE["mainnet"]["p2pkh"]),
    (DOGECOIN, DOGE_ONE["testnet"]["p2pkh"], DOGE_ONE["testnet"]["p2pkh"]),
    (LITECOIN, LTC_ONE["mainnet"]["p2pkh"], LTC_ONE["mainnet"]["p2pkh"]),
    (LITECOIN, LTC_ONE["mainnet"]["p2sh_p2wpkh"], LTC_ONE["mainnet"]["p2sh_p2wpkh"]),
    (LITECOIN, LTC_ONE["mainnet"]["p2wpkh"], LTC_ONE["mainnet"]["p2wpkh"]),
    (LITECOIN, LTC_ONE["mainnet"]["p2wpkh"].upper(), LTC_ONE["mainnet"]["p2wpkh"]),
    (LITECOIN, LTC_ONE["testnet"]["p2pkh"], LTC_ONE["testnet"]["p2pkh"]),
    (LITECOIN, LTC_ONE["testnet"]["p2sh_p2wpkh"], LTC_ONE["testnet"]["p2sh_p2wpkh"]),
    (LITECOIN, LTC_ONE["testnet"]["p2wpkh"], LTC_ONE["testnet"]["p2wpkh"]),
    (EOS, "a", "a"),
    (EOS, "eosio", "eosio"),
    (EOS, "eosio.token", "eosio.token"),
    (EOS, "abcdefghijkl", "abcdefghijkl"),
    (EOS, "12345zzzzzzz", "12345zzzzzzz"),
]
INVALID_NAMES = [
    # family, name, what the message says
    (COSMOS, "cosmos1my63mjadtw8nhzl69ukdepwzsyvv4yexz6psj1", "not bech32"),
    (COSMOS, "cosmos1my63mjadtw8nhzl69ukdepwzsyvv4yexhx3uhz", "checksum"),
    (COSMOS, COSMOS_ONE[:-1] + "q", "checksum"),
    (COSMOS, "bnb1j08ys4ct2hzzc2hcz6h2hgrvlmsjynawtf2n0y", "prefix"),
    (COSMOS, COSMOS_ONE[:10].upper() + COSMOS_ONE[10:], "not valid bech32"),
    (COSMOS, "cosmos1" + "q" * 90, "longer than 90"),
    (COSMOS, "", "not bech32"),
    (COSMOS, "alice", "not bech32"),
    (COSMOS, DOGE_ONE["mainnet"]["p2pkh"], "prefix"),
    (DOGECOIN, DOGE_ONE["mainnet"]["p2pkh"][:-1] + "x", "checksum"),
    (DOGECOIN, LTC_ONE["mainnet"]["p2pkh"], "version byte"),
    (DOGECOIN, "1BgGZ9tcN4rm9KBzDn7KprQz87SZ26SAMH", "version byte"),
    (DOGECOIN, DOGE_ONE["mainnet"]["wif"], "payload"),
    (DOGECOIN, LTC_ONE["mainnet"]["p2wpkh"], "base58"),
    (DOGECOIN, "D" * 91, "longer than 90"),
    (DOGECOIN, "", "empty"),
    (LITECOIN, LTC_ONE["mainnet"]["p2sh_p2wpkh_deprecated_version"]["address"], "version byte"),
    (LITECOIN, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "prefix"),
    (LITECOIN, LTC_ONE["mainnet"]["p2wpkh"][:-1] + "q", "checksum"),
    (
        LITECOIN,
        LTC_ONE["mainnet"]["p2wpkh"][:8].upper() + LTC_ONE["mainnet"]["p2wpkh"][8:],
        "base58",
    ),
    (LITECOIN, DOGE_ONE["mainnet"]["p2pkh"], "version byte"),
    (LITECOIN, "ltc1" + "q" * 90, "longer than 90"),
    (EOS, "", "1 to 12"),
    (EOS, "abcdefghijklm", "1 to 12"),
    (EOS, "alice.", "1 to 12"),
    (EOS, "Alice", "1 to 12"),
    (EOS, "alice6", "1 to 12"),
    (EOS, "alice0", "1 to 12"),
    (EOS, "ali-ce", "1 to 12"),
    (EOS, "ali ce", "1 to 12"),
    (EOS, "alice\n", "1 to 12"),
    (EOS, "a" * 10_000, "1 to 12"),
]


@pytest.mark.parametrize(
    ("fam", "name", "canonical"), VALID_NAMES, ids=[f"{f.name}-{n[:16]}" for f, n, _ in VALID_NAMES]
)
def test_valid_names(fam: Family[Any], name: str, canonical: str) -> None:
    assert fam.check_name(name) == canonical


@pytest.mark.parametrize(
    ("fam", "name", "message"),
    INVALID_NAMES,
    ids=[f"{f.name}-{n[:16]}" for f, n, _ in INVALID_NAMES],
)
def test_invalid_names(fam: Family[Any], name: str, message: str) -> None:
    with pytest.raises(ChainError) as caught:
        fam.check_name(name)
    assert caught.value.code == "invalid_account_name"
    assert message in caught.value.message
    assert_no_echo(caught.value.message, name)


# ---------------------------------------------------------------- check_address: one network only

ADDRESSES = [
    (COSMOS, "cosmoshub", ONE["cosmos"]["addresses"]["cosmos"], True),
    (COSMOS, "cosmoshub-testnet", ONE["cosmos"]["addresses"]["cosmos"], True),
    (COSMOS, "cosmoshub", ONE["cosmos"]["addresses"]["osmo"], False),
    (COSMOS, "osmosis", ONE["cosmos"]["addresses"]["osmo"], True),
    (COSMOS, "juno", ONE["cosmos"]["addresses"]["osmo"], False),
    (DOGECOIN, "mainnet", ONE["dogecoin"]["mainnet"]["p2pkh"], True),
    (DOGECOIN, "mainnet", ONE["dogecoin"]["testnet"]["p2pkh"], False),
    (DOGECOIN, "testnet", ONE["dogecoin"]["mainnet"]["p2pkh"], False),
    (LITECOIN, "mainnet", ONE["litecoin"]["mainnet"]["p2wpkh"], True),
    (LITECOIN, "mainnet", ONE["litecoin"]["testnet"]["p2wpkh"], False),
    (LITECOIN, "testnet", ONE["litecoin"]["mainnet"]["p2sh_p2wpkh"], False),
    (LITECOIN, "testnet", ONE["litecoin"]["testnet"]["p2sh_p2wpkh"], True),
    (LITECOIN, "regtest", ONE["litecoin"]["testnet"]["p2wpkh"], False),
    (EOS, "wax", "alice", True),
    (EOS, "wax", "alice!", False),
]


@pytest.mark.parametrize(
    ("fam", "network", "text", "valid"),
    ADDRESSES,
    ids=[f"{f.name}-{n}-{'ok' if v else 'bad'}-{t[:12]}" for f, n, t, v in ADDRESSES],
)
def test_check_address(fam: Family[Any], network: str, text: str, valid: bool) -> None:
    if valid:
        assert fam.check_address(text, fam.network(network)) == text
    else:
        with pytest.raises(ChainError) as caught:
            fam.check_address(text, fam.network(network))
        assert caught.value.code in {"invalid_address", "invalid_account_name"}


def test_a_network_row_without_a_parameter_is_a_programming_error() -> None:
    bare = Network("bare", 1)
    key = generate_key()
    with pytest.raises(ValueError, match="no p2pkh version"):
        DOGECOIN.account(key, bare, DOGECOIN.options({}, key))
    with pytest.raises(ValueError, match="no WIF version"):
        DOGECOIN.export_private_key(key, bare)
    with pytest.raises(ValueError, match="no bech32 prefix"):
        COSMOS.account(key, bare, COSMOS.options({}, key))
    with pytest.raises(ValueError, match="no chain id"):
        EOS.account(key, bare, EOS.options({}, key))
