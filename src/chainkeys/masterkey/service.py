"""The operator's master-key workflows on top of the barrier: rotate, retire, destroy.

Every key they use is the process's barrier's (vault/barrier.py): the keys it opened
at start and learns from the ring, its fence before each seal, its heartbeat while a
rotation re-seals (the CLI process counts as a process that seals, and leaves when
done). Nothing here holds a key of its own.

A rotation (1) makes the next key, (2) publishes it in one transaction: a new term,
the new key under the current one (so every running process learns it within
`key_refresh_seconds`) and every past key under the new one (so the new key alone
opens everything, whatever happens next), (3) waits until every live server process
seals with it, (4) re-seals every registered sealed column (store/sealed.py) until
nothing is left under an older key, and (5) promotes the key in its provider.
Interrupted at any step, every secret still opens and running it again finishes.

Retire stops older keys from sealing and from unwrapping anything (the ring keeps
them under the current key); destroying one is a separate, explicit step, refused
while any value or any process that ever used it (a stale heartbeat is unknown, not
gone) may still need it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import Conflict, IntegrityFailure, NotFound, StartupError
from chainkeys.masterkey import moves
from chainkeys.store.backend import Backend
from chainkeys.store.sealed import REGISTRY, SealedColumn, SealedColumns
from chainkeys.vault.barrier import Barrier, current_term, live_since, wrap
from chainkeys.vault.gate import Gate, opened
from chainkeys.vault.providers import KeyProvider, provider_for
from chainkeys.vault.repository import Keyring, KeyUser, KeyUsers, MetaBlobs, Term
from chainkeys.vault.seal import Context, SealError

RESEAL_PASSES = 5  # a process that sealed just before it switched leaves a row behind


@dataclass(frozen=True, slots=True)
class RotationReport:
    new_key_id: str
    resealed: dict[str, int]  # sealed column -> values re-sealed
    retired_key_file: str | None


@dataclass(frozen=True, slots=True)
class RetireReport:
    current_key_id: str
    retired: list[str]  # key ids that stopped sealing now
    removed: list[str]  # the provider's copies of older keys removed (the ring keeps them)
    rooted: list[KeyUser] = field(default_factory=list)  # live processes started from one


@dataclass(frozen=True, slots=True)
class KeyState:
    """What `chainkeys key list` shows: the terms and the processes that seal."""

    terms: list[Term]
    current: str | None
    processes: list[KeyUser]
    live_since_ms: int


def describe(users: list[KeyUser], now: int) -> str:
    return ", ".join(
        f"{u.host} pid {u.pid} (process {u.process}, seals with {u.sealing_key_id}, seen "
        f"{(now - u.seen_ms) / 1000:.0f} s ago)"
        for u in users[:5]
    ) + (f" and {len(users) - 5} more" if len(users) > 5 else "")


def refuse_if_behind(
    users: list[KeyUser], current: str, since_ms: int, refresh_seconds: float
) -> None:
    """Conflict naming the processes that still seal with a key other than `current`:
    the live ones, which switch within the refresh, and the stalled ones (heartbeat
    older than the liveness window), which need a restart or `--gone`."""
    sealing = [u for u in users if u.sealing_key_id != current]
    if not sealing:
        return
    live = [u for u in sealing if u.seen_ms >= since_ms]
    stalled = [u for u in sealing if u.seen_ms < since_ms]
    parts = []
    if live:
        parts.append(
            f"{len(live)} running process(es) still seal with an older key: "
            f"{describe(live, now_ms())}; each switches within {refresh_seconds:g} s "
            "of a rotation"
        )
    if stalled:
        parts.append(
            f"{len(stalled)} process(es) whose heartbeat stopped still seal with an "
            f"older key: {describe(stalled, now_ms())}; a stalled one could never "
            "learn the current key after a retire: restart it, or if it has ended, "
            "name it with --gone PROCESS"
        )
    raise Conflict("; ".join(parts) + "; nothing was retired")


def refuse_if_forged(users: list[KeyUser], what: str) -> None:
    """IntegrityFailure naming the heartbeats whose MAC fails: edited, one could let a
    retire or a destroy finish while a process still needs the key; inserted, it names
    no process at all. Either way the operator decides (`--gone`), never the row."""
    forged = [u.process for u in users if u.authentic is False]
    if forged:
        raise IntegrityFailure(
            f"the heartbeat of process {', '.join(forged)} fails its integrity check (it "
            "was written by someone without the master key): if no such process runs, "
            f"name it with --gone PROCESS; nothing was {what}"
        )


class KeyService:
    """Master-key rotation, retirement and destruction, online and resumable."""

    BATCH = 500

    def __init__(self, db: Backend, settings: Settings, barrier: Barrier | None = None) -> None:
        self.db = db
        self.settings = settings
        self.barrier = barrier  # None where only moves run (they read no sealed value)

    def _provider(self) -> KeyProvider:
        return provider_for(self.settings, MetaBlobs(self.db))

    async def _keys(self) -> tuple[Barrier, Gate, list[Term]]:
        """The barrier, its view of the ring fresh and authenticated (it seals with the
        current term's key when it holds it), its gate, and the store's terms."""
        if self.barrier is None:
            raise StartupError("this command opened no master key")
        await self.barrier.learn()
        gate = opened(self.barrier.integrity)
        async with self.db.read() as tx:
            _, terms = await Keyring.read(tx, gate)
        return self.barrier, gate, terms

    async def _refused(self, action: str, why: str) -> None:
        await Audit.record(self.db, audit_event(None, action, "refused", details={"reason": why}))

    async def state(self) -> KeyState:
        """The terms and heartbeats, authenticated where this process opened the key
        (`key list` opens none: it shows what the store says)."""
        gate = self.barrier.integrity if self.barrier is not None else None
        async with self.db.read() as tx:
            if gate is None:
                _, terms = await Keyring.unverified(tx)
            else:
                _, terms = await Keyring.read(tx, gate)
            users = await KeyUsers.all(tx, gate)
        current = current_term(terms)
        return KeyState(
            terms,
            current.key_id if current else None,
            users,
            live_since(self.settings.key_refresh_seconds),
        )

    # -- rotate ----------------------------------------------------------------------------

    async def rotate(
        self, wait_seconds: float = 60.0, say: Callable[[str], None] | None = None
    ) -> RotationReport:
        """Rotate online (the module docstring); each re-seal batch commits on its own.

        With the key file, a `.next` key is made (or reused, when resuming) and promoted
        once nothing is sealed by the old key. With CHAINKEYS_MASTER_KEY, the new key is
        that variable and the old ones are in CHAINKEYS_PREVIOUS_MASTER_KEYS; with an
        HSM, the next key waits wrapped beside the current one.
        """
        provider = self._provider()
        barrier, gate, terms = await self._keys()
        root = barrier.root  # the provider's key; the store's current one may be newer
        new = await provider.begin_rotation(root)
        barrier.add(new)
        await self._publish(barrier, gate, barrier.key_id, new.id, terms)
        await barrier.learn()  # the new term: the barrier seals with the new key now
        if barrier.key_id != new.id:
            raise Conflict(
                f"another rotation published a newer key than {new.id} meanwhile: "
                "run `chainkeys key rotate` again once it has finished"
            )
        await barrier.beat()  # this process re-seals: it counts among those that seal
        try:
            await self._wait_for_processes(gate, new.id, wait_seconds, say)
            resealed: dict[str, int] = {c.name: 0 for c in REGISTRY}
            left: set[str] = set()
            for _ in range(RESEAL_PASSES):
                for col in REGISTRY:
                    resealed[col.name] += await self._reseal(barrier, col)
                async with self.db.read() as tx:
                    left = (await SealedColumns.key_ids(tx)) - {new.id}
                if not left:
                    break
        finally:
            await barrier.leave()
        if left:
            raise Conflict(
                f"secrets sealed with key id {', '.join(sorted(left))} remain after "
                f"{RESEAL_PASSES} passes; run `chainkeys key rotate` again"
            )
        kept = await provider.finish_rotation(root, new) if root.id != new.id else None
        await Audit.record(self.db, audit_event(None, "key.rotate", "ok", account_name=new.id))
        return RotationReport(new.id, resealed, kept)

    async def _publish(
        self, barrier: Barrier, gate: Gate, old: str, new: str, terms: list[Term]
    ) -> None:
        """One transaction: the new term; the new key under the key that seals now (every
        running process holds that one); every past key not destroyed under the new one.
        From its commit, the new key alone opens everything."""
        destroyed = {t.key_id for t in terms if t.destroyed_ms is not None}
        async with self.db.write() as tx:
            await Keyring.add_term(tx, gate, new, now_ms())
            have = {(e.key_id, e.wrapped_by) for e in (await Keyring.read(tx, gate))[0]}
            wanted = [(new, old)] if old != new else []
            wanted += [(k.id, new) for k in barrier.held() if k.id != new and k.id not in destroyed]
            for key_id, under in wanted:
                if (key_id, under) not in have:
                    await Keyring.insert(tx, gate, wrap(barrier.key(key_id), barrier.key(under)))

    async def _wait_for_processes(
        self, gate: Gate, key_id: str, wait_seconds: float, say: Callable[[str], None] | None
    ) -> None:
        """Until every live server process seals with `key_id` (Conflict after
        `wait_seconds`, naming the processes it waits for). A silent process is not
        waited for past the liveness window: its barrier re-reads the ring before it
        seals again (the fence), and the ring keeps every older key, so nothing it
        seals late is lost. A heartbeat that fails its MAC is not waited for either
        (waiting only saves re-seal passes); retire refuses while it is there."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        told = False
        while True:
            since = live_since(self.settings.key_refresh_seconds)
            async with self.db.read() as tx:
                users = [u for u in await KeyUsers.all(tx, gate) if u.authentic]
            behind = [u for u in users if u.sealing_key_id != key_id and u.seen_ms >= since]
            if not behind:
                stalled = [u for u in users if u.sealing_key_id != key_id]
                if stalled and say is not None:
                    say(
                        f"not waiting for {len(stalled)} process(es) whose heartbeat stopped: "
                        f"{describe(stalled, now_ms())}; `chainkeys key retire` refuses until "
                        "each switches, stops cleanly or is named with --gone"
                    )
                return
            if say is not None and not told:
                say(
                    f"waiting for {len(behind)} running process(es) to seal with key {key_id}: "
                    f"{describe(behind, now_ms())}"
                )
                told = True
            if loop.time() > deadline:
                raise Conflict(
                    f"{len(behind)} running process(es) still seal with an older key after "
                    f"{wait_seconds:g} s: {describe(behind, now_ms())}. Each learns a new key "
                    f"within CHAINKEYS_KEY_REFRESH_SECONDS ({self.settings.key_refresh_seconds:g} "
                    "s); stop a stuck one, then run `chainkeys key rotate` again (it resumes)"
                )
            await asyncio.sleep(0.25)

    async def _reseal(self, barrier: Barrier, col: SealedColumn) -> int:
        """One registered column, a batch per transaction, until nothing in it is sealed
        by another key (rows re-sealed leave the batch's query)."""
        done = 0
        while True:
            async with self.db.read() as tx:
                rows = await SealedColumns.not_sealed_by(tx, col, barrier.key_id, self.BATCH)
            if not rows:
                return done
            async with self.db.write() as tx:
                for row in rows:
                    context = Context(row.aad[1], row.aad[2], row.aad[3], purpose=row.aad[0])
                    try:
                        plain = await barrier.open_async(row.blob, row.key_id, context)
                    except SealError:
                        raise Conflict(
                            f"a value in {col.name} (sealed with key {row.key_id}) "
                            "does not open with the keys held; nothing more was "
                            "re-sealed"
                        ) from None
                    sealed = await barrier.seal(plain, context)  # (through the fence)
                    if await SealedColumns.reseal(tx, row, sealed.blob, sealed.key_id):
                        done += 1

    # -- retire and destroy ----------------------------------------------------------------

    async def retire(self, gone: frozenset[str] = frozenset()) -> RetireReport:
        """Every key but the current one stops sealing and unwrapping anything, once no
        secret and no process uses one. The ring keeps each under the current key (so
        whatever a late process sealed still opens); the provider's own copies of older
        keys go (their files, `key.retired-*`).

        A process counts however old its heartbeat: one stalled past the liveness window
        (starved, paused, swapped out) still holds only the older key, and once the ring
        no longer wraps the current key under it, it could never learn it again. It is
        refused until the process switches, stops cleanly, or is named in `gone` (the
        operator knows it has ended: its heartbeat goes). The check is made in the
        transaction that retires, so no switch is missed between the two."""
        provider = self._provider()
        barrier, gate, terms = await self._keys()
        current = barrier.key_id
        older = [t.key_id for t in terms if t.key_id != current and t.destroyed_ms is None]
        lost = [k for k in older if not barrier.holds(k)]
        if lost:  # never drop a wrapping of a key the ring could not keep under the current
            raise Conflict(
                f"key id {', '.join(lost)} is not held (neither the provider nor "
                "the ring gives it): nothing was retired"
            )
        since = live_since(self.settings.key_refresh_seconds)
        try:
            users, retired = await self._retire(barrier, gate, terms, older, gone, since)
        except IntegrityFailure as exc:
            await self._refused("key.retire", exc.message)
            raise
        removed = await provider.retire()
        rooted = [u for u in users if u.seen_ms >= since and u.root_key_id != current]
        return RetireReport(current, retired, removed, rooted)

    async def _retire(
        self,
        barrier: Barrier,
        gate: Gate,
        terms: list[Term],
        older: list[str],
        gone: frozenset[str],
        since: int,
    ) -> tuple[list[KeyUser], list[str]]:
        """Retire's one transaction: checked, then every older key retired."""
        current = barrier.key_id
        async with self.db.write() as tx:
            used = await SealedColumns.key_ids(tx)
            if used - {current}:
                raise Conflict(
                    f"secrets are still sealed by key id {', '.join(sorted(used - {current}))}: "
                    "run `chainkeys key rotate` (it resumes) before retiring"
                )
            users = [u for u in await KeyUsers.all(tx, gate) if u.process not in gone]
            refuse_if_forged(users, "retired")
            refuse_if_behind(users, current, since, self.settings.key_refresh_seconds)
            for process in sorted(gone):
                await KeyUsers.remove(tx, process)
            have = {(e.key_id, e.wrapped_by) for e in (await Keyring.read(tx, gate))[0]}
            for key_id in older:
                if (key_id, current) not in have:
                    await Keyring.insert(tx, gate, wrap(barrier.key(key_id), barrier.current))
            retired = [
                t.key_id
                for t in terms
                if t.key_id != current and t.retired_ms is None and t.destroyed_ms is None
            ]
            await Keyring.retire_all_but(tx, gate, current, now_ms())
            for key_id in older:
                await Keyring.drop_wrapped_by(tx, gate, key_id)
            details = {"retired": retired, "gone": sorted(gone)}
            await Audit.insert(
                tx, audit_event(None, "key.retire", "ok", account_name=current, details=details)
            )
        return users, retired

    async def destroy(self, key_id: str, gone: frozenset[str] = frozenset()) -> int:
        """Forget a retired key for good: secrets sealed with it would never open again,
        so it is refused while any is left, and while any process that used it may still
        hold one it has not committed (its heartbeat, however old: a stopped process may
        resume). `gone` names processes the operator knows have ended; their heartbeats
        go with it. Returns the ring entries removed."""
        try:
            return await self._destroy(key_id, gone)
        except IntegrityFailure as exc:
            await self._refused("key.destroy", exc.message)
            raise

    async def _destroy(self, key_id: str, gone: frozenset[str]) -> int:
        gate = opened(self.barrier.integrity if self.barrier is not None else None)
        async with self.db.read() as tx:
            _, terms = await Keyring.read(tx, gate)
            users = await KeyUsers.all(tx, gate)
            sealed = await SealedColumns.count_by(tx, key_id)
        term = next((t for t in terms if t.key_id == key_id), None)
        if term is None:
            raise NotFound(f"no master key {key_id} in this store (`chainkeys key list`)")
        if term.destroyed_ms is not None:
            return 0
        if term.retired_ms is None:
            raise Conflict(
                f"master key {key_id} is not retired: rotate away from it and run "
                "`chainkeys key retire` first"
            )
        if sealed:
            counts = ", ".join(f"{n} in {col}" for col, n in sealed.items())
            raise Conflict(
                f"secrets are still sealed with key {key_id} ({counts}): run "
                "`chainkeys key rotate`, then try again"
            )
        refuse_if_forged([u for u in users if u.process not in gone], "destroyed")
        naming = [u for u in users if u.names(key_id) and u.process not in gone]
        if naming:
            raise Conflict(
                f"{len(naming)} process(es) used key {key_id} and may still hold a value "
                f"sealed with it: {describe(naming, now_ms())}. Restart them (a clean stop "
                "removes a heartbeat), or if you know one has ended, name it with --gone "
                "PROCESS; nothing was destroyed"
            )
        async with self.db.write() as tx:
            for process in sorted(gone):
                await KeyUsers.remove(tx, process)
            removed = await Keyring.drop_key(tx, gate, key_id)
            await Keyring.destroyed(tx, gate, key_id, now_ms())
            await Audit.insert(
                tx,
                audit_event(
                    None, "key.destroy", "ok", account_name=key_id, details={"gone": sorted(gone)}
                ),
            )
        return removed

    async def move(self, to: str, overrides: Mapping[str, Any] | None = None) -> moves.Moved:
        """Move the master key to another provider (`chainkeys key move`), audited."""
        moved = await moves.move(self.db, self.settings, to, overrides)
        async with self.db.write() as tx:
            details = {"to": moved.to, "already": moved.already}
            await Audit.insert(
                tx, audit_event(None, "key.move", "ok", account_name=moved.key_id, details=details)
            )
        return moved
