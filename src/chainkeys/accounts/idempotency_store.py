"""Idempotency records: the sealed first response of a create, by tenant and key."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import (
    bindparam,
    delete,
    insert,
    select,
    update,
)

from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import (
    idempotency,
)

_i = idempotency.c
_GET_IDEM = Prepared(
    select(_i.fingerprint, _i.response, _i.key_id, _i.expires_ms, _i.family, _i.account_name).where(
        _i.tenant_id == bindparam("tenant_id"), _i.key == bindparam("key")
    )
)
_INSERT_IDEM = Prepared(
    insert(idempotency),
    (
        "tenant_id",
        "key",
        "fingerprint",
        "response",
        "key_id",
        "expires_ms",
        "family",
        "account_name",
    ),
)
_FORGET_IDEM_OF = Prepared(
    delete(idempotency).where(
        _i.tenant_id == bindparam("tenant_id"),
        _i.family == bindparam("family"),
        _i.account_name == bindparam("name"),
    )
)
_DELETE_EXPIRED_IDEM = Prepared(
    delete(idempotency).where(
        _i.tenant_id == bindparam("tenant_id"),
        _i.key == bindparam("key"),
        _i.expires_ms <= bindparam("now"),
    )
)
_FORGET_IDEM = Prepared(
    delete(idempotency).where(_i.tenant_id == bindparam("tenant_id"), _i.key == bindparam("key"))
)
_PURGE_IDEM = Prepared(delete(idempotency).where(_i.expires_ms <= bindparam("now")))
_IDEM_PAGE = Prepared(
    select(_i.tenant_id, _i.key, _i.response, _i.key_id)
    .where(_i.key_id != bindparam("current"))
    .limit(bindparam("limit"))
)
_RESEAL_IDEM = Prepared(
    update(idempotency)
    .where(
        _i.tenant_id == bindparam("row_tenant"),
        _i.key == bindparam("row_key"),
        _i.key_id == bindparam("old_key_id"),
    )
    .values(response=bindparam("new_value"), key_id=bindparam("new_key_id"))
)


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    fingerprint: str
    response: bytes = field(repr=False)  # sealed
    key_id: str
    expires_ms: int
    family: str | None = None  # the account the first response created
    account_name: str | None = None


class Idempotency:
    """Stored first responses of POSTs that carried an Idempotency-Key."""

    @staticmethod
    async def get(tx: Tx, tenant_id: str, key: str) -> IdempotencyRecord | None:
        row = (await tx.execute(_GET_IDEM, {"tenant_id": tenant_id, "key": key})).first()
        if row is None:
            return None
        return IdempotencyRecord(row[0], bytes(row[1]), row[2], row[3], row[4], row[5])

    @staticmethod
    async def insert(tx: Tx, tenant_id: str, key: str, record: IdempotencyRecord) -> bool:
        """False when the key is already taken (the caller then replays or refuses)."""
        params = {
            "tenant_id": tenant_id,
            "key": key,
            "fingerprint": record.fingerprint,
            "response": record.response,
            "key_id": record.key_id,
            "expires_ms": record.expires_ms,
            "family": record.family,
            "account_name": record.account_name,
        }
        return await insert_new(tx, _INSERT_IDEM, params)

    @staticmethod
    async def forget_account(tx: Tx, tenant_id: str, family: str, name: str) -> int:
        """Drop every record whose first response created this account."""
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        return int((await tx.execute(_FORGET_IDEM_OF, params)).rowcount)

    @staticmethod
    async def forget(tx: Tx, tenant_id: str, key: str) -> None:
        await tx.execute(_FORGET_IDEM, {"tenant_id": tenant_id, "key": key})

    @staticmethod
    async def delete_expired(tx: Tx, tenant_id: str, key: str, now_ms: int) -> None:
        params = {"tenant_id": tenant_id, "key": key, "now": now_ms}
        await tx.execute(_DELETE_EXPIRED_IDEM, params)

    @staticmethod
    async def purge(tx: Tx, now_ms: int) -> int:
        return int((await tx.execute(_PURGE_IDEM, {"now": now_ms})).rowcount)

    @staticmethod
    async def not_sealed_by(tx: Tx, current: str, limit: int) -> list[tuple[str, str, bytes, str]]:
        rows = (await tx.execute(_IDEM_PAGE, {"current": current, "limit": limit})).all()
        return [(r[0], r[1], bytes(r[2]), r[3]) for r in rows]

    @staticmethod
    async def reseal(
        tx: Tx, tenant_id: str, key: str, old_key_id: str, value: bytes, key_id: str
    ) -> bool:
        params = {
            "row_tenant": tenant_id,
            "row_key": key,
            "old_key_id": old_key_id,
            "new_value": value,
            "new_key_id": key_id,
        }
        return bool((await tx.execute(_RESEAL_IDEM, params)).rowcount)
