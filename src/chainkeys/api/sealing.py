"""A server's life between its start and its stop: its services and background tasks
(`Running`), and, with Shamir shares, the seal in front of them (`SealGate`).

A shamir server starts sealed: it listens, answers /livez, /healthz (the database
answers) and the unseal, and every other request, /readyz included, with 503
`sealed` in the usual envelope (the router asks the gate before it routes). The
threshold-th share opens the services as any start does and only then starts the
background tasks (key ring, sweeps, webhook); `POST /sys/seal` stops them, closes
the services and drops every reference to the keys (Python does not zero freed
memory: a process that must forget them for certain is stopped, which seals too).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
from typing import Any

from starlette.responses import Response

from chainkeys import metrics
from chainkeys.api import background
from chainkeys.api.errors import error_response
from chainkeys.api.ratelimit import LocalBuckets
from chainkeys.api.ui import SealedPages
from chainkeys.audit.service import AuditService, audit_event
from chainkeys.bootstrap import Services
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError, RateLimited, Sealed
from chainkeys.unsealing import SealedStore, SealStatus, open_sealed

log = logging.getLogger("chainkeys.api")

# Unseal attempts per client address: 20 at once, then one every 6 s. A share cannot be
# guessed (16 bytes per half and a check), so the limit is against a flood that fills the
# log and the audit trail; per address, so one caller cannot spend the operators' budget.
UNSEAL_BURST = 20
UNSEAL_PER_SECOND = 1 / 6
ANSWERED_SEALED = frozenset({"/livez", "/sys/unseal", "/sys/seal-status"})
_ALIVE = b'{"success":true,"message":"alive"}'


class Running:
    """Services and their background tasks, started and stopped as one."""

    def __init__(self, services: Services, owned: bool) -> None:
        self.services = services
        self.owned = owned  # opened here (not handed in by a test): closed here
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if self.owned:
            # Everything alive now lives as long as the services: out of the
            # collector's reach, a full collection walks only what requests allocate.
            gc.collect()
            gc.freeze()
        self.tasks = background.start(self.services, purge=self.owned)

    async def stop(self) -> None:
        await background.stop(self.tasks)  # before the store closes under a round
        if self.tasks:
            await self.services.barrier.leave()
        self.tasks = []
        if self.owned:
            await self.services.close()
            # What `start` froze is out of the cycle collector's reach: a seal must let the
            # barrier's keys go with the rest (a shutdown does not mind the collection).
            gc.unfreeze()
            gc.collect()


async def open_gate(state: Any, settings: Settings) -> SealGate:
    """The gate of a server that starts sealed, said in its log: an operator watching
    the start sees why every request answers 503 and what it waits for (the share set's
    id is not said: it names the set each share carries)."""
    store = await open_sealed(settings)
    try:
        found = await store.share_set()
    except BaseException:
        await store.close()
        raise
    log.warning(
        "sealed: waiting for %d of %d shares (POST /sys/unseal, or chainkeys operator unseal)",
        found.threshold,
        found.shares,
    )
    return SealGate(state, store)


class SealGate:
    """The seal of one server process (each replica is unsealed on its own)."""

    def __init__(self, state: Any, store: SealedStore) -> None:
        self.state = state  # the router's state: `services` is set while unsealed
        self.store = store
        self.running: Running | None = None
        self._lock = asyncio.Lock()
        self._attempts = LocalBuckets(UNSEAL_PER_SECOND, UNSEAL_BURST)
        self._audit = AuditService(store.db, store.settings, None)
        self._pages = SealedPages()

    @property
    def sealed(self) -> bool:
        return self.running is None

    async def while_sealed(self, path: str) -> Response | None:
        """The answer to a request while sealed; None for the routes that answer then."""
        if path in ANSWERED_SEALED:
            return None
        page = self._pages.answer(path)  # the console says it is sealed, in words
        if page is not None:
            return page
        if path == "/healthz":  # alive, and the database answers (a liveness probe)
            try:
                await self.store.db_ping()
            except ChainkeysError as exc:
                return error_response(exc)
            return Response(_ALIVE, media_type="application/json")
        return error_response(Sealed())

    def status(self) -> SealStatus:
        return self.store.status(sealed=self.sealed)

    def limit(self, client: str) -> None:
        """One unseal attempt from `client` (its address); 429 past the budget."""
        wait = self._attempts.take(client)
        if wait > 0:
            metrics.RATE_LIMITED.inc()
            seconds = max(1, math.ceil(wait))
            raise RateLimited(
                f"too many unseal attempts from this address; retry after {seconds}s",
                retry_after=seconds,
            )

    async def unseal(self, share: str) -> SealStatus:
        """Count one share; at the threshold, open and start the services."""
        async with self._lock:
            if not self.sealed:
                return self.status()
            try:
                opened = await self.store.submit(share)
            except ChainkeysError as exc:
                await self._record("refused", {"code": exc.code})
                log.warning("unseal: a share was refused (%s)", exc.code)
                raise
            if opened is None:
                status = self.status()
                await self._record("progress", {"progress": status.progress})
                return status
            running = Running(opened, owned=True)
            running.start()
            self.running = running
            self.state.services = opened
            await self._record("unsealed", None)
            log.warning("unsealed: the master key is open; serving")
            return self.status()

    async def seal(self) -> None:
        """Seal again: stop the tasks, close the services, forget the shares given."""
        async with self._lock:
            running, self.running = self.running, None
            self.state.services = None
            self.store.forget()
            if running is not None:
                await running.stop()
                await self._record("sealed", None)
                log.warning("sealed: the master key was dropped; waiting for shares")

    async def refused_seal(self, code: str) -> None:
        """A `POST /sys/seal` refused (no operator token set, or a wrong one): audited."""
        await self._record("seal_refused", {"code": code})

    async def close(self) -> None:
        if self.running is not None:
            await self.running.stop()
            self.running = None
        await self.store.close()

    async def _record(self, outcome: str, details: dict[str, Any] | None) -> None:
        """A server-wide audit event (no tenant); a database that does not take it must
        not stop an unseal or a seal."""
        with contextlib.suppress(ChainkeysError):
            await self._audit.record(audit_event(None, "sys.seal", outcome, details=details))
