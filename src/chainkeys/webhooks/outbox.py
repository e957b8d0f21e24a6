"""The webhook outbox: events written in the transaction of the change they announce
(an approval's state, a governance change, a freeze), so a restart loses none; sent by
any process (webhooks/delivery.py). Each row is MACed (`WEBHOOK_OUTBOX`): one a
database writer inserted or edited is parked with why, never signed and sent."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, insert, or_, select, update

from chainkeys.store.integrity import WEBHOOK_OUTBOX
from chainkeys.store.sql import Prepared, Tx
from chainkeys.store.tables import webhook_outbox
from chainkeys.vault.integrity import failed

NEVER = 2**62  # a parked event's next attempt: never
UNSENT = "fails its integrity check: written by someone without the master key; never sent"
_o = webhook_outbox.c
_OUTBOX_INSERT = Prepared(
    insert(webhook_outbox), ("event_id", "body", "created_ms", "attempts", "next_ms", "mac")
)
_OUTBOX_DUE = Prepared(
    select(_o.id, _o.body, _o.attempts, _o.event_id, _o.created_ms, _o.mac)
    .where(
        _o.delivered_ms.is_(None),
        _o.next_ms <= bindparam("now"),
        or_(_o.claimed_until.is_(None), _o.claimed_until < bindparam("now")),
    )
    .order_by(_o.id)
    .limit(bindparam("limit"))
)
_OUTBOX_CLAIM = Prepared(
    update(webhook_outbox)
    .where(
        _o.id == bindparam("id"),
        _o.delivered_ms.is_(None),
        or_(_o.claimed_until.is_(None), _o.claimed_until < bindparam("now")),
    )
    .values(claimed_until=bindparam("until"))
)
_OUTBOX_DONE = Prepared(
    update(webhook_outbox).where(_o.id == bindparam("id")).values(delivered_ms=bindparam("at"))
)
_OUTBOX_RETRY = Prepared(
    update(webhook_outbox)
    .where(_o.id == bindparam("id"))
    .values(
        attempts=bindparam("attempts"),
        next_ms=bindparam("next_ms"),
        claimed_until=None,
        last_error=bindparam("error"),
    )
)


class Outbox:
    @staticmethod
    async def add(tx: Tx, event_id: str, body: str, at: int) -> None:
        params: dict[str, Any] = {
            "event_id": event_id,
            "body": body,
            "created_ms": at,
            "attempts": 0,
            "next_ms": at,
        }
        signer = tx.signer
        params["mac"] = signer.mac(WEBHOOK_OUTBOX, params) if signer is not None else None
        await tx.execute(_OUTBOX_INSERT, params)

    @staticmethod
    async def due(
        tx: Tx, now: int, limit: int
    ) -> tuple[list[tuple[int, str, int]], list[tuple[int, int]]]:
        """Events to send, each authenticated; and those that fail (a row a database
        writer inserted or edited: logged, counted, for `park`), never signed and sent."""
        rows = (await tx.execute(_OUTBOX_DUE, {"now": now, "limit": limit})).all()
        signer, due, forged = tx.signer, [], []
        for r in rows:
            if signer is None or not signer.valid(WEBHOOK_OUTBOX, r._mapping):
                failed(WEBHOOK_OUTBOX, f"webhook event {r[3]!r}")
                forged.append((int(r[0]), int(r[2])))
                continue
            due.append((int(r[0]), str(r[1]), int(r[2])))
        return due, forged

    @staticmethod
    async def park(tx: Tx, forged: list[tuple[int, int]]) -> None:
        """Never due again, with why (what `due` found failing)."""
        for event, attempts in forged:
            params = {"id": event, "attempts": attempts, "next_ms": NEVER, "error": UNSENT}
            await tx.execute(_OUTBOX_RETRY, params)

    @staticmethod
    async def claim(tx: Tx, event: int, now: int, until: int) -> bool:
        params = {"id": event, "now": now, "until": until}
        return bool((await tx.execute(_OUTBOX_CLAIM, params)).rowcount)

    @staticmethod
    async def delivered(tx: Tx, event: int, at: int) -> None:
        await tx.execute(_OUTBOX_DONE, {"id": event, "at": at})

    @staticmethod
    async def purge_delivered(tx: Tx, before_ms: int) -> int:
        """Forget events delivered before `before_ms` (their retention is over)."""
        stmt = delete(webhook_outbox).where(webhook_outbox.c.delivered_ms < before_ms)
        return int((await tx.execute(stmt)).rowcount or 0)

    @staticmethod
    async def retry(tx: Tx, event: int, attempts: int, next_ms: int, error: str) -> None:
        params = {"id": event, "attempts": attempts, "next_ms": next_ms, "error": error[:500]}
        await tx.execute(_OUTBOX_RETRY, params)
