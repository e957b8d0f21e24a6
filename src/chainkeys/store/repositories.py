"""Every query chainkeys runs, as prebuilt statements.

Statements are built once at import: constructing a SQLAlchemy statement per
call costs ~100 µs, executing a prebuilt one ~20 µs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from sqlalchemy import (
    BigInteger,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    union,
    update,
)
from sqlalchemy.exc import IntegrityError

from chainkeys.errors import AccountExists
from chainkeys.store.sql import Prepared, Tx, is_unique_violation
from chainkeys.store.tables import (
    accounts,
    audit,
    deleted_accounts,
    idempotency,
    meta,
    tenants,
    tokens,
)


@dataclass(frozen=True, slots=True)
class AccountRow:
    tenant_id: str
    family: str
    name: str
    network: str
    address: str
    public_key: str
    details: dict[str, Any]
    secret: bytes = field(repr=False)
    key_id: str
    created_ms: int
    id: int | None = None


class ListedAccount(Protocol):
    """A row of a page, read by name: no per-row objects are built for a list."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def public_key(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TokenRow:
    id: str
    tenant_id: str
    tenant: str
    label: str
    created_ms: int
    revoked_ms: int | None
    scopes: str = "create,delete,read,sign"
    expires_ms: int | None = None
    families: str | None = None


@dataclass(frozen=True, slots=True)
class LiveToken:
    tenant_id: str
    tenant: str
    token_id: str
    scopes: str
    expires_ms: int | None
    families: str | None


_a = accounts.c
_ACCOUNT_COLS = (
    _a.id, _a.tenant_id, _a.family, _a.name, _a.network, _a.address,
    _a.public_key, _a.details, _a.secret, _a.key_id, _a.created_ms,
)  # fmt: skip
_KEY = and_(
    _a.tenant_id == bindparam("tenant_id"),
    _a.family == bindparam("family"),
    _a.name == bindparam("name"),
)
_INSERT_ACCOUNT = Prepared(
    insert(accounts),
    (
        "tenant_id",
        "family",
        "name",
        "network",
        "address",
        "public_key",
        "details",
        "secret",
        "key_id",
        "created_ms",
    ),
)
_GET_ACCOUNT = Prepared(select(*_ACCOUNT_COLS).where(_KEY))
_VIEW_ACCOUNT = Prepared(
    select(
        _a.family, _a.network, _a.name, _a.address, _a.public_key, _a.details, _a.created_ms
    ).where(_KEY)
)
_DELETE_ACCOUNT = Prepared(delete(accounts).where(_KEY))
_d = deleted_accounts.c
_RETAINED_COLS = (
    "tenant_id", "family", "name", "network", "address", "public_key",
    "details", "secret", "key_id", "created_ms",
)  # fmt: skip
_RETAIN_ACCOUNT = Prepared(
    insert(deleted_accounts).from_select(
        [*_RETAINED_COLS, "deleted_ms"],
        select(*(_a[c] for c in _RETAINED_COLS), bindparam("now", type_=BigInteger)).where(_KEY),
    )
)
_DELETED_COLS = (_d.id, *(_d[c] for c in _RETAINED_COLS), _d.deleted_ms)
_LATEST_DELETED = Prepared(
    select(*_DELETED_COLS)
    .where(
        _d.tenant_id == bindparam("tenant_id"),
        _d.family == bindparam("family"),
        _d.name == bindparam("name"),
    )
    .order_by(_d.deleted_ms.desc(), _d.id.desc())
    .limit(1)
)
_FORGET_DELETED = Prepared(delete(deleted_accounts).where(_d.id == bindparam("row_id")))
_PURGE_DELETED = Prepared(delete(deleted_accounts).where(_d.deleted_ms <= bindparam("before")))
_PAGE = Prepared(
    select(_a.id, _a.name, _a.address, _a.public_key)
    .where(
        _a.tenant_id == bindparam("tenant_id"),
        _a.family == bindparam("family"),
        _a.id > bindparam("after"),
    )
    .order_by(_a.id)
    .limit(bindparam("limit"))
)
_PAGE_NETWORK = Prepared(
    select(_a.id, _a.name, _a.address, _a.public_key)
    .where(
        _a.tenant_id == bindparam("tenant_id"),
        _a.family == bindparam("family"),
        _a.network == bindparam("network"),
        _a.id > bindparam("after"),
    )
    .order_by(_a.id)
    .limit(bindparam("limit"))
)
_COUNT_SEALED = Prepared(select(func.count()).select_from(accounts))

_t, _k = tenants.c, tokens.c
_TENANT_BY_TOKEN = Prepared(
    select(_k.tenant_id, _t.name, _k.id, _k.scopes, _k.expires_ms, _k.families)
    .join_from(tokens, tenants, _k.tenant_id == _t.id)
    .where(_k.token_hash == bindparam("token_hash"), _k.revoked_ms.is_(None))
)
_TENANT_NAMES = Prepared(select(_t.id, _t.name))
_TENANT_BY_NAME = Prepared(select(_t.id).where(_t.name == bindparam("name")))
_INSERT_TENANT = Prepared(insert(tenants), ("id", "name", "created_ms"))
_INSERT_TOKEN = Prepared(
    insert(tokens),
    ("id", "tenant_id", "label", "token_hash", "created_ms", "scopes", "expires_ms", "families"),
)
_LIST_TOKENS = (
    select(
        _k.id,
        _k.tenant_id,
        _t.name,
        _k.label,
        _k.created_ms,
        _k.revoked_ms,
        _k.scopes,
        _k.expires_ms,
        _k.families,
    )
    .join_from(tokens, tenants, _k.tenant_id == _t.id)
    .order_by(_k.created_ms, _k.id)
)
_REVOKE_TOKEN = Prepared(
    update(tokens)
    .where(_k.id == bindparam("token_id"), _k.revoked_ms.is_(None))
    .values(revoked_ms=bindparam("now"))
    .returning(_k.tenant_id)
)
_COUNT_TOKENS = Prepared(select(func.count()).select_from(tokens))

_PING = Prepared(select(literal(1)))
_META_ALL = select(meta.c.key, meta.c.value, meta.c.key_id)
_RESEAL_META = Prepared(
    update(meta)
    .where(meta.c.key == bindparam("row_key"), meta.c.key_id == bindparam("old_key_id"))
    .values(value=bindparam("new_value"), key_id=bindparam("new_key_id"))
)

_u = audit.c
_AUDIT_INSERTED = (
    "tenant_id", "action", "family", "account_name", "request_id", "outcome", "created_ms",
    "actor_token_id", "client_request_id", "details",
)  # fmt: skip
_INSERT_AUDIT = Prepared(insert(audit), _AUDIT_INSERTED)
# PostgreSQL: an account and its audit event in one statement (a data-modifying CTE is
# atomic on its own): one round trip where BEGIN, two INSERTs and COMMIT took four.
_ACCOUNT_PARAMS = _INSERT_ACCOUNT.columns
_CREATED = (
    insert(accounts)
    .values({c: bindparam(c, type_=accounts.c[c].type) for c in _ACCOUNT_PARAMS})
    .returning(accounts.c.id)
    .cte("created")
)
_INSERT_ACCOUNT_AUDITED = Prepared(
    insert(audit).from_select(
        list(_AUDIT_INSERTED),
        select(
            bindparam("tenant_id", type_=audit.c.tenant_id.type),
            bindparam("audit_action", type_=audit.c.action.type),
            bindparam("family", type_=audit.c.family.type),
            bindparam("name", type_=audit.c.account_name.type),
            bindparam("audit_request_id", type_=audit.c.request_id.type),
            bindparam("audit_outcome", type_=audit.c.outcome.type),
            bindparam("audit_ms", type_=audit.c.created_ms.type),
            bindparam("audit_actor", type_=audit.c.actor_token_id.type),
            bindparam("audit_client_request_id", type_=audit.c.client_request_id.type),
            bindparam("audit_details", type_=audit.c.details.type),
        ).select_from(_CREATED),
    )
)
_AUDIT_COLS = (
    _u.id, _u.tenant_id, _u.action, _u.family, _u.account_name,
    _u.request_id, _u.outcome, _u.created_ms, _u.actor_token_id, _u.client_request_id,
    _u.details,
)  # fmt: skip

_i = idempotency.c
_GET_IDEM = Prepared(
    select(_i.fingerprint, _i.response, _i.key_id, _i.expires_ms, _i.family, _i.account_name).where(
        _i.tenant_id == bindparam("tenant_id"), _i.key == bindparam("key")
    )
)
_INSERT_IDEM = Prepared(
    insert(idempotency),
    ("tenant_id", "key", "fingerprint", "response", "key_id", "expires_ms", "family",
     "account_name"),
)  # fmt: skip
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
_KEY_IDS = union(
    select(_a.key_id).distinct(),
    select(_d.key_id).distinct(),
    select(meta.c.key_id).where(meta.c.key_id.is_not(None)).distinct(),
    select(_i.key_id).distinct(),
)
_GET_META = Prepared(select(meta.c.value, meta.c.key_id).where(meta.c.key == bindparam("key")))
_INSERT_META = Prepared(insert(meta), ("key", "value", "key_id"))


def _row_to_account(row: Any) -> AccountRow:
    return AccountRow(
        id=row.id,
        tenant_id=row.tenant_id,
        family=row.family,
        name=row.name,
        network=row.network,
        address=row.address,
        public_key=row.public_key,
        details=orjson.loads(row.details),
        secret=bytes(row.secret),
        key_id=row.key_id,
        created_ms=row.created_ms,
    )


class SealedRows:
    """Rotation's view of a table of sealed accounts (live or retained after delete)."""

    def __init__(self, table: Table) -> None:
        c = table.c
        self._page = Prepared(
            select(table)
            .where(c.id > bindparam("after"), c.key_id != bindparam("current"))
            .order_by(c.id)
            .limit(bindparam("limit"))
        )
        self._reseal = Prepared(
            update(table)
            .where(c.id == bindparam("row_id"), c.key_id == bindparam("old_key_id"))
            .values(secret=bindparam("new_secret"), key_id=bindparam("new_key_id"))
        )

    async def not_sealed_by(self, tx: Tx, current: str, after: int, limit: int) -> list[AccountRow]:
        """Rows sealed by another key than `current`, in id order."""
        params = {"current": current, "after": after, "limit": limit}
        return [_row_to_account(r) for r in (await tx.execute(self._page, params)).all()]

    async def reseal(
        self, tx: Tx, row_id: int, old_key_id: str, secret: bytes, key_id: str
    ) -> bool:
        params = {
            "row_id": row_id,
            "old_key_id": old_key_id,
            "new_secret": secret,
            "new_key_id": key_id,
        }
        return bool((await tx.execute(self._reseal, params)).rowcount)


SEALED_TABLES = (SealedRows(accounts), SealedRows(deleted_accounts))


class Accounts:
    """Accounts, always addressed within one tenant."""

    @staticmethod
    async def insert(tx: Tx, row: AccountRow) -> int:
        """Insert; AccountExists when (tenant, family, name) is taken."""
        with _name_taken_is_409(row):
            result = await tx.execute(_INSERT_ACCOUNT, _account_params(row))
        pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    @staticmethod
    async def insert_audited(tx: Tx, row: AccountRow, event: AuditEvent) -> None:
        """Insert an account and the audit event of its creation, together: one
        statement on PostgreSQL (see Database.write's one_statement), two elsewhere.
        AccountExists when (tenant, family, name) is taken."""
        if tx.dialect != "postgresql":
            await Accounts.insert(tx, row)
            await Audit.insert(tx, event)
            return
        with _name_taken_is_409(row):
            await tx.execute(
                _INSERT_ACCOUNT_AUDITED,
                {
                    **_account_params(row),
                    "audit_action": event.action,
                    "audit_request_id": event.request_id,
                    "audit_outcome": event.outcome,
                    "audit_ms": event.created_ms,
                    "audit_actor": event.actor_token_id,
                    "audit_client_request_id": event.client_request_id,
                    "audit_details": event.details,
                },
            )

    @staticmethod
    async def get(tx: Tx, tenant_id: str, family: str, name: str) -> AccountRow | None:
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        row = (await tx.execute(_GET_ACCOUNT, params)).first()
        return None if row is None else _row_to_account(row)

    @staticmethod
    async def view(tx: Tx, tenant_id: str, family: str, name: str) -> Any:
        """The public columns of one account (no sealed key read or copied), or None."""
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        return (await tx.execute(_VIEW_ACCOUNT, params)).first()

    @staticmethod
    async def page(
        tx: Tx, tenant_id: str, family: str, after: int, limit: int, network: str | None = None
    ) -> Sequence[ListedAccount]:
        params = {"tenant_id": tenant_id, "family": family, "after": after, "limit": limit}
        if network is None:
            return (await tx.execute(_PAGE, params)).all()
        return (await tx.execute(_PAGE_NETWORK, {**params, "network": network})).all()

    @staticmethod
    async def delete(
        tx: Tx, tenant_id: str, family: str, name: str, retain_at_ms: int | None
    ) -> bool:
        """Delete; with `retain_at_ms`, keep the sealed row in deleted_accounts first."""
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        if retain_at_ms is not None:
            await tx.execute(_RETAIN_ACCOUNT, {**params, "now": retain_at_ms})
        result = await tx.execute(_DELETE_ACCOUNT, params)
        return bool(result.rowcount)

    @staticmethod
    async def count(tx: Tx) -> int:
        return int((await tx.execute(_COUNT_SEALED)).scalar_one())


class Tenants:
    """Tenants and their tokens (tokens are stored only as hashes)."""

    @staticmethod
    async def by_token_hash(tx: Tx, token_hash: str) -> LiveToken | None:
        """The tenant and limits of an unrevoked token (its expiry is the caller's to check)."""
        row = (await tx.execute(_TENANT_BY_TOKEN, {"token_hash": token_hash})).first()
        return None if row is None else LiveToken(*row)

    @staticmethod
    async def id_by_name(tx: Tx, name: str) -> str | None:
        row = (await tx.execute(_TENANT_BY_NAME, {"name": name})).first()
        return None if row is None else str(row[0])

    @staticmethod
    async def insert(tx: Tx, tenant_id: str, name: str, now_ms: int) -> None:
        await tx.execute(_INSERT_TENANT, {"id": tenant_id, "name": name, "created_ms": now_ms})

    @staticmethod
    async def insert_token(tx: Tx, row: TokenRow, token_hash: str) -> None:
        await tx.execute(
            _INSERT_TOKEN,
            {
                "id": row.id,
                "tenant_id": row.tenant_id,
                "label": row.label,
                "token_hash": token_hash,
                "created_ms": row.created_ms,
                "scopes": row.scopes,
                "expires_ms": row.expires_ms,
                "families": row.families,
            },
        )

    @staticmethod
    async def list_tokens(tx: Tx, tenant: str | None) -> list[TokenRow]:
        stmt = _LIST_TOKENS if tenant is None else _LIST_TOKENS.where(_t.name == tenant)
        rows = (await tx.execute(stmt)).all()
        return [TokenRow(*r) for r in rows]

    @staticmethod
    async def revoke_token(tx: Tx, token_id: str, now_ms: int) -> str | None:
        """The tenant id of the token revoked, None when no live token has that id."""
        row = (await tx.execute(_REVOKE_TOKEN, {"token_id": token_id, "now": now_ms})).first()
        return None if row is None else str(row[0])

    @staticmethod
    async def names(tx: Tx) -> dict[str, str]:
        """Tenant id -> name, for showing people names instead of ids."""
        return {r[0]: r[1] for r in (await tx.execute(_TENANT_NAMES)).all()}

    @staticmethod
    async def count_tokens(tx: Tx) -> int:
        return int((await tx.execute(_COUNT_TOKENS)).scalar_one())


class Meta:
    """Small service-wide records (the master-key check value)."""

    @staticmethod
    async def all(tx: Tx) -> list[tuple[str, bytes, str | None]]:
        return [(r[0], bytes(r[1]), r[2]) for r in (await tx.execute(_META_ALL)).all()]

    @staticmethod
    async def reseal(tx: Tx, key: str, old_key_id: str, value: bytes, key_id: str) -> bool:
        params = {
            "row_key": key,
            "old_key_id": old_key_id,
            "new_value": value,
            "new_key_id": key_id,
        }
        return bool((await tx.execute(_RESEAL_META, params)).rowcount)

    @staticmethod
    async def key_ids(tx: Tx) -> set[str]:
        """Every master-key id that sealed something in this store."""
        return {r[0] for r in (await tx.execute(_KEY_IDS)).all()}

    @staticmethod
    async def get(tx: Tx, key: str) -> tuple[bytes, str | None] | None:
        row = (await tx.execute(_GET_META, {"key": key})).first()
        return None if row is None else (bytes(row[0]), row[1])

    @staticmethod
    async def insert(tx: Tx, key: str, value: bytes, key_id: str | None) -> None:
        await tx.execute(_INSERT_META, {"key": key, "value": value, "key_id": key_id})

    @staticmethod
    async def ping(tx: Tx) -> None:
        await tx.execute(_PING)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    tenant_id: str | None
    action: str
    outcome: str
    created_ms: int
    family: str | None = None
    account_name: str | None = None
    request_id: str | None = None
    actor_token_id: str | None = None
    client_request_id: str | None = None
    details: str | None = None  # JSON
    id: int | None = None

    def params(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "action": self.action,
            "family": self.family,
            "account_name": self.account_name,
            "request_id": self.request_id,
            "outcome": self.outcome,
            "created_ms": self.created_ms,
            "actor_token_id": self.actor_token_id,
            "client_request_id": self.client_request_id,
            "details": self.details,
        }


@contextlib.contextmanager
def _name_taken_is_409(row: AccountRow) -> Iterator[None]:
    """A unique violation on insert: (tenant, family, name) is taken."""
    try:
        yield
    except IntegrityError as exc:
        if is_unique_violation(exc):
            raise AccountExists(
                f"a {row.family} account with this name already exists in your tenant"
            ) from None
        raise


def _account_params(row: AccountRow) -> dict[str, Any]:
    return {
        "tenant_id": row.tenant_id,
        "family": row.family,
        "name": row.name,
        "network": row.network,
        "address": row.address,
        "public_key": row.public_key,
        "details": orjson.dumps(row.details).decode(),
        "secret": row.secret,
        "key_id": row.key_id,
        "created_ms": row.created_ms,
    }


class Audit:
    """Append-only record of what was done; never holds a secret."""

    @staticmethod
    async def insert(tx: Tx, event: AuditEvent) -> None:
        await tx.execute(_INSERT_AUDIT, event.params())

    @staticmethod
    async def page(
        tx: Tx, tenant_id: str | None, since_ms: int, after: int, limit: int
    ) -> list[AuditEvent]:
        stmt = select(*_AUDIT_COLS).where(_u.id > after, _u.created_ms >= since_ms)
        if tenant_id is not None:
            stmt = stmt.where(_u.tenant_id == tenant_id)
        rows = (await tx.execute(stmt.order_by(_u.id).limit(limit))).all()
        return [AuditEvent(**r._mapping) for r in rows]


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
        try:
            await tx.execute(
                _INSERT_IDEM,
                {
                    "tenant_id": tenant_id,
                    "key": key,
                    "fingerprint": record.fingerprint,
                    "response": record.response,
                    "key_id": record.key_id,
                    "expires_ms": record.expires_ms,
                    "family": record.family,
                    "account_name": record.account_name,
                },
            )
        except IntegrityError as exc:
            if is_unique_violation(exc):
                return False
            raise
        return True

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


@dataclass(frozen=True, slots=True)
class DeletedRow:
    id: int
    account: AccountRow
    deleted_ms: int


def _row_to_deleted(row: Any) -> DeletedRow:
    return DeletedRow(row.id, _row_to_account(row), row.deleted_ms)


class DeletedAccounts:
    """Sealed accounts kept after a delete, until the retention period ends."""

    @staticmethod
    async def latest(tx: Tx, tenant_id: str, family: str, name: str) -> DeletedRow | None:
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        row = (await tx.execute(_LATEST_DELETED, params)).first()
        return None if row is None else _row_to_deleted(row)

    @staticmethod
    async def forget(tx: Tx, row_id: int) -> None:
        await tx.execute(_FORGET_DELETED, {"row_id": row_id})

    @staticmethod
    async def purge(tx: Tx, before_ms: int) -> int:
        return int((await tx.execute(_PURGE_DELETED, {"before": before_ms})).rowcount)

    @staticmethod
    async def recent(tx: Tx, tenant_id: str | None, limit: int) -> list[DeletedRow]:
        stmt = select(*_DELETED_COLS).order_by(_d.deleted_ms.desc()).limit(limit)
        if tenant_id is not None:
            stmt = stmt.where(_d.tenant_id == tenant_id)
        return [_row_to_deleted(r) for r in (await tx.execute(stmt)).all()]
