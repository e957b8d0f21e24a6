"""Master keys learned through the database: how a rotation reaches every process online.

A rotation stores the new key in `key_ring`, sealed under the key that was
current (every running process holds that one: it opened the store with it).
Each server process reads the ring every `key_refresh_seconds`, adds the keys
it can unwrap to its vault, seals with the newest from then on, and writes a
heartbeat naming the key it seals with and the key it started from. Rotation
re-seals only once every live process seals with the new key; retirement
refuses while a secret or a live process still uses the old one, and then
clears the ring, so a retired key unwraps nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from chainkeys.clock import now_ms
from chainkeys.errors import ChainkeysError
from chainkeys.masterkey.repository import KeyUser, KeyUsers, Ring, RingEntry
from chainkeys.store.backend import Backend
from chainkeys.vault import Context, MasterKey, SealError, Vault

log = logging.getLogger("chainkeys.masterkey")


def ring_context(key_id: str) -> Context:
    """The associated data of a ring entry: it opens only as the key it says it is."""
    return Context("-", "-", key_id, purpose="keyring")


def wrap(new: MasterKey, under: Vault, wrapped_by: str) -> RingEntry:
    """A ring entry for `new`, sealed under the held key `wrapped_by`."""
    sealer = Vault(under.key(wrapped_by))
    return RingEntry(new.id, sealer.seal(new.material, ring_context(new.id)), wrapped_by, now_ms())


def live_since(refresh_seconds: float) -> int:
    """The oldest heartbeat of a process still counted as running."""
    return now_ms() - int(max(15.0, 5 * refresh_seconds) * 1000)


class KeyRing:
    """One process's view of the ring: what its vault learned, and its heartbeat."""

    def __init__(self, db: Backend, vault: Vault, refresh_seconds: float = 2.0) -> None:
        self.db = db
        self.vault = vault
        self.refresh_seconds = refresh_seconds
        self.process = uuid.uuid4().hex
        self._since = 0  # created_ms of the ring entry that seals now (0: the root key)
        self._lock = asyncio.Lock()

    async def learn(self) -> bool:
        """Add every ring key the vault can unwrap; seal with the newest. True when
        the sealing key changed."""
        async with self._lock:
            async with self.db.read() as tx:
                entries = await Ring.entries(tx)
            return self.absorb(entries)

    def absorb(self, entries: list[RingEntry]) -> bool:
        progress = True
        while progress:  # a chain: K3 under K2 under K1 needs K2 first
            progress = False
            for entry in entries:
                if self.vault.holds(entry.key_id) or not self.vault.holds(entry.wrapped_by):
                    continue
                try:
                    material = self.vault.open(entry.wrapped, entry.wrapped_by,
                                               ring_context(entry.key_id))  # fmt: skip
                except SealError:
                    log.error("the key ring entry for key %s does not open; ignored", entry.key_id)
                    continue
                key = MasterKey(material)
                if key.id != entry.key_id:
                    log.error("the key ring entry for key %s holds another key; ignored",
                              entry.key_id)  # fmt: skip
                    continue
                self.vault.add(key)
                progress = True
        newest = [e for e in entries if self.vault.holds(e.key_id) and e.created_ms > self._since]
        if not newest:
            return False
        entry = max(newest, key=lambda e: e.created_ms)
        self._since = entry.created_ms
        if entry.key_id == self.vault.key_id:
            return False
        self.vault.use(entry.key_id)
        log.warning("master key rotated: sealing with key %s from now on", entry.key_id)
        return True

    async def ensure(self, key_id: str) -> None:
        """Before opening a secret sealed with `key_id`: learn the ring if the vault
        does not hold it yet (a rotation newer than the last refresh)."""
        if not self.vault.holds(key_id):
            await self.learn()

    async def beat(self) -> None:
        me = KeyUser(self.process, socket.gethostname()[:255], os.getpid(), self.vault.key_id,
                     self.vault.root.id, now_ms())  # fmt: skip
        async with self.db.write() as tx:
            await KeyUsers.beat(tx, me)

    async def run(self) -> None:
        """Refresh and heartbeat every `refresh_seconds` until cancelled."""
        failing = False
        while True:
            try:
                await self.learn()
                await self.beat()
                failing = False
            except ChainkeysError:
                if not failing:
                    log.warning("the key ring could not be refreshed; retrying")
                failing = True
            await asyncio.sleep(self.refresh_seconds)

    async def leave(self) -> None:
        """Stop counting as a running process (a clean shutdown)."""
        try:
            async with self.db.write() as tx:
                await KeyUsers.remove(tx, self.process)
        except ChainkeysError:
            pass  # its heartbeat simply ages out
