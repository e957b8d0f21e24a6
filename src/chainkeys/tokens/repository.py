"""Tenants and tokens: their SQL (tokens are stored only as hashes)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    bindparam,
    func,
    insert,
    select,
    update,
)

from chainkeys.store.integrity import TENANTS
from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import (
    tenants,
    tokens,
)
from chainkeys.vault.integrity import Integrity


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
    group: str | None = None  # the approver group of an `approve` token
    token_hash: str = ""
    mac: str | None = None  # store/integrity.py

    def covered(self) -> dict[str, object]:
        """The row by column name, as its MAC covers it (store/integrity.py TOKENS)."""
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "label": self.label,
            "token_hash": self.token_hash,
            "created_ms": self.created_ms,
            "revoked_ms": self.revoked_ms,
            "scopes": self.scopes,
            "expires_ms": self.expires_ms,
            "families": self.families,
            "approver_group": self.group,
            "mac": self.mac,
        }


@dataclass(frozen=True, slots=True)
class LiveToken:
    tenant_id: str
    tenant: str
    token_id: str
    scopes: str
    expires_ms: int | None
    families: str | None
    label: str = ""
    group: str | None = None
    created_ms: int = 0
    token_hash: str = ""
    mac: str | None = None
    tenant_created_ms: int = 0
    tenant_mac: str | None = None

    def tenant_row(self) -> dict[str, object]:
        """The tenant's row, as its MAC covers it (store/integrity.py TENANTS)."""
        return {
            "id": self.tenant_id,
            "name": self.tenant,
            "created_ms": self.tenant_created_ms,
            "mac": self.tenant_mac,
        }

    def covered(self) -> dict[str, object]:
        """As TokenRow.covered (a live token is not revoked)."""
        return {
            "id": self.token_id,
            "tenant_id": self.tenant_id,
            "label": self.label,
            "token_hash": self.token_hash,
            "created_ms": self.created_ms,
            "revoked_ms": None,
            "scopes": self.scopes,
            "expires_ms": self.expires_ms,
            "families": self.families,
            "approver_group": self.group,
            "mac": self.mac,
        }


_t, _k = tenants.c, tokens.c
_TENANT_BY_TOKEN = Prepared(
    select(
        _k.tenant_id,
        _t.name,
        _k.id,
        _k.scopes,
        _k.expires_ms,
        _k.families,
        _k.label,
        _k.approver_group,
        _k.created_ms,
        _k.token_hash,
        _k.mac,
        _t.created_ms,
        _t.mac,
    )
    .join_from(tokens, tenants, _k.tenant_id == _t.id)
    .where(_k.token_hash == bindparam("token_hash"), _k.revoked_ms.is_(None))
)
_TENANT_NAMES = Prepared(select(_t.id, _t.name))
_TENANT_BY_NAME = Prepared(
    select(_t.id, _t.name, _t.created_ms, _t.mac).where(_t.name == bindparam("name"))
)
_INSERT_TENANT = Prepared(insert(tenants), ("id", "name", "created_ms", "mac"))
_INSERT_TOKEN = Prepared(
    insert(tokens),
    (
        "id",
        "tenant_id",
        "label",
        "token_hash",
        "created_ms",
        "scopes",
        "expires_ms",
        "families",
        "approver_group",
        "mac",
    ),
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
        _k.approver_group,
        _k.token_hash,
        _k.mac,
    )
    .join_from(tokens, tenants, _k.tenant_id == _t.id)
    .order_by(_k.created_ms, _k.id)
)
_REVOKE_TOKEN = Prepared(
    update(tokens)
    .where(_k.id == bindparam("token_id"), _k.revoked_ms.is_(None))
    .values(revoked_ms=bindparam("now"), mac=bindparam("mac"))
    .returning(_k.tenant_id)
)
_COUNT_TOKENS = Prepared(select(func.count()).select_from(tokens))


class Tenants:
    """Tenants and their tokens (tokens are stored only as hashes)."""

    @staticmethod
    async def by_token_hash(tx: Tx, token_hash: str) -> LiveToken | None:
        """The tenant and limits of an unrevoked token (its expiry is the caller's to check)."""
        row = (await tx.execute(_TENANT_BY_TOKEN, {"token_hash": token_hash})).first()
        return None if row is None else LiveToken(*row)

    @staticmethod
    async def id_by_name(tx: Tx, name: str, integrity: Integrity | None) -> str | None:
        """The id of the tenant named `name`, its row authenticated (IntegrityFailure:
        a name a writer moved to another tenant's row is never followed). Without the key
        (a command that only lists), unchecked: what it shows is named unverified."""
        row = (await tx.execute(_TENANT_BY_NAME, {"name": name})).first()
        if row is None:
            return None
        if integrity is not None:
            integrity.check(TENANTS, row._mapping, f"the tenant {name[:64]!r}")
        return str(row[0])

    @staticmethod
    async def insert(tx: Tx, row: dict[str, object]) -> None:
        await tx.execute(_INSERT_TENANT, row)

    @staticmethod
    async def live_members(tx: Tx, tenant_id: str) -> list[TokenRow]:
        """The tenant's unrevoked tokens (the `tokens` set its head pins)."""
        stmt = _LIST_TOKENS.where(_k.tenant_id == tenant_id, _k.revoked_ms.is_(None))
        return [TokenRow(*r) for r in (await tx.execute(stmt)).all()]

    @staticmethod
    async def insert_token(tx: Tx, row: TokenRow, token_hash: str, mac: str | None) -> None:
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
                "approver_group": row.group,
                "mac": mac,
            },
        )

    @staticmethod
    async def token(tx: Tx, token_id: str) -> TokenRow | None:
        row = (await tx.execute(_LIST_TOKENS.where(_k.id == token_id))).first()
        return None if row is None else TokenRow(*row)

    @staticmethod
    async def list_tokens(tx: Tx, tenant: str | None) -> list[TokenRow]:
        stmt = _LIST_TOKENS if tenant is None else _LIST_TOKENS.where(_t.name == tenant)
        rows = (await tx.execute(stmt)).all()
        return [TokenRow(*r) for r in rows]

    @staticmethod
    async def revoke_token(tx: Tx, token_id: str, now_ms: int, mac: str | None) -> str | None:
        """The tenant id of the token revoked (its row's new MAC `mac`), None when no live
        token has that id."""
        params = {"token_id": token_id, "now": now_ms, "mac": mac}
        row = (await tx.execute(_REVOKE_TOKEN, params)).first()
        return None if row is None else str(row[0])

    @staticmethod
    async def names(tx: Tx) -> dict[str, str]:
        """Tenant id -> name, for showing people names instead of ids."""
        return {r[0]: r[1] for r in (await tx.execute(_TENANT_NAMES)).all()}

    @staticmethod
    async def count_tokens(tx: Tx) -> int:
        return int((await tx.execute(_COUNT_TOKENS)).scalar_one())
