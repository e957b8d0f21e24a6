"""Pure chain layer: keys, addresses, formats and networks. No I/O, no settings, no logging."""

from chainkeys.chains.registry import FAMILIES, family
from chainkeys.chains.secp256k1 import generate_key, key_from_secret, parse_hex_key
from chainkeys.chains.spec import Account, ChainError, Family, Key, Network, NoOptions

__all__ = [
    "FAMILIES",
    "Account",
    "ChainError",
    "Family",
    "Key",
    "Network",
    "NoOptions",
    "family",
    "generate_key",
    "key_from_secret",
    "parse_hex_key",
]
