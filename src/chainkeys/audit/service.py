"""Audit events: built here for every domain, read back per tenant."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol

import msgspec

from chainkeys import logs, paging
from chainkeys.audit.repository import Audit, AuditEvent, AuditQuery
from chainkeys.audit.shipping import AuditDevices
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import AuditUnavailable, ChainkeysError
from chainkeys.store.backend import Backend
from chainkeys.vault.derive import Cursors


class Actor(Protocol):
    @property
    def tenant_id(self) -> str: ...

    @property
    def token_id(self) -> str: ...


def audit_event(
    actor: Actor | None,
    action: str,
    outcome: str,
    *,
    details: dict[str, Any] | None = None,
    **fields: Any,
) -> AuditEvent:
    """An event stamped with the acting token, the server's request id and the
    client's own request id (kept apart: a client may send any value)."""
    return AuditEvent(
        tenant_id=actor.tenant_id if actor else None,
        action=action,
        outcome=outcome,
        created_ms=now_ms(),
        request_id=logs.request_id.get(),
        actor_token_id=(actor.token_id or None) if actor else None,
        client_request_id=logs.client_request_id.get(),
        details=msgspec.json.encode(details).decode() if details is not None else None,
        **fields,
    )


EXPORT_MAX: Final = 100_000  # events in one download: a narrower time range for more
EXPORT_BATCH: Final = 1_000


class AuditService:
    """Reads the audit log (the API gives a tenant only its own events)."""

    def __init__(self, db: Backend, settings: Settings, cursors: Cursors | None) -> None:
        self.db = db
        self.settings = settings
        self.cursors = cursors
        self.devices = AuditDevices(db, settings)  # nothing opens until their tasks run

    async def require_devices(self, actor: Actor, method: str, path: str) -> None:
        """CHAINKEYS_AUDIT_REQUIRED: refuse a change (503 audit_unavailable, audited in
        the table, which the devices get once one is back) while no device that
        confirms delivery is healthy; before the request's handler runs, so before any
        key is opened. The database's half needs no check here: a change's event is
        written in the change's own transaction (a sign's with the signature, which
        leaves only if it committed)."""
        if self.devices.available():
            return
        event = audit_event(
            actor, "denied", AuditUnavailable.code, details={"method": method, "path": path[:200]}
        )
        with contextlib.suppress(ChainkeysError):
            await Audit.record(self.db, event)
        raise AuditUnavailable()

    async def events(self, q: AuditQuery, after_id: int, limit: int) -> list[AuditEvent]:
        """Up to `limit` events after row `after_id`, oldest first (the CLI's paging)."""
        async with self.db.read() as tx:
            return await Audit.page(tx, q, after_id, limit)

    async def record(self, event: AuditEvent) -> None:
        """Write one event on its own (a refusal: nothing else is written with it)."""
        await Audit.record(self.db, event)

    async def page(
        self, q: AuditQuery, limit: int | None, cursor: str | None
    ) -> tuple[list[AuditEvent], str | None]:
        """A page of events, newest first; the cursor is bound to the query's tenant."""
        w = paging.window(self.settings, self.cursors, f"audit/{q.tenant_id or '*'}", limit, cursor)
        async with self.db.read() as tx:  # newest first: a page starts before its cursor's row
            events = await Audit.newest(tx, q, w.after, w.fetch)
        return w.page(events, lambda e: e.id or 0)

    async def tally(self, q: AuditQuery) -> tuple[int, int]:
        """Signatures made and requests refused in `q`'s tenant since `q.since_ms`."""
        if q.tenant_id is None:
            raise ValueError("a tally is of one tenant")
        async with self.db.read() as tx:
            return await Audit.tally(tx, q.tenant_id, q.since_ms, q.families)

    async def export(self, q: AuditQuery) -> AsyncIterator[list[AuditEvent]]:
        """Every event of `q`, newest first, in batches each read in a transaction of its
        own (a long download holds no snapshot open), at most EXPORT_MAX in all."""
        before: int | None = None
        left = EXPORT_MAX
        while left > 0:
            async with self.db.read() as tx:
                batch = await Audit.newest(tx, q, before, min(EXPORT_BATCH, left))
            if not batch:
                return
            yield batch
            left -= len(batch)
            before = batch[-1].id
