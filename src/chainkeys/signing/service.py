"""The one path every sign request takes, whatever the family and kind.

Decode and check first (the chain layer's `prepare`, with public data only);
a refusal opens no key. Then open the key, sign, and audit the summary with
the digest and tx id. Policies (issue 15) plug in between check and key.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chainkeys import metrics
from chainkeys.accounts.repository import AccountRow
from chainkeys.accounts.service import AccountService, family_of
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.keys import key_from_secret
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import Owner, Signed, SignKind
from chainkeys.errors import BadRequest, ChainkeysError
from chainkeys.store.db import Database
from chainkeys.tokens.service import Principal


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
    def __init__(self, db: Database, accounts: AccountService) -> None:
        self.db = db
        self.accounts = accounts

    async def sign(
        self, who: Principal, family: str, name: str, kind: SignKind, request: Any
    ) -> Signed:
        row = await self.accounts.row(who, family, name)
        owner = owner_of(row)
        try:
            prepared = kind.prepare(request, owner)
        except ChainError as exc:
            metrics.SIGN_REFUSALS.labels(family, kind.path, exc.code).inc()
            await self._audit(who, row, exc.code, {"kind": kind.path, "reason": exc.message})
            raise BadRequest(exc.message, code=exc.code) from None
        summary = prepared.summary
        compressed = len(owner.public_key) == 33
        signed = prepared.sign(key_from_secret(self.accounts.open_key(row), compressed))
        details = {
            "kind": kind.path,
            "digest": summary.digest,
            "tx_id": signed.tx_id,
            "summary": msgspec.to_builtins(summary),
        }
        await self._audit(who, row, "ok", details)
        metrics.SIGNATURES.labels(family, kind.path).inc()
        return signed

    async def _audit(
        self, who: Principal, row: AccountRow, outcome: str, details: dict[str, Any]
    ) -> None:
        event = audit_event(
            who, "sign", outcome, family=row.family, account_name=row.name, details=details
        )
        try:
            async with self.db.write() as tx:
                await Audit.insert(tx, event)
        except ChainkeysError:
            if outcome == "ok":
                raise  # a signature that cannot be audited is not handed out
