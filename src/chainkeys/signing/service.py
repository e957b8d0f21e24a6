"""The one path every sign request takes, whatever the family and kind.

Decode and check first (the chain layer's `prepare`, with public data only),
then the tenant's policy on the summary; a refusal opens no key. Then, in one
transaction: count the spend against the policy's 24 h caps, open the key,
sign, and audit the summary with the digest and tx id. A signature whose
audit row (or cap count) cannot be committed is not handed out.

Every refusal is audited, whatever its shape: a body that is too large,
malformed or of the wrong types (`refuse_unread`), an unknown account, a
request the decoder refuses, and one the decoder fails on (a bug there is
a 400 that signs nothing, never a 500).
"""

from __future__ import annotations

import logging
from typing import Any

from chainkeys import metrics
from chainkeys.accounts.repository import AccountRow
from chainkeys.accounts.service import AccountService, family_of
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.keys import key_from_secret
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import BAD as BAD_REQUEST
from chainkeys.chains.tx.base import Owner, Signed, SignKind, Summary, summary_record
from chainkeys.errors import AccountNotFound, BadRequest, ChainkeysError, KeyMismatch, PolicyDenied
from chainkeys.policies.engine import Decision, Refusal, decide
from chainkeys.policies.service import PolicyService
from chainkeys.store.db import Database
from chainkeys.tokens.service import Principal

log = logging.getLogger("chainkeys.signing")


def owner_of(row: AccountRow) -> Owner:
    fam = family_of(row.family)
    return Owner(
        family=row.family,
        name=row.name,
        address=row.address,
        public_key=fam.public_key_bytes(row.public_key),
        network=fam.network(row.network),
        address_type=row.details.get("address_type"),
    )


class SigningService:
    def __init__(self, db: Database, accounts: AccountService, policies: PolicyService) -> None:
        self.db = db
        self.accounts = accounts
        self.policies = policies

    async def refuse_unread(
        self, who: Principal, family: str, name: str, kind: SignKind, exc: ChainkeysError
    ) -> None:
        """Audit a sign request refused before its body could be read (too large, too
        slow, not JSON, wrong field types): nothing was decoded, nothing signed."""
        await self._audit_refusal(who, family, name[:200], exc.code,
                                  {"kind": kind.path, "reason": exc.message[:500]})  # fmt: skip

    async def sign(
        self, who: Principal, family: str, name: str, kind: SignKind, request: Any
    ) -> Signed:
        try:
            row = await self.accounts.row(who, family, name)
        except AccountNotFound as exc:
            await self.refuse_unread(who, family, name, kind, exc)
            raise
        owner = owner_of(row)
        try:
            prepared = kind.prepare(request, owner)
        except ChainError as exc:
            await self._refused(who, row, exc.code, {"kind": kind.path, "reason": exc.message})
            raise BadRequest(exc.message, code=exc.code) from None
        except Exception as exc:  # a decoder that fails has not understood the request
            log.error("the %s %s decoder failed (%s); the request is refused",
                      family, kind.path, type(exc).__name__)  # fmt: skip
            reason = "the request could not be decoded; nothing was signed"
            await self._refused(who, row, BAD_REQUEST, {"kind": kind.path, "reason": reason})
            raise BadRequest(reason, code=BAD_REQUEST) from None
        summary = prepared.summary
        policy = await self.policies.current(who.tenant_id)
        decision: Decision | None = None
        try:
            if policy is not None:
                decision = decide(policy, summary)
            await self.accounts.ring.ensure(row.key_id)  # a rotation newer than the last refresh
            async with self.db.write() as tx:
                if decision is not None:
                    await PolicyService.count(
                        tx, who.tenant_id, family, owner.network.name, decision, summary.digest
                    )
                key = key_from_secret(self.accounts.open_key(row), len(owner.public_key) == 33)
                if key.public != owner.public_key:  # decoded and checked against this key
                    log.error("refused to sign: the %s account %s opened a key that is not "
                              "its stored public key's", row.family, row.name)  # fmt: skip
                    raise KeyMismatch()
                signed = prepared.sign(key)
                details = self._details(kind, summary, decision)
                details["tx_id"] = signed.tx_id
                event = audit_event(who, "sign", "ok", family=row.family,
                                    account_name=row.name, details=details)  # fmt: skip
                await Audit.insert(tx, event)
        except KeyMismatch:
            await self._refused(who, row, KeyMismatch.code, {"kind": kind.path})
            raise
        except Refusal as refusal:
            details = self._details(kind, summary, decision)
            details.update(rule=refusal.rule.index if refusal.rule else None,
                           reason=refusal.reason)  # fmt: skip
            await self._refused(who, row, PolicyDenied.code, details)
            raise PolicyDenied(refusal.message) from None
        metrics.SIGNATURES.labels(family, kind.path).inc()
        return signed

    @staticmethod
    def _details(kind: SignKind, summary: Summary, decision: Decision | None) -> dict[str, Any]:
        details: dict[str, Any] = {
            "kind": kind.path,
            "digest": summary.digest,
            "summary": summary_record(summary),
        }
        if decision is not None:
            details["policy_rule"] = decision.rule.index
        return details

    async def _refused(
        self, who: Principal, row: AccountRow, code: str, details: dict[str, Any]
    ) -> None:
        await self._audit_refusal(who, row.family, row.name, code, details)

    async def _audit_refusal(
        self, who: Principal, family: str, name: str, code: str, details: dict[str, Any]
    ) -> None:
        metrics.SIGN_REFUSALS.labels(family, details["kind"], code).inc()
        event = audit_event(who, "sign", code, family=family, account_name=name, details=details)
        try:
            async with self.db.write() as tx:
                await Audit.insert(tx, event)
        except ChainkeysError:
            log.error("the audit row of a refused %s sign request could not be written", family)
