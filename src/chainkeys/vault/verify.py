"""`chainkeys integrity verify`, the start's check and the supervised round's: every
authenticated row carries its valid MAC, and every tenant's head (and the master-key
ring's) is what its rows say.

Read in one snapshot (`Backend.copy_session`), so a change committed while it reads
never looks like a mismatch. What fails is named (table and row, never a value that
could be a secret), counted (`chainkeys_integrity_failures_total{table}`) and logged;
a failing row is never used by the service either way (vault/integrity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chainkeys.store.backend import Backend
from chainkeys.store.integrity import HEADS, REGISTRY
from chainkeys.store.sql import Tx
from chainkeys.vault.adoption import describe, expected_heads
from chainkeys.vault.heads import RING, parse_body
from chainkeys.vault.integrity import Integrity, failed
from chainkeys.vault.pinned import PINNED, RING_PINNED, rows


@dataclass
class Report:
    rows: dict[str, int] = field(default_factory=dict)
    tenants: int = 0
    master_keys: int = 0  # the ring's terms, checked with the tenants' heads
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


async def verify_store(db: Backend, integrity: Integrity, full: bool = True) -> Report:
    """Check the store; `full` reads every authenticated row, else only the tables the
    heads pin (what the start checks: small, live sets)."""
    async with db.copy_session(snapshot=True) as session:
        return await check(session, integrity, full)  # type: ignore[arg-type]


async def check(tx: Tx, integrity: Integrity, full: bool) -> Report:
    report = Report()
    pinned = {p.entry.table.name for p in (*PINNED, *RING_PINNED)}
    for entry in REGISTRY:
        if entry is HEADS or (not full and entry.table.name not in pinned | {"tenants"}):
            continue
        found = await rows(tx, entry)
        report.rows[entry.table.name] = len(found)
        for row in found:
            if not integrity.valid(entry, row):
                failed(entry, describe(entry, row))
                report.failures.append(f"{describe(entry, row)} fails its MAC")
    if report.failures:
        return report  # the heads' sums would only repeat the rows that failed
    expected = await expected_heads(tx, integrity)
    actual = {}
    for row in await rows(tx, HEADS):
        if not integrity.valid(HEADS, row):
            failed(HEADS, f"head {row['scope']}")
            report.failures.append(f"the head {row['scope']} fails its MAC")
            continue
        actual[str(row["scope"])] = parse_body(str(row["body"]))
    report.tenants = len(expected) - 1
    report.master_keys = expected[RING].sets.get("master_keys", (0, 0))[0]
    for scope, head in sorted(expected.items()):
        whose = "the master-key ring" if scope == RING else f"tenant {scope[1:]}"
        if scope not in actual:
            report.failures.append(f"{whose} has no head")
            continue
        for name in sorted(set(head.sets) | set(actual[scope])):
            want = head.sets.get(name, (0, 0))
            have = actual[scope].get(name, (0, 0))
            if want != have:
                report.failures.append(
                    f"{whose}: its {name} are not what its head pins ({want[0]} "
                    f"rows here, {have[0]} pinned): a row was put back, removed or added"
                )
    for scope in sorted(set(actual) - set(expected)):
        if scope.startswith("t"):
            report.failures.append(f"the head {scope} names no tenant: the tenant was deleted")
    return report
