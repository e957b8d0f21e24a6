"""The integrity key: what lets the service trust a row that a database writer could edit.

Sealing keys protects them from whoever can read the database; this protects what
authorizes anything (store/integrity.py lists it) from whoever can write it without
holding the master key. The key is 256 random bits of this store, sealed in `meta`
under the master key (the *record*) and opened by the barrier at start, as Vault keeps
its salt behind its barrier: a master-key rotation re-seals it like every sealed value
and keeps its value, so a token digest never needs the token to be re-keyed. It
- keys token digests: HMAC(k, "token" || sha256(token)), so a row inserted with the
  digest of a token of the writer's choosing matches nothing, and no stored value lets
  a reader check a guessed token;
- MACs each authenticated row: HMAC(k, record || JSON of its covered columns), so a
  widened scope, a loosened policy or a forged vote fails its check and is not used
  (`IntegrityFailure`, logged, counted in `chainkeys_integrity_failures_total`);
- keys the elements of the pinned sets' digests (vault/heads.py), so a writer can
  neither compute nor cancel out the element of a row they put back;
- through a key derived from it (HKDF, "chainkeys wallet seed v1"), keys wallets' seed
  fingerprints (`wallets.seed_key`): one wallet per seed per tenant, held by a unique
  key, with no unkeyed hash of a phrase stored and no key material in `wallets/`.

A store is born with its key, and nothing adopts itself (vault/adoption.py): a store
whose record is missing, or of an older format, starts only after an operator ran
`chainkeys integrity adopt`.

Two kinds of key, both in the record. A token digest cannot be re-keyed: the token
itself is never stored, so no one can compute its digest under another key. So the
record's `key` (the *store key*) keys token digests and set elements for the life of
the store, and row MACs are made under *MAC keys* numbered by generation, which
`chainkeys integrity rotate` replaces (vault/rotation.py). Generation 1 is the store
key itself, so a store from before rotation existed keeps every MAC it holds. A MAC
names its generation (`v1:…`, `v2:…`), so during a rotation a row is checked under
the key it was made with while new MACs are made under the writing one; once every
row is MACed again the old generation is dropped from the record and a MAC under it
is refused like a forged one. Set elements stay under the store key on purpose: a
row MACed again changes its element, and its head is changed with it in the same
transaction (`Heads.change`), so no head ever holds a sum of two keys' elements; the
head itself is a MACed row, which a writer without the current MAC key cannot make.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import msgspec

from chainkeys import metrics
from chainkeys.errors import IntegrityFailure
from chainkeys.store.integrity import Authenticated
from chainkeys.vault.derive import subkey
from chainkeys.vault.seal import Context

log = logging.getLogger("chainkeys.vault")
RECORD = "integrity_key"  # the meta record holding the sealed key
CONTEXT = Context("-", "-", RECORD, purpose="meta")
VERSION = "v1"  # the MAC of generation 1 (the store key); generation n writes "vn:"
SEEDS = "chainkeys wallet seed v1"  # the purpose of the seed fingerprints' key
# The record's format: 1 was the bare key, 2 named the tables it adopted; 3 also says
# the store was born with it or adopted by an operator. Older ones are refused at start.
FORMAT = 3
# 4 also lists the MAC keys by generation and which one writes (a rotated store); a
# format-3 record reads as generation 1 alone.
ROTATED = 4
_encode = msgspec.json.Encoder().encode


def generation(mac: object) -> int | None:
    """The key generation a stored MAC names ("v2:…" is 2), None when it names none."""
    if not isinstance(mac, str) or not mac.startswith("v"):
        return None
    head, sep, _ = mac.partition(":")
    number = head[1:]
    if not sep or not number.isdigit() or len(number) > 6:
        return None
    return int(number)


class Integrity:
    """Token digests and set elements under the store key; row MACs under the MAC key
    of the writing generation, checked under whichever generation a MAC names."""

    __slots__ = ("_key", "_macs", "_seeds", "_writing")

    def __init__(self, key: bytes, macs: Mapping[int, bytes] | None = None, writing: int = 1):
        self._key = b""
        self._macs: dict[int, bytes] = {}
        self._writing = 0
        self.learn(key, {1: key} if macs is None else macs, writing)

    def learn(self, key: bytes, macs: Mapping[int, bytes], writing: int) -> None:
        """Take the keys of a record (at start, or when a rotation moved on): the store
        key never changes; the MAC keys and the writing generation do."""
        if len(key) != 32 or any(len(k) != 32 for k in macs.values()):
            raise ValueError("an integrity key is 32 bytes")
        if self._key and not hmac.compare_digest(self._key, key):
            raise ValueError("the store key of a record never changes")
        if writing not in macs:
            raise ValueError("the writing generation must be one of the record's")
        self._key, self._macs, self._writing = key, dict(macs), writing
        self._seeds = subkey(key, SEEDS)

    @classmethod
    def of(cls, record: Record) -> Self:
        return cls(record.key, record.macs, record.writing)

    def __repr__(self) -> str:
        return "Integrity(***)"

    @property
    def writing(self) -> int:
        """The generation new MACs are made under."""
        return self._writing

    @property
    def generations(self) -> frozenset[int]:
        """The generations a MAC is accepted under."""
        return frozenset(self._macs)

    def token_digest(self, token: str) -> str:
        """What `tokens.token_hash` holds for `token`."""
        return self.keyed_digest(hashlib.sha256(token.encode()).digest())

    def keyed_digest(self, sha256: bytes) -> str:
        """A token digest from the token's bare sha256 (what stores from before integrity
        held: `chainkeys integrity adopt` re-keys them). Under the store key, which no
        rotation changes: the token is not stored, so its digest could not be made
        again."""
        return hmac.new(self._key, b"token\x00" + sha256, hashlib.sha256).hexdigest()

    def seed_key(self, tenant_id: str, phrase: bytes) -> str:
        """What `wallets.seed_key` holds for a wallet's sealed phrase (its plaintext) in
        a tenant: keyed, so a copy of the database confirms no guessed phrase; under the
        integrity key's own subkey, which master-key rotations keep, so the fingerprints
        stay comparable across them."""
        data = tenant_id.encode() + b"\x00" + phrase
        return hmac.new(self._seeds, data, hashlib.sha256).hexdigest()

    def mac(self, entry: Authenticated, row: Mapping[str, Any]) -> str:
        """The MAC of `row`'s covered columns, bound to its table's record name, under
        the writing generation's key."""
        return self._mac(self._writing, entry, row)

    def _mac(self, gen: int, entry: Authenticated, row: Mapping[str, Any]) -> str:
        data = _encode([entry.record, *entry.fields(row)])
        return f"v{gen}:{hmac.new(self._macs[gen], data, hashlib.sha256).hexdigest()}"

    def element(self, name: str, ident: str, mac: str) -> int:
        """A row's element in a pinned set's digest (vault/heads.py): keyed, so only the
        service can add or remove one; 256 bits. Under the store key (module docstring:
        the member's MAC names its generation, the element need not)."""
        data = _encode(["set", name, ident, mac])
        return int.from_bytes(hmac.new(self._key, data, hashlib.sha256).digest(), "big")

    def valid(self, entry: Authenticated, row: Mapping[str, Any]) -> bool:
        """Whether `row` carries its MAC under a generation this record still accepts."""
        found = row.get("mac")
        gen = generation(found)
        if gen is None or gen not in self._macs:
            return False
        return hmac.compare_digest(str(found), self._mac(gen, entry, row))

    def current(self, mac: object) -> bool:
        """Whether a stored MAC was made under the writing generation (a rotation MACs
        again only the rows that are not)."""
        return generation(mac) == self._writing

    def check(self, entry: Authenticated, row: Mapping[str, Any], what: str) -> None:
        """IntegrityFailure (logged, counted) unless `row` carries its valid MAC."""
        if not self.valid(entry, row):
            raise failed(entry, what)


def failed(entry: Authenticated, what: str) -> IntegrityFailure:
    """The failure of one row: counted by table, logged (never the row's values)."""
    metrics.INTEGRITY_FAILURES.labels(entry.table.name).inc()
    log.error(
        "integrity failure: %s (table %s) fails its MAC; it is not used: the database "
        "was written by someone without the master key",
        what,
        entry.table.name,
    )
    return IntegrityFailure(f"{what} failed its integrity check; nothing was done")


@dataclass(frozen=True, slots=True)
class Record:
    """What the sealed record holds: the store key, its format, the tables it
    authenticates, how the store came by it ("born" or "adopted"), and (format 4) the
    MAC keys by generation with the one that writes."""

    key: bytes
    format: int
    adopted: frozenset[str]
    origin: str
    macs: Mapping[int, bytes] = field(default_factory=dict)  # empty: {1: key}
    writing: int = 1

    def __post_init__(self) -> None:
        if not self.macs:
            object.__setattr__(self, "macs", {1: self.key})

    def __repr__(self) -> str:
        return (
            f"Record(format={self.format}, origin={self.origin!r}, "
            f"generations={sorted(self.macs)}, writing={self.writing}, key=***)"
        )

    def encode(self) -> bytes:
        fields: dict[str, Any] = {
            "format": self.format,
            "key": base64.b64encode(self.key).decode(),
            "adopted": sorted(map(str, self.adopted)),
            "origin": self.origin,
        }
        if self.format >= ROTATED:
            fields["macs"] = {str(g): base64.b64encode(k).decode() for g, k in self.macs.items()}
            fields["writing"] = self.writing
        return _encode(fields)


def read_record(plain: bytes) -> Record:
    """The record, whatever its format (the caller refuses an older one)."""
    if len(plain) == 32:  # the first format: the bare key
        return Record(plain, 1, frozenset(), "")
    fields = msgspec.json.decode(plain)
    macs = {int(g): base64.b64decode(k) for g, k in fields.get("macs", {}).items()}
    return Record(
        base64.b64decode(fields["key"]),
        int(fields.get("format", 2)),
        frozenset(fields["adopted"]),
        str(fields.get("origin", "")),
        macs,
        int(fields.get("writing", 1)),
    )
