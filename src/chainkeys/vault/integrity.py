"""The integrity key: what lets the service trust a row that a database writer could edit.

Sealing keys protects them from whoever can read the database; this protects what
authorizes anything (tokens, policies, approvals and their votes: store/integrity.py)
from whoever can write it without holding the master key. The key is 256 random bits
of this store, sealed in `meta` under the master key and opened by the barrier at
start, as Vault keeps its salt behind its barrier: a master-key rotation re-seals it
like every sealed value and keeps its value, so a token digest never needs the token
to be re-keyed. It
- keys token digests: HMAC(k, "token" || sha256(token)), so a row inserted with the
  digest of a token of the writer's choosing matches nothing, and no stored value lets
  a reader check a guessed token;
- MACs each authenticated row: HMAC(k, record || JSON of its covered columns), so a
  widened scope, a loosened policy or a forged vote fails its check and is not used
  (`IntegrityFailure`, logged, counted in `chainkeys_integrity_failures_total`).

Adoption: the first start of this version on a store from before it finds no key,
makes one and MACs every row it already has (and re-keys their token digests), in the
start-up transaction; from then on a row without a valid MAC is refused. A store whose
rows carry MACs but whose key record is gone was edited: it is refused at start.
Rolling the whole database back to a copy from before adoption is not detected (the
limits are in docs/security.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping
from typing import Any

import msgspec
from sqlalchemy import select, update

from chainkeys import metrics
from chainkeys.errors import IntegrityFailure, StartupError
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import REGISTRY, TOKENS, Authenticated
from chainkeys.store.sql import Tx
from chainkeys.vault.repository import Meta
from chainkeys.vault.seal import Context

log = logging.getLogger("chainkeys.vault")
RECORD = "integrity_key"  # the meta record holding the sealed key
CONTEXT = Context("-", "-", RECORD, purpose="meta")
VERSION = "v1"
_encode = msgspec.json.Encoder().encode


class Integrity:
    """Token digests and row MACs under this store's integrity key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("an integrity key is 32 bytes")
        self._key = key

    def __repr__(self) -> str:
        return "Integrity(***)"

    def token_digest(self, token: str) -> str:
        """What `tokens.token_hash` holds for `token`."""
        return self._keyed(hashlib.sha256(token.encode()).digest())

    def _keyed(self, sha256: bytes) -> str:
        return hmac.new(self._key, b"token\x00" + sha256, hashlib.sha256).hexdigest()

    def mac(self, entry: Authenticated, row: Mapping[str, Any]) -> str:
        """The MAC of `row`'s covered columns, bound to its table's record name."""
        data = _encode([entry.record, *entry.fields(row)])
        return f"{VERSION}:{hmac.new(self._key, data, hashlib.sha256).hexdigest()}"

    def valid(self, entry: Authenticated, row: Mapping[str, Any]) -> bool:
        found = row.get("mac")
        return isinstance(found, str) and hmac.compare_digest(found, self.mac(entry, row))

    def check(self, entry: Authenticated, row: Mapping[str, Any], what: str) -> None:
        """IntegrityFailure (logged, counted) unless `row` carries its valid MAC."""
        if not self.valid(entry, row):
            raise failed(entry, what)


def opened(integrity: Integrity | None) -> Integrity:
    """The barrier's integrity key, which every process that serves has opened at start
    (None only in a command that never reads an authenticated row)."""
    if integrity is None:
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    return integrity


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


# The tables a key record of the first format (the bare 32 bytes) had adopted; a record
# now also names the tables it adopted, so a table newly authenticated by a later
# release (accounts, audit heads, approver credentials) is adopted once, at the first
# start that knows it, and a row whose MAC is missing is never adopted again after.
FIRST_ADOPTED = frozenset({"tokens", "policy_versions", "approvals", "approval_votes"})


def _record(key: bytes, adopted: frozenset[str]) -> bytes:
    return _encode({"key": base64.b64encode(key).decode(), "adopted": sorted(map(str, adopted))})


def read_record(plain: bytes) -> tuple[bytes, frozenset[str]]:
    if len(plain) == 32:  # the first format
        return plain, FIRST_ADOPTED
    fields = msgspec.json.decode(plain)
    return base64.b64decode(fields["key"]), frozenset(fields["adopted"])


async def open_integrity(db: Backend, barrier: Any) -> Integrity:
    """This store's integrity key, opened through the barrier; made (and every existing
    row adopted) on the first start that has none, and a table newly in the registry
    adopted on the first start that knows it. Called under the start-up lock."""
    async with db.read() as tx:
        found = await Meta.get(tx, RECORD)
    if found is not None:
        blob, key_id = found
        key, adopted = read_record(await barrier.open_async(blob, key_id or "", CONTEXT))
        integrity = Integrity(key)
        await _adopt_new(db, barrier, integrity, adopted)
        return integrity
    key = secrets.token_bytes(32)
    everything = frozenset(entry.table.name for entry in REGISTRY)
    sealed = await barrier.seal(_record(key, everything), CONTEXT)
    integrity = Integrity(key)
    async with db.write() as tx:
        if await Meta.get(tx, RECORD) is not None:  # never under the lock; kept for safety
            raise StartupError("the integrity key appeared during start-up; start again")
        for entry in REGISTRY:
            stmt = select(entry.table.c.mac).where(entry.table.c.mac.is_not(None)).limit(1)
            if (await tx.execute(stmt)).first() is not None:
                raise StartupError(
                    f"rows of {entry.table.name} carry MACs but the store's integrity key is "
                    "gone: the database was edited; restore it from a backup"
                )
        counts = {entry.table.name: await _adopt(tx, integrity, entry) for entry in REGISTRY}
        await Meta.insert(tx, RECORD, sealed.blob, sealed.key_id)
    if any(counts.values()):
        log.warning(
            "integrity: this store's rows are authenticated from now on; adopted %s",
            ", ".join(f"{n} {t}" for t, n in counts.items() if n),
        )
    return integrity


async def _adopt_new(
    db: Backend, barrier: Any, integrity: Integrity, adopted: frozenset[str]
) -> None:
    """MAC the rows of the tables this release authenticates that the key record does
    not name yet, and name them in it (one transaction)."""
    new = [entry for entry in REGISTRY if entry.table.name not in adopted]
    if not new:
        return
    everything = adopted | {entry.table.name for entry in new}
    sealed = await barrier.seal(_record(integrity._key, everything), CONTEXT)
    async with db.write() as tx:
        counts = {entry.table.name: await _adopt(tx, integrity, entry) for entry in new}
        await Meta.put(tx, RECORD, sealed.blob, sealed.key_id)
    log.warning(
        "integrity: newly authenticated tables adopted: %s",
        ", ".join(f"{t} ({n} rows)" for t, n in counts.items()),
    )


async def _adopt(tx: Tx, integrity: Integrity, entry: Authenticated) -> int:
    """MAC every row of `entry` (a store from before integrity): token digests re-keyed
    first (`HMAC(k, sha256(token))` from the stored `sha256(token)`, no token changes)."""
    table = entry.table
    keys = [c.name for c in table.primary_key.columns]
    rows = (await tx.execute(select(table))).all()
    for found in rows:
        row = dict(found._mapping)
        values: dict[str, Any] = {}
        if entry is TOKENS:
            values["token_hash"] = row["token_hash"] = integrity._keyed(
                bytes.fromhex(row["token_hash"])
            )
        values["mac"] = integrity.mac(entry, row)
        where = [table.c[k] == row[k] for k in keys]
        await tx.execute(update(table).where(*where).values(**values))
    return len(rows)
