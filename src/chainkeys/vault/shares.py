"""The Shamir shares themselves: the unseal key, its split into N shares of which
any K rebuild it, a share's text as an operator copies it, and the keyed
commitments that let a sealed server refuse a forged share before counting it.

Its own module because nothing here touches the store, the wrapped master key or
the key provider (vault/shamir.py, which uses this and is the only way in for the
rest of chainkeys: nothing outside vault/ splits, combines or holds an unseal key).

The sharing is pycryptodome's `Crypto.Protocol.SecretSharing.Shamir` (GF(2^128),
16-byte secrets), not a field written here. The 32-byte unseal key is shared as two
16-byte halves, each with its own random polynomial, at the same indexes (1..N): one
shared 16-byte seed would cap the key at 128 bits; K-1 shares say nothing of either.

A share as an operator copies it, on one line:

    cks2-<set: 8 hex>-<index>-<64 hex: both halves' values>-<check: 8 hex>

The set id names the share set (a rekey makes a new one); the check is 4 bytes of
SHA-256 over the rest, so a typo is caught where the share is read, by the operator's
own command, before anything is sent. It is no authentication: anyone can compute it.

What authenticates a share (format 2) is a **per-index keyed commitment** kept in the
store beside the share set: `HMAC-SHA256(check key, set id, index, value)` for each
of the N shares, under a random 32-byte check key of that set. A sealed server holds
no secret, so it can verify nothing that needs one; but a commitment needs none to be
*checked*: a share is counted only if its value hashes to its index's commitment.
Chosen over a keyed tag carried in the share (a check key in the store, a MAC in the
text) because whoever reads the store learns that key and could then mint tags that
pass, and flood an unseal with shares that poison its progress; to pass a commitment
one needs the share itself (a preimage of HMAC-SHA256). The check key is public to a
database reader; it makes each commitment one set's own (no table across sets or
stores, nothing equal between two sets). What keeps a share secret from the store
is its 256 bits of uniform randomness, not the key; and the wrapped master key is
already a test of a guessed unseal key, so a commitment adds no oracle.

Format 1 (`cks1-`, no commitments) is what stores made before format 2 hold: they
still unseal, a forged share there is caught only once combined (the wrapped blob's
GCM tag, progress reset), and `chainkeys operator rekey` moves them to format 2.
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

MAX_SHARES = 255  # an index is one byte in format 1's check and in the commitments
HALF = 16  # pycryptodome's Shamir shares 16-byte secrets
FORMAT = 2  # what new share sets are made in
FORMATS = (1, 2)  # what a store may hold: format 1 sets still unseal
CHECK_KEY_BYTES = 32
SHARE = re.compile(r"cks([0-9])-([0-9a-f]{8})-([0-9]{1,3})-([0-9a-f]{64})-([0-9a-f]{8})")
_TYPO_DOMAIN = {1: b"chainkeys share v1\x00", 2: b"chainkeys share v2\x00"}
_COMMIT_DOMAIN = b"chainkeys share commitment v2\x00"
# Said to whoever sends a share, unauthenticated: neither the store's set id nor N, and
# the same words whatever the reason (another store's, an old set's, an index the set
# has not, a forged value), so a caller learns nothing by trying.
NOT_OURS = (
    "this share is not one of this store's current shares (another store's, one from "
    "before a rekey, or altered); nothing was counted"
)


class InvalidShare(BadRequest):
    """A share that cannot be one of this store's: a typo, another store's, an old
    set's or a forged one."""

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
    """One operator's share: its set, its index (1..N), its 32-byte value and the
    format its text is written in."""

    set_id: str
    index: int
    value: bytes = field(repr=False)
    version: int = FORMAT

    def __repr__(self) -> str:
        return f"Share(set_id={self.set_id!r}, index={self.index}, value=***)"

    def text(self) -> str:
        body = f"cks{self.version}-{self.set_id}-{self.index}-{self.value.hex()}"
        return f"{body}-{_typo_check(self.version, body)}"


@dataclass(frozen=True, slots=True)
class ShareSet:
    """What the store records of a share set (never a share): its id, N, K, its format
    and, from format 2, its check key and one commitment per index (1..N)."""

    set_id: str
    shares: int
    threshold: int
    version: int = 1
    check_key: bytes = field(default=b"", repr=False)
    commitments: tuple[bytes, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.version not in FORMATS:
            raise StartupError(
                f"the Shamir share set in the database is of format {self.version}, "
                "which this chainkeys does not know: run the release that wrote it"
            )
        committed = len(self.check_key) == CHECK_KEY_BYTES and len(self.commitments) == self.shares
        if self.version >= 2 and not committed:
            raise StartupError("the Shamir share set in the database is damaged")

    def owns(self, share: Share) -> bool:
        """Whether `share` is one of this set's: its format, set id and index, and from
        format 2 its value against its index's commitment (compared in constant time)."""
        if (share.version, share.set_id) != (self.version, self.set_id):
            return False
        if not 1 <= share.index <= self.shares:
            return False
        if self.version < 2:
            return True  # format 1 committed nothing: the wrapped blob's tag decides
        expected = self.commitments[share.index - 1]
        return hmac.compare_digest(expected, _commit(self.check_key, share))


def _typo_check(version: int, body: str) -> str:
    if version == 1:  # as format 1 wrote it: over set id, index byte and value
        _, set_id, index, value = body.split("-")
        data = set_id.encode() + bytes([int(index)]) + bytes.fromhex(value)
    else:
        data = body.encode()
    return hashlib.sha256(_TYPO_DOMAIN[version] + data).hexdigest()[:8]


def _commit(check_key: bytes, share: Share) -> bytes:
    data = _COMMIT_DOMAIN + share.set_id.encode() + bytes([share.index]) + share.value
    return hmac.digest(check_key, data, "sha256")


def parse_share(text: str) -> Share:
    """A share as an operator typed or pasted it (spaces and case forgiven): its shape
    and check digits only (whether the store's set holds it is `check_set`'s).

    Raises:
        InvalidShare: not a share's shape, or its check fails (the message never
            quotes the text: it is a secret).
    """
    compact = "".join(text.split()).lower()
    found = SHARE.fullmatch(compact)
    if found is None or int(found[1]) not in FORMATS:
        raise InvalidShare(
            "this is not a chainkeys share: a share is one line "
            "cks2-<set>-<index>-<64 hex digits>-<check>"
        )
    version, index = int(found[1]), int(found[3])
    body = compact.rpartition("-")[0]
    if not 1 <= index <= MAX_SHARES or not hmac.compare_digest(
        found[5], _typo_check(version, body)
    ):
        raise InvalidShare(
            "this share's check digits do not match: it was mistyped or "
            "cut short; nothing was counted"
        )
    return Share(found[2], index, bytes.fromhex(found[4]), version)


def split(key: UnsealKey, shares: int, threshold: int) -> tuple[ShareSet, list[Share]]:
    """N shares of `key`, any `threshold` of which rebuild it: a new set id, a new
    check key and the shares' commitments (format 2).

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
    set_id = secrets.token_hex(4)
    if threshold == 1:  # a polynomial of degree 0: every share is the key itself
        made = [Share(set_id, i, key.material) for i in range(1, shares + 1)]
    else:
        low = Shamir.split(threshold, shares, key.material[:HALF], ssss=False)
        high = Shamir.split(threshold, shares, key.material[HALF:], ssss=False)
        # pycryptodome numbers both 1..N: the halves must meet at one index
        if [i for i, _ in low] != [j for j, _ in high]:
            raise StartupError("the two halves' shares were numbered differently")
        made = [
            Share(set_id, i, bytes(a) + bytes(b)) for (i, a), (_, b) in zip(low, high, strict=True)
        ]
    check_key = secrets.token_bytes(CHECK_KEY_BYTES)
    commitments = tuple(_commit(check_key, share) for share in made)
    return ShareSet(set_id, shares, threshold, FORMAT, check_key, commitments), made


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
    """The shares, each one of `share_set`'s (format, set id, index and, from format 2,
    value against its commitment); InvalidShare, saying no more, otherwise."""
    out = []
    for share in shares:
        if not share_set.owns(share):
            raise InvalidShare(NOT_OURS)
        out.append(share)
    return out
