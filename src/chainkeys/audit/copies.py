"""`chainkeys audit verify --file`: a device's copy checked against the audit table.

The copy is what a device received (audit/devices.py): the file device's JSON Lines,
an HTTP receiver's, or a syslog collector's file (each line's MSG is the same JSON).
Every event must equal its row as stored; every row from the copy's first event to
its last must be in it. Rows newer than its last event are the device's lag, not a
problem; lines that are not events (a line cut short by a crash, written again whole
after it) are noted, not counted against the copy: a replaced event still shows, as
its row missing from the copy. Checkpoint lines (audit/checkpoints.py) are no events
and are skipped here: `chainkeys integrity verify` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from chainkeys.audit.devices import event_of
from chainkeys.audit.repository import AUDIT_COLUMNS, Stored
from chainkeys.store.backend import Backend


@dataclass
class FileCheck:
    """What `verify_file` found: `problems` fail the check, `notes` do not."""

    events: int = 0  # events read (of the tenant asked for)
    matched: int = 0  # events equal to their row
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    more: int = 0  # problems found beyond those named

    @property
    def ok(self) -> bool:
        return not self.problems and not self.more

    def problem(self, text: str, named: int = 50) -> None:
        if len(self.problems) < named:
            self.problems.append(text)
        else:
            self.more += 1


def event_in(line: bytes) -> dict[str, Any] | None:
    """The event of a copy's line: a JSON Lines event, or the MSG of a syslog line as a
    collector wrote it (the JSON after the header); None for anything else."""
    event = object_in(line)
    if event is None or not isinstance(event.get("id"), int):
        return None
    return event


def object_in(line: bytes) -> dict[str, Any] | None:
    """The JSON object of a copy's line (an event, or a checkpoint of
    audit/checkpoints.py), bare or after a syslog header; None for anything else."""
    text = line.strip()
    if not text.startswith(b"{"):
        start = text.find(b"\xef\xbb\xbf{")
        start = start + 3 if start >= 0 else text.find(b" {") + 1
        if start <= 0:
            return None
        text = text[start:]
    try:
        event = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return event if isinstance(event, dict) else None


def _differs(event: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """The fields of `event` that are not its row's (`chain` only once the event has
    one: a row linked after it was shipped is not a difference)."""
    expected = event_of(row)
    wrong = [k for k in ("id", "time", *AUDIT_COLUMNS) if event.get(k) != expected[k]]
    if event.get("chain") is not None and event["chain"] != expected["chain"]:
        wrong.append("chain")
    return wrong


RANGE: Final = 20_000  # ids compared per read when looking for missing rows


async def verify_file(
    db: Backend, paths: list[Path], tenant_id: str | None = None, every_tenant: bool = True
) -> FileCheck:
    """Check a device's copy (one file, or a rotated series given oldest first) against
    the table: every event must equal its row, and every row from the copy's first
    event to its last must be in it. Rows newer than its last event are not a problem
    (the device may not have had them yet): they are counted in a note. With
    `every_tenant` False, only `tenant_id`'s events and rows (None: the operator's)."""
    check = FileCheck()
    events: dict[int, tuple[dict[str, Any], str]] = {}
    unreadable = 0
    for path in paths:
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                event = event_in(line)
                if event is None:
                    found = object_in(line)
                    if found is None or found.get("action") != "checkpoint":
                        unreadable += 1  # (a checkpoint is no event: audit/checkpoints.py)
                    continue
                if not every_tenant and event.get("tenant_id") != tenant_id:
                    continue
                where = f"{path.name}:{number}"
                seen = events.get(event["id"])
                if seen is not None:
                    if seen[0] != event:
                        check.problem(
                            f"event {event['id']} appears twice, differently "
                            f"({seen[1]} and {where})"
                        )
                    continue
                events[event["id"]] = (event, where)
    check.events = len(events)
    if unreadable:
        check.notes.append(
            f"{unreadable} lines are not audit events (a line cut short by a "
            "crash is written again whole after it)"
        )
    if not events:
        check.notes.append("the copy holds no events")
        return check
    ids = sorted(events)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        async with db.read() as tx:
            rows = {r["id"]: r for r in await Stored.of(tx, chunk)}
        for event_id in chunk:
            event, where = events[event_id]
            row = rows.get(event_id)
            if row is None:
                check.problem(
                    f"event {event_id} ({where}) has no row in the table: the row was deleted"
                )
                continue
            wrong = _differs(event, row)
            if wrong:
                check.problem(
                    f"event {event_id} ({where}) differs from its row in "
                    f"{', '.join(wrong)}: one of them was edited"
                )
            else:
                check.matched += 1
    first, last = ids[0], ids[-1]
    low = first
    while low <= last:
        high = min(last, low + RANGE - 1)
        async with db.read() as tx:
            table = await Stored.ids_between(tx, low, high, tenant_id, every_tenant)
        for row_id in table:
            if row_id not in events:
                check.problem(
                    f"row {row_id} is missing from the copy (between its events {first} and {last})"
                )
        low = high + 1
    async with db.read() as tx:
        newer = await Stored.ids_between(tx, last + 1, 2**62, tenant_id, every_tenant)
    if newer:
        check.notes.append(
            f"{len(newer)} rows are newer than the copy's last event "
            f"({last}): not shipped to it yet, or written since"
        )
    return check
