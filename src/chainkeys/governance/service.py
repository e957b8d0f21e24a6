"""Governance: no single person loosens a governed tenant's rules (docs/governance.md).

A tenant is governed once the operator sets its quorum and delay (`chainkeys
governance set`, with the master key; afterwards only through a change of kind
`governance`). Its admins (`admin` tokens, each a person by label, with keys enrolled by
`chainkeys admin add-key`) file changes (`POST /changes`) and vote on them with
signatures of `SHA-256("chainkeys change v1" || id || digest || decision)`: a vote
is the person's key's, never the bearer token's alone. At the quorum a change that
only tightens applies at once; one that loosens anything is scheduled for the delay,
during which any one admin may cancel it, and a supervised round (`due`) applies it.

Every decision is made and acted on in one write transaction, under the tenant's
`changes/` scope (one writer per tenant on every replica), on rows read in it: two
last votes racing, or a vote racing a cancel or the round, never both act. What each
kind of change means, says and does is governance/kinds.py: a change applies only onto
the state its diff was made against (a policy version, the quorum and delay, a freeze
that holds); if that moved meanwhile it is rejected as superseded (people signed a diff
that no longer holds).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import msgspec

from chainkeys.approvals.proofs import ADMINS, DECISIONS, Proof, change_challenge, person
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import iso, now_ms
from chainkeys.errors import BadRequest, ChainkeysError, Conflict, Forbidden, IntegrityFailure
from chainkeys.freezes.service import FreezeService
from chainkeys.governance.grants import KeyKind, TokenKind
from chainkeys.governance.kinds import (
    FreezeLiftKind,
    GovernanceKind,
    Kind,
    NoLongerHolds,
    Plan,
    PolicyKind,
    parse_delay,
    quorum_of,
)
from chainkeys.governance.repository import (
    MAX_OPEN,
    OPEN,
    ChangeRow,
    Changes,
    Governance,
    GovernanceRow,
    VoteRow,
    Votes,
)
from chainkeys.governance.views import ChangeNotFound, ChangeView, tenant_id_of
from chainkeys.policies.repository import Version
from chainkeys.policies.service import PolicyService
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import Gate
from chainkeys.webhooks.outbox import Outbox

if TYPE_CHECKING:
    from chainkeys.approvals.passkeys import Passkeys

log = logging.getLogger("chainkeys.governance")
ID_PREFIX: Final = "chg_"


class SignatureRequired(Forbidden):
    code = "signature_required"
    message = (
        'a vote on a change is signed: send "signature": {"credential", "value"} made by '
        "your key enrolled with `chainkeys admin add-key`"
    )


class GovernanceService:
    """Governance as the operator sets it and as admins file, vote on and cancel changes."""

    def __init__(
        self,
        db: Backend,
        policies: PolicyService,
        passkeys: Passkeys | None,
        webhook: bool,
        integrity: Gate | None,
    ) -> None:
        self.db = db
        self.policies = policies  # the server's own: applying a change drops its cache
        self.passkeys = passkeys  # None: an operator's process (no votes there)
        self.webhook = webhook
        self.integrity = integrity
        self.policy_kind = PolicyKind(policies)
        freezes = FreezeService(db, webhook=webhook, integrity=integrity)
        self.kinds: dict[str, Kind] = {
            "policy": self.policy_kind,
            "freeze.lift": FreezeLiftKind(freezes),
            "governance": GovernanceKind(),
            "token": TokenKind(),
            "approver": KeyKind(admins=False),
            "admin": KeyKind(admins=True),
        }

    # -- the operator -------------------------------------------------------------------

    async def set(self, tenant: str, quorum: int, delay: str) -> GovernanceRow:
        """Govern `tenant` (once: afterwards only through a change of kind governance)."""
        quorum, delay_ms = quorum_of(quorum), parse_delay(delay)
        async with self.db.write() as tx:
            tenant_id = await tenant_id_of(tx, tenant, self.integrity)
            await tx.serialize("changes/" + tenant_id)
            if await Governance.get(tx, tenant_id) is not None:
                raise Conflict(
                    f"the tenant {tenant} is governed already: its quorum and delay change "
                    "only through a governed change (kind governance)",
                    code="already_governed",
                )
            row = GovernanceRow(tenant_id, quorum, delay_ms, now_ms())
            row = await Governance.insert(tx, row)
            details = {"quorum": quorum, "delay_ms": delay_ms}
            actor = Principal(tenant_id, tenant, "")
            await Audit.insert(tx, audit_event(actor, "governance.set", "ok", details=details))
        return row

    async def show(self, tenant: str) -> GovernanceRow | None:
        async with self.db.read() as tx:
            return await Governance.get(tx, await tenant_id_of(tx, tenant, self.integrity))

    async def set_policy(
        self, tenant: str, document: str | None, break_glass: bool = False
    ) -> tuple[str, Version | ChangeRow]:
        """The operator's `policy set`/`clear` (`document`: validated canonical JSON):
        ("set", version) on a tenant that is not governed; ("filed", change) on one that
        is; ("break_glass", version) when the operator applies it at once anyway
        (audited as `break_glass` and announced). Decided in one transaction."""
        async with self.db.write() as tx:
            tenant_id = await tenant_id_of(tx, tenant, self.integrity)
            await tx.serialize("changes/" + tenant_id)
            governed = await Governance.get(tx, tenant_id)
            operator = Principal(tenant_id, tenant, "", label="operator")
            if governed is not None and not break_glass:
                plan = await self.policy_kind.plan_canonical(tx, tenant_id, document)
                return "filed", await self.file_planned(tx, operator, governed, "policy", plan)
            version = await self.policies.write_version(tx, tenant_id, tenant, document)
            if governed is None:
                return "set", version
            details = {"what": "policy", "version": version.version}
            await Audit.insert(tx, audit_event(operator, "break_glass", "ok", details=details))
            await self.announce(tx, "governance.break_glass", {"tenant": tenant, **details})
        return "break_glass", version

    # -- admins -------------------------------------------------------------------------

    async def file(self, who: Principal, body: Mapping[str, Any]) -> ChangeView:
        """File a change (`body`: the request, `kind` and its fields), audited; 409
        `not_governed` on a tenant that is not. A refusal is audited with its code."""
        try:
            kind = self.kinds.get(str(body.get("kind")))
            if kind is None:
                raise BadRequest(
                    f"kind is one of {', '.join(self.kinds)}", code="unsupported_change_kind"
                )
            async with self.db.write() as tx:
                await tx.serialize("changes/" + who.tenant_id)
                governed = await Governance.get(tx, who.tenant_id)
                if governed is None:
                    raise Conflict(
                        "this tenant is not governed: an operator sets its quorum and delay "
                        "(chainkeys governance set)",
                        code="not_governed",
                    )
                plan = await kind.plan(tx, who, body)
                row = await self.file_planned(tx, who, governed, str(body["kind"]), plan)
        except ChainkeysError as exc:
            await self.refused(who, body.get("kind"), exc)
            raise
        return ChangeView(row, [], plan.secret)

    async def refused(self, who: Principal, kind: object, exc: ChainkeysError) -> None:
        """Audit a refused filing (`change.file` with the refusal's code and message;
        never the body, which may hold anything). The API's decoder refuses some first."""
        details = {"kind": str(kind)[:32], "reason": exc.message[:500]}
        try:
            await Audit.record(self.db, audit_event(who, "change.file", exc.code, details=details))
        except ChainkeysError:
            log.error("the audit row of a refused change could not be written")

    async def file_planned(
        self, tx: Tx, who: Principal, governed: GovernanceRow, kind: str, plan: Plan
    ) -> ChangeRow:
        """File a change its kind has planned, in the caller's transaction (which holds
        the tenant's `changes/` scope and read `governed` in it): `file` here, and the
        operator's CLI (cli/governed.py), which decides filing or break glass in the
        same transaction as it acts. Audited as `change.file`."""
        if len(await Changes.open(tx, who.tenant_id)) >= MAX_OPEN:
            raise Conflict(
                f"this tenant has {MAX_OPEN} open changes: cancel some first",
                code="too_many_changes",
            )
        body = {"kind": kind, "tenant": who.tenant_id, "base": plan.base, "document": plan.document}
        row = ChangeRow(
            ID_PREFIX + secrets.token_hex(12),
            who.tenant_id,
            kind,
            plan.document,
            plan.base,
            hashlib.sha256(msgspec.json.encode(body, order="sorted")).hexdigest(),
            msgspec.json.encode(plan.words).decode(),
            plan.loosens,
            governed.quorum,
            governed.delay_ms,
            now_ms(),
            who.label,
            who.token_id,
            "pending",
        )
        row = await Changes.insert(tx, row)
        words = plan.words[:20]
        details = {"change": row.id, "kind": kind, "loosens": plan.loosens, "diff": words}
        await Audit.insert(tx, audit_event(who, "change.file", "ok", details=details))
        return row

    async def listed(self, who: Principal, state: str | None) -> list[ChangeView]:
        async with self.db.read() as tx:
            rows = await Changes.listed(tx, who.tenant_id, state, 100)
            return [ChangeView(r, await Votes.of(tx, r.id)) for r in rows]

    async def get(self, who: Principal, change_id: str) -> ChangeView:
        async with self.db.read() as tx:
            row = await Changes.get(tx, who.tenant_id, change_id[:40])
            if row is None:
                raise ChangeNotFound()
            return ChangeView(row, await Votes.of(tx, row.id))

    async def cancel(self, who: Principal, change_id: str) -> ChangeView:
        """Any one admin cancels a change until it is applied."""
        async with self.db.write() as tx:
            await tx.serialize("changes/" + who.tenant_id)
            row = await self._open(tx, who, change_id)
            ended = replace(
                row, state="cancelled", ended_ms=now_ms(), ended_by=who.label, reason="cancelled"
            )
            done = await self._move(tx, row, ended)
            await Audit.insert(
                tx, audit_event(who, "change.cancel", "ok", details={"change": row.id})
            )
            await self.announce(tx, "change.cancelled", ChangeView(done, []).record())
            return ChangeView(done, await Votes.of(tx, row.id))

    async def vote(
        self, who: Principal, change_id: str, decision: str, digest: str, proof: Proof | None
    ) -> ChangeView:
        """One signed vote per person; at the quorum the change applies (it only
        tightens) or is scheduled (it loosens); one rejection ends it."""
        if decision not in DECISIONS:
            raise BadRequest("decision is approve or reject", code="invalid_decision")
        if proof is None:
            raise SignatureRequired()
        async with self.db.read() as tx:
            row = await Changes.get(tx, who.tenant_id, change_id[:40])
        if row is None:
            raise ChangeNotFound()
        self._pending(row, digest)
        if self.passkeys is None:
            raise RuntimeError("votes need the passkeys service")  # never: the API has it
        expected = change_challenge(row.id, row.digest, decision)
        details = {"change": row.id}
        stored = await self.passkeys.signed(
            who, expected, ADMINS, proof, f"change.{decision}", details
        )
        async with self.db.write() as tx:
            await tx.serialize("changes/" + who.tenant_id)
            row = await self._open(tx, who, row.id)
            self._pending(row, digest)
            at = now_ms()
            vote = VoteRow(
                row.id, person(who.label), who.label, who.token_id, decision, digest, stored, at
            )
            if not await Votes.add(tx, vote):
                raise Conflict("you voted on this change already", code="already_voted")
            await Audit.insert(tx, audit_event(who, f"change.{decision}", "ok", details=details))
            if decision == "reject":
                ended = replace(row, state="rejected", ended_ms=at, ended_by=who.label)
                row = await self._move(tx, row, replace(ended, reason="rejected"))
            elif await self._signed(tx, row) >= (await self._needed(tx, row))[0]:
                row = await self._decide(tx, row, at)
            return ChangeView(row, await Votes.of(tx, row.id))

    # -- deciding -----------------------------------------------------------------------

    async def _signed(self, tx: Tx, row: ChangeRow) -> int:
        """How many people's approving votes verify now, in `tx` (a credential revoked
        since, or a vote row a writer made, counts for nothing)."""
        if self.passkeys is None:
            return 0
        expected = change_challenge(row.id, row.digest, "approve")
        count = 0
        for vote in await Votes.of(tx, row.id):
            if vote.decision != "approve" or vote.digest != row.digest:
                continue
            if await self.passkeys.still_signed(
                expected, vote.proof, row.tenant_id, vote.voter_label, ADMINS, tx
            ):
                count += 1
            else:
                log.warning("a vote on change %s does not verify; it is not counted", row.id)
        return count

    async def _needed(self, tx: Tx, row: ChangeRow) -> tuple[int, int]:
        """The quorum and delay `row` needs now: those it was filed under, or the
        tenant's where a governance change raised them since (never fewer: admins who
        raise the quorum because they fear one of them do not want the changes already
        open to pass with the old one)."""
        governed = await Governance.get(tx, row.tenant_id)
        if governed is None:  # never: the head pins the governance of a governed tenant
            return row.quorum, row.delay_ms
        return max(row.quorum, governed.quorum), max(row.delay_ms, governed.delay_ms)

    async def _decide(self, tx: Tx, row: ChangeRow, at: int) -> ChangeRow:
        """At the quorum: apply a change that only tightens, schedule one that loosens."""
        _, delay = await self._needed(tx, row)
        if row.loosens and delay > 0:
            scheduled = replace(row, state="scheduled", effective_ms=at + delay)
            done = await self._move(tx, row, scheduled)
            details = {"change": row.id, "effective_ms": done.effective_ms}
            await Audit.insert(
                tx, audit_event(_actor(row), "change.scheduled", "ok", details=details)
            )
            await self.announce(tx, "change.scheduled", ChangeView(done, []).record())
            return done
        return await self._apply(tx, row, at)

    async def _apply(self, tx: Tx, row: ChangeRow, at: int) -> ChangeRow:
        """Apply `row` as its kind does, or reject it as superseded when what it was
        made against moved on (nothing of it is written then)."""
        actor = _actor(row)
        kind = self.kinds.get(row.kind)
        try:
            if kind is None:  # a kind a newer server filed: never applied by this one
                raise NoLongerHolds(f"this server does not apply {row.kind} changes")
            applied_details = await kind.apply(tx, row)
        except NoLongerHolds as exc:
            reason = f"superseded: {exc}"
            ended = replace(row, state="rejected", ended_ms=at, ended_by="chainkeys", reason=reason)
            done = await self._move(tx, row, ended)
            details: dict[str, object] = {"change": row.id, "reason": reason}
            await Audit.insert(tx, audit_event(actor, "change.superseded", "ok", details=details))
            return done
        applied = replace(row, state="applied", effective_ms=row.effective_ms or at, ended_ms=at)
        done = await self._move(tx, row, applied)
        details = {"change": row.id, "kind": row.kind, **applied_details}
        await Audit.insert(tx, audit_event(actor, "change.applied", "ok", details=details))
        await self.announce(tx, "change.applied", ChangeView(done, []).record())
        return done

    async def due(self) -> int:
        """A round of the background task: apply the scheduled changes whose time has
        come, each decided in its own transaction on the row read in it (cancelled or
        applied meanwhile: nothing). One that fails (its row edited by hand) is logged
        and counted and never stops the others. How many were applied."""
        async with self.db.read() as tx:
            due = await Changes.due(tx, now_ms())
        applied = 0
        for tenant_id, change_id in due:
            try:
                async with self.db.write() as tx:
                    await tx.serialize("changes/" + tenant_id)
                    row = await Changes.get(tx, tenant_id, change_id)
                    at = now_ms()
                    if row is None or row.state != "scheduled" or (row.effective_ms or 0) > at:
                        continue
                    signed, (quorum, _) = await self._signed(tx, row), await self._needed(tx, row)
                    if signed < quorum:
                        reason = (
                            "its votes no longer verify (a key was revoked)"
                            if signed < row.quorum
                            else f"the quorum was raised to {quorum} since it was filed"
                        )
                        ended = replace(row, state="rejected", ended_ms=at, reason=reason)
                        await self._move(tx, row, replace(ended, ended_by="chainkeys"))
                        details = {"change": row.id, "reason": reason}
                        await Audit.insert(
                            tx, audit_event(_actor(row), "change.superseded", "ok", details=details)
                        )
                        continue
                    await self._apply(tx, row, at)
                    applied += 1
            except IntegrityFailure:
                log.error(
                    "scheduled change %s was not applied: it fails its integrity check", change_id
                )
        return applied

    # -- helpers ------------------------------------------------------------------------

    async def _open(self, tx: Tx, who: Principal, change_id: str) -> ChangeRow:
        row = await Changes.get(tx, who.tenant_id, change_id[:40])
        if row is None:
            raise ChangeNotFound()
        if row.state not in OPEN:
            raise Conflict(f"change {row.id} is {row.state}", code="change_ended")
        return row

    @staticmethod
    def _pending(row: ChangeRow, digest: str) -> None:
        if row.state != "pending":
            raise Conflict(
                f"change {row.id} is {row.state}: votes are taken while it is pending",
                code="change_not_pending",
            )
        if digest != row.digest:
            raise Conflict(
                "digest is not this change's: look at the change again (GET /changes/{id})",
                code="digest_mismatch",
            )

    @staticmethod
    async def _move(tx: Tx, row: ChangeRow, new: ChangeRow) -> ChangeRow:
        done = await Changes.move(tx, row, new)
        if done is None:  # never under the tenant's scope; a writer's hand otherwise
            raise Conflict(f"change {row.id} moved meanwhile", code="change_ended")
        return done

    async def announce(self, tx: Tx, kind: str, payload: dict[str, Any]) -> None:
        """Queue a webhook event in `tx`, when a webhook is configured (the operator's
        break glass in cli/governed.py announces through it too)."""
        if not self.webhook:
            return
        at = now_ms()
        event_id = "evt_" + secrets.token_hex(12)
        body = {"id": event_id, "type": kind, "change": payload, "time": iso(at)}
        await Outbox.add(tx, event_id, msgspec.json.encode(body).decode(), at)


def _actor(row: ChangeRow) -> Principal:
    return Principal(row.tenant_id, "", "")
