"""Dogecoin: P2PKH addresses, WIF or hex keys.

Version bytes from Dogecoin Core src/chainparams.cpp (base58Prefixes
PUBKEY_ADDRESS, SCRIPT_ADDRESS, SECRET_KEY); testnets derive at coin type 1.
"""

from __future__ import annotations

from typing import Final

from chainkeys.chains.base58 import P2PKH, Base58Family
from chainkeys.chains.encoding import network_table
from chainkeys.chains.spec import Network

NETWORKS: Final = network_table(
    Network("mainnet", 3, p2pkh=b"\x1e", p2sh=b"\x16", wif=b"\x9e"),
    Network("testnet", 1, testnet=True, p2pkh=b"\x71", p2sh=b"\xc4", wif=b"\xf1"),
    Network("regtest", 1, testnet=True, p2pkh=b"\x6f", p2sh=b"\xc4", wif=b"\xef"),
)

FAMILY: Final = Base58Family(
    name="dogecoin",
    networks=NETWORKS,
    default_network="mainnet",
    address_types={"p2pkh": P2PKH},
    default_address_type="p2pkh",
    xpubs={"p2pkh": ("dgub", "xpub")},  # Dogecoin Core's dgub, and Bitcoin's
)
