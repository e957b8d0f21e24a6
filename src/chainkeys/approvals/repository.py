"""Approval SQL: requests, votes and state changes (compare-and-set on `state`), and
approvers' credentials and enrolment codes (approvals/passkeys.py); the webhook outbox
the changes announce themselves through is webhooks/outbox.py."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, select, update

from chainkeys.store.integrity import APPROVALS
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import (
    approval_votes,
    approvals,
)
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded

APPROVALS_COVERED = tuple(c for c in APPROVALS.covered if c != "id")
PENDING, APPROVED, SIGNED, FAILED = "pending", "approved", "signed", "failed"
REJECTED, EXPIRED, CANCELLED = "rejected", "expired", "cancelled"
STATES = (PENDING, APPROVED, SIGNED, FAILED, REJECTED, EXPIRED, CANCELLED)


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    id: str
    tenant_id: str
    requester_token_id: str
    requester_label: str
    family: str
    account_name: str
    kind: str
    request: str  # the sign endpoint's body, JSON
    pending_key: str | None
    digest: str
    summary: str  # JSON
    rule_index: int
    approver_group: str
    quorum: int
    state: str
    reason: str | None
    created_ms: int
    expires_ms: int
    decided_ms: int | None = None
    result: str | None = None  # the sign endpoint's `data`, JSON
    seq: int = 0
    mac: str | None = None  # store/integrity.py
    passkey: bool | None = None  # votes count only signed (approvals/passkeys.py)

    def covered(self) -> dict[str, Any]:
        """The row by column name (store/integrity.py APPROVALS picks what it covers)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Vote:
    approval_id: str
    voter_label: str
    voter_token_id: str
    decision: str  # approve, reject
    digest: str
    reason: str | None
    created_ms: int
    mac: str | None = None  # store/integrity.py
    assertion: str | None = None  # JSON: what signed it (approvals/passkeys.py)

    def covered(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_a, _v = approvals.c, approval_votes.c
_ROW_COLUMNS = [f.name for f in fields(ApprovalRow)]
_SELECT = select(*(_a[name] for name in _ROW_COLUMNS))
_INSERT = Prepared(insert(approvals), [n for n in _ROW_COLUMNS if n != "seq"])
_BY_ID = Prepared(_SELECT.where(_a.id == bindparam("id")))
_BY_PENDING_KEY = Prepared(_SELECT.where(_a.pending_key == bindparam("pending_key")))
_MOVE = Prepared(
    update(approvals)
    .where(_a.id == bindparam("id"), _a.state == bindparam("old"))
    .values(
        state=bindparam("new"),
        pending_key=None,
        decided_ms=bindparam("at"),
        reason=bindparam("reason"),
        result=bindparam("result"),
    )
)
_DUE = Prepared(
    select(_a.id).where(_a.state == PENDING, _a.expires_ms < bindparam("now")).limit(100)
)
_PENDING_REQUESTERS = Prepared(
    select(_a.id, _a.requester_token_id).where(_a.state == PENDING).order_by(_a.seq).limit(1000)
)
_STUCK = Prepared(
    select(_a.id).where(_a.state == APPROVED, _a.decided_ms < bindparam("before")).limit(100)
)
_VOTE_INSERT = Prepared(
    insert(approval_votes),
    (
        "approval_id",
        "voter_label",
        "voter_token_id",
        "decision",
        "digest",
        "reason",
        "created_ms",
        "mac",
        "assertion",
    ),
)
_VOTES = Prepared(
    select(
        _v.approval_id,
        _v.voter_label,
        _v.voter_token_id,
        _v.decision,
        _v.digest,
        _v.reason,
        _v.created_ms,
        _v.mac,
        _v.assertion,
    )
    .where(_v.approval_id == bindparam("id"))
    .order_by(_v.created_ms, _v.voter_label)
)


def _row(r: Any) -> ApprovalRow:
    row = dict(zip(_ROW_COLUMNS, r, strict=True))
    if row["passkey"] is not None:  # SQLite's fast path answers 1 (the MAC covers true)
        row["passkey"] = bool(row["passkey"])
    return ApprovalRow(**row)


class Approvals:
    @staticmethod
    async def insert(tx: Tx, row: ApprovalRow) -> bool:
        """False when the same request is already pending (its pending key is taken)."""
        params = {n: getattr(row, n) for n in _ROW_COLUMNS if n != "seq"}
        return await insert_new(tx, _INSERT, params)

    @staticmethod
    async def get(tx: Tx, approval_id: str) -> ApprovalRow | None:
        found = (await tx.execute(_BY_ID, {"id": approval_id})).first()
        return None if found is None else _row(found)

    @staticmethod
    async def pending(tx: Tx, pending_key: str) -> ApprovalRow | None:
        found = (await tx.execute(_BY_PENDING_KEY, {"pending_key": pending_key})).first()
        return None if found is None else _row(found)

    @staticmethod
    async def page(
        tx: Tx,
        tenant_id: str,
        state: str | None,
        token_id: str,
        group: str | None,
        before: int,
        limit: int,
        families: frozenset[str] | None = None,
    ) -> list[ApprovalRow]:
        """What a caller may see: the requests its token made, and, for an approver,
        its group's of the families its token may use. Newest first, as people read a
        queue (docs/approvals.md): a page starts below `before`, the last row of the
        page before it (0: the first page)."""
        stmt = _SELECT.where(_a.tenant_id == tenant_id, _seen(token_id, group, families))
        if before:
            stmt = stmt.where(_a.seq < before)
        if state is not None:
            stmt = stmt.where(_a.state == state)
        rows = (await tx.execute(stmt.order_by(_a.seq.desc()).limit(limit))).all()
        return [_row(r) for r in rows]

    @staticmethod
    async def count(
        tx: Tx,
        tenant_id: str,
        state: str,
        token_id: str,
        group: str | None,
        families: frozenset[str] | None = None,
    ) -> int:
        """How many `page` would show in `state`."""
        stmt = (
            select(func.count())
            .select_from(approvals)
            .where(_a.tenant_id == tenant_id, _a.state == state, _seen(token_id, group, families))
        )
        return int((await tx.execute(stmt)).scalar_one())

    @staticmethod
    async def open_members(tx: Tx, gate: Gate, tenant_id: str) -> list[Loaded]:
        """The tenant's open requests (pending or approved), as members of its
        `approvals` set (vault/heads.py), each by its stored MAC and whether it holds."""
        stmt = select(_a.id, *(_a[c] for c in APPROVALS_COVERED), _a.mac).where(
            _a.tenant_id == tenant_id, _a.state.in_((PENDING, APPROVED))
        )
        found = [dict(r._mapping) for r in (await tx.execute(stmt)).all()]
        return [((r["id"], str(r["mac"])), gate.valid(APPROVALS, r)) for r in found]

    @staticmethod
    async def current(tx: Tx, gate: Gate, row: ApprovalRow) -> None:
        """IntegrityFailure unless `row` is one of the tenant's open requests as its head
        pins them: a request that ended (rejected, cancelled, expired, signed, failed)
        and was set pending or approved again by a database writer, or put back from an
        older copy, is not."""

        async def load() -> list[Loaded]:
            return await Approvals.open_members(tx, gate, row.tenant_id)

        member = (row.id, str(row.mac))
        await gate.heads.current(tx, row.tenant_id, "approvals", member, load, f"approval {row.id}")

    @staticmethod
    async def move(
        tx: Tx,
        approval_id: str,
        old: str,
        new: str,
        at: int,
        reason: str | None = None,
        result: str | None = None,
    ) -> bool:
        """Change the state if it is still `old` (exactly one of racing movers wins)."""
        params = {
            "id": approval_id,
            "old": old,
            "new": new,
            "at": at,
            "reason": reason,
            "result": result,
        }
        return bool((await tx.execute(_MOVE, params)).rowcount)

    @staticmethod
    async def pending_requesters(tx: Tx) -> list[tuple[str, str]]:
        """(approval id, requester token id) of pending requests, oldest first."""
        return [(r[0], r[1]) for r in (await tx.execute(_PENDING_REQUESTERS)).all()]

    @staticmethod
    async def due(tx: Tx, now: int) -> list[str]:
        return [r[0] for r in (await tx.execute(_DUE, {"now": now})).all()]

    @staticmethod
    async def stuck(tx: Tx, before: int) -> list[str]:
        return [r[0] for r in (await tx.execute(_STUCK, {"before": before})).all()]


class Votes:
    @staticmethod
    async def insert(tx: Tx, vote: Vote) -> bool:
        """False when this person (label) has voted already."""
        params = {f.name: getattr(vote, f.name) for f in fields(Vote)}
        return await insert_new(tx, _VOTE_INSERT, params)

    @staticmethod
    async def of(tx: Tx, approval_id: str) -> list[Vote]:
        return [Vote(*r) for r in (await tx.execute(_VOTES, {"id": approval_id})).all()]


def _seen(token_id: str, group: str | None, families: frozenset[str] | None) -> Any:
    """What a caller may see: the requests its token made, and, for an approver, its
    group's of the families its token may use."""
    seen = _a.requester_token_id == token_id
    if group is None:
        return seen
    theirs = _a.approver_group == group
    if families is not None:
        theirs = and_(theirs, _a.family.in_(sorted(families)))
    return or_(seen, theirs)
