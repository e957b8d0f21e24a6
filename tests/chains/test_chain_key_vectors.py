"""vectors.json: every key in every form, every invalid input, edge case and anchor."""

from __future__ import annotations

from typing import Any

import pytest
from tests.chains.chain_vectors import (
    COSMOS,
    COSMOS_NETWORK_BY_HRP,
    EOS,
    KEYS,
    LITECOIN,
    assert_no_echo,
    key_by_id,
    key_entry,
    lookup,
    ltc_options,
    without,
)

from chainkeys.chains import eos
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError

# ---------------------------------------------------------------- keys[]: key -> every form


def _groups() -> list[Any]:
    params = []
    for vector in KEYS["keys"]:
        params.append(pytest.param(vector, "", id=f"{vector['id']}/key"))
        params.append(pytest.param(vector, "cosmos", id=f"{vector['id']}/cosmos"))
        params.append(pytest.param(vector, "eos", id=f"{vector['id']}/eos"))
        for family in ("dogecoin", "litecoin"):
            for network in vector[family]:
                group = f"{family}.{network}"
                params.append(pytest.param(vector, group, id=f"{vector['id']}/{group}"))
    return params


@pytest.mark.parametrize(("vector", "group"), _groups())
def test_key_forms_match_vectors(vector: dict[str, Any], group: str) -> None:
    """Public keys, hashes, addresses and exports of one family/network, all fields at once."""
    rebuilt = key_entry(vector["private_key_hex"])
    if group:
        assert lookup(rebuilt, group) == lookup(vector, group)
    else:
        top = without(vector, "id", "source", "cosmos", "dogecoin", "litecoin", "eos")
        assert {k: rebuilt[k] for k in top} == top


@pytest.mark.parametrize("vector", KEYS["keys"], ids=lambda v: v["id"])
def test_deprecated_p2sh_version_is_not_what_litecoin_returns(vector: dict[str, Any]) -> None:
    key = LITECOIN.parse_private_key(vector["private_key_hex"], LITECOIN.network(None))
    for network in ("mainnet", "testnet"):
        net = LITECOIN.network(network)
        address = LITECOIN.account(key, net, ltc_options("p2sh_p2wpkh")).address
        assert address != vector["litecoin"][network]["p2sh_p2wpkh_deprecated_version"]["address"]


# ---------------------------------------------------------------- keys[]: every form -> key


def _wif_imports() -> list[Any]:
    params = []
    for vector in KEYS["keys"]:
        for family in ("dogecoin", "litecoin"):
            for network in vector[family]:
                params.append(
                    pytest.param(vector, family, network, id=f"{vector['id']}/{family}.{network}")
                )
    return params


@pytest.mark.parametrize(("vector", "family_name", "network_name"), _wif_imports())
def test_wif_imports(vector: dict[str, Any], family_name: str, network_name: str) -> None:
    """A compressed WIF gives the key back; an uncompressed one keeps its own address."""
    family = FAMILIES[family_name]
    network = family.network(network_name)
    expected = vector[family_name][network_name]

    key = family.parse_private_key(expected["wif"], network)
    assert (key.secret.hex(), key.compressed) == (vector["private_key_hex"], True)
    assert (
        family.account(key, network, family.options({}, key)).public_key
        == vector["public_key_compressed_hex"]
    )

    old = family.parse_private_key(expected["uncompressed_key"]["wif"], network)
    assert (old.secret.hex(), old.compressed) == (vector["private_key_hex"], False)
    account = family.account(old, network, family.options({}, old))
    assert account.address == account.name == expected["uncompressed_key"]["p2pkh"]
    assert account.address != expected["p2pkh"]
    assert account.public_key == vector["public_key_uncompressed_hex"]
    assert family.export_private_key(old, network) == expected["uncompressed_key"]["wif"]


@pytest.mark.parametrize("vector", KEYS["keys"], ids=lambda v: v["id"])
def test_uncompressed_wif_refuses_segwit(vector: dict[str, Any]) -> None:
    network = LITECOIN.network(None)
    old = LITECOIN.parse_private_key(
        vector["litecoin"]["mainnet"]["uncompressed_key"]["wif"], network
    )
    for vector_type in ("p2wpkh", "p2sh_p2wpkh"):
        with pytest.raises(ChainError) as caught:
            ltc_options(vector_type, old)
        assert caught.value.code == "invalid_option"
        assert "compressed" in caught.value.message
        with pytest.raises(ChainError):
            LITECOIN.account(old, network, ltc_options(vector_type))


@pytest.mark.parametrize("vector", KEYS["keys"], ids=lambda v: v["id"])
def test_eos_imports(vector: dict[str, Any]) -> None:
    """Legacy WIF, PVT_K1_ and hex give the key; EOS… and PUB_K1_ give the public key."""
    forms = vector["eos"]
    for network in EOS.networks.values():
        for text in (forms["private_key_wif"], forms["private_key_k1"], vector["private_key_hex"]):
            assert EOS.parse_private_key(text, network).secret.hex() == vector["private_key_hex"]
    for text in (forms["public_key_legacy"], forms["public_key_k1"]):
        assert eos.parse_public_key(text).hex() == vector["public_key_compressed_hex"]


@pytest.mark.parametrize("vector", KEYS["keys"], ids=lambda v: v["id"])
def test_cosmos_import_and_export(vector: dict[str, Any]) -> None:
    for hrp, network_name in COSMOS_NETWORK_BY_HRP.items():
        network = COSMOS.network(network_name)
        key = COSMOS.parse_private_key(vector["private_key_hex"], network)
        account = COSMOS.account(key, network, COSMOS.options({}, key))
        assert account.name == account.address == vector["cosmos"]["addresses"][hrp]
        assert COSMOS.export_private_key(key, network) == vector["private_key_hex"]


# ---------------------------------------------------------------- invalid[]


def _refuse(entry: dict[str, Any]) -> None:
    family = FAMILIES[entry["family"]]
    kind, text = entry["input_kind"], entry["input"]
    if kind == "address":
        # vectors.json names Cosmos networks by prefix.
        family.check_address(text, family.network(COSMOS_NETWORK_BY_HRP[entry["network"]]))
    elif kind == "eos_public_key":
        eos.parse_public_key(text)
    else:
        networks = (
            family.networks.values()
            if entry["network"] == "any"
            else [family.network(entry["network"])]
        )
        for network in networks:
            family.parse_private_key(text, network)


@pytest.mark.parametrize("entry", KEYS["invalid"], ids=lambda e: e["id"])
def test_invalid_inputs_are_refused(entry: dict[str, Any]) -> None:
    assert entry["expect"] == "invalid"
    with pytest.raises(ChainError) as caught:
        _refuse(entry)
    assert caught.value.message
    assert_no_echo(caught.value.message, entry["input"])


WIF_MESSAGES = {
    "dogecoin-mainnet-wif-wrong-network-testnet": "WIF is for dogecoin testnet, not mainnet",
    "dogecoin-testnet-wif-wrong-network-mainnet": "WIF is for dogecoin mainnet, not testnet",
    "litecoin-testnet-wif-wrong-network-mainnet": "WIF is for litecoin mainnet, not testnet",
    "dogecoin-mainnet-wif-wrong-network-litecoin": "wrong version byte",
    "dogecoin-testnet-wif-wrong-network-bitcoin-mainnet": "wrong version byte",
    "dogecoin-mainnet-wif-payload-too-long": "payload is 35 bytes; a WIF carries 33 or 34",
    "litecoin-mainnet-wif-payload-too-short": "payload is 32 bytes; a WIF carries 33 or 34",
    "dogecoin-testnet-wif-bad-checksum": "checksum does not verify",
    "dogecoin-mainnet-wif-scalar-zero-valid-checksum": "key is zero",
    "litecoin-mainnet-wif-scalar-n-plus-one-valid-checksum": "key is not below the curve order",
    "litecoin-mainnet-wif-bad-compression-flag": "compression flag",
    "dogecoin-testnet-wif-invalid-base58-char": "base58",
    "eos-private-pvt-r1-key": "only K1 (secp256k1)",
    "eos-private-pvt-lowercase-prefix": "case-sensitive",
    "eos-private-wif-compressed-flag": "no compression flag",
    "cosmos-hex-non-hex": "0-9, a-f",
    "cosmos-hex-truncated-31-bytes": "62 digits",
    "cosmos-address-bech32m-checksum": "checksum does not verify",
    "cosmos-address-wrong-hrp-osmo-for-cosmos": "prefix",
}


@pytest.mark.parametrize(("entry_id", "expected"), WIF_MESSAGES.items(), ids=list(WIF_MESSAGES))
def test_invalid_inputs_say_which_rule_failed(entry_id: str, expected: str) -> None:
    entry = next(e for e in KEYS["invalid"] if e["id"] == entry_id)
    with pytest.raises(ChainError) as caught:
        _refuse(entry)
    assert expected in caught.value.message
    assert caught.value.code in {"invalid_private_key", "invalid_address"}


# ---------------------------------------------------------------- edge_cases[]


@pytest.mark.parametrize("case", KEYS["edge_cases"], ids=lambda c: c["id"])
def test_edge_cases(case: dict[str, Any]) -> None:
    if case["expect"] == "valid-uncompressed":
        family = FAMILIES[case["family"]]
        network = family.network(case["network"])
        key = family.parse_private_key(case["input"], network)
        assert (key.secret.hex(), key.compressed) == (case["decodes_to_private_key_hex"], False)
        account = family.account(key, network, family.options({}, key))
        assert account.address == case["address_of_uncompressed_pubkey"]
        assert account.address != case["address_of_compressed_pubkey"]
        assert account.public_key.startswith("04") and len(account.public_key) == 130
    elif case["input_kind"] == "private_key_hex":
        # Upper case and a 0x prefix are both accepted, as the same key.
        expected = key_by_id(case["same_as_key_id"])
        for family in FAMILIES.values():
            for network in family.networks.values():
                key = family.parse_private_key(case["input"], network)
                assert key.secret.hex() == expected["private_key_hex"]
                assert key.public.hex() == expected["public_key_compressed_hex"]
    else:
        assert case["id"] == "eos-wif-single-sha256-checksum"
        with pytest.raises(ChainError) as caught:
            EOS.parse_private_key(case["input"], EOS.network(None))
        assert "single SHA-256" in caught.value.message
        assert_no_echo(caught.value.message, case["input"])


def test_edge_cases_are_all_handled() -> None:
    kinds = {(c["expect"], c["input_kind"]) for c in KEYS["edge_cases"]}
    assert kinds == {
        ("valid-uncompressed", "wif"),
        ("valid", "private_key_hex"),
        ("implementation-defined", "private_key_hex"),
        ("reject-recommended", "eos_private_key"),
    }


# ---------------------------------------------------------------- anchors[]


@pytest.mark.parametrize("anchor", KEYS["anchors"], ids=lambda a: f"{a['key_id']}/{a['field']}")
def test_anchors(anchor: dict[str, Any]) -> None:
    vector = key_by_id(anchor["key_id"])
    assert lookup(key_entry(vector["private_key_hex"]), anchor["field"]) == anchor["expected"]
