"""A governance change as the API, the webhook and the CLI show it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

from chainkeys.clock import iso, now_ms
from chainkeys.errors import NotFound
from chainkeys.governance.repository import ChangeRow, VoteRow
from chainkeys.store.sql import Tx
from chainkeys.tokens.repository import Tenants
from chainkeys.vault.integrity import Integrity


class ChangeNotFound(NotFound):
    code, message = "change_not_found", "no such change in this tenant"


def _at(ms: int | None) -> str | None:
    return iso(ms) if ms is not None else None


def shown(row: ChangeRow) -> dict[str, Any] | None:
    """The document as people read it: a token change's token digest is signed (the
    change's digest covers it) but never shown, as no one needs it."""
    if row.document is None:
        return None
    found: dict[str, Any] = msgspec.json.decode(row.document)
    if row.kind == "token":
        found.pop("token_digest", None)
    return found


@dataclass(frozen=True, slots=True)
class ChangeView:
    row: ChangeRow
    votes: list[VoteRow]
    secret: str | None = None  # a token change's token, in its filing's answer only

    def record(self) -> dict[str, Any]:
        """What a person looks at before they sign: the diff in words, the digest they
        sign, the document, and where the change stands (a scheduled one's countdown)."""
        row = self.row
        countdown = None
        if row.state == "scheduled" and row.effective_ms is not None:
            countdown = max(0, math.ceil((row.effective_ms - now_ms()) / 1000))
        return {
            "id": row.id,
            "kind": row.kind,
            "state": row.state,
            "digest": row.digest,
            "diff": msgspec.json.decode(row.diff),
            "loosens": row.loosens,
            "document": shown(row),
            "base_version": row.base_version,
            "quorum": row.quorum,
            "delay_seconds": row.delay_ms // 1000,
            "approvals": sum(1 for v in self.votes if v.decision == "approve"),
            "votes": [
                {"label": v.voter_label, "decision": v.decision, "at": iso(v.created_ms)}
                for v in self.votes
            ],
            "created_at": iso(row.created_ms),
            "created_by": row.created_by,
            "effective_at": _at(row.effective_ms),
            "countdown_seconds": countdown,
            "ended_at": _at(row.ended_ms),
            "ended_by": row.ended_by,
            "reason": row.reason,
            "token": self.secret,
        }


async def tenant_id_of(tx: Tx, tenant: str, integrity: Integrity | None) -> str:
    """The tenant's id by name (its row authenticated), or 404."""
    found = await Tenants.id_by_name(tx, tenant.strip(), integrity)
    if found is None:
        raise NotFound(f"no tenant named {tenant[:64]!r}", code="tenant_not_found")
    return found
