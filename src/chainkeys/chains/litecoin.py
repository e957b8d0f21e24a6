"""Litecoin: native segwit (default), P2PKH or P2SH-P2WPKH addresses, WIF or hex keys.

Version bytes and prefixes from Litecoin Core src/chainparams.cpp. P2SH uses
SCRIPT_ADDRESS2 (0x32 "M…", 0x3a "Q…"), not the deprecated Bitcoin-shared
0x05/0xc4. Mnemonic paths follow the address type: BIP44/49/84 purpose
44'/49'/84', coin type 2 (1 on test networks).
"""

from __future__ import annotations

from typing import Final

from chainkeys.chains.base58 import P2PKH, P2SH_P2WPKH, P2WPKH, Base58Family
from chainkeys.chains.encoding import network_table
from chainkeys.chains.spec import Network

NETWORKS: Final = network_table(
    Network("mainnet", 2, hrp="ltc", p2pkh=b"\x30", p2sh=b"\x32", wif=b"\xb0"),
    Network("testnet", 1, testnet=True, hrp="tltc", p2pkh=b"\x6f", p2sh=b"\x3a", wif=b"\xef"),
    Network("regtest", 1, testnet=True, hrp="rltc", p2pkh=b"\x6f", p2sh=b"\x3a", wif=b"\xef"),
)

FAMILY: Final = Base58Family(
    name="litecoin",
    networks=NETWORKS,
    default_network="mainnet",
    address_types={t.name: t for t in (P2WPKH, P2PKH, P2SH_P2WPKH)},
    default_address_type="p2wpkh",
    # Bitcoin's xpub (what Litecoin Core and BIP380 descriptors use), Litecoin's Ltub/Mtub,
    # SLIP-132's ypub/zpub for the segwit types
    xpubs={
        "p2pkh": ("xpub", "Ltub"),
        "p2sh-p2wpkh": ("xpub", "Ltub", "ypub", "Mtub"),
        "p2wpkh": ("xpub", "Ltub", "zpub"),
    },
)
