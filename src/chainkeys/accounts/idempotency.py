"""Idempotency-Key: a repeated create returns its first response instead of acting twice.

The first response may hold a one-time private key, so the record is sealed,
and so is the request's fingerprint (a hash of a request that carries a key,
mnemonic or passphrase would let a database thief confirm guesses offline).
The record names the account it created: deleting that account ends every
replay of it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from chainkeys.accounts.idempotency_store import Idempotency, IdempotencyRecord
from chainkeys.accounts.models import Created, CreateRequest
from chainkeys.accounts.repository import Accounts
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, Conflict
from chainkeys.store.sql import Tx
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.gate import opened
from chainkeys.vault.seal import Context

KEY_MAX = 255
SEALED = "sealed"  # the fingerprint column of records whose fingerprint is sealed inside


class IdempotencyConflict(Conflict):
    code = "idempotency_key_reused"
    message = "this Idempotency-Key was used with a different request"


class IdempotencyRace(Exception):
    """Another request with the same key committed first."""


class _Stored(msgspec.Struct):
    fingerprint: str
    created: Created


def check_key(key: str) -> str:
    if not 1 <= len(key) <= KEY_MAX or not all(33 <= ord(c) <= 126 for c in key):
        raise BadRequest(
            f"Idempotency-Key must be 1 to {KEY_MAX} visible ASCII characters",
            code="invalid_idempotency_key",
        )
    return key


def hashed_key(key: str) -> str:
    """Stored hashed: a copy of the database must not tell which key would replay."""
    return hashlib.sha256(check_key(key).encode()).hexdigest()


def fingerprint(family: str, req: CreateRequest) -> str:
    """Same family and same fields (however the JSON was spelled) → same fingerprint."""
    return hashlib.sha256(family.encode() + b"\x00" + msgspec.json.encode(req)).hexdigest()


def _context(tenant_id: str, key: str) -> Context:
    return Context(tenant_id, "-", key, purpose="idempotency")


async def replay(tx: Tx, barrier: Barrier, tenant_id: str, key: str, fp: str) -> Created | None:
    """The first response of this key, or None (no record, expired, or its account is gone)."""
    record = await Idempotency.get(tx, tenant_id, key)
    if record is None or record.expires_ms <= now_ms():
        return None
    plain = await barrier.open_async(record.response, record.key_id, _context(tenant_id, key))
    if record.fingerprint == SEALED:
        stored = msgspec.json.decode(plain, type=_Stored)
        first, created = stored.fingerprint, stored.created
    else:  # written before fingerprints were sealed (expires within the TTL)
        first, created = record.fingerprint, msgspec.json.decode(plain, type=Created)
    if first != fp:
        raise IdempotencyConflict()
    view = created.view
    if (
        await Accounts.view(tx, opened(barrier.integrity), tenant_id, view.family, view.name)
        is None
    ):
        return None  # the account was deleted since: its replay ended with it
    return Created(view, created.imported, created.private_key, replayed=True)


async def record(
    barrier: Barrier, tenant_id: str, key: str, fp: str, created: Created, ttl_ms: int
) -> IdempotencyRecord:
    """The sealed first response (sealed before the transaction that stores it)."""
    payload = msgspec.json.encode(_Stored(fp, created))
    sealed = await barrier.seal(payload, _context(tenant_id, key))
    view = created.view
    return IdempotencyRecord(
        SEALED, sealed.blob, sealed.key_id, now_ms() + ttl_ms, view.family, view.name
    )


async def remember(tx: Any, tenant_id: str, key: str, record: IdempotencyRecord) -> None:
    """Store the first response; IdempotencyRace if another request stored one first."""
    # An expired record of the same key is replaced, not replayed; so is one whose
    # account was deleted (records written before they named their account).
    await Idempotency.delete_expired(tx, tenant_id, key, now_ms())
    old = await Idempotency.get(tx, tenant_id, key)
    if old is not None and old.fingerprint != SEALED:
        await Idempotency.forget(tx, tenant_id, key)
    if not await Idempotency.insert(tx, tenant_id, key, record):
        raise IdempotencyRace()
