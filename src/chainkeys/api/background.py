"""What every server process does beside its requests, supervised in one place.

A loop that dies quietly is worse than a crash: a key ring that stops refreshing
fences every seal, a sweeper that stops leaves approvals pending, a webhook sender
that stops delivers nothing. So each task here is one round of work, repeated
every few seconds by `supervise`, which catches everything a round raises, logs it
with the task's name (the frames, never the message: it could quote a secret),
counts it (`chainkeys_background_errors_total{task}`), waits with a backoff that
doubles up to a minute, and goes on. Only shutdown (cancellation) ends a task, and
shutdown (`stop`) waits until every task has ended before the services close: a round
cancelled in the middle of a database call finishes its cancellation (rolls back,
gives its connection back) on a store that is still open.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from chainkeys import metrics
from chainkeys.audit.chain import chain_round
from chainkeys.bootstrap import Services
from chainkeys.store.backend import Backend
from chainkeys.vault.gate import Gate
from chainkeys.vault.verify import verify_store
from chainkeys.webhooks.delivery import Webhook

log = logging.getLogger("chainkeys.background")
MAX_BACKOFF_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    round: Callable[[], Awaitable[object]]
    every: float  # seconds between rounds


async def supervise(task: Task) -> None:
    """Run `task.round` every `task.every` seconds until cancelled, whatever it raises."""
    failures = 0
    while True:
        try:
            await task.round()
            failures, delay = 0, task.every
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures += 1
            delay = min(MAX_BACKOFF_SECONDS, task.every * 2**failures)
            metrics.BACKGROUND_ERRORS.labels(task.name).inc()
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log.error(
                "background task %s failed (%s; %d in a row); next round in %.1f s\n%s",
                task.name,
                type(exc).__name__,
                failures,
                delay,
                frames,
            )
        await asyncio.sleep(delay)


def tasks_of(svc: Services, purge: bool) -> list[Task]:
    """The tasks of a server process (`purge`: the one that owns its services)."""
    settings = svc.settings
    tasks = [
        Task("key-ring", svc.barrier.refresh, settings.key_refresh_seconds),
        Task("approvals-sweep", svc.signing.sweep, 2.0),
        Task("changes-due", svc.governance.due, 1.0),  # scheduled governance changes
    ]
    integrity = svc.barrier.integrity
    if integrity is not None:  # the audit chain: every replica takes its turn (audit/chain.py)
        tasks.append(Task("audit-chain", lambda: chain_round(svc.db, integrity), 5.0))
        if purge:  # the heads against their rows (vault/verify.py), from one process
            tasks.append(Task("integrity", lambda: check_integrity(svc.db, integrity), 60.0))
    if svc.db.watch_every is not None:
        tasks.append(Task("store-watch", svc.db.watch, svc.db.watch_every))
    # audit devices: each ships the table to its device, in one process at a time
    tasks += [Task(s.name, s.serve, 1.0) for s in svc.audit.devices.shippers]
    if settings.webhook_url is not None and settings.webhook_secret is not None:
        secret = settings.webhook_secret.get_secret_value().encode()
        webhook = Webhook(svc.db, settings.webhook_url, secret, settings.webhook_retention_days)
        tasks.append(Task("webhook", webhook.send_due, 1.0))
        if purge:
            tasks.append(Task("webhook-purge", webhook.purge_delivered, 600.0))
    if purge:
        tasks.append(Task("purge", lambda: purge_expired(svc), 600.0))
    return tasks


async def check_integrity(db: Backend, gate: Gate) -> None:
    """A round of the start's check: every tenant's pinned sets against its rows.
    Failures are logged and counted (`chainkeys_integrity_failures_total`); what fails
    is refused where it is used, whether or not this round saw it first."""
    report = await verify_store(db, gate, full=False)
    for failure in report.failures[:20]:
        log.error("integrity round: %s", failure)


async def purge_expired(svc: Services) -> None:
    """Expired idempotency records hold sealed one-time keys: drop them promptly (and
    deleted accounts and wallets once their retention period is over)."""
    await svc.accounts.purge_expired()
    await svc.wallets.purge_expired()


PREFIX = "chainkeys background: "  # each task's asyncio name, so that `running` finds it


def start(svc: Services, purge: bool) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(supervise(t), name=PREFIX + t.name) for t in tasks_of(svc, purge)]


def running() -> list[asyncio.Task[None]]:
    """This loop's background tasks: for a measurement that prices requests alone
    (bench/icount.py stops them, since their rounds run on a clock it slows 50 times)."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(PREFIX)]


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel every task and wait until each has ended (its cancellation included)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
