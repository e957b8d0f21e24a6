"""The start's check against the audit devices' checkpoints: a database put back whole
from an older copy does not start.

Called where the adoption checks run (bootstrap.open_store, once the integrity key is
open): every process that serves, and every command that opens the master key, reads
the newest checkpoint of the file device (audit/checkpoints.py) and compares it with
the store. A store behind it in any position (a tenant's head version lower, or fewer
of its audit rows linked) is refused with a StartupError naming the tenant and both
positions; nothing is written to the store first (a refusal written into it would
move the very positions compared, and a few starts could walk it up to the
checkpoint). A store level with the checkpoint or ahead of it (a device that was
behind, a file rotated) starts.

Only the file can be read back. Syslog and HTTP receivers hold the same checkpoints,
but a process cannot ask them for the newest: each start says so in the log, and
`chainkeys integrity verify --checkpoints FILE` checks the store against a copy of
what they received. A checkpoint line that fails its MAC is reported (logged, counted
in `chainkeys_integrity_failures_total{table="audit_checkpoints"}`, a failure of
`integrity verify`) and never trusted: the newest authentic one before it is used.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from chainkeys import metrics
from chainkeys.audit.checkpoints import Found, behind, newest, positions
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store.backend import Backend
from chainkeys.store.sql import RowSigner

log = logging.getLogger("chainkeys.audit.checkpoints")
TABLE: Final = "audit_checkpoints"  # the metric's label for a forged checkpoint line
SHOWN: Final = 10  # tenants named in a refusal before "and N more"


@dataclass
class Compared:
    """One copy's newest checkpoint against the store: what it found and what is behind."""

    path: Path
    found: Found
    behind: list[str] = field(default_factory=list)


def unreadable(settings: Settings) -> list[str]:
    """The configured devices a process cannot read checkpoints back from."""
    kinds = []
    if settings.audit_syslog is not None:
        kinds.append("syslog")
    if settings.audit_http_url is not None:
        kinds.append("HTTP")
    return kinds


async def compare(db: Backend, signer: RowSigner, paths: list[Path]) -> list[Compared]:
    """Each file's newest authentic checkpoint against the store as it is now."""
    held, _ = await positions(db, signer)
    done = []
    for path in paths:
        found = await asyncio.to_thread(newest, path, signer)
        for where in found.forged:
            metrics.INTEGRITY_FAILURES.labels(TABLE).inc()
            log.error(
                "audit checkpoint: the line in %s fails its MAC: it was not written by "
                "this store, and is not trusted",
                where,
            )
        late = behind(held, found.newest) if found.newest is not None else []
        done.append(Compared(path, found, late))
    return done


async def check_at_start(db: Backend, signer: RowSigner, settings: Settings) -> None:
    """StartupError when the store is behind the file device's newest checkpoint."""
    for kind in unreadable(settings):
        log.info(
            "audit checkpoint: the %s device cannot be read back; the start checks the "
            "store against the file device's checkpoints only",
            kind,
        )
    if settings.audit_file is None:
        return
    (found,) = await compare(db, signer, [settings.audit_file])
    if found.found.foreign:
        log.warning(
            "audit checkpoint: %s ends with %d checkpoints of another store (another "
            "integrity key); they are not compared",
            settings.audit_file,
            found.found.foreign,
        )
    if found.found.newest is None:
        log.info("audit checkpoint: %s holds no checkpoint of this store yet", settings.audit_file)
        return
    if not found.behind:
        return
    late = found.behind
    named = "; ".join(late[:SHOWN]) + (
        f"; and {len(late) - SHOWN} more" if len(late) > SHOWN else ""
    )
    checkpoint = found.found.newest
    raise StartupError(
        f"the database is behind the audit file's newest checkpoint ({checkpoint.time}, "
        f"{checkpoint.where}): {named}. It was put back whole from an older copy (a "
        "restored backup or snapshot, a failover that lost commits): nothing was started. "
        "Start it on the newest copy of the database; if this older copy is the one you "
        f"mean to run, keep {settings.audit_file} (it records what this copy lacks), move "
        "it aside, and start again"
    )
