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
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from chainkeys import metrics
from chainkeys.errors import IntegrityFailure
from chainkeys.store.integrity import Authenticated
from chainkeys.vault.derive import subkey
from chainkeys.vault.seal import Context

log = logging.getLogger("chainkeys.vault")
RECORD = "integrity_key"  # the meta record holding the sealed key
CONTEXT = Context("-", "-", RECORD, purpose="meta")
VERSION = "v1"  # of a row's MAC
SEEDS = "chainkeys wallet seed v1"  # the purpose of the seed fingerprints' key
# The record's format: 1 was the bare key, 2 named the tables it adopted; 3 also says
# the store was born with it or adopted by an operator. Older ones are refused at start.
FORMAT = 3
_encode = msgspec.json.Encoder().encode


class Integrity:
    """Token digests and row MACs under this store's integrity key."""

    __slots__ = ("_key", "_seeds")

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("an integrity key is 32 bytes")
        self._key = key
        self._seeds = subkey(key, SEEDS)

    def __repr__(self) -> str:
        return "Integrity(***)"

    def token_digest(self, token: str) -> str:
        """What `tokens.token_hash` holds for `token`."""
        return self.keyed_digest(hashlib.sha256(token.encode()).digest())

    def keyed_digest(self, sha256: bytes) -> str:
        """A token digest from the token's bare sha256 (what stores from before integrity
        held: `chainkeys integrity adopt` re-keys them)."""
        return hmac.new(self._key, b"token\x00" + sha256, hashlib.sha256).hexdigest()

    def seed_key(self, tenant_id: str, phrase: bytes) -> str:
        """What `wallets.seed_key` holds for a wallet's sealed phrase (its plaintext) in
        a tenant: keyed, so a copy of the database confirms no guessed phrase; under the
        integrity key's own subkey, which master-key rotations keep, so the fingerprints
        stay comparable across them."""
        data = tenant_id.encode() + b"\x00" + phrase
        return hmac.new(self._seeds, data, hashlib.sha256).hexdigest()

    def mac(self, entry: Authenticated, row: Mapping[str, Any]) -> str:
        """The MAC of `row`'s covered columns, bound to its table's record name."""
        data = _encode([entry.record, *entry.fields(row)])
        return f"{VERSION}:{hmac.new(self._key, data, hashlib.sha256).hexdigest()}"

    def element(self, name: str, ident: str, mac: str) -> int:
        """A row's element in a pinned set's digest (vault/heads.py): keyed, so only the
        service can add or remove one; 256 bits."""
        data = _encode(["set", name, ident, mac])
        return int.from_bytes(hmac.new(self._key, data, hashlib.sha256).digest(), "big")

    def valid(self, entry: Authenticated, row: Mapping[str, Any]) -> bool:
        found = row.get("mac")
        return isinstance(found, str) and hmac.compare_digest(found, self.mac(entry, row))

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
    """What the sealed record holds: the key, its format, the tables it authenticates,
    and how the store came by it ("born" or "adopted")."""

    key: bytes
    format: int
    adopted: frozenset[str]
    origin: str

    def __repr__(self) -> str:
        return f"Record(format={self.format}, origin={self.origin!r}, key=***)"

    def encode(self) -> bytes:
        return _encode(
            {
                "format": self.format,
                "key": base64.b64encode(self.key).decode(),
                "adopted": sorted(map(str, self.adopted)),
                "origin": self.origin,
            }
        )


def read_record(plain: bytes) -> Record:
    """The record, whatever its format (the caller refuses an older one)."""
    if len(plain) == 32:  # the first format: the bare key
        return Record(plain, 1, frozenset(), "")
    fields = msgspec.json.decode(plain)
    return Record(
        base64.b64decode(fields["key"]),
        int(fields.get("format", 2)),
        frozenset(fields["adopted"]),
        str(fields.get("origin", "")),
    )
