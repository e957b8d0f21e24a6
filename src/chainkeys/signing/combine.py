"""A Cosmos multisig's transaction assembled from its members' signatures (POST
/{family}/{accountName}/combine).

Its own module because it is not signing: no key is opened, no policy applies, no
cap is counted; the members signed elsewhere, and this only checks their amino
signatures and builds the TxRaw. It is one family's, where the signing service is
every family's. It reads the account and audits as every sign request does, with
the signing service's decoding and refusal auditing, so it uses that service (and
the service knows nothing of it); the bytes themselves are the chain layer's
(chains/tx/cosmos/multisig.py `combine`), which knows no accounts, store or audit.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import Signed
from chainkeys.chains.tx.cosmos.common import CosmosDoc
from chainkeys.chains.tx.cosmos.multisig import CosmosMultisig, combine
from chainkeys.chains.tx.cosmos.transfer import CosmosTransactionResponse
from chainkeys.errors import AccountNotFound, BadRequest
from chainkeys.signing.requests import kind_of, owner_of
from chainkeys.signing.service import SigningService
from chainkeys.tokens.service import Principal


def _decoded(signatures: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """(key, signature) pairs from their base64 text."""
    try:
        return [
            (base64.b64decode(k, validate=True), base64.b64decode(v, validate=True))
            for k, v in signatures
        ]
    except ValueError:
        raise ChainError("a key or a signature is not base64", "invalid_signature") from None


async def combine_multisig(
    signing: SigningService,
    who: Principal,
    family: str,
    name: str,
    doc: dict[str, Any],
    signatures: list[tuple[str, str]],
) -> Signed:
    """A Cosmos multisig's transaction from its members' amino signatures (base64
    key, base64 signature): the document read in full as sign-amino reads it, each
    signature verified, the TxRaw built as cosmjs `makeMultisignedTx` builds it.
    Nothing is signed here, so no policy applies; it is audited as any signature, and
    refused as any while a freeze holds over the account."""
    kind = kind_of(family, "sign-amino")
    try:
        row = await signing.accounts.row(who, family, name)
    except AccountNotFound as exc:
        await signing.refuse_unread(who, family, name, kind, exc)
        raise
    owner = owner_of(row)
    ms = owner.multisig
    if not isinstance(ms, CosmosMultisig):
        wrong = BadRequest("this account is not a Cosmos multisig", code="not_multisig")
        await signing.refused(who, row, wrong.code, {"kind": "combine", "reason": wrong.message})
        raise wrong
    prepared = await signing.decode(who, row, owner, kind, kind.request(signDoc=doc))
    await signing.unfrozen(who, row, "combine", (row.name,))  # it makes a signed transaction
    try:
        pairs = _decoded(signatures)
        if not isinstance(prepared, CosmosDoc):  # never: sign-amino prepares one
            raise RuntimeError("sign-amino prepared no Cosmos document")
        raw = combine(ms, doc, prepared.message, pairs)
    except ChainError as exc:
        await signing.refused(who, row, exc.code, {"kind": "combine", "reason": exc.message})
        raise BadRequest(exc.message, code=exc.code) from None
    tx_hash = hashlib.sha256(raw).hexdigest().upper()
    details = {
        "kind": "combine",
        "digest": prepared.summary.digest,
        "tx_id": tx_hash,
        "signatures": len(pairs),
    }
    event = audit_event(who, "sign", "ok", family=family, account_name=row.name, details=details)
    await Audit.record(signing.db, event)
    answer = CosmosTransactionResponse(signedTx=base64.b64encode(raw).decode(), txHash=tx_hash)
    return Signed(answer, tx_hash)
