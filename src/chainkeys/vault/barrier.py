"""The barrier: the one holder of master keys in a process, as Vault's barrier is.

Every secret a domain seals or opens passes through here. Outside it, raw master keys
are handled only where a key changes hands: rotation re-wraps the held keys under the
new one (masterkey/service.py), a move loads a key from one provider and gives it to
another (masterkey/moves.py), and unsealing combines shares into the key the barrier
opens with (unsealing.py, through vault/shares.py); tests/house/test_source_shapes.py
(KEY_HOLDERS) fails on any other. The barrier owns
- the keys: the root key from the provider (file, environment, HSM) and every key
  it learns from the store's ring (`key_ring`: each past key sealed under the newest,
  each rotation's new key under the key before it);
- which key seals: the newest term of `master_keys` that is not retired;
- a heartbeat (`key_users`): the key it seals with, the key it started from and
  every key it has sealed with, which rotation, retire and destroy read;
- the fence: it seals only while its view of the ring is fresh. A process that was
  stopped (SIGSTOP, a paused VM, swap, a long pause) longer than the fence re-reads
  the ring before its next seal, so it never seals with a key that was retired
  while it was away; if it cannot re-read, or the ring says its key is retired and
  it cannot learn the current one, it refuses (a 503, logged and counted) and seals
  nothing. The fence is half the liveness window rotation uses: by the time a
  rotation stops waiting for a silent process, that process would re-read first;
- trust in the ring: once the gate is open (`trust`), every read of the ring is
  authenticated (vault/repository.py `Keyring.read`); a ring that fails (a term
  un-retired, edited, inserted or put back, an entry put back) is not absorbed, and
  the barrier seals nothing (`integrity_failure`, audited through `audit_refusal`)
  until a read of the ring holds again.

No key is lost by an online operation: past keys stay in the ring under the newest
until destroyed explicitly (masterkey/service.py), so whatever a late process sealed
with an older key still opens.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from chainkeys import metrics
from chainkeys.clock import iso, monotonic, now_ms
from chainkeys.errors import ChainkeysError, IntegrityFailure, KeyUnavailable, SealFenced
from chainkeys.store.backend import Backend
from chainkeys.vault.gate import Gate, opened
from chainkeys.vault.providers import MasterKey
from chainkeys.vault.repository import Keyring, KeyUser, KeyUsers, RingEntry, Term
from chainkeys.vault.seal import Context, SealError, Vault

log = logging.getLogger("chainkeys.vault")
LIVE_FLOOR_SECONDS = 15.0


def live_window_ms(refresh_seconds: float) -> int:
    """How long a heartbeat counts as a running process (rotation waits for those)."""
    return int(max(LIVE_FLOOR_SECONDS, 5 * refresh_seconds) * 1000)


def live_since(refresh_seconds: float) -> int:
    """The oldest heartbeat of a process still counted as running."""
    return now_ms() - live_window_ms(refresh_seconds)


def ring_context(key_id: str) -> Context:
    """The associated data of a ring entry: it opens only as the key it says it is."""
    return Context("-", "-", key_id, purpose="keyring")


def wrap(key: MasterKey, under: MasterKey) -> RingEntry:
    """A ring entry holding `key`, sealed under `under`."""
    sealed = Vault(under).seal(key.material, ring_context(key.id))
    return RingEntry(key.id, under.id, sealed, now_ms())


def learn_keys(vault: Vault, entries: Iterable[RingEntry]) -> None:
    """Add every ring key the vault can unwrap (a chain: K3 under K2 under K1 needs K2
    first); an entry that does not open is logged and skipped."""
    entries = list(entries)
    progress = True
    while progress:
        progress = False
        for entry in entries:
            if vault.holds(entry.key_id) or not vault.holds(entry.wrapped_by):
                continue
            try:
                material = vault.open(entry.wrapped, entry.wrapped_by, ring_context(entry.key_id))
            except SealError:
                log.error("the key ring entry for key %s does not open; ignored", entry.key_id)
                continue
            key = MasterKey(material)
            if key.id != entry.key_id:
                log.error("the key ring entry for key %s holds another key; ignored", entry.key_id)
                continue
            vault.add(key)
            progress = True


def current_term(terms: Iterable[Term]) -> Term | None:
    """The term that seals: the newest one neither retired nor destroyed."""
    usable = [t for t in terms if t.retired_ms is None and t.destroyed_ms is None]
    return max(usable, key=lambda t: t.created_ms) if usable else None


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed value and the id of the key that sealed it (stored side by side)."""

    blob: bytes
    key_id: str


class Barrier:
    """One process's keys, the key that seals, its heartbeat and its fence."""

    def __init__(self, db: Backend, vault: Vault, refresh_seconds: float = 2.0) -> None:
        self.db = db
        self.vault = vault
        self.refresh_seconds = refresh_seconds
        self.fence_ms = live_window_ms(refresh_seconds) // 2
        self.process = uuid.uuid4().hex
        self._terms: dict[str, Term] = {}
        self._read_at = (-math.inf, 0)  # (monotonic seconds, wall ms) of the last ring read
        self._lock = asyncio.Lock()
        self._used: set[str] = set()
        self._stuck: str | None = None  # why this process may not seal, when it may not
        self._broken: str | None = None  # why the ring as read now is not trusted
        # audits a refusal of the ring (bootstrap: the vault writes no audit row itself)
        self.audit_refusal: Callable[[str], Awaitable[None]] | None = None
        # the gate (vault/gate.py: the integrity key and the heads), opened at start
        self.integrity: Gate | None = None

    @property
    def key_id(self) -> str:
        return self.vault.key_id

    def holds(self, key_id: str) -> bool:
        return self.vault.holds(key_id)

    # -- what key rotation and retirement use (masterkey/service.py) -----------------------

    @property
    def root(self) -> MasterKey:
        """The key the provider gave at start (the store's current one may be newer)."""
        return self.vault.root

    @property
    def current(self) -> MasterKey:
        """The key this process seals with."""
        return self.vault.current

    def key(self, key_id: str) -> MasterKey:
        return self.vault.key(key_id)

    def held(self) -> list[MasterKey]:
        return self.vault.held()

    def add(self, key: MasterKey) -> None:
        """Hold a key that is not in the ring yet (a rotation's new key, before the
        rotation publishes it); the barrier seals with it once a term names it."""
        self.vault.add(key)

    # -- the ring ------------------------------------------------------------------------

    def absorb(self, entries: Iterable[RingEntry], terms: Iterable[Term]) -> bool:
        """Learn what the ring gives; seal with the current term from now on. True when
        the sealing key changed."""
        learn_keys(self.vault, entries)
        self._terms = {t.key_id: t for t in terms}
        self._read_at = (monotonic(), now_ms())
        current = current_term(self._terms.values())
        if current is None:  # a store from before terms (or none yet): seal as started
            self._stuck = None
            return False
        if not self.vault.holds(current.key_id):
            mine = self._terms.get(self.vault.key_id)
            since = f" (retired {iso(mine.retired_ms)})" if mine and mine.retired_ms else ""
            self._stuck = (
                f"this process seals with master key {self.vault.key_id}{since} and cannot "
                f"learn the store's current key {current.key_id}: restart it with the current "
                "key (its key file, variable or HSM settings)"
            )
            return False
        self._stuck = None
        if current.key_id == self.vault.key_id:
            return False
        self.vault.use(current.key_id)
        log.warning("master key rotated: sealing with key %s from now on", current.key_id)
        return True

    async def learn(self) -> bool:
        """Read the ring and the terms (one snapshot; authenticated once the gate is
        open) and absorb them. IntegrityFailure when they fail: nothing is absorbed and
        nothing is sealed until a read holds again."""
        async with self._lock:
            gate = self.integrity
            try:
                async with self.db.read() as tx:
                    if gate is None:
                        entries, terms = await Keyring.unverified(tx)
                    else:
                        entries, terms = await Keyring.read(tx, gate)
            except IntegrityFailure as exc:
                await self._distrust(exc.message)
                raise
            self._broken = None
            return self.absorb(entries, terms)

    async def trust(self, gate: Gate) -> None:
        """From now on, read the ring authenticated: checked now (IntegrityFailure with
        why), and the store's first term written when it has none (a new store)."""
        self.integrity = gate
        self.db.signer = gate  # audit rows, a refusal of the ring's among them, MACed
        await self.learn()
        if not self._terms:
            async with self.db.write() as tx:
                await Keyring.add_term(tx, gate, self.vault.key_id, now_ms())
            await self.learn()

    async def _distrust(self, why: str) -> None:
        """The ring failed: seal nothing from now on; audited once per reason."""
        if why == self._broken:
            return
        self._broken = why
        log.error("the master-key ring is not trusted: %s; nothing is sealed", why)
        if self.audit_refusal is not None:
            try:
                await self.audit_refusal(why)
            except ChainkeysError:
                log.exception("the ring's refusal could not be audited")

    def _stale(self) -> bool:
        """The ring was last read longer ago than the fence (a stall, a paused VM, a
        refresher that failed): either clock says so (a paused VM may stop one)."""
        mono, wall = self._read_at
        age_ms = max((monotonic() - mono) * 1000, now_ms() - wall)
        return age_ms > self.fence_ms or now_ms() < wall

    # -- sealing and opening -------------------------------------------------------------

    async def seal(self, plaintext: bytes, context: Context) -> Sealed:
        """Seal under the current key, after re-reading the ring if this process's view
        of it is older than the fence. SealFenced (503) when it may not seal."""
        if self._stale():
            try:
                await self.learn()
            except IntegrityFailure:
                pass  # refused just below, with why
            except ChainkeysError:
                fence = self.fence_ms / 1000
                self._refuse(
                    "stale",
                    f"its view of the master-key ring is older than {fence:g} "
                    "s and the ring cannot be read now",
                )
        if self._broken is not None:
            metrics.SEAL_REFUSALS.labels("integrity").inc()
            raise IntegrityFailure(
                "this server seals nothing until the master-key ring is restored: " + self._broken
            )
        if self._stuck is not None:
            self._refuse("retired", self._stuck)
        blob = self.vault.seal(plaintext, context)
        key_id = self.vault.key_id
        self._used.add(key_id)
        return Sealed(blob, key_id)

    def check_may_seal(self) -> None:
        """SealFenced when this process may not seal (readiness asks, without counting)."""
        if self._stuck is not None:
            raise SealFenced(f"this server cannot store secrets: {self._stuck}")

    def _refuse(self, reason: str, why: str) -> None:
        metrics.SEAL_REFUSALS.labels(reason).inc()
        log.error("refused to seal: %s", why)
        raise SealFenced(f"this server cannot store secrets right now: {why}")

    async def ensure(self, key_id: str) -> None:
        """Before opening a value sealed with `key_id`: learn the ring if the vault does
        not hold it yet (a rotation newer than the last refresh). KeyUnavailable (503)
        when it still does not."""
        if not self.vault.holds(key_id):
            await self.learn()
        if not self.vault.holds(key_id):
            metrics.SEAL_REFUSALS.labels("key_unavailable").inc()
            log.error(
                "a value is sealed with master key %s, which this process cannot "
                "learn; it holds %s",
                key_id,
                ", ".join(sorted(self._held())),
            )
            raise KeyUnavailable(
                f"this server does not hold master key {key_id}: restart it with the store's "
                "current key"
            )

    def open(self, blob: bytes, key_id: str, context: Context) -> bytes:
        """Open a value whose key the caller made sure of (`ensure`)."""
        return self.vault.open(blob, key_id, context)

    async def open_async(self, blob: bytes, key_id: str, context: Context) -> bytes:
        await self.ensure(key_id)
        return self.vault.open(blob, key_id, context)

    def _held(self) -> list[str]:
        return [k.id for k in self.vault.held()]

    # -- the heartbeat -------------------------------------------------------------------

    async def beat(self) -> None:
        me = KeyUser(
            self.process,
            socket.gethostname()[:255],
            os.getpid(),
            self.vault.key_id,
            self.vault.root.id,
            now_ms(),
            ",".join(sorted(self._used | {self.vault.key_id})),
        )
        gate = opened(self.integrity)
        async with self.db.write() as tx:
            await KeyUsers.beat(tx, gate, me)

    async def refresh(self) -> None:
        """One round of the key-ring task (api/background.py runs it every
        `refresh_seconds`, supervised): learn the ring, then the heartbeat."""
        await self.learn()
        await self.beat()

    async def leave(self) -> None:
        """Stop counting as a running process (a clean shutdown)."""
        try:
            async with self.db.write() as tx:
                await KeyUsers.remove(tx, self.process)
        except ChainkeysError:
            pass  # its heartbeat stays: destroying a key it used then needs --gone
