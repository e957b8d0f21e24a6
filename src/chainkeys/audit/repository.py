"""The audit log's SQL: append events, page them (statements prebuilt at import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    insert,
    select,
)

from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import (
    audit,
)

_u = audit.c
AUDIT_COLUMNS = (
    "tenant_id", "action", "family", "account_name", "request_id", "outcome", "created_ms",
    "actor_token_id", "client_request_id", "details",
)  # fmt: skip
_INSERT_AUDIT = Prepared(insert(audit), AUDIT_COLUMNS)
_AUDIT_COLS = (
    _u.id, _u.tenant_id, _u.action, _u.family, _u.account_name,
    _u.request_id, _u.outcome, _u.created_ms, _u.actor_token_id, _u.client_request_id,
    _u.details,
)  # fmt: skip


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
