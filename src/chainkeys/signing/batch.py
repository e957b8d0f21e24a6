"""A batch of sign requests on one account (`POST /{family}/{name}/sign-batch`).

Each item is one of the account's sign requests, answered as that request alone
would be: decided, capped, signed and audited by `SigningService.sign_on`, the
path every sign request takes (so whatever decides a single request, a co-signer
or a freeze included, decides each item), in the items' order. What the batch
adds is its transaction: every item's reads and writes go through the batch's one
transaction (store/shared.py), so an item's caps and conditions see what the items
before it spent, and the signatures, their audit rows and cap counts commit
together (none is handed out unless all of it committed; when the transaction fails,
the whole batch fails, 503 or 500, audited, and nothing of it is kept); and the
account's key is opened (and checked against its public key) once for the batch, not
once per item.

An item that could not be read (too large for the server's body limit, malformed)
is refused and audited in its place, as alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from chainkeys import metrics
from chainkeys.accounts.repository import AccountRow
from chainkeys.approvals.service import ApprovalView
from chainkeys.chains.tx.base import Signed, SignKind
from chainkeys.errors import ChainkeysError
from chainkeys.signing.keys import OpenedKeys
from chainkeys.signing.requests import frames
from chainkeys.signing.service import SigningService
from chainkeys.store.shared import Shared
from chainkeys.tokens.service import Principal

log = logging.getLogger("chainkeys.signing")

KIND: Final = "sign-batch"  # what an audit row of the batch as a whole names
MAX_ITEMS: Final = 1_000
MAX_BODY: Final = 1 << 20  # the route's own body cap (1 MiB), above the server's
# Items signed between two turns of the event loop: on SQLite nothing in an item
# waits, and a batch of 1,000 would hold the loop (every other request) for its whole
# time; 16 items are a few milliseconds.
TURN: Final = 16

Outcome = Signed | ApprovalView | ChainkeysError


@dataclass(frozen=True, slots=True)
class Item:
    """One item as read: its sign kind and request, or why it was refused unread."""

    kind: SignKind
    request: Any = None
    refusal: ChainkeysError | None = None


async def sign_batch(
    signing: SigningService, who: Principal, family: str, name: str, items: Sequence[Item]
) -> list[Outcome]:
    """Each item's outcome, in order: signed, waiting for approval, or refused (the
    error its endpoint would have answered). The batch as a whole fails (raises, audited)
    when its account is not found or its transaction cannot commit."""
    row = await signing.account(who, family, name, KIND)
    outcomes: list[Outcome] = []
    try:
        async with signing.db.write() as tx:
            shared, opened = Shared(tx), OpenedKeys()
            for n, item in enumerate(items):
                outcomes.append(await _one(signing, who, row, item, shared, opened))
                if shared.failed is not None:  # nothing of this transaction may commit
                    raise shared.failed
                if n % TURN == TURN - 1:
                    await asyncio.sleep(0)
            await shared.flush()  # the rows added behind, before the COMMIT
            if shared.failed is not None:
                raise shared.failed
    except ChainkeysError as exc:
        await signing.refuse_unread(who, family, row.name, KIND, exc)
        raise
    except Exception as exc:
        log.error(
            "a batch of %d %s sign requests failed (%s); nothing of it was kept\n%s",
            len(items),
            family,
            type(exc).__name__,
            frames(exc),
        )
        await signing.refuse_unread(who, family, row.name, KIND, ChainkeysError())
        raise
    signed = Counter(
        i.kind.path for i, o in zip(items, outcomes, strict=True) if isinstance(o, Signed)
    )
    for path, count in signed.items():  # (counted once committed)
        metrics.SIGNATURES.labels(family, path).inc(count)
    return outcomes


async def _one(
    signing: SigningService,
    who: Principal,
    row: AccountRow,
    item: Item,
    shared: Shared,
    opened: OpenedKeys,
) -> Outcome:
    if item.refusal is not None:
        await signing.refuse_unread(who, row.family, row.name, item.kind, item.refusal, shared)
        return item.refusal
    try:
        return await signing.sign_on(who, row, item.kind, item.request, shared, opened)
    except ChainkeysError as exc:
        return exc
    except Exception as exc:  # as alone: a 500 (audited where it was raised)
        log.error(
            "a %s %s item of a batch failed (%s)\n%s",
            row.family,
            item.kind.path,
            type(exc).__name__,
            frames(exc),
        )
        return ChainkeysError()
