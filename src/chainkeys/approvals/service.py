"""Approvals: a sign request a policy rule sends to people waits here for a quorum.

States: pending → approved → signed (or failed), rejected, expired, cancelled.
Every move is a compare-and-set on the row's state, so of two replicas racing
for the same move exactly one wins: two approvals racing for the last vote
sign once. Votes are per person (the token's label), on the digest the person
saw. Each change is audited and, with a webhook configured, written to the
outbox in the same transaction (approvals/webhook.py sends it). Signing at the
quorum is the signing service's (signing/service.py `complete`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys import paging
from chainkeys.approvals.repository import (
    APPROVED,
    CANCELLED,
    EXPIRED,
    FAILED,
    PENDING,
    REJECTED,
    SIGNED,
    STATES,
    ApprovalRow,
    Approvals,
    Outbox,
    Vote,
    Votes,
)
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import iso, now_ms
from chainkeys.config import Settings
from chainkeys.errors import BadRequest, Conflict, Forbidden, NotFound
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.derive import Cursors

log = logging.getLogger("chainkeys.approvals")
ID_PREFIX: Final = "apr_"
MAX_REASON: Final = 500
STUCK_MS: Final = 30_000  # an approved request not signed after this is signed again


class ApprovalNotFound(NotFound):
    code, message = "approval_not_found", "no such approval request"


@dataclass(frozen=True, slots=True)
class ApprovalView:
    row: ApprovalRow
    votes: list[Vote]

    def record(self) -> dict[str, Any]:
        """The approval as the API, the webhook and the page show it."""
        r = self.row
        out: dict[str, Any] = {
            "id": r.id, "state": r.state, "family": r.family, "account": r.account_name,
            "kind": r.kind, "summary": msgspec.json.decode(r.summary), "digest": r.digest,
            "required": r.quorum, "group": r.approver_group,
            "votes": [{"label": v.voter_label, "decision": v.decision,
                       "time": iso(v.created_ms), **({"reason": v.reason} if v.reason else {})}
                      for v in self.votes],
            "created_at": iso(r.created_ms), "expires_at": iso(r.expires_ms),
        }  # fmt: skip
        if r.reason:
            out["reason"] = r.reason
        if r.result is not None:
            out["result"] = msgspec.json.decode(r.result)
        return out


@dataclass(frozen=True, slots=True)
class Request:
    """What waits: the requester, the account, the sign endpoint and its body."""

    family: str
    account_name: str
    kind: str
    body: str  # JSON
    digest: str
    summary: dict[str, Any]
    rule_index: int
    group: str
    quorum: int
    ttl_ms: int


class ApprovalService:
    def __init__(self, db: Backend, settings: Settings, cursors: Cursors) -> None:
        self.db = db
        self.settings = settings
        self.cursors = cursors
        self.webhook = settings.webhook_url is not None

    # -- requests ----------------------------------------------------------------------

    async def open(self, who: Principal, req: Request) -> ApprovalView:
        """The pending approval of this request: a new one, or the one the same token
        opened for the same bytes (a retry never makes a second)."""
        key = hashlib.sha256(
            "\x00".join((who.token_id, req.family, req.account_name, req.kind, req.body)).encode()
        ).hexdigest()
        for _ in range(3):
            async with self.db.read() as tx:
                found = await Approvals.pending(tx, key)
                if found is not None:
                    return ApprovalView(found, await Votes.of(tx, found.id))
            at = now_ms()
            row = ApprovalRow(
                ID_PREFIX + secrets.token_hex(12), who.tenant_id, who.token_id, who.label,
                req.family, req.account_name, req.kind, req.body, key, req.digest,
                msgspec.json.encode(req.summary).decode(), req.rule_index, req.group, req.quorum,
                PENDING, None, at, at + req.ttl_ms,
            )  # fmt: skip
            try:
                async with self.db.write() as tx:
                    if not await Approvals.insert(tx, row):
                        raise _Taken
                    await self._changed(tx, who, row, PENDING)
                return ApprovalView(row, [])
            except _Taken:
                continue  # the same request, opened at the same moment: answer that one
        raise Conflict("the same request is being opened; retry", code="busy")

    async def get(self, who: Principal, approval_id: str) -> ApprovalView:
        row = await self._visible(who, approval_id)
        if row.state == PENDING and row.expires_ms <= now_ms():
            await self.expire(row.id)
            row = await self._visible(who, approval_id)
        async with self.db.read() as tx:
            return ApprovalView(row, await Votes.of(tx, row.id))

    async def page(
        self, who: Principal, state: str | None, limit: int | None, cursor: str | None
    ) -> tuple[list[ApprovalView], str | None]:
        if state is not None and state not in STATES:
            raise BadRequest(f"state is one of {', '.join(STATES)}", code="invalid_state")
        scope = f"approvals/{who.tenant_id}/{who.token_id}/{state}"
        w = paging.window(self.settings, self.cursors, scope, limit, cursor)
        await self.expire_due()
        group = who.group if "approve" in who.scopes else None
        async with self.db.read() as tx:
            rows = await Approvals.page(tx, who.tenant_id, state, who.token_id, group,
                                        w.after or 0, w.fetch)  # fmt: skip
            shown, next_cursor = w.page(rows, lambda r: r.seq)
            views = [ApprovalView(r, await Votes.of(tx, r.id)) for r in shown]
        return views, next_cursor

    async def _visible(self, who: Principal, approval_id: str) -> ApprovalRow:
        """The approval if the caller may see it: its own request, or its group's (an
        approver); anything else is a 404, like a missing one."""
        async with self.db.read() as tx:
            row = await Approvals.get(tx, approval_id[:40])
        if row is None or row.tenant_id != who.tenant_id:
            raise ApprovalNotFound()
        approver = "approve" in who.scopes and who.group == row.approver_group
        if row.requester_token_id != who.token_id and not approver:
            raise ApprovalNotFound()
        return row

    # -- people ------------------------------------------------------------------------

    async def vote(
        self, who: Principal, approval_id: str, approve: bool, digest: str | None,
        reason: str | None,
    ) -> tuple[ApprovalView, bool]:  # fmt: skip
        """Record a vote; (the approval, whether this vote reached the quorum: the caller
        then signs). One rejection ends the request."""
        row = await self._visible(who, approval_id)
        if "approve" not in who.scopes or who.group != row.approver_group:
            raise Forbidden("only an approver of this request's group may vote on it")
        if who.token_id == row.requester_token_id or (
            row.requester_label and who.label == row.requester_label
        ):
            raise Forbidden("the requester does not approve its own request",
                            code="self_approval")  # fmt: skip
        if approve and digest != row.digest:
            raise Conflict("the digest voted on is not this request's digest: look at the "
                           "request again", code="digest_mismatch")  # fmt: skip
        if reason is not None and len(reason) > MAX_REASON:
            raise BadRequest(f"a reason is at most {MAX_REASON} characters", code="invalid_reason")
        if row.state != PENDING or row.expires_ms <= now_ms():
            if row.state == PENDING:
                await self.expire(row.id)
            raise Conflict(f"this request is {EXPIRED if row.state == PENDING else row.state}; "
                           "votes are closed", code="approval_closed")  # fmt: skip
        at = now_ms()
        vote = Vote(row.id, who.label, who.token_id, "approve" if approve else "reject",
                    digest or row.digest, reason, at)  # fmt: skip
        won = False
        async with self.db.write() as tx:
            if not await Votes.insert(tx, vote):
                raise _Voted
            action = "approval.approve" if approve else "approval.reject"
            await Audit.insert(tx, audit_event(who, action, "ok", family=row.family,
                                               account_name=row.account_name,
                                               details={"approval": row.id}))  # fmt: skip
            if not approve:
                if await Approvals.move(tx, row.id, PENDING, REJECTED, at, reason=reason):
                    await self._changed(tx, who, row, REJECTED)
            elif await Votes.approvals(tx, row.id) >= row.quorum:
                won = await Approvals.move(tx, row.id, PENDING, APPROVED, at)
                if won:
                    await self._changed(tx, who, row, APPROVED)
        return await self.get(who, row.id), won

    async def cancel(self, who: Principal, approval_id: str) -> ApprovalView:
        row = await self._visible(who, approval_id)
        if row.requester_token_id != who.token_id:
            raise Forbidden("only the token that made the request cancels it")
        async with self.db.write() as tx:
            if not await Approvals.move(tx, row.id, PENDING, CANCELLED, now_ms()):
                raise Conflict(f"this request is {row.state}; only a pending one is cancelled",
                               code="approval_closed")  # fmt: skip
            await self._changed(tx, who, row, CANCELLED)
        return await self.get(who, row.id)

    # -- the service ---------------------------------------------------------------------

    async def finish(self, approval_id: str, result: str | None, failure: str | None) -> None:
        """Approved → signed with the sign endpoint's answer, or → failed with why."""
        async with self.db.write() as tx:
            row = await Approvals.get(tx, approval_id)
            if row is None:
                return
            new = SIGNED if failure is None else FAILED
            if await Approvals.move(tx, row.id, APPROVED, new, now_ms(), reason=failure,
                                    result=result):  # fmt: skip
                await self._changed(tx, None, row, new)

    async def expire(self, approval_id: str) -> None:
        async with self.db.write() as tx:
            row = await Approvals.get(tx, approval_id)
            due = row is not None and row.state == PENDING and row.expires_ms <= now_ms()
            if row is not None and due and await Approvals.move(tx, row.id, PENDING, EXPIRED,
                                                                now_ms()):  # fmt: skip
                await self._changed(tx, None, row, EXPIRED)

    async def expire_due(self) -> None:
        async with self.db.read() as tx:
            due = await Approvals.due(tx, now_ms())
        for approval_id in due:
            await self.expire(approval_id)

    async def stuck(self) -> list[ApprovalRow]:
        """Approved requests whose signing did not finish (a process ended mid-way)."""
        async with self.db.read() as tx:
            ids = await Approvals.stuck(tx, now_ms() - STUCK_MS)
            rows = [await Approvals.get(tx, i) for i in ids]
        return [r for r in rows if r is not None]

    async def row(self, approval_id: str) -> ApprovalRow:
        async with self.db.read() as tx:
            row = await Approvals.get(tx, approval_id)
        if row is None:
            raise ApprovalNotFound()
        return row

    async def _changed(self, tx: Tx, who: Principal | None, row: ApprovalRow, state: str) -> None:
        """Audit a state change and, with a webhook, queue its event."""
        actor = who or Principal(row.tenant_id, "", "")
        await Audit.insert(tx, audit_event(actor, f"approval.{state}", "ok", family=row.family,
                                           account_name=row.account_name,
                                           details={"approval": row.id}))  # fmt: skip
        if self.webhook:
            current = await Approvals.get(tx, row.id) or row
            votes = await Votes.of(tx, row.id)
            at = now_ms()
            event_id = "evt_" + secrets.token_hex(12)
            body = {"id": event_id, "type": f"approval.{state}",
                    "approval": ApprovalView(current, votes).record(), "time": iso(at)}  # fmt: skip
            await Outbox.add(tx, event_id, msgspec.json.encode(body).decode(), at)


class _Taken(Exception):
    """Another request with the same pending key was inserted first."""


class _Voted(Conflict):
    code, message = "already_voted", "this person has voted on this request already"
