"""The one path every sign request takes, whatever the family and kind.

Decode and check first (the chain layer's `prepare`, with public data only),
then the tenant's policy on the summary; a refusal opens no key. Then the gate every
signature passes, whichever way it came (`_sign`: the sign endpoint, an approved
request at its quorum, an item of a batch, and any later way to sign): no freeze may
hold over the tenant, the account or a key that would sign (freezes/service.py), and
the co-signer, when one is set, must approve (signing/cosigner.py). Then, in one
transaction: check the policy's 24 h caps, open the key, sign, count the spend, and
audit the summary with the digest and tx id. A signature whose audit row (or cap
count) cannot be committed is not handed out.

The co-signer is asked outside any transaction (its answer may take seconds; no
lock or connection waits on it), after the caps were checked without counting (it is
never asked about what they refuse) and before they are counted: so a rejected or
unanswered signature consumes no cap, and the count in the signing transaction,
which may still refuse when concurrent signatures filled the window meanwhile,
keeps every cap exact. Its approval is necessary, never sufficient. An item of a batch
(signing/batch.py) takes the same path (`sign_on`), its reads and writes in the
batch's one transaction (`db`): there the co-signer is asked inside it.

Every refusal is audited (signing/refusals.py), whatever its shape: a body too large,
malformed or of the wrong types (`refuse_unread`), an unknown account, a request the
decoder refuses or fails on (a bug there is a 400 that signs nothing, never a 500).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from chainkeys import metrics
from chainkeys.accounts.families import family_of
from chainkeys.accounts.multisig import held_members
from chainkeys.accounts.repository import AccountRow
from chainkeys.accounts.service import AccountService
from chainkeys.approvals.proofs import Proof
from chainkeys.approvals.repository import ApprovalRow
from chainkeys.approvals.service import ApprovalService, ApprovalView
from chainkeys.approvals.service import Request as ApprovalRequest
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.tx.base import (
    CoSigned,
    Decoded,
    Owner,
    Signed,
    SignKind,
    Summary,
    summary_record,
)
from chainkeys.errors import (
    AccountNotFound,
    BadRequest,
    ChainkeysError,
    Frozen,
    IntegrityFailure,
    KeyMismatch,
    PolicyDenied,
)
from chainkeys.policies.engine import Decision, Refusal
from chainkeys.policies.service import Account, PolicyService, Spend
from chainkeys.signing.cosigner import Cosigner
from chainkeys.signing.gate import Gate
from chainkeys.signing.keys import OpenedKeys, open_checked
from chainkeys.signing.refusals import details_of
from chainkeys.signing.requests import (
    SIGN_FAILED,
    Again,
    account_for,
    approved,
    frames,
    kind_of,
    owner_of,
    prepare,
)
from chainkeys.store.backend import Backend, Transactions
from chainkeys.tokens.service import Principal, TokenService
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.gate import opened

log = logging.getLogger("chainkeys.signing")


class Completed(Exception):
    """An approved request another process signed first (`ApprovalService.signed_in`):
    this completion's transaction, its signature and audit row with it, is dropped."""


class SigningService(Gate):
    def __init__(
        self,
        db: Backend,
        barrier: Barrier,
        accounts: AccountService,
        policies: PolicyService,
        approvals: ApprovalService,
        tokens: TokenService,
        cosigner: Cosigner | None = None,
    ) -> None:
        super().__init__(db, policies, cosigner)
        self.barrier = barrier
        self.tokens = tokens
        self.accounts = accounts
        self.approvals = approvals

    async def sign(
        self, who: Principal, family: str, name: str, kind: SignKind, request: Any
    ) -> Signed | ApprovalView:
        """Sign, or, when the tenant's policy asks people to approve it first, open (or
        answer again) the approval request and sign nothing yet."""
        row = await self.account(who, family, name, kind.path)
        return await self.sign_on(who, row, kind, request)

    async def account(self, who: Principal, family: str, name: str, kind: str) -> AccountRow:
        """The account that signs (an unknown one is refused, audited as `kind`)."""
        try:
            return await self.accounts.row(who, family, name)
        except AccountNotFound as exc:
            await self.refuse_unread(who, family, name, kind, exc)
            raise

    async def sign_on(
        self,
        who: Principal,
        row: AccountRow,
        kind: SignKind,
        request: Any,
        db: Transactions | None = None,
        opened_keys: OpenedKeys | None = None,
    ) -> Signed | ApprovalView:
        """`sign` on the account `row`: what decides, caps, signs and audits a request,
        alone (`db` None: each write is its own transaction) or as an item of a batch
        (`db`: the batch's one transaction, where the items before it are seen;
        `opened_keys`: the keys its items opened and checked, once per batch)."""
        db = db or self.db
        owner = owner_of(row)
        prepared = await self.decode(who, row, owner, kind, request, db)
        summary = prepared.summary
        try:
            policy = await self.policies.current(who.tenant_id, db=db)
        except IntegrityFailure as exc:  # the policy was edited: sign nothing until reset
            await self.refused(who, row, exc.code, {"kind": kind.path, "reason": exc.message}, db)
            raise
        decision: Decision | None = None
        again: Again = None
        try:
            if policy is not None:
                account = await self._account(row, db)
                facts = await self.policies.facts(who, account, summary, policy, db)
                decision = await self.policies.decide(policy, summary, facts)
                again = (policy, facts) if policy.reads_spent else None
            if decision is not None and decision.approval is not None:
                return await self._hold(
                    who, row, owner, kind, request, summary, decision, again, db
                )
        except Refusal as refusal:
            await self.policy_refused(who, row, kind, summary, decision, refusal, db)
            raise PolicyDenied(refusal.message) from None
        return await self._sign(
            who,
            row,
            owner,
            kind,
            prepared,
            decision,
            request,
            again=again,
            db=db,
            opened_keys=opened_keys,
        )

    async def decode(
        self,
        who: Principal,
        row: AccountRow,
        owner: Owner,
        kind: SignKind,
        request: Any,
        db: Transactions | None = None,
    ) -> Decoded:
        """The chain layer's `prepare`, a request it refuses audited (also signing/combine.py)."""
        try:
            return prepare(kind, request, owner)
        except BadRequest as exc:
            await self.refused(who, row, exc.code, {"kind": kind.path, "reason": exc.message}, db)
            raise

    async def _sign(
        self,
        who: Principal,
        row: AccountRow,
        owner: Owner,
        kind: SignKind,
        prepared: Decoded,
        decision: Decision | None,
        request: Any,
        approval: ApprovalRow | None = None,
        again: Again = None,
        db: Transactions | None = None,
        opened_keys: OpenedKeys | None = None,
    ) -> Signed:
        """No freeze holding, the co-signer's approval; then check the caps (deciding
        again under their lock when conditions read `spent`), open the key, sign, count
        the spend and audit, in one transaction. Whatever fails is audited.

        Every row it adds comes after the last thing that can refuse the request: an
        item of a batch shares the batch's transaction without a savepoint
        (store/shared.py), so a refused item must leave nothing of its own behind (a
        write that added rows and then failed fails the whole batch instead)."""
        db = db or self.db
        summary = prepared.summary
        try:
            signers = await self._signers(who, row, owner)
            names = (row.name, *(s.name for s in signers if s.name != row.name))
            await self.unfrozen(who, row, kind.path, names, db)
            asked = await self._cosigned(
                who, row, owner, kind, prepared, request, decision, approval, again, db
            )
            if asked is not None:  # its answer took a while: a freeze made meanwhile holds
                await self.unfrozen(who, row, kind.path, names, db)
            for signer in signers:  # a rotation newer than the last refresh
                await self.barrier.ensure(signer.key_id)
            # without caps to count, the audit row is the write's one statement
            async with db.write(one_statement=decision is None and approval is None) as tx:
                if approval is not None:  # one completion at a time (signed_in below)
                    await tx.serialize(f"approval/{approval.id}")
                spend: Spend | None = None
                if decision is not None:
                    decision, spend = await self.policies.check(
                        tx, who.tenant_id, owner.network.name, decision, summary, again=again
                    )
                    approved(decision, approval)
                    if asked is None and self._asks(decision):  # decided again: another rule
                        raise Refusal(decision.rule, "the policy changed meanwhile; send it again")
                keys = [open_checked(self.accounts, s, opened_keys) for s in signers]
                if owner.multisig is None:
                    signed = prepared.sign(keys[0])
                elif isinstance(prepared, CoSigned):  # every kind in MULTISIG_KINDS is
                    signed = prepared.cosign(keys)
                else:
                    raise RuntimeError(f"{kind.path} prepared no multisig signing")
                if spend is not None:  # signed: its spend counts from here
                    await spend.record()
                details = details_of(kind, summary, decision)
                details["tx_id"] = signed.tx_id
                if asked is not None:
                    details["cosigner"] = asked
                if approval is not None:
                    details["approval"] = approval.id
                event = audit_event(
                    who, "sign", "ok", family=row.family, account_name=row.name, details=details
                )
                await Audit.insert(tx, event)
                if approval is not None:
                    result = msgspec.json.encode(signed.data).decode()
                    if not await self.approvals.signed_in(tx, approval.id, result):
                        raise Completed(approval.id)
        except (Completed, Frozen):  # audited where it was found
            raise
        except KeyMismatch:
            await self.refused(who, row, KeyMismatch.code, {"kind": kind.path}, db)
            raise
        except BadRequest as exc:  # a multisig none of whose member keys is held any more
            await self.refused(who, row, exc.code, {"kind": kind.path, "reason": exc.message}, db)
            raise
        except Refusal as refusal:
            await self.policy_refused(who, row, kind, summary, decision, refusal, db)
            raise PolicyDenied(refusal.message) from None
        except ChainkeysError as exc:  # the store unavailable, a fence: said as it is
            await self.refused(who, row, exc.code, {"kind": kind.path, "reason": exc.message}, db)
            raise
        except Exception as exc:  # a key that will not open, a signer that fails: audited
            log.error(
                "signing with the %s account %s failed (%s); nothing was signed\n%s",
                row.family,
                row.name,
                type(exc).__name__,
                frames(exc),
            )
            reason = {"kind": kind.path, "reason": "signing failed"}
            await self.refused(who, row, SIGN_FAILED, reason, db)
            raise
        if db is self.db:  # (a batch counts its signatures once they are committed)
            metrics.SIGNATURES.labels(row.family, kind.path).inc()
        return signed

    async def _account(self, row: AccountRow, db: Transactions | None = None) -> Account:
        return await account_for(db or self.db, opened(self.barrier.integrity), row)

    async def _signers(self, who: Principal, row: AccountRow, owner: Owner) -> list[AccountRow]:
        """The accounts whose keys sign: this one, or a multisig's members held here."""
        if owner.multisig is None:
            return [row]
        found = []
        for public_key, name in held_members(row.details).items():
            try:
                member = await self.accounts.row(who, row.family, name)
            except AccountNotFound:
                continue  # deleted since: it no longer signs
            mine = family_of(member.family).public_key_bytes(member.public_key).hex()
            if mine == public_key and member.network == row.network:
                found.append(member)
        if not found:
            raise BadRequest(
                "no member key of this multisig is held here any more", code="multisig_no_key"
            )
        return found

    # -- approvals -----------------------------------------------------------------------

    async def _hold(
        self,
        who: Principal,
        row: AccountRow,
        owner: Owner,
        kind: SignKind,
        request: Any,
        summary: Summary,
        decision: Decision,
        again: Again,
        db: Transactions,
    ) -> ApprovalView:
        """A request the policy allows only with approval: the caps are checked now (an
        approval never overrides a refusal), nothing is counted or signed, no key is
        opened; the approval request waits for people."""
        approval = decision.approval
        if approval is None:  # never: the caller checked
            raise RuntimeError("no approval to wait for")
        await self.unfrozen(who, row, kind.path, (row.name,), db)  # no request opens either
        async with db.write() as tx:
            decision, _ = await self.policies.check(
                tx, who.tenant_id, owner.network.name, decision, summary, again=again
            )
        approval = decision.approval
        if approval is None:  # the window moved under the lock: it no longer needs people
            raise Refusal(
                decision.rule,
                "the 24 h window changed while this request was decided; send it again",
            )
        held = ApprovalRequest(
            row.family,
            row.name,
            kind.path,
            msgspec.json.encode(request).decode(),
            summary.digest,
            summary_record(summary),
            decision.rule.index,
            approval.group,
            approval.quorum,
            approval.ttl_ms,
            approval.passkey,
        )
        return await self.approvals.open(who, held, db)

    async def vote(
        self,
        who: Principal,
        approval_id: str,
        approve: bool,
        digest: str | None,
        reason: str | None,
        proof: Proof | None = None,
    ) -> ApprovalView:
        """A person's vote (with its passkey or key signature: approvals/passkeys.py); the
        vote that reaches the quorum signs (once, whichever replica it lands on)."""
        view, won = await self.approvals.vote(who, approval_id, approve, digest, reason, proof)
        if won:
            await self.complete(view.row)
            view = await self.approvals.get(who, approval_id)
        return view

    async def complete(self, approval: ApprovalRow) -> None:
        """Sign an approved request: decoded again (it must still be the digest the
        people approved), the current policy and caps checked again, then signed as the
        requester; the sign endpoint's answer is kept for the requester. Whatever goes
        wrong (a refusal, a stored request that no longer decodes, a key that will not
        open) fails this approval with its reason, audited: never the next one's turn."""
        try:
            await self._complete(approval)
        except Completed:
            return  # another process signed it first: its answer stands
        except ChainkeysError as exc:
            await self.approvals.finish(approval.id, exc.message)
            return
        except Exception as exc:
            log.error(
                "the approved request %s could not be signed (%s); it is failed\n%s",
                approval.id,
                type(exc).__name__,
                frames(exc),
            )
            await self.approvals.finish(
                approval.id, f"it could not be signed ({type(exc).__name__})"
            )
            return

    async def _complete(self, approval: ApprovalRow) -> Signed | None:
        await self.approvals.verified(approval)  # the request and its votes, authenticated
        requester = await self.tokens.live(approval.requester_token_id)
        if (
            requester is None
            or "sign" not in requester.scopes
            or not requester.may_use(approval.family)
        ):
            reason = "the requesting token was revoked, has expired or may no longer sign this"
            await self.approvals.finish(approval.id, reason)
            return None
        kind = kind_of(approval.family, approval.kind)
        try:
            request = msgspec.json.decode(approval.request, type=kind.request)
        except msgspec.DecodeError:  # a stored request this version cannot read
            raise BadRequest("the stored request no longer decodes") from None
        row = await self.accounts.row(requester, approval.family, approval.account_name)
        owner = owner_of(row)
        prepared = await self.decode(requester, row, owner, kind, request)
        if prepared.summary.digest != approval.digest:
            raise BadRequest("the request no longer decodes to the approved digest")
        policy = await self.policies.current(approval.tenant_id, fresh=True)
        decision, again = None, None
        if policy is not None:
            try:
                facts = await self.policies.facts(
                    requester, await self._account(row), prepared.summary, policy
                )
                decision = await self.policies.decide(policy, prepared.summary, facts)
                approved(decision, approval)
            except Refusal as refusal:
                await self.policy_refused(requester, row, kind, prepared.summary, None, refusal)
                raise PolicyDenied(refusal.message) from None
            again = (policy, facts) if policy.reads_spent else None
        return await self._sign(
            requester, row, owner, kind, prepared, decision, request, approval, again
        )

    async def sweep(self) -> None:
        """Expire pending requests past their ttl; sign approved ones a process did not
        finish (a crash between the quorum and the signature), each on its own."""
        await self.approvals.expire_due()
        await self.approvals.cancel_orphans(self._requester_live)
        for approval in await self.approvals.stuck():
            await self.complete(approval)

    async def _requester_live(self, token_id: str) -> bool:
        return await self.tokens.live(token_id) is not None
