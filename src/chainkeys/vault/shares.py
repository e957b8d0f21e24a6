"""The Shamir shares themselves: the unseal key, its split into N shares of which
any K rebuild it, and a share's text as an operator copies it.

Its own module because nothing here touches the store, the wrapped master key or
the key provider (vault/shamir.py, which uses this): an operator's side of
`chainkeys operator unseal` and `rekey` reads, checks and combines shares with this
alone, and the share format can be read (and changed) without the wrapping.

The sharing is pycryptodome's `Crypto.Protocol.SecretSharing.Shamir` (GF(2^128),
16-byte secrets), not a field written here. The 32-byte unseal key is shared as two
16-byte halves, each with its own random polynomial, at the same indexes (1..N): one
shared 16-byte seed would cap the key at 128 bits; K-1 shares say nothing of either.

A share as an operator copies it, on one line:

    cks1-<set: 8 hex>-<index>-<64 hex: both halves' values>-<check: 8 hex>

The set id names the share set (a rekey makes a new one, so an old share is
refused as such before anything is combined); the check is 4 bytes of SHA-256
over the rest, so a typo is caught when the share is read, not after combining.
The check is no authentication: a share that passes it and combines to a wrong
key is caught by the wrapped blob's GCM tag, and the progress is reset.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from Crypto.Protocol.SecretSharing import Shamir

from chainkeys.errors import BadRequest, StartupError
from chainkeys.vault.providers import KEY_BYTES

MAX_SHARES = 255  # share indexes are one byte in the check
HALF = 16  # pycryptodome's Shamir shares 16-byte secrets
SHARE = re.compile(r"cks1-([0-9a-f]{8})-([0-9]{1,3})-([0-9a-f]{64})-([0-9a-f]{8})")


class InvalidShare(BadRequest):
    """A share that cannot be one of this store's: a typo, another store's or an old set's."""

    code = "invalid_share"


@dataclass(frozen=True, slots=True)
class UnsealKey:
    """The 256-bit key the shares rebuild; it wraps the master key, never seals data."""

    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) != KEY_BYTES:
            raise StartupError(f"an unseal key is {KEY_BYTES} bytes")

    def __repr__(self) -> str:
        return "UnsealKey(***)"

    @classmethod
    def new(cls) -> UnsealKey:
        return cls(secrets.token_bytes(KEY_BYTES))


@dataclass(frozen=True, slots=True)
class Share:
    """One operator's share: its set, its index (1..N) and its 32-byte value."""

    set_id: str
    index: int
    value: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"Share(set_id={self.set_id!r}, index={self.index}, value=***)"

    def text(self) -> str:
        body = f"cks1-{self.set_id}-{self.index}-{self.value.hex()}"
        return f"{body}-{_check(self.set_id, self.index, self.value)}"


@dataclass(frozen=True, slots=True)
class ShareSet:
    """What the store records of a share set (never a share): its id, N and K."""

    set_id: str
    shares: int
    threshold: int


def _check(set_id: str, index: int, value: bytes) -> str:
    data = b"chainkeys share v1\x00" + set_id.encode() + bytes([index]) + value
    return hashlib.sha256(data).hexdigest()[:8]


def parse_share(text: str) -> Share:
    """A share as an operator typed or pasted it (spaces and case forgiven).

    Raises:
        InvalidShare: not a share's shape, or its check fails (the message never
            quotes the text: it is a secret).
    """
    compact = "".join(text.split()).lower()
    found = SHARE.fullmatch(compact)
    if found is None:
        raise InvalidShare(
            "this is not a chainkeys share: a share is one line "
            "cks1-<set>-<index>-<64 hex digits>-<check>"
        )
    set_id, index_text, value_hex, check = found.groups()
    index = int(index_text)
    value = bytes.fromhex(value_hex)
    if not 1 <= index <= MAX_SHARES or not hmac.compare_digest(check, _check(set_id, index, value)):
        raise InvalidShare(
            "this share's check digits do not match: it was mistyped or "
            "cut short; nothing was counted"
        )
    return Share(set_id, index, value)


def split(key: UnsealKey, shares: int, threshold: int) -> tuple[ShareSet, list[Share]]:
    """N shares of `key`, any `threshold` of which rebuild it (a new set id).

    Args:
        key: the unseal key.
        shares: N, from 1 to 255.
        threshold: K, from 1 to N (1: every share alone opens the store).

    Raises:
        StartupError: N or K out of range.
    """
    if not 1 <= shares <= MAX_SHARES:
        raise StartupError(f"--shares {shares}: from 1 to {MAX_SHARES}")
    if not 1 <= threshold <= shares:
        raise StartupError(f"--threshold {threshold}: from 1 to the number of shares ({shares})")
    share_set = ShareSet(secrets.token_hex(4), shares, threshold)
    if threshold == 1:  # a polynomial of degree 0: every share is the key itself
        return share_set, [Share(share_set.set_id, i, key.material) for i in range(1, shares + 1)]
    low = Shamir.split(threshold, shares, key.material[:HALF], ssss=False)
    high = Shamir.split(threshold, shares, key.material[HALF:], ssss=False)
    out = []
    for (i, a), (j, b) in zip(low, high, strict=True):
        if i != j:  # pycryptodome numbers both 1..N: the halves must meet at one index
            raise StartupError("the two halves' shares were numbered differently")
        out.append(Share(share_set.set_id, i, bytes(a) + bytes(b)))
    return share_set, out


def combine(shares: Iterable[Share]) -> UnsealKey:
    """The key K shares rebuild: a wrong share gives a wrong key, never an error
    (the caller proves the key against the wrapped blob)."""
    given = sorted(shares, key=lambda s: s.index)
    if len({s.index for s in given}) != len(given):
        raise InvalidShare("two shares with the same index were given")
    if len(given) == 1:
        return UnsealKey(given[0].value)
    low = Shamir.combine([(s.index, s.value[:HALF]) for s in given], ssss=False)
    high = Shamir.combine([(s.index, s.value[HALF:]) for s in given], ssss=False)
    return UnsealKey(bytes(low) + bytes(high))


def check_set(shares: Iterable[Share], share_set: ShareSet) -> list[Share]:
    """The shares, each of `share_set` with an index it has; InvalidShare otherwise."""
    out = []
    for share in shares:
        # (said to whoever sends a share, unauthenticated: neither the store's set id
        # nor how many shares it has)
        if share.set_id != share_set.set_id:
            raise InvalidShare(
                "this share is not of this store's current share set (shares from "
                "before a rekey open nothing)"
            )
        if share.index > share_set.shares:
            raise InvalidShare("this share's index is not one of this store's share set")
        out.append(share)
    return out
