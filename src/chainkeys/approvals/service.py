"""Approvals: a sign request a policy rule sends to people waits here for a quorum.

States: pending → approved → signed (or failed), rejected, expired, cancelled.
Every transition of a request runs in a transaction serialized on that request
(`Tx.serialize`: a PostgreSQL advisory lock, SQLite's one writer), which reads the
state and the votes inside it: two first votes at once both count, a vote racing a
rejection or a cancel finds the request closed, two last votes sign once. Every move
is also a compare-and-set on the row's state. Votes are per person (the token's
label, compared after NFKC normalisation and case folding), on the digest the person
saw, by approvers whose tokens may use the request's family. Each change is audited
and, with a webhook configured, written to the outbox in the same transaction
(webhooks/delivery.py sends it). Signing at the quorum is the signing service's
(signing/service.py `complete`), as the requester if its token is still live; a
revoked or expired requester's pending requests are cancelled by the sweeper. A rule
with `"passkey": true` counts only votes signed by the person's enrolled credential
(approvals/passkeys.py) over the digest and the summary derived from the request
(approvals/summaries.py: what is shown is never a stored copy), verified when cast and
again when the quorum signs. The moves
that end a request (expiry, cancellation, failure, signed) and the audit and outbox
events of every move are approvals/transitions.py's.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass, replace
from typing import Any, Final

import msgspec

from chainkeys import paging
from chainkeys.approvals.passkeys import Passkeys
from chainkeys.approvals.proofs import PasskeyRequired, Proof, person
from chainkeys.approvals.repository import (
    APPROVED,
    PENDING,
    REJECTED,
    STATES,
    ApprovalRow,
    Approvals,
    Vote,
    Votes,
)
from chainkeys.approvals.summaries import Shown, derive
from chainkeys.approvals.transitions import Transitions, record_of
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import BadRequest, Conflict, Forbidden, NotFound, StartupError
from chainkeys.freezes.service import frozen, holding
from chainkeys.store.backend import Backend, Transactions
from chainkeys.store.integrity import APPROVAL_VOTES, APPROVALS
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.derive import Cursors
from chainkeys.vault.gate import Gate
from chainkeys.vault.integrity import failed

log = logging.getLogger("chainkeys.approvals")
ID_PREFIX: Final = "apr_"
MAX_REASON: Final = 500


class ApprovalNotFound(NotFound):
    code, message = "approval_not_found", "no such approval request"


@dataclass(frozen=True, slots=True)
class ApprovalView:
    row: ApprovalRow
    votes: list[Vote]
    shown: Shown  # the summary derived from the request now (approvals/summaries.py)

    def record(self) -> dict[str, Any]:
        """The approval as the API, the webhook and the page show it."""
        return record_of(self.row, self.votes, self.shown)

    def cancellable_by(self, who: Principal) -> bool:
        """Whether `who` may cancel it (`ApprovalService.cancel`): its token made the
        request, which is pending."""
        return self.row.requester_token_id == who.token_id and self.row.state == PENDING


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
    passkey: bool = False  # votes count only signed by the person's credential


class ApprovalService(Transitions):
    """Opening, showing and voting on requests; the moves that end them (expiry,
    cancellation, failure, signed) and their audit and outbox events: `Transitions`."""

    def __init__(
        self, db: Backend, settings: Settings, cursors: Cursors, integrity: Gate | None = None
    ) -> None:
        super().__init__(db, webhook=settings.webhook_url is not None, gate=integrity)
        self.settings = settings
        self.cursors = cursors
        self.integrity = integrity
        self.passkeys = Passkeys(db, settings, integrity)

    # -- requests ----------------------------------------------------------------------

    async def open(
        self, who: Principal, req: Request, db: Transactions | None = None
    ) -> ApprovalView:
        """The pending approval of this request: a new one, or the one the same token
        opened for the same bytes (a retry never makes a second). `db`: where (a batch
        of sign requests' one transaction), the store by default."""
        db = db or self.db
        key = hashlib.sha256(
            "\x00".join((who.token_id, req.family, req.account_name, req.kind, req.body)).encode()
        ).hexdigest()
        for _ in range(3):
            async with db.read() as tx:
                found = await Approvals.pending(tx, key)
                if found is not None:
                    return await self._view(tx, found)
            at = now_ms()
            row = ApprovalRow(
                ID_PREFIX + secrets.token_hex(12),
                who.tenant_id,
                who.token_id,
                who.label,
                req.family,
                req.account_name,
                req.kind,
                req.body,
                key,
                req.digest,
                msgspec.json.encode(req.summary).decode(),
                req.rule_index,
                req.group,
                req.quorum,
                PENDING,
                None,
                at,
                at + req.ttl_ms,
                passkey=True if req.passkey else None,
            )
            row = replace(row, mac=self._keyed().mac(APPROVALS, row.covered()))
            try:
                async with db.write() as tx:
                    if not await Approvals.insert(tx, row):
                        raise _Taken
                    await self._changed(tx, who, row, PENDING)
                async with db.read() as tx:
                    return await self._view(tx, row)
            except _Taken:
                continue  # the same request, opened at the same moment: answer that one
        raise Conflict("the same request is being opened; retry", code="busy")

    async def get(self, who: Principal, approval_id: str) -> ApprovalView:
        row = await self._visible(who, approval_id)
        if row.state == PENDING and row.expires_ms <= now_ms():
            await self.expire(row.id)
            row = await self._visible(who, approval_id)
        async with self.db.read() as tx:
            return await self._view(tx, row)

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
            rows = await Approvals.page(
                tx, who.tenant_id, state, who.token_id, group, w.after or 0, w.fetch, who.families
            )
            shown, next_cursor = w.page(rows, lambda r: r.seq)
            views = [await self._view(tx, r) for r in shown]
        return views, next_cursor

    async def _view(self, tx: Tx, row: ApprovalRow) -> ApprovalView:
        """`row` with its votes and its summary derived from its request now."""
        return ApprovalView(row, await Votes.of(tx, row.id), await derive(tx, self._keyed(), row))

    async def count(self, who: Principal, state: str) -> int:
        """How many of the requests this token sees (`page`) are in `state`."""
        await self.expire_due()
        group = who.group if "approve" in who.scopes else None
        async with self.db.read() as tx:
            return await Approvals.count(
                tx, who.tenant_id, state, who.token_id, group, who.families
            )

    async def _visible(self, who: Principal, approval_id: str) -> ApprovalRow:
        """The approval if the caller may see it: its own request, or its group's (an
        approver whose token may use the request's family); anything else is a 404,
        like a missing one."""
        async with self.db.read() as tx:
            row = await Approvals.get(tx, approval_id[:40])
        if row is None or row.tenant_id != who.tenant_id:
            raise ApprovalNotFound()
        approver = (
            "approve" in who.scopes and who.group == row.approver_group and who.may_use(row.family)
        )
        if row.requester_token_id != who.token_id and not approver:
            raise ApprovalNotFound()
        return row

    # -- people ------------------------------------------------------------------------

    async def vote(
        self,
        who: Principal,
        approval_id: str,
        approve: bool,
        digest: str | None,
        reason: str | None,
        proof: Proof | None = None,
    ) -> tuple[ApprovalView, bool]:
        """Record a vote; (the approval, whether this vote reached the quorum: the caller
        then signs). One rejection ends the request. On a passkey rule's request the vote
        carries `proof`, verified here (and stored, to be verified again at signing); a
        proof sent with any other vote is verified and kept too."""
        row = await self._visible(who, approval_id)
        if "approve" not in who.scopes or who.group != row.approver_group:
            raise Forbidden("only an approver of this request's group may vote on it")
        if not self._keyed().valid(APPROVALS, row.covered()):  # nobody's request: it ends
            error = failed(APPROVALS, f"approval {row.id}")
            await self.finish_pending(row.id, error.message)
            raise error
        if who.token_id == row.requester_token_id or (
            row.requester_label and person(who.label) == person(row.requester_label)
        ):
            raise Forbidden("the requester does not approve its own request", code="self_approval")
        if approve and digest != row.digest:
            raise Conflict(
                "the digest voted on is not this request's digest: look at the request again",
                code="digest_mismatch",
            )
        if reason is not None and len(reason) > MAX_REASON:
            raise BadRequest(f"a reason is at most {MAX_REASON} characters", code="invalid_reason")
        decision = "approve" if approve else "reject"
        if approve:  # a rejection can only stop a request: it is taken during a freeze
            await self._unfrozen(who, row)
        shown = await self._shown(row)
        if approve and shown.summary is None:
            raise Conflict(f"nothing to approve: {shown.problem}", code="summary_unavailable")
        assertion = None
        if row.passkey and proof is None:
            await self.passkeys.audit_refusal(
                who, f"approval.{decision}", PasskeyRequired.code, {"approval": row.id}
            )
            raise PasskeyRequired()
        if proof is not None:
            assertion = await self.passkeys.check(who, row, shown.summary, decision, proof)
        at = now_ms()
        vote = Vote(
            row.id,
            who.label,
            who.token_id,
            decision,
            digest or row.digest,
            reason,
            at,
            assertion=assertion,
        )
        vote = replace(vote, mac=self._keyed().mac(APPROVAL_VOTES, vote.covered()))
        won, closed = False, None
        async with self.db.write() as tx:
            await tx.serialize(f"approval/{row.id}")  # one transition of this request at a time
            current = await Approvals.get(tx, row.id)  # its state, read inside
            if current is None:
                raise ApprovalNotFound()
            if current.state in (PENDING, APPROVED):  # open as the head pins it, or ended
                await Approvals.current(tx, self._keyed(), current)
            closed = await self._closed(tx, current, at)
            if closed is None:
                voted = {person(v.voter_label) for v in await Votes.of(tx, row.id)}
                if person(who.label) in voted or not await Votes.insert(tx, vote):
                    raise _Voted
                action = "approval.approve" if approve else "approval.reject"
                await Audit.insert(
                    tx,
                    audit_event(
                        who,
                        action,
                        "ok",
                        family=row.family,
                        account_name=row.account_name,
                        details={"approval": row.id},
                    ),
                )
                if not approve:
                    if await Approvals.move(tx, row.id, PENDING, REJECTED, at, reason=reason):
                        await self._changed(tx, who, row, REJECTED)
                elif self.approvers(row, await Votes.of(tx, row.id)) >= row.quorum:
                    won = await Approvals.move(tx, row.id, PENDING, APPROVED, at)
                    if won:
                        await self._changed(tx, who, row, APPROVED)
        if closed is not None:
            raise Conflict(f"this request is {closed}; votes are closed", code="approval_closed")
        return await self.get(who, row.id), won

    async def _unfrozen(self, who: Principal, row: ApprovalRow) -> None:
        """Frozen (423, audited) while a freeze holds over the request's tenant or
        account (freezes/service.py): no approving vote counts then."""
        found = await holding(self.db, row.tenant_id, row.family, (row.account_name,), False)
        if found is not None:
            error = frozen(found, "the vote was not counted")
            details = {"approval": row.id, "freeze": found.id, "reason": error.message}
            await self.passkeys.audit_refusal(who, "approval.approve", error.code, details)
            raise error

    def approvers(self, row: ApprovalRow, votes: list[Vote]) -> int:
        """The people whose authenticated votes approve `row`'s digest: the quorum is
        counted from these, never from a state column or a row count (a vote a
        database writer added or edited fails its MAC: logged, counted, not counted).
        On a passkey request only votes that carry a proof count (`verified` checks
        each proof again before anything is signed)."""
        integrity = self._keyed()
        people = set()
        for v in votes:
            if not integrity.valid(APPROVAL_VOTES, v.covered()):
                failed(APPROVAL_VOTES, f"a vote on approval {row.id}")
                continue
            if row.passkey and v.assertion is None:
                continue
            if v.approval_id == row.id and v.decision == "approve" and v.digest == row.digest:
                people.add(person(v.voter_label))
        return len(people)

    async def verified(self, row: ApprovalRow) -> None:
        """IntegrityFailure unless `row` is the request that was opened (its MAC) and its
        authenticated votes reach its quorum: checked again when it is signed."""
        integrity = self._keyed()
        integrity.check(APPROVALS, row.covered(), f"approval {row.id}")
        async with self.db.read() as tx:
            await Approvals.current(tx, integrity, row)  # not a request that ended
            votes = await Votes.of(tx, row.id)
        if row.passkey:  # each proof verified again, against its credential as it is now
            summary = (await self._shown(row)).summary  # and the summary derived now
            votes = [
                v
                for v in votes
                if v.decision == "approve" and await self.passkeys.counts(row, summary, v)
            ]
        if self.approvers(row, votes) < row.quorum:
            raise failed(
                APPROVALS,
                f"the quorum of approval {row.id} (its authenticated votes "
                f"do not reach {row.quorum})",
            )

    async def challenge(self, who: Principal, approval_id: str, decision: str) -> dict[str, Any]:
        """WebAuthn request options for the caller's vote (`decision`) on a request it
        may vote on, with the `summary` their challenge covers; their `challenge` is
        what a script key signs too."""
        row = await self._visible(who, approval_id)
        if "approve" not in who.scopes or who.group != row.approver_group:
            raise Forbidden("only an approver of this request's group may vote on it")
        shown = await self._shown(row)
        if decision == "approve" and shown.summary is None:
            raise Conflict(f"nothing to approve: {shown.problem}", code="summary_unavailable")
        return await self.passkeys.request_options(who, row, shown.summary, decision)

    async def _shown(self, row: ApprovalRow) -> Shown:
        """`row`'s summary derived from its request now (what a vote's challenge covers)."""
        async with self.db.read() as tx:
            return await derive(tx, self._keyed(), row)

    def _keyed(self) -> Gate:
        if self.integrity is None:
            raise StartupError(
                "approvals need the master key (their rows are authenticated under it)"
            )
        return self.integrity

    async def cancel(self, who: Principal, approval_id: str) -> ApprovalView:
        row = await self._visible(who, approval_id)
        if row.requester_token_id != who.token_id:
            raise Forbidden("only the token that made the request cancels it")
        closed = await self._cancel(row.id, who, "cancelled by the requester")
        if closed is not None:
            raise Conflict(
                f"this request is {closed}; only a pending one is cancelled", code="approval_closed"
            )
        return await self.get(who, row.id)

    async def row(self, approval_id: str) -> ApprovalRow:
        async with self.db.read() as tx:
            row = await Approvals.get(tx, approval_id)
        if row is None:
            raise ApprovalNotFound()
        return row


class _Taken(Exception):
    """Another request with the same pending key was inserted first."""


class _Voted(Conflict):
    code, message = "already_voted", "this person has voted on this request already"
