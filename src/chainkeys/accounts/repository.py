"""Accounts and deleted (retained) accounts: their SQL, always within one tenant.

Statements are built once at import: constructing a SQLAlchemy statement per
call costs ~100 µs, executing a prebuilt one ~20 µs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
from sqlalchemy import (
    BigInteger,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError

from chainkeys.audit.repository import AuditEvent
from chainkeys.errors import AccountExists
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import ACCOUNTS, AUDIT_ROWS, DELETED_ACCOUNTS
from chainkeys.store.sql import Prepared, Tx, is_unique_violation
from chainkeys.store.tables import account_created, accounts, deleted_accounts, tenants
from chainkeys.vault.integrity import Integrity, failed


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


_a = accounts.c
_ACCOUNT_COLS = (
    _a.id,
    _a.tenant_id,
    _a.family,
    _a.name,
    _a.network,
    _a.address,
    _a.public_key,
    _a.details,
    _a.secret,
    _a.key_id,
    _a.created_ms,
    _a.mac,
)
# What a row's MAC is checked over (store/integrity.py ACCOUNTS), read with every row
# that is shown or used: a page reads them too.
_CHECKED = (*(_a[c] for c in ACCOUNTS.covered), _a.mac)
_KEY = and_(
    _a.tenant_id == bindparam("tenant_id"),
    _a.family == bindparam("family"),
    _a.name == bindparam("name"),
)
_INSERT_ACCOUNT = Prepared(insert(accounts).returning(_a.id), account_created.first_columns)
_GET_ACCOUNT = Prepared(select(*_ACCOUNT_COLS).where(_KEY))
_VIEW_ACCOUNT = Prepared(select(*_CHECKED).where(_KEY))
_DELETE_ACCOUNT = Prepared(delete(accounts).where(_KEY))
_d = deleted_accounts.c
_RETAINED_COLS = (
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
    "mac",
)
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
_PAGE_ROWS = select(_a.id, *_CHECKED).where(
    _a.tenant_id == bindparam("tenant_id"),
    _a.family == bindparam("family"),
    _a.id > bindparam("after"),
)
_PAGE = Prepared(_PAGE_ROWS.order_by(_a.id).limit(bindparam("limit")))
_PAGE_NETWORK = Prepared(
    select(_a.id, *_CHECKED)
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
_COUNTS = Prepared(
    select(_a.family, func.count())
    .where(_a.tenant_id == bindparam("tenant_id"))
    .group_by(_a.family)
)

# An account and its audit event in one statement: atomic on its own (store/joined.py).
_INSERT_ACCOUNT_AUDITED = account_created.prepared()


def checked(integrity: Integrity, row: Any, entry: Any = ACCOUNTS) -> Any:
    """`row` if its MAC holds (IntegrityFailure otherwise: logged, counted, never used)."""
    integrity.check(entry, row._mapping, f"the {row.family} account {row.name!r}")
    return row


def _row_to_account(row: Any) -> AccountRow:
    return AccountRow(
        id=row.id,
        tenant_id=row.tenant_id,
        family=row.family,
        name=row.name,
        network=row.network,
        address=row.address,
        public_key=row.public_key,
        details=msgspec.json.decode(row.details),
        secret=bytes(row.secret),
        key_id=row.key_id,
        created_ms=row.created_ms,
    )


class Accounts:
    """Accounts, always addressed within one tenant."""

    @staticmethod
    async def insert(tx: Tx, integrity: Integrity, row: AccountRow) -> int:
        """Insert (MACed) and return the new row's id; AccountExists when (tenant,
        family, name) is taken."""
        with _name_taken_is_409(row):
            result = await tx.execute(_INSERT_ACCOUNT, _account_params(integrity, row))
            return int(result.scalar_one())

    @staticmethod
    async def create_audited(
        db: Backend, integrity: Integrity, row: AccountRow, event: AuditEvent
    ) -> None:
        """`insert_audited` as a transaction of its own: where the engine writes both rows
        in one statement, it skips BEGIN and COMMIT (the hot path of a create)."""
        async with db.write(one_statement=True) as tx:
            await Accounts.insert_audited(tx, integrity, row, event)

    @staticmethod
    async def insert_audited(
        tx: Tx, integrity: Integrity, row: AccountRow, event: AuditEvent
    ) -> None:
        """Insert an account and the audit event of its creation, together, in one
        statement. AccountExists when (tenant, family, name) is taken."""
        audit = event.params()  # each text cut to its column
        with _name_taken_is_409(row):
            await tx.execute(
                _INSERT_ACCOUNT_AUDITED,
                {
                    **_account_params(integrity, row),
                    "audit_action": audit["action"],
                    "audit_request_id": audit["request_id"],
                    "audit_outcome": audit["outcome"],
                    "audit_ms": audit["created_ms"],
                    "audit_actor": audit["actor_token_id"],
                    "audit_client_request_id": audit["client_request_id"],
                    "audit_details": audit["details"],
                    "audit_mac": integrity.mac(AUDIT_ROWS, audit),
                },
            )

    @staticmethod
    async def get(
        tx: Tx, integrity: Integrity, tenant_id: str, family: str, name: str
    ) -> AccountRow | None:
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        row = (await tx.execute(_GET_ACCOUNT, params)).first()
        return None if row is None else _row_to_account(checked(integrity, row))

    @staticmethod
    async def view(tx: Tx, integrity: Integrity, tenant_id: str, family: str, name: str) -> Any:
        """The public columns of one account (no sealed key read or copied), or None."""
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        row = (await tx.execute(_VIEW_ACCOUNT, params)).first()
        return None if row is None else checked(integrity, row)

    @staticmethod
    async def page(
        tx: Tx,
        integrity: Integrity,
        tenant_id: str,
        family: str,
        after: int,
        limit: int,
        network: str | None = None,
        prefix: str | None = None,
    ) -> Sequence[ListedAccount]:
        """A page in creation order; with `prefix`, only names (addresses) that start
        with it, exactly (case and all: the same comparison on both engines, where LIKE
        and collations differ), read along the tenant's rows in id order."""
        params = {"tenant_id": tenant_id, "family": family, "after": after, "limit": limit}
        if prefix:
            stmt = _PAGE_ROWS.where(func.substr(_a.name, 1, len(prefix)) == prefix)
            if network is not None:
                stmt = stmt.where(_a.network == network)
            stmt = stmt.order_by(_a.id).limit(bindparam("limit"))
            rows = (await tx.execute(stmt, params)).all()
        elif network is None:
            rows = (await tx.execute(_PAGE, params)).all()
        else:
            rows = (await tx.execute(_PAGE_NETWORK, {**params, "network": network})).all()
        return [checked(integrity, r) for r in rows]

    @staticmethod
    async def of_wallet(
        tx: Tx, integrity: Integrity, tenant_id: str, wallet_id: str, after: int, limit: int
    ) -> Sequence[Any]:
        """A page of the accounts derived from one wallet, in creation order; each row's
        `wallet_id` must agree with its (MACed) details, or a writer could list any
        account of the tenant as the wallet's."""
        stmt = (
            select(_a.id, *_CHECKED)
            .where(_a.tenant_id == tenant_id, _a.wallet_id == wallet_id, _a.id > after)
            .order_by(_a.id)
            .limit(limit)
        )
        rows = [checked(integrity, r) for r in (await tx.execute(stmt)).all()]
        for r in rows:
            if msgspec.json.decode(r.details).get("wallet") != wallet_id:
                raise failed(ACCOUNTS, f"the {r.family} account {r.name!r} (its wallet_id)")
        return rows

    @staticmethod
    async def holding(
        tx: Tx,
        integrity: Integrity,
        tenant_id: str,
        family: str,
        network: str,
        public_keys: Sequence[str],
    ) -> Sequence[Any]:
        """(name, public_key, …) of the tenant's accounts on this network with one of these
        keys (a multisig's members held here), read along the tenant's family index."""
        stmt = (
            select(*_CHECKED)
            .where(
                _a.tenant_id == tenant_id,
                _a.family == family,
                _a.network == network,
                _a.public_key.in_(list(public_keys)),
            )
            .order_by(_a.id)
        )
        return [checked(integrity, r) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def counts(tx: Tx, tenant_id: str) -> dict[str, int]:
        """Accounts per family (index-only on both engines)."""
        rows = (await tx.execute(_COUNTS, {"tenant_id": tenant_id})).all()
        return {str(r[0]): int(r[1]) for r in rows}

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


@contextlib.contextmanager
def _name_taken_is_409(row: AccountRow) -> Iterator[None]:
    """A unique violation on insert: (tenant, family, name) is taken."""
    try:
        yield
    except IntegrityError as exc:
        if is_unique_violation(exc):
            raise AccountExists(
                f"an account of {row.family} with this name already exists in your tenant"
            ) from None
        raise


def _account_params(integrity: Integrity, row: AccountRow) -> dict[str, Any]:
    params = {
        "tenant_id": row.tenant_id,
        "family": row.family,
        "name": row.name,
        "network": row.network,
        "address": row.address,
        "public_key": row.public_key,
        "details": msgspec.json.encode(row.details).decode(),
        "secret": row.secret,
        "key_id": row.key_id,
        "created_ms": row.created_ms,
        "wallet_id": _wallet_of(row),
    }
    params["mac"] = integrity.mac(ACCOUNTS, params)
    return params


def _wallet_of(row: AccountRow) -> str | None:
    wallet = row.details.get("wallet")
    return wallet if isinstance(wallet, str) and wallet else None


@dataclass(frozen=True, slots=True)
class DeletedRow:
    id: int
    account: AccountRow
    deleted_ms: int
    tenant: str | None = None  # the tenant's name, where it was read with it (`recent`)


def _row_to_deleted(row: Any) -> DeletedRow:
    return DeletedRow(
        row.id, _row_to_account(row), row.deleted_ms, getattr(row, "tenant_name", None)
    )


class DeletedAccounts:
    """Sealed accounts kept after a delete, until the retention period ends."""

    @staticmethod
    async def latest(
        tx: Tx, integrity: Integrity, tenant_id: str, family: str, name: str
    ) -> DeletedRow | None:
        """The newest retained copy, checked: a restore never revives a forged row."""
        params = {"tenant_id": tenant_id, "family": family, "name": name}
        row = (await tx.execute(_LATEST_DELETED, params)).first()
        return None if row is None else _row_to_deleted(checked(integrity, row, DELETED_ACCOUNTS))

    @staticmethod
    async def forget(tx: Tx, row_id: int) -> None:
        await tx.execute(_FORGET_DELETED, {"row_id": row_id})

    @staticmethod
    async def purge(tx: Tx, before_ms: int) -> int:
        return int((await tx.execute(_PURGE_DELETED, {"before": before_ms})).rowcount)

    @staticmethod
    async def recent(tx: Tx, tenant_id: str | None, limit: int) -> list[DeletedRow]:
        """The newest first, each with its tenant's name (what an operator types)."""
        stmt = (
            select(*_DELETED_COLS, tenants.c.name.label("tenant_name"))
            .outerjoin(tenants, tenants.c.id == _d.tenant_id)
            .order_by(_d.deleted_ms.desc())
            .limit(limit)
        )
        if tenant_id is not None:
            stmt = stmt.where(_d.tenant_id == tenant_id)
        return [_row_to_deleted(r) for r in (await tx.execute(stmt)).all()]
