"""The vector files, and the same shapes rebuilt by chainkeys so tests compare whole groups.

`key_entry(hex)` and `mnemonic_entry(phrase, passphrase)` produce dicts laid out
exactly like the entries of vectors.json and mnemonic_vectors.json, computed
only through the public chain API. A test then compares a group (one family,
network and address type) of the vector with the same group rebuilt here, and
anchors look their field up in the rebuilt entry.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from bip_utils import (  # type: ignore[import-untyped]
    Bip32Slip10Secp256k1,
    Bip39Languages,
    Bip39MnemonicDecoder,
)

from chainkeys.chains import encoding, eos
from chainkeys.chains.base58 import AddressOptions
from chainkeys.chains.hd import key_from_mnemonic
from chainkeys.chains.mnemonic import normalise_mnemonic, seed_from_mnemonic
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret, parse_hex_key
from chainkeys.chains.spec import Key

VECTORS_DIR = Path(__file__).resolve().parent / "vectors"
KEYS: dict[str, Any] = json.loads((VECTORS_DIR / "vectors.json").read_text("utf-8"))
MNEMONICS: dict[str, Any] = json.loads((VECTORS_DIR / "mnemonic_vectors.json").read_text("utf-8"))

COSMOS, DOGECOIN, EOS, LITECOIN = (FAMILIES[n] for n in ("cosmos", "dogecoin", "eos", "litecoin"))
# vectors.json names Cosmos networks by bech32 prefix.
COSMOS_NETWORK_BY_HRP = {"cosmos": "cosmoshub", "osmo": "osmosis", "juno": "juno"}
NO_NAME = eos.EosOptions()  # EOS: the name derived from the key


def ltc_options(vector_type: str, key: Key | None = None) -> AddressOptions:
    """vectors say p2sh_p2wpkh, the API says p2sh-p2wpkh."""
    options: AddressOptions = LITECOIN.options({"address_type": vector_type.replace("_", "-")}, key)
    return options


def lookup(entry: Any, dotted: str) -> Any:
    """entry["a"]["b"][0]… for "a.b.0…"."""
    for part in dotted.split("."):
        entry = entry[int(part)] if isinstance(entry, list) else entry[part]
    return entry


def without(entry: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in keys}


def assert_no_echo(message: str, text: str) -> None:
    """The message repeats neither the input nor any 10-character run of it."""
    if not text:
        return
    assert text not in message
    for start in range(max(len(text) - 9, 0)):
        assert text[start : start + 10] not in message


# ---------------------------------------------------------------- keys


def _base58_group(family: Any, key: Key, network: str, types: list[str]) -> dict[str, Any]:
    net = family.network(network)
    group: dict[str, Any] = {}
    for vector_type in types:
        options = ltc_options(vector_type) if family is LITECOIN else family.options({}, key)
        group[vector_type] = family.account(key, net, options).address
    group["wif"] = family.export_private_key(key, net)
    uncompressed = key_from_secret(key.secret, compressed=False)
    group["uncompressed_key"] = {
        "wif": family.export_private_key(uncompressed, net),
        "p2pkh": family.account(uncompressed, net, family.options({}, uncompressed)).address,
    }
    return group


@cache
def key_entry(private_key_hex: str) -> dict[str, Any]:
    """A vectors.json keys[] entry rebuilt from its private key."""
    key = parse_hex_key(private_key_hex)
    cosmos = {
        hrp: COSMOS.account(key, COSMOS.network(net), COSMOS.options({}, key))
        for hrp, net in COSMOS_NETWORK_BY_HRP.items()
    }
    hub = cosmos["cosmos"]
    litecoin: dict[str, Any] = {}
    for network, old_version in (("mainnet", "0x05"), ("testnet", "0xc4")):
        group = _base58_group(LITECOIN, key, network, ["p2pkh", "p2sh_p2wpkh", "p2wpkh"])
        group["p2sh_p2wpkh_deprecated_version"] = {
            "version_byte": old_version,
            "address": encoding.p2sh_p2wpkh_address(key.public, bytes.fromhex(old_version[2:])),
        }
        litecoin[network] = group
    account = EOS.account(key, EOS.network(None), EOS.options({}, key))
    return {
        "private_key_hex": key.secret.hex(),
        "public_key_compressed_hex": key.public.hex(),
        "public_key_uncompressed_hex": key_from_secret(key.secret, compressed=False).public.hex(),
        "hash160_hex": encoding.hash160(key.public).hex(),
        "cosmos": {
            "hash160_hex": encoding.hash160(key.public).hex(),
            "pubkey_base64": hub.public_key,
            "pubkey_amino_json": {"type": "tendermint/PubKeySecp256k1", "value": hub.public_key},
            "pubkey_keyring_json": json.loads(hub.extra["pubkey"]),
            "pubkey_keyring_json_string": hub.extra["pubkey"],
            "addresses": {hrp: a.address for hrp, a in cosmos.items()},
        },
        "dogecoin": {
            network: _base58_group(DOGECOIN, key, network, ["p2pkh"])
            for network in ("mainnet", "testnet")
        },
        "litecoin": litecoin,
        "eos": {
            "public_key_legacy": account.public_key,
            "public_key_k1": account.extra["public_key_k1"],
            "private_key_wif": EOS.export_private_key(key, EOS.network(None)),
            "private_key_k1": eos.private_key_k1(key.secret),
        },
    }


# ---------------------------------------------------------------- mnemonics


def _derived(key: Key) -> dict[str, Any]:
    return {
        "path": key.path,
        "private_key_hex": key.secret.hex(),
        "public_key_compressed_hex": key.public.hex(),
    }


def _dogecoin(phrase: str, passphrase: str, index: int, network: Any) -> dict[str, Any]:
    # The network row carries the coin type, so the alternative convention is
    # the testnet row with another coin type.
    key = key_from_mnemonic(
        DOGECOIN, phrase, passphrase, index, network, DOGECOIN.options({}, None)
    )
    return _derived(key) | {
        "p2pkh": DOGECOIN.account(key, network, DOGECOIN.options({}, key)).address,
        "wif": DOGECOIN.export_private_key(key, network),
    }


def _litecoin(phrase: str, passphrase: str, index: int, network: Any) -> dict[str, Any]:
    group = {}
    for vector_type in ("p2pkh", "p2sh_p2wpkh", "p2wpkh"):
        options = ltc_options(vector_type)
        key = key_from_mnemonic(LITECOIN, phrase, passphrase, index, network, options)
        group[vector_type] = _derived(key) | {
            "address": LITECOIN.account(key, network, options).address,
            "wif": LITECOIN.export_private_key(key, network),
        }
    return group


def _account(phrase: str, passphrase: str, index: int) -> dict[str, Any]:
    cosmos_keys = {
        hrp: key_from_mnemonic(
            COSMOS, phrase, passphrase, index, COSMOS.network(net), COSMOS.options({}, None)
        )
        for hrp, net in (("cosmos", "cosmoshub"), ("osmo", "osmosis"))
    }
    assert cosmos_keys["cosmos"] == cosmos_keys["osmo"]
    doge_test, ltc_test = DOGECOIN.network("testnet"), LITECOIN.network("testnet")
    eos_key = key_from_mnemonic(
        EOS, phrase, passphrase, index, EOS.network(None), EOS.options({}, None)
    )
    eos_account = EOS.account(eos_key, EOS.network(None), EOS.options({}, eos_key))
    return {
        "account_index": index,
        "cosmos": _derived(cosmos_keys["cosmos"])
        | {
            "addresses": {
                hrp: COSMOS.account(key, COSMOS.network(net), COSMOS.options({}, key)).address
                for (hrp, key), net in zip(
                    cosmos_keys.items(), ("cosmoshub", "osmosis"), strict=True
                )
            }
        },
        "dogecoin": {
            "mainnet": _dogecoin(phrase, passphrase, index, DOGECOIN.network("mainnet")),
            "testnet": _dogecoin(phrase, passphrase, index, doge_test),
            "testnet_coin_type_3": _dogecoin(
                phrase, passphrase, index, replace(doge_test, coin_type=3)
            ),
        },
        "litecoin": {
            "mainnet": _litecoin(phrase, passphrase, index, LITECOIN.network("mainnet")),
            "testnet": _litecoin(phrase, passphrase, index, ltc_test),
            "testnet_coin_type_2": _litecoin(
                phrase, passphrase, index, replace(ltc_test, coin_type=2)
            ),
        },
        "eos": _derived(eos_key)
        | {
            "public_key_legacy": eos_account.public_key,
            "public_key_k1": eos_account.extra["public_key_k1"],
            "private_key_wif": EOS.export_private_key(eos_key, EOS.network(None)),
            "private_key_k1": eos.private_key_k1(eos_key.secret),
        },
    }


@cache
def mnemonic_entry(phrase: str, passphrase: str) -> dict[str, Any]:
    """A mnemonic_vectors.json mnemonics[] entry rebuilt from its phrase."""
    seed = seed_from_mnemonic(phrase, passphrase)
    canonical = normalise_mnemonic(phrase)
    return {
        "mnemonic": canonical,
        "passphrase": passphrase,
        "word_count": len(canonical.split()),
        "entropy_hex": bytes(Bip39MnemonicDecoder(Bip39Languages.ENGLISH).Decode(canonical)).hex(),
        "seed_hex": seed.hex(),
        "bip32_root_xprv": str(Bip32Slip10Secp256k1.FromSeed(seed).PrivateKey().ToExtended()),
        "accounts": [_account(phrase, passphrase, index) for index in (0, 1)],
    }


def mnemonic_by_id(vector_id: str) -> dict[str, Any]:
    return next(m for m in MNEMONICS["mnemonics"] if m["id"] == vector_id)


def key_by_id(vector_id: str) -> dict[str, Any]:
    return next(k for k in KEYS["keys"] if k["id"] == vector_id)
