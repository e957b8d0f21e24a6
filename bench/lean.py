"""The baseline's own chain encoders: the least code that gives the same addresses.

Written apart from `chainkeys.chains` on purpose: the baseline measures what a
lean pipeline costs, so it must not inherit chainkeys' overheads (bip-utils'
encoders, option checks). `tests/benchmarks/test_bench_quick.py` checks every function
here against chainkeys for the same key, so the two do the same work.
"""

from __future__ import annotations

import hashlib

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz12345"

# Mainnet parameters of each family's default network.
DOGE_P2PKH, DOGE_WIF = b"\x1e", b"\x9e"
LTC_HRP, LTC_WIF = "ltc", b"\xb0"
COSMOS_HRP = "cosmos"
EOS_CHAIN_ID = bytes.fromhex("aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906")
COSMOS_KEYRING = '{"@type":"/cosmos.crypto.secp256k1.PubKey","key":"%s"}'


def ripemd160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", data).digest()


def hash160(data: bytes) -> bytes:
    return ripemd160(hashlib.sha256(data).digest())


def b58encode(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(_B58[r])
    pad = len(data) - len(data.lstrip(b"\0"))
    return "1" * pad + "".join(reversed(out))


def b58check(payload: bytes) -> str:
    check = hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    return b58encode(payload + check)


def _polymod(values: list[int]) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            if (top >> i) & 1:
                chk ^= _GEN[i]
    return chk


def _to5(data: bytes) -> list[int]:
    acc = bits = 0
    out = []
    for b in data:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append((acc >> bits) & 31)
    if bits:
        out.append((acc << (5 - bits)) & 31)
    return out


def bech32(hrp: str, data5: list[int]) -> str:
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    pm = _polymod([*expanded, *data5, 0, 0, 0, 0, 0, 0]) ^ 1
    check = [(pm >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_BECH32[d] for d in data5 + check)


def cosmos_address(pub33: bytes, hrp: str = COSMOS_HRP) -> str:
    return bech32(hrp, _to5(hash160(pub33)))


def p2wpkh_address(pub33: bytes, hrp: str = LTC_HRP) -> str:
    return bech32(hrp, [0, *_to5(hash160(pub33))])


def p2pkh_address(pub33: bytes, version: bytes = DOGE_P2PKH) -> str:
    return b58check(version + hash160(pub33))


def wif(secret: bytes, version: bytes, compressed: bool = True) -> str:
    return b58check(version + secret + (b"\x01" if compressed else b""))


def eos_public_legacy(pub33: bytes) -> str:
    return "EOS" + b58encode(pub33 + ripemd160(pub33)[:4])


def eos_public_k1(pub33: bytes) -> str:
    return "PUB_K1_" + b58encode(pub33 + ripemd160(pub33 + b"K1")[:4])


def eos_name(pub33: bytes, chain_id: bytes = EOS_CHAIN_ID) -> str:
    value = int.from_bytes(hashlib.sha256(chain_id + pub33).digest(), "big")
    value, first = divmod(value, 26)
    chars = [_NAME_ALPHABET[first]]
    for _ in range(11):
        value, index = divmod(value, 31)
        chars.append(_NAME_ALPHABET[index])
    return "".join(chars)
