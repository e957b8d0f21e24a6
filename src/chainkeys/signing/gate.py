"""The gate every signature passes after the policy allowed it and before a key
opens: no freeze holding (freezes/service.py), the co-signer's approval when one is set
(signing/cosigner.py); and how a refused sign request is audited.

The base of `SigningService` (signing/service.py), whose `_sign` calls `unfrozen` and
`_cosigned` on the one path every signature takes, so the sign endpoint, an approved
request at its quorum and any later way to sign pass both by construction.
"""

from __future__ import annotations

import logging
from typing import Any

from chainkeys.accounts.repository import AccountRow
from chainkeys.approvals.repository import ApprovalRow
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.tx.base import Decoded, Owner, SignKind
from chainkeys.errors import ChainkeysError, CosignerRejected, CosignerUnavailable
from chainkeys.freezes.service import FreezeLookup, frozen
from chainkeys.policies.engine import Decision
from chainkeys.policies.service import PolicyService
from chainkeys.signing.cosigner import Cosigner, question
from chainkeys.signing.refusals import Refusals
from chainkeys.signing.requests import Again, approved
from chainkeys.store.backend import Backend, Transactions
from chainkeys.tokens.service import Principal

log = logging.getLogger("chainkeys.signing")


class Gate(Refusals):
    """Freezes and the co-signer between a decision and a key; refusals audited
    (signing/refusals.py). `db`: where an item of a batch reads and writes (its
    transaction, store/shared.py), the store by default."""

    def __init__(self, db: Backend, policies: PolicyService, cosigner: Cosigner | None) -> None:
        self.db = db
        self.policies = policies
        self.cosigner = cosigner
        self.freezes = FreezeLookup(db)

    async def unfrozen(
        self,
        who: Principal,
        row: AccountRow,
        kind: str,
        names: tuple[str, ...],
        db: Transactions | None = None,
    ) -> None:
        """Frozen (423, audited) while a freeze holds over the tenant or any of `names`
        (the account, and a multisig's member keys that would sign); also combine.py's."""
        found = await self.freezes.holding(who.tenant_id, row.family, names)
        if found is not None:
            error = frozen(found, "nothing was signed")
            details = {"kind": kind, "freeze": found.id, "reason": error.message}
            await self.refused(who, row, error.code, details, db)
            raise error

    def _asks(self, decision: Decision | None) -> bool:
        """Whether the co-signer is asked: one is set, and the deciding rule (if any)
        does not say `"cosigner": false`."""
        return self.cosigner is not None and (decision is None or decision.rule.cosigner)

    async def _cosigned(
        self,
        who: Principal,
        row: AccountRow,
        owner: Owner,
        kind: SignKind,
        prepared: Decoded,
        request: Any,
        decision: Decision | None,
        approval: ApprovalRow | None,
        again: Again,
        db: Transactions | None = None,
    ) -> str | None:
        """The co-signer's approval (the question's id; None: none was asked), asked
        after the caps were checked, without counting them, in a short transaction of
        their own (Refusal: it is never asked about what they refuse). The call, its
        outcome and any reason are audited (`cosigner`); a refusal raises."""
        if self.cosigner is None or not self._asks(decision):
            return None
        summary = prepared.summary
        if decision is not None and (decision.spent or again is not None):
            async with (db or self.db).write() as tx:
                checked = await self.policies.count(
                    tx, who.tenant_id, owner.network.name, decision, summary, False, again
                )
            approved(checked, approval)
        asked = question(
            who.tenant,
            row.family,
            row.name,
            owner.network.name,
            kind.path,
            summary,
            request,
            approval.id if approval is not None else None,
        )
        details: dict[str, Any] = {"cosigner": asked["id"], "kind": kind.path}
        details.update(digest=summary.digest, approval=asked["approval"])
        outcome = "interrupted"  # the request was cancelled, or the asking failed
        try:
            await self.cosigner.ask(asked)
            outcome = "ok"
        except (CosignerRejected, CosignerUnavailable) as exc:
            outcome, details["reason"] = exc.code, exc.message
            raise
        finally:
            event = audit_event(
                who, "cosigner", outcome, family=row.family, account_name=row.name, details=details
            )
            try:
                await Audit.record(db or self.db, event)
            except ChainkeysError:
                log.error("the audit row of a co-signer call could not be written")
        return str(asked["id"])

    async def close(self) -> None:
        if self.cosigner is not None:
            await self.cosigner.close()
