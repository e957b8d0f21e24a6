"""The moves that end an approval request, and what every move leaves behind.

`ApprovalService` (service.py) opens requests, shows them and takes votes; it extends
`Transitions`, which holds the rest of the state machine: a request's expiry, its
cancellation (by its requester, or by the sweeper once the requesting token is gone),
its failure, and the approved → signed move made inside the signing transaction
(`signed_in`), with the sweeper's reads (`expire_due`, `cancel_orphans`, `stuck`).
Every move, a vote's too, runs in a transaction serialized on its request
(`Tx.serialize`) as a compare-and-set on the row's state, and is audited and, with a
webhook configured, queued in the outbox in that same transaction (`_changed`, with the
approval as `record_of` shows it; webhooks/delivery.py sends it). Its own module so the
ends of a request, which the sweeper and the signing service rely on, read in one place
apart from the people-facing checks of opening and voting.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from chainkeys.approvals.repository import (
    APPROVED,
    CANCELLED,
    EXPIRED,
    FAILED,
    PENDING,
    SIGNED,
    ApprovalRow,
    Approvals,
    Vote,
    Votes,
)
from chainkeys.approvals.summaries import Shown, derive
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import iso, now_ms
from chainkeys.errors import IntegrityFailure
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import Gate, opened
from chainkeys.webhooks.outbox import Outbox

STUCK_MS: Final = 30_000  # an approved request not signed after this is signed again


def record_of(row: ApprovalRow, votes: list[Vote], shown: Shown) -> dict[str, Any]:
    """The approval as the API, the webhook and the page show it (`ApprovalView.record`),
    with the summary derived from its request now (`shown`: approvals/summaries.py),
    never the stored summary column."""
    out: dict[str, Any] = {
        "id": row.id,
        "state": row.state,
        "family": row.family,
        "account": row.account_name,
        "kind": row.kind,
        "summary": shown.summary,
        "digest": row.digest,
        "required": row.quorum,
        "group": row.approver_group,
        "votes": [
            {
                "label": v.voter_label,
                "decision": v.decision,
                "time": iso(v.created_ms),
                **({"reason": v.reason} if v.reason else {}),
                **({"signed": signed_with(v)} if v.assertion else {}),
            }
            for v in votes
        ],
        "passkey": bool(row.passkey),
        "created_at": iso(row.created_ms),
        "expires_at": iso(row.expires_ms),
    }
    if shown.problem is not None:
        out["summary_error"] = shown.problem
    out["request"] = _request(row)  # the raw request: for offline verifiers
    if shown.signer is not None:
        out["signer"] = shown.signer
    if row.reason:
        out["reason"] = row.reason
    if row.result is not None:
        out["result"] = msgspec.json.decode(row.result)
    return out


def _request(row: ApprovalRow) -> Any:
    """The sign endpoint's body as the server read it (JSON; text if it does not parse)."""
    try:
        return msgspec.json.decode(row.request)
    except msgspec.DecodeError:
        return row.request


def signed_with(vote: Vote) -> str:
    """What signed a vote, as the approval shows it: `passkey` or `key`."""
    try:
        stored = msgspec.json.decode(vote.assertion or "{}")
    except msgspec.DecodeError:
        return "unreadable"
    return "passkey" if isinstance(stored, dict) and "assertion" in stored else "key"


class Transitions:
    """The state moves of stored requests (the base of `ApprovalService`)."""

    def __init__(self, db: Backend, webhook: bool, gate: Gate | None = None) -> None:
        self.db = db
        self.webhook = webhook  # state changes are queued in the outbox
        self.gate = gate

    async def _closed(self, tx: Tx, row: ApprovalRow, at: int) -> str | None:
        """Why a request takes no vote or cancel any more (None: it is pending); one past
        its ttl is expired here, in the caller's serialized transaction."""
        if row.state != PENDING:
            return row.state
        if row.expires_ms <= at:
            if await Approvals.move(tx, row.id, PENDING, EXPIRED, at):
                await self._changed(tx, None, row, EXPIRED)
            return EXPIRED
        return None

    async def finish_pending(self, approval_id: str, reason: str) -> None:
        """Pending → failed with `reason` (audited, announced), if it is still pending."""
        async with self.db.write() as tx:
            await tx.serialize(f"approval/{approval_id}")
            row = await Approvals.get(tx, approval_id)
            if row is not None and await Approvals.move(
                tx, row.id, PENDING, FAILED, now_ms(), reason=reason
            ):
                await self._changed(tx, None, row, FAILED)

    async def _cancel(self, approval_id: str, who: Principal | None, reason: str) -> str | None:
        """Pending → cancelled in a serialized transaction; why not, when it was not."""
        at = now_ms()
        async with self.db.write() as tx:
            await tx.serialize(f"approval/{approval_id}")
            row = await Approvals.get(tx, approval_id)
            if row is None:
                return "gone"
            closed = await self._closed(tx, row, at)
            if closed is None and await Approvals.move(
                tx, row.id, PENDING, CANCELLED, at, reason=reason
            ):
                await self._changed(tx, who, row, CANCELLED)
        return closed

    async def cancel_orphans(self, is_live: Callable[[str], Awaitable[bool]]) -> int:
        """Cancel pending requests whose requester token was revoked or has expired: a
        token that may no longer sign gets no signature from a quorum either (a round
        of the sweeper, and run at once by a revocation)."""
        async with self.db.read() as tx:
            pending = await Approvals.pending_requesters(tx)
        done = 0
        for approval_id, token_id in pending:
            if not await is_live(token_id):
                reason = "the requesting token was revoked or has expired"
                done += await self._cancel(approval_id, None, reason) is None
        return done

    async def finish(self, approval_id: str, failure: str) -> None:
        """Approved → failed with why (signed: `signed_in`)."""
        async with self.db.write() as tx:
            await self._settle(tx, approval_id, FAILED, reason=failure)

    async def signed_in(self, tx: Tx, approval_id: str, result: str) -> bool:
        """Approved → signed, in the transaction that signs; False when another process
        signed it first (the caller drops its transaction and signature: signed once)."""
        return await self._settle(tx, approval_id, SIGNED, result=result)

    async def _settle(self, tx: Tx, approval_id: str, new: str, **fields: str) -> bool:
        """Approved → `new`, if it still is approved (serialized per approval)."""
        await tx.serialize(f"approval/{approval_id}")
        row = await Approvals.get(tx, approval_id)
        if row is None or not await Approvals.move(tx, row.id, APPROVED, new, now_ms(), **fields):
            return False
        await self._changed(tx, None, row, new)
        return True

    async def expire(self, approval_id: str) -> None:
        async with self.db.write() as tx:
            await tx.serialize(f"approval/{approval_id}")
            row = await Approvals.get(tx, approval_id)
            if row is not None:
                await self._closed(tx, row, now_ms())

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

    async def _pin(self, tx: Tx, row: ApprovalRow, state: str) -> None:
        """The tenant's `approvals` set (vault/heads.py): in at opening, out at its end
        (by its stored MAC: a row a writer edited in place leaves as it entered); one a
        writer set open again after it ended was not in it and leaves nothing."""
        if self.gate is None:
            raise IntegrityFailure("the integrity key is not open here: nothing was done")
        member = [(row.id, str(row.mac))]
        if state == PENDING:
            await self.gate.heads.change(tx, row.tenant_id, "approvals", added=member)
            return
        if state == APPROVED:
            return
        # the row has just left the open states: was it in the set until now? (a request
        # a writer set open again after it ended was not). Read under the tenant's head:
        # another request's end committing between the two reads would look like one.
        await tx.serialize("head/" + row.tenant_id)
        head = await self.gate.heads.head(tx, row.tenant_id)
        now_open = await Approvals.open_members(tx, self.gate, row.tenant_id)
        before = [*(m for m, _ in now_open), *member]
        if self.gate.heads.matches(head, "approvals", before):
            await self.gate.heads.change(tx, row.tenant_id, "approvals", removed=member)

    async def _changed(self, tx: Tx, who: Principal | None, row: ApprovalRow, state: str) -> None:
        """Pin it (a request is open from PENDING until it ends), audit the state change
        and, with a webhook, queue its event."""
        await self._pin(tx, row, state)
        actor = who or Principal(row.tenant_id, "", "")
        await Audit.insert(
            tx,
            audit_event(
                actor,
                f"approval.{state}",
                "ok",
                family=row.family,
                account_name=row.account_name,
                details={"approval": row.id},
            ),
        )
        if self.webhook:
            current = await Approvals.get(tx, row.id) or row
            votes = await Votes.of(tx, row.id)
            shown = await derive(tx, opened(self.gate), current)
            at = now_ms()
            event_id = "evt_" + secrets.token_hex(12)
            body = {
                "id": event_id,
                "type": f"approval.{state}",
                "approval": record_of(current, votes, shown),
                "time": iso(at),
            }
            await Outbox.add(tx, event_id, msgspec.json.encode(body).decode(), at)
