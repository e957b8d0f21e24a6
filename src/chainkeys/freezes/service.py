"""Emergency freezes: any approver or admin stops a tenant, or one account, at once.

`POST /freezes` (an `approve` or `admin` token) makes one; while it holds, every signature (each
kind, an approved request's at its quorum too), every key or wallet export and every
approving vote in its scope is refused with 423 `frozen`, naming the freeze and its
reason, audited. A freeze ends at its `until`, or earlier by the operator
(`chainkeys freeze lift`) or, on a governed tenant, only by a change its admins sign
(`freeze.lift`, governance/kinds.py). Making and lifting one are audited and, with a webhook
configured, announced (`freeze.created`, `freeze.lifted`) through the approvals'
outbox in the same transaction.

`holding` is the check: one indexed read of the tenant's active freezes, so a freeze
made on one replica holds on every other at its next request; the signing service,
which checks on the one path every signature takes (signing/gate.py, from
signing/service.py `_sign`, so a new way to sign cannot forget it), keeps them only as
long as the store can say nothing committed since (`FreezeLookup`).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from datetime import datetime
from typing import Any, Final, Protocol

import msgspec

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.registry import FAMILIES
from chainkeys.clock import iso, now_ms
from chainkeys.errors import BadRequest, ChainkeysError, Conflict, Forbidden, Frozen, NotFound
from chainkeys.freezes.repository import MAX_ACTIVE, FreezeRow, Freezes
from chainkeys.governance.repository import Governance
from chainkeys.store.backend import Backend
from chainkeys.store.cache import StoreCache
from chainkeys.store.sql import Tx
from chainkeys.store.tables import freezes
from chainkeys.text import printable
from chainkeys.tokens.repository import Tenants
from chainkeys.tokens.service import Principal
from chainkeys.vault.integrity import Integrity
from chainkeys.webhooks.outbox import Outbox


class AccountRows(Protocol):
    """What freezing an account reads: the account by name, as its token may see it (a
    400 or 404 naming why otherwise). The account service is one (accounts/lookup.py):
    named by what it does, so freezes, which accounts consult, import nothing of theirs."""

    async def row(self, who: Principal, family: str, name: str) -> Any: ...


log = logging.getLogger("chainkeys.freezes")
ID_PREFIX: Final = "frz_"
MAX_REASON: Final = 500


class FreezeNotFound(NotFound):
    code, message = "freeze_not_found", "no such freeze in this tenant"


class Governed(Conflict):
    code = "governed"
    message = "the tenant is governed: a freeze is lifted by a change its admins sign"


def record_of(row: FreezeRow) -> dict[str, Any]:
    """The freeze as the API, the webhook and the CLI show it."""
    out: dict[str, Any] = {
        "id": row.id,
        "account": row.account,
        "until": iso(row.until_ms) if row.until_ms is not None else None,
        "reason": row.reason,
        "created_at": iso(row.created_ms),
        "created_by": row.created_by,
    }
    if row.lifted_ms is not None:
        out["lifted_at"] = iso(row.lifted_ms)
    return out


def frozen(row: FreezeRow, stopped: str) -> Frozen:
    """The 423 for what `row` stopped: its id, its scope, until when, its reason."""
    scope = f"the account {row.account}" if row.account else "this tenant"
    until = f"until {iso(row.until_ms)}" if row.until_ms is not None else "until it is lifted"
    return Frozen(f"frozen: freeze {row.id} holds over {scope} {until} ({row.reason}); {stopped}")


async def holding(
    db: Backend, tenant_id: str, family: str | None, names: tuple[str, ...], any_account: bool
) -> FreezeRow | None:
    """The first freeze holding now over `names` of `family` (or the whole tenant); with
    `any_account`, any freeze of the tenant (a wallet's phrase gives every key derived
    from it). Read from the store each time (exports and votes; signing keeps them as
    `FreezeLookup` does)."""
    async with db.read() as tx:
        rows = await Freezes.active(tx, tenant_id, now_ms())
    return first_holding(rows, family, names, any_account)


def first_holding(
    rows: list[FreezeRow], family: str | None, names: tuple[str, ...], any_account: bool
) -> FreezeRow | None:
    now = now_ms()
    return next(
        (
            r
            for r in rows
            if (r.until_ms is None or r.until_ms > now) and (any_account or r.covers(family, names))
        ),
        None,
    )


class FreezeLookup:
    """`holding` for every signature: a tenant's active freezes kept only while the store
    can tell that nothing committed since they were read (SQLite's change counter,
    store/cache.py: another process's commit, or an own one that changed `freezes`,
    drops them; a freeze's INSERT does, `Freezes.insert`), and read each time where it
    cannot (PostgreSQL): a freeze made on any replica holds at the next request."""

    SIZE: Final = 10_000  # tenants whose freezes (most often none) are kept

    def __init__(self, db: Backend) -> None:
        self._db = db
        self._kept: StoreCache[str, list[FreezeRow]] = StoreCache(
            db, self.SIZE, frozenset({freezes.name}), "freezes"
        )

    async def holding(
        self, tenant_id: str, family: str | None, names: tuple[str, ...]
    ) -> FreezeRow | None:
        if self._db.counter_is_immediate:
            rows = await self._kept.through(tenant_id, lambda: self._read(tenant_id))
        else:  # a freeze made on another replica must hold at this one's next request
            rows = await self._read(tenant_id)
        return first_holding(rows, family, names, any_account=False)

    async def _read(self, tenant_id: str) -> list[FreezeRow]:
        async with self._db.read() as tx:
            return await Freezes.active(tx, tenant_id, now_ms())


class FreezeService:
    """Freezes as approvers make and see them, and as the operator lists and lifts them."""

    def __init__(
        self,
        db: Backend,
        accounts: AccountRows | None = None,
        webhook: bool = False,
        integrity: Integrity | None = None,
    ) -> None:
        self.db = db
        self.accounts = accounts  # None: an operator's process (list and lift only)
        self.webhook = webhook
        self.integrity = integrity  # the tenants' rows are read authenticated with it

    async def create(
        self, who: Principal, account: str | None, until: datetime | None, reason: str
    ) -> FreezeRow:
        """A new freeze of the tenant (`account` None) or of `family/name`; audited, and
        announced; a refusal (400, 403, 404, 409) is audited too."""
        try:
            row = await self._new(who, account, until, reason)
        except ChainkeysError as exc:
            details = {"account": (account or "")[:120], "reason": exc.message[:500]}
            event = audit_event(who, "freeze.create", exc.code, details=details)
            try:
                await Audit.record(self.db, event)
            except ChainkeysError:
                log.error("the audit row of a refused freeze could not be written")
            raise
        return row

    async def _new(
        self, who: Principal, account: str | None, until: datetime | None, reason: str
    ) -> FreezeRow:
        if not (reason.strip() and len(reason) <= MAX_REASON and printable(reason)):
            raise BadRequest(
                f"reason is 1 to {MAX_REASON} characters, not only spaces, with no control, "
                "format or line-break characters",
                code="invalid_reason",
            )
        at = now_ms()
        until_ms = None
        if until is not None:
            until_ms = int(until.timestamp() * 1000)
            if until_ms <= at:
                raise BadRequest("until must be in the future", code="invalid_until")
        family, name = await self._scope(who, account)
        row = FreezeRow(
            ID_PREFIX + secrets.token_hex(12),
            who.tenant_id,
            family,
            name,
            reason,
            at,
            until_ms,
            who.label,
            who.token_id,
        )
        async with self.db.write() as tx:
            if len(await Freezes.active(tx, who.tenant_id, at)) >= MAX_ACTIVE:
                raise Conflict(
                    f"this tenant has {MAX_ACTIVE} freezes holding already: freeze the "
                    "whole tenant instead",
                    code="too_many_freezes",
                )
            await Freezes.insert(tx, row)
            await self._changed(tx, who, row, "freeze.created")
        return row

    async def _scope(self, who: Principal, account: str | None) -> tuple[str | None, str | None]:
        """(family, canonical account name) of a freeze of one account; (None, None) for
        the whole tenant, which needs a token of every family (a token limited to some
        freezes only their accounts)."""
        if account is None:
            if who.families is not None:
                raise Forbidden(
                    "a freeze of the whole tenant needs a token not limited to families; "
                    "name an account (family/name) of yours"
                )
            return None, None
        family, _, name = account.partition("/")
        if family not in FAMILIES or not name:
            raise BadRequest(
                f"account is family/name, the family one of {', '.join(FAMILIES)}",
                code="invalid_account",
            )
        if not who.may_use(family):
            raise Forbidden(f"this token may not use {family} accounts")
        if self.accounts is None:  # never: the API's service has the accounts
            raise RuntimeError("freezing an account needs the account service")
        row = await self.accounts.row(who, family, name)  # 400 or 404 naming why
        return row.family, row.name

    async def active(self, who: Principal) -> list[FreezeRow]:
        """The tenant's freezes holding now that this token may see (a token limited to
        families sees the tenant's and its families' accounts')."""
        async with self.db.read() as tx:
            rows = await Freezes.active(tx, who.tenant_id, now_ms())
        return [r for r in rows if r.family is None or who.may_use(r.family)]

    async def listed(self, tenant: str) -> list[FreezeRow]:
        """The tenant's freezes holding now (`chainkeys freeze list`)."""
        async with self.db.read() as tx:
            tenant_id = await _tenant_id(tx, tenant, self.integrity)
            return await Freezes.active(tx, tenant_id, now_ms())

    async def lift(self, tenant: str, freeze_id: str) -> FreezeRow:
        """End a freeze now (`chainkeys freeze lift`): audited and announced. Lifting
        loosens, so on a governed tenant it is a change its admins sign (kind
        `freeze.lift`, docs/governance.md), never the operator's alone: refused, and
        the refusal audited, in the transaction that reads the governance (a tenant
        governed meanwhile is never lifted past it)."""
        async with self.db.write() as tx:
            tenant_id = await _tenant_id(tx, tenant, self.integrity)
            governed = await Governance.get(tx, tenant_id) is not None
            lifted = None
            if not governed:
                row = await Freezes.get(tx, tenant_id, freeze_id[:40])
                if row is None:
                    raise FreezeNotFound(f"no freeze {freeze_id[:40]} in the tenant {tenant}")
                lifted = await self.lift_in(tx, Principal(tenant_id, tenant, ""), row, None)
        if governed:
            refused = Governed(
                f"the tenant {tenant} is governed: a freeze is lifted by a change its admins "
                f'sign (POST /changes {{"kind": "freeze.lift", "freeze": "{freeze_id[:40]}"}})'
            )
            details = {"freeze": freeze_id[:40], "reason": refused.message}
            who = Principal(tenant_id, tenant, "")
            await Audit.record(
                self.db, audit_event(who, "freeze.lift", refused.code, details=details)
            )
            raise refused
        if lifted is None:
            raise Conflict(f"freeze {freeze_id[:40]} has ended already", code="freeze_ended")
        return lifted

    async def lift_in(
        self, tx: Tx, who: Principal, row: FreezeRow, change: str | None
    ) -> FreezeRow | None:
        """Lift `row` in `tx` (the operator's lift, or a governed `freeze.lift` change as
        it applies, named by `change`): its pinned state in the head moves as any lift's,
        audited and announced. None when it has ended already (by time, or lifted)."""
        at = now_ms()
        if row.lifted_ms is not None or (row.until_ms is not None and row.until_ms <= at):
            return None
        if not await Freezes.lift(tx, row, at):
            return None
        lifted = replace(row, lifted_ms=at)
        await self._changed(tx, who, lifted, "freeze.lifted", change)
        return lifted

    async def _changed(
        self, tx: Tx, who: Principal, row: FreezeRow, event: str, change: str | None = None
    ) -> None:
        """Audit the change and, with a webhook, queue its event, in `tx`."""
        action = "freeze.create" if event == "freeze.created" else "freeze.lift"
        details = {"freeze": row.id, "account": row.account, "reason": row.reason}
        if change is not None:
            details["change"] = change
        if row.until_ms is not None:
            details["until"] = iso(row.until_ms)
        audited = audit_event(
            who, action, "ok", family=row.family, account_name=row.account_name, details=details
        )
        await Audit.insert(tx, audited)
        if self.webhook:
            at = now_ms()
            event_id = "evt_" + secrets.token_hex(12)
            body = {"id": event_id, "type": event, "freeze": record_of(row), "time": iso(at)}
            await Outbox.add(tx, event_id, msgspec.json.encode(body).decode(), at)


async def _tenant_id(tx: Tx, tenant: str, integrity: Integrity | None) -> str:
    """The tenant's id, its row authenticated when the key is held (lift: always)."""
    tenant_id = await Tenants.id_by_name(tx, tenant, integrity)
    if tenant_id is None:
        raise NotFound(f"no tenant named {tenant}")
    return tenant_id
