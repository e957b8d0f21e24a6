"""Rollback checkpoints: each tenant's head written to the audit devices, beside the events.

The MACs and heads of vault/heads.py and audit/chain.py prove a row was written by the
service and is the newest copy *that the database holds*: a database put back whole
from an older copy (a restored backup, a snapshot, a failover that lost commits) is
consistent with itself and passes them all. What it cannot change is what already left
the box. So each shipping round that delivers events (audit/shipping.py) writes,
after them and in the same write, a checkpoint line: every tenant's position as the
store holds it now, MACed under the store's integrity key:

    {"action": "checkpoint", "checkpoint": "v1", "time": "…", "store": "<keyed id>",
     "heads": [["t<tenant id>", <head version>, <audit rows linked>], …], "mac": "v1:…"}

- the head version (vault/heads.py) moves with every authorizing write of the tenant;
- the audit rows linked (audit/chain.py's per-tenant head, `-` for the operator's
  events and `*` for all of them) grow with its log.

Neither ever goes down in an honest store (an adoption rebuilds heads at a higher
version), and a checkpoint is read from what has committed, so an honest store is
never behind one. A start (audit/rollback.py) reads the newest checkpoint of the file
device back and refuses a store behind it.

Per round, not per head change: a line per change would put the device in every
authorizing request's path, which the outbox exists to avoid; a round writes one
line (only when a position moved since the last one it wrote), at most about a second
behind. The line names no secret: tenant ids, counters and a store id keyed by the
integrity key (so a file shared by two stores tells their lines apart, and nothing
computed from it can be checked without the key). No line is trusted without its MAC:
one that fails is reported, never used.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from chainkeys.audit.copies import object_in
from chainkeys.clock import iso, now_ms
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import AUDIT_HEADS, HEADS, Authenticated
from chainkeys.store.sql import RowSigner
from chainkeys.vault.pinned import rows

VERSION: Final = "v1"
ACTION: Final = "checkpoint"
# What a checkpoint's MAC covers, bound to its own record names (no table holds them:
# the entries borrow the audit heads' table only to be entries).
RECORD = Authenticated(
    AUDIT_HEADS.table, "audit checkpoint", ("checkpoint", "time", "store", "heads"), {}
)
STORE = Authenticated(AUDIT_HEADS.table, "audit checkpoint store", (), {})
CHUNK: Final = 256 * 1024  # bytes read at a time, from the end of a file
Position = tuple[int, int]  # (head version, audit rows linked)


def store_id(signer: RowSigner) -> str:
    """This store's name in its checkpoints: keyed, so it says nothing without the key."""
    return signer.mac(STORE, {}).rsplit(":", 1)[-1][:16]


async def positions(db: Backend, signer: RowSigner) -> tuple[dict[str, Position], int]:
    """Every tenant's position as the store holds it now, and the id the audit chain
    has linked through: heads that fail their MAC are left out (they fail closed where
    they are used, and say nothing true)."""
    async with db.read() as tx:
        heads = await rows(tx, HEADS)
        linked = await rows(tx, AUDIT_HEADS)
    found: dict[str, list[int]] = {}
    through = 0
    for row in heads:
        if signer.valid(HEADS, row):
            found.setdefault(str(row["scope"]), [0, 0])[0] = int(row["version"])
    for row in linked:
        if signer.valid(AUDIT_HEADS, row):
            found.setdefault(str(row["tenant_key"]), [0, 0])[1] = int(row["rows"])
            if row["tenant_key"] == "*":
                through = int(row["last_id"])
    return {key: (v[0], v[1]) for key, v in found.items()}, through


def record(
    signer: RowSigner, held: Mapping[str, Position], at_ms: int | None = None
) -> dict[str, Any]:
    """The checkpoint line for `held`, MACed."""
    line: dict[str, Any] = {
        "action": ACTION,
        "checkpoint": VERSION,
        "time": iso(now_ms() if at_ms is None else at_ms),
        "store": store_id(signer),
        "heads": [[key, v, n] for key, (v, n) in sorted(held.items())],
    }
    line["mac"] = signer.mac(RECORD, line)
    return line


def is_checkpoint(obj: Mapping[str, Any]) -> bool:
    return obj.get("action") == ACTION and "checkpoint" in obj and "id" not in obj


@dataclass(frozen=True, slots=True)
class Checkpoint:
    time: str
    where: str  # the file, and the byte its line starts at
    heads: dict[str, Position]


@dataclass
class Found:
    """What one file holds: its newest authentic checkpoint of this store, the lines
    that look like checkpoints of this store and fail their MAC (newest first), and how
    many belong to another store (another integrity key: a file two stores shared)."""

    newest: Checkpoint | None = None
    forged: list[str] = field(default_factory=list)
    foreign: int = 0


def _parsed(obj: Mapping[str, Any]) -> dict[str, Position] | None:
    heads = obj.get("heads")
    if not isinstance(heads, list):
        return None
    found: dict[str, Position] = {}
    for entry in heads:
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) for n in entry[1:])
        ):
            return None
        found[entry[0]] = (entry[1], entry[2])
    return found


def newest(path: Path, signer: RowSigner) -> Found:
    """The newest authentic checkpoint of this store in `path`, read from its end (a
    file that holds none is read whole); a missing file holds none."""
    found = Found()
    try:
        return _scan(path, signer, found)
    except FileNotFoundError:
        return found


def _scan(path: Path, signer: RowSigner, found: Found) -> Found:
    ours = store_id(signer)
    for offset, line in _backwards(path):
        obj = object_in(line)
        if obj is None or not is_checkpoint(obj):
            continue
        if not hmac.compare_digest(str(obj.get("store", "")), ours):
            found.foreign += 1
            continue
        where = f"{path} at byte {offset}"
        heads = _parsed(obj)
        if heads is None or not signer.valid(RECORD, obj) or obj.get("checkpoint") != VERSION:
            found.forged.append(where)
            continue
        found.newest = Checkpoint(str(obj["time"]), where, heads)
        return found
    return found


def _backwards(path: Path) -> Iterator[tuple[int, bytes]]:
    """The lines of a file, last first, each with the byte it starts at."""
    with path.open("rb") as f:
        end = f.seek(0, 2)
        carry = b""
        while end > 0:
            start = max(0, end - CHUNK)
            f.seek(start)
            data = f.read(end - start) + carry
            parts = data.split(b"\n")
            carry = parts.pop(0) if start > 0 else b""
            offsets = []
            at = start + (len(carry) + 1 if start > 0 else 0)
            for part in parts:
                offsets.append(at)
                at += len(part) + 1
            for at, part in zip(reversed(offsets), reversed(parts), strict=True):
                if part.strip():
                    yield at, part
            end = start


def behind(held: Mapping[str, Position], checkpoint: Checkpoint) -> list[str]:
    """Each position the store holds below the checkpoint's, named with both."""
    found = []
    for key, (version, linked) in sorted(checkpoint.heads.items()):
        have_version, have_linked = held.get(key, (0, 0))
        if have_version < version or have_linked < linked:
            found.append(
                f"{_who(key)}: the store is at head version {have_version} with "
                f"{have_linked} audit rows linked, the device at version {version} with "
                f"{linked}"
            )
    return found


def _who(key: str) -> str:
    if key == "*":
        return "the audit log as a whole"
    if key == "-":
        return "the operator's events"
    if key.startswith("t"):
        return f"tenant {key[1:]}"
    return f"the head {key}"
