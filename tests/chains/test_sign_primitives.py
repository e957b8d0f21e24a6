"""The signing primitives: low-S, deterministic retries, canonical EOS signatures, and
the one private coincurve API they use, pinned to the version it was read for."""

from __future__ import annotations

import hashlib

import pytest
from coincurve import PublicKey

from chainkeys.chains.tx import ecdsa
from chainkeys.chains.tx.eos import name_of, signature_k1

SECRETS = [bytes([i]) * 32 for i in range(1, 40)]


@pytest.mark.parametrize("secret", SECRETS[:8])
def test_extra_entropy_is_deterministic_low_s_and_recoverable(secret: bytes) -> None:
    digest = hashlib.sha256(secret).digest()
    a = ecdsa.sign_recoverable_with_entropy(secret, digest, bytes(31) + b"\x01")
    b = ecdsa.sign_recoverable_with_entropy(secret, digest, bytes(31) + b"\x01")
    c = ecdsa.sign_recoverable_with_entropy(secret, digest, bytes(31) + b"\x02")
    assert a == b and a != c
    assert ecdsa.low_s(a[0]) and ecdsa.low_s(c[0])
    recovered = PublicKey.from_signature_and_message(a[0] + bytes((a[1],)), digest, hasher=None)
    assert recovered == PublicKey.from_secret(secret)


@pytest.mark.parametrize("secret", SECRETS)
def test_eos_signatures_are_canonical(secret: bytes) -> None:
    from chainkeys.chains import encoding

    sig = signature_k1(secret, hashlib.sha256(secret).digest())
    raw = encoding.base58_decode(sig.removeprefix("SIG_K1_"), what="sig", code="x")[:65]
    r, s = raw[1:33], raw[33:65]
    assert r[0] < 0x80 and s[0] < 0x80
    assert (r[0] or r[1] >= 0x80) and (s[0] or s[1] >= 0x80)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (0x5530EA033482A600, "eosio.token"),
        (0xCDCD3C2D57000000, "transfer"),
        (0x3232EDA800000000, "active"),
        (0x0, ""),
    ],
)
def test_name_decoding(value: int, name: str) -> None:
    assert name_of(value) == name
