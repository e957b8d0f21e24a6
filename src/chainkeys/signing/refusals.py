"""Every refused sign request is audited: what the signing service writes when it
refuses, in one place (signing/service.py, signing/batch.py, signing/combine.py).

A refusal's event is a write of its own, or, for an item of a batch, part of the
batch's one transaction (`db`: store/shared.py). A refusal whose event cannot be
written is logged; the refusal stands.
"""

from __future__ import annotations

import logging
from typing import Any

from chainkeys import metrics
from chainkeys.accounts.repository import AccountRow
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.tx.base import SignKind, Summary, summary_record
from chainkeys.errors import ChainkeysError, PolicyDenied
from chainkeys.policies.engine import Decision, Refusal
from chainkeys.store.backend import Backend, Transactions
from chainkeys.tokens.service import Principal

log = logging.getLogger("chainkeys.signing")


class Refusals:
    """The audit of refused sign requests (the signing service is one)."""

    db: Backend

    async def refuse_unread(
        self,
        who: Principal,
        family: str,
        name: str,
        kind: SignKind | str,
        exc: ChainkeysError,
        db: Transactions | None = None,
    ) -> None:
        """Audit a sign request refused before its body could be read (too large, too
        slow, not JSON, wrong field types) or its account found: nothing was decoded,
        nothing signed. `kind`: the sign endpoint, or its path (`sign-batch`)."""
        path = kind if isinstance(kind, str) else kind.path
        details = {"kind": path, "reason": exc.message[:500]}
        await self.audit_refusal(who, family, name, exc.code, details, db)

    async def refused(
        self,
        who: Principal,
        row: AccountRow,
        code: str,
        details: dict[str, Any],
        db: Transactions | None = None,
    ) -> None:
        """Audit a refused request on an account (also signing/combine.py)."""
        await self.audit_refusal(who, row.family, row.name, code, details, db)

    async def policy_refused(
        self,
        who: Principal,
        row: AccountRow,
        kind: SignKind,
        summary: Summary,
        decision: Decision | None,
        refusal: Refusal,
        db: Transactions | None = None,
    ) -> None:
        details = details_of(kind, summary, decision)
        details.update(rule=refusal.rule.index if refusal.rule else None, reason=refusal.reason)
        await self.refused(who, row, PolicyDenied.code, details, db)

    async def audit_refusal(
        self,
        who: Principal,
        family: str,
        name: str,
        code: str,
        details: dict[str, Any],
        db: Transactions | None = None,
    ) -> None:
        metrics.SIGN_REFUSALS.labels(family, details["kind"], code).inc()
        event = audit_event(who, "sign", code, family=family, account_name=name, details=details)
        try:
            await Audit.record(db or self.db, event)
        except ChainkeysError:
            log.error("the audit row of a refused %s sign request could not be written", family)


def details_of(kind: SignKind, summary: Summary, decision: Decision | None) -> dict[str, Any]:
    """What a sign event says of the request: its kind, digest, summary and rule."""
    details: dict[str, Any] = {
        "kind": kind.path,
        "digest": summary.digest,
        "summary": summary_record(summary),
    }
    if decision is not None:
        details["policy_rule"] = decision.rule.index
    return details
