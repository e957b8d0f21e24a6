"""The audit log as a download: CSV or JSON Lines, rendered batch by batch.

CSV is opened in spreadsheets, which run a cell that starts with `=`, `+`, `-`, `@`
(or a tab or carriage return) as a formula: an account name or a memo is attacker
text, so such a cell is written with a leading `'` (OWASP's CSV injection advice).
Times are both milliseconds and ISO 8601 UTC; details stay one JSON cell.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import msgspec

from chainkeys.audit.repository import AuditEvent

COLUMNS: Final = (
    "id",
    "time",
    "time_ms",
    "action",
    "outcome",
    "family",
    "account_name",
    "token_id",
    "request_id",
    "client_request_id",
    "details",
)
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _row(e: AuditEvent) -> dict[str, Any]:
    when = dt.datetime.fromtimestamp(e.created_ms / 1000, dt.UTC)
    return {
        "id": e.id or 0,
        "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "time_ms": e.created_ms,
        "action": e.action,
        "outcome": e.outcome,
        "family": e.family,
        "account_name": e.account_name,
        "token_id": e.actor_token_id,
        "request_id": e.request_id,
        "client_request_id": e.client_request_id,
        "details": msgspec.json.decode(e.details) if e.details else None,
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return "'" + text if text.startswith(_FORMULA) else text


async def csv_lines(batches: AsyncIterator[list[AuditEvent]]) -> AsyncIterator[bytes]:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    yield out.getvalue().encode()
    async for batch in batches:
        out.seek(0)
        out.truncate()
        for event in batch:
            row = _row(event)
            writer.writerow([_cell(row[c]) for c in COLUMNS])
        yield out.getvalue().encode()


async def json_lines(batches: AsyncIterator[list[AuditEvent]]) -> AsyncIterator[bytes]:
    async for batch in batches:
        yield b"".join(msgspec.json.encode(_row(e)) + b"\n" for e in batch)


EXPORTS: Final[dict[str, tuple[str, Callable[..., AsyncIterator[bytes]]]]] = {
    "csv": ("text/csv; charset=utf-8", csv_lines),
    "jsonl": ("application/jsonl; charset=utf-8", json_lines),
}
