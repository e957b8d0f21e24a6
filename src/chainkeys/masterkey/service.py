"""Master-key rotation: re-seal every secret under the new key, resumably, online.

A rotation (1) makes the next key, (2) stores it in the key ring sealed under the
store's current key, (3) waits until every live server process seals with it
(each learns it from the ring within `key_refresh_seconds`), (4) re-seals every
secret, again until none is left under an older key, and (5) promotes the key
file. Interrupted at any step, every secret still opens with the keys held, and
running it again finishes the job. Retirement then refuses while any secret or
any live process still uses an older key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from chainkeys.accounts.idempotency_store import Idempotency
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import Conflict
from chainkeys.masterkey import hsm
from chainkeys.masterkey.repository import (
    CHECK_CONTEXT,
    CHECK_KEY,
    SEALED_TABLES,
    KeyUser,
    KeyUsers,
    Meta,
    Ring,
)
from chainkeys.masterkey.ring import KeyRing, live_since, wrap
from chainkeys.store.backend import Backend
from chainkeys.vault import Context, Vault, provider_from_settings
from chainkeys.wallets.repository import Wallets, wallet_context

RESEAL_PASSES = 5  # a process that sealed just before it switched leaves a row behind


@dataclass(frozen=True, slots=True)
class RotationReport:
    new_key_id: str
    accounts: int
    records: int
    retired_key_file: str | None


@dataclass(frozen=True, slots=True)
class RetireReport:
    current_key_id: str
    removed: list[str]  # retired key files removed
    ring_entries: int  # ring entries cleared
    rooted: list[KeyUser] = field(default_factory=list)  # live processes started from an old key


def describe(users: list[KeyUser], now: int) -> str:
    return ", ".join(
        f"{u.host} pid {u.pid} (seals with {u.sealing_key_id}, seen {(now - u.seen_ms) / 1000:.0f}"
        " s ago)"
        for u in users[:5]
    ) + (f" and {len(users) - 5} more" if len(users) > 5 else "")


class KeyService:
    """Master-key rotation: re-seal every secret under the new key, resumably."""

    BATCH = 500

    def __init__(self, db: Backend, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    async def rotate(
        self, wait_seconds: float = 60.0, say: Callable[[str], None] | None = None
    ) -> RotationReport:
        """Rotate online (the module docstring); each re-seal batch commits on its own.

        With the key file, a `.next` key is made (or reused, when resuming) and
        promoted once nothing is sealed by the old key. With CHAINKEYS_MASTER_KEY,
        the new key is that variable and the old ones are in
        CHAINKEYS_PREVIOUS_MASTER_KEYS; with an HSM, the next key waits wrapped
        beside the current one.
        """
        in_hsm = self.settings.key_provider == "pkcs11"
        if in_hsm:
            old, new = await hsm.begin_rotation(self.db, self.settings)
            vault = Vault(new, [old])
        else:
            provider = provider_from_settings(self.settings)
            old = provider.load(create=False)
            new = provider.begin_rotation(old)
            vault = Vault(new, [old, *provider.others()])
        async with self.db.read() as tx:
            KeyRing(self.db, vault).absorb(await Ring.entries(tx))
        vault.use(new.id)
        await self._publish(vault)
        await self._wait_for_processes(vault.key_id, wait_seconds, say)
        accounts = records = 0
        for _ in range(RESEAL_PASSES):
            accounts += await self._reseal_accounts(vault)
            records += await self._reseal_records(vault)
            async with self.db.read() as tx:
                left = (await Meta.key_ids(tx)) - {vault.key_id}
            if not left:
                break
        if left:
            raise Conflict(f"secrets sealed with key id {', '.join(sorted(left))} remain after "
                           f"{RESEAL_PASSES} passes; run `chainkeys key rotate` again")  # fmt: skip
        retired = None
        if in_hsm:
            await hsm.finish_rotation(self.db)
        elif old.id != new.id:
            retired = provider.finish_rotation(old, new)
        async with self.db.write() as tx:
            await Audit.insert(tx, audit_event(None, "key.rotate", "ok", account_name=vault.key_id))
        return RotationReport(vault.key_id, accounts, records, retired)

    async def _publish(self, vault: Vault) -> None:
        """Put the new key in the ring, sealed under the key that sealed the store's check
        record: every running process opened the store with that one."""
        async with self.db.write() as tx:
            check = await Meta.get(tx, CHECK_KEY)
            store_key = check[1] if check is not None else None
            ring = {e.key_id for e in await Ring.entries(tx)}
            if store_key and store_key != vault.key_id and vault.key_id not in ring:
                await Ring.insert(tx, wrap(vault.current, vault, store_key))

    async def _wait_for_processes(
        self, key_id: str, wait_seconds: float, say: Callable[[str], None] | None
    ) -> None:
        """Until every live server process seals with `key_id` (Conflict after
        `wait_seconds`, naming the processes it waits for)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        told = False
        while True:
            async with self.db.read() as tx:
                live = await KeyUsers.live(tx, live_since(self.settings.key_refresh_seconds))
            behind = [u for u in live if u.sealing_key_id != key_id]
            if not behind:
                return
            if say is not None and not told:
                say(f"waiting for {len(behind)} running process(es) to seal with key {key_id}: "
                    f"{describe(behind, now_ms())}")  # fmt: skip
                told = True
            if loop.time() > deadline:
                raise Conflict(
                    f"{len(behind)} running process(es) still seal with an older key after "
                    f"{wait_seconds:g} s: {describe(behind, now_ms())}. Each learns a new key "
                    f"within CHAINKEYS_KEY_REFRESH_SECONDS ({self.settings.key_refresh_seconds:g} "
                    "s); stop a stuck one, then run `chainkeys key rotate` again (it resumes)"
                )
            await asyncio.sleep(0.25)

    async def _reseal_accounts(self, vault: Vault) -> int:
        """Live and retained-after-delete accounts, a batch per transaction."""
        done = 0
        for table in SEALED_TABLES:
            after = 0
            while True:
                async with self.db.read() as tx:
                    rows = await table.not_sealed_by(tx, vault.key_id, after, self.BATCH)
                if not rows:
                    break
                async with self.db.write() as tx:
                    for row in rows:
                        context = Context(row.tenant_id, row.family, row.name)
                        sealed = vault.seal(vault.open(row.secret, row.key_id, context), context)
                        done += await table.reseal(tx, row.id or 0, row.key_id, sealed,
                                                   vault.key_id)  # fmt: skip
                after = rows[-1].id or after
        return done

    async def _reseal_records(self, vault: Vault) -> int:
        done = await self._reseal_wallets(vault)
        async with self.db.write() as tx:
            for key, value, key_id in await Meta.all(tx):
                if key_id and key_id != vault.key_id:
                    context = CHECK_CONTEXT if key == CHECK_KEY else Context("-", "-", key, "meta")
                    sealed = vault.seal(vault.open(value, key_id, context), context)
                    done += await Meta.reseal(tx, key, key_id, sealed, vault.key_id)
        while True:
            async with self.db.read() as tx:
                rows = await Idempotency.not_sealed_by(tx, vault.key_id, self.BATCH)
            if not rows:
                return done
            async with self.db.write() as tx:
                for tenant_id, key, blob, key_id in rows:
                    context = Context(tenant_id, "-", key, purpose="idempotency")
                    sealed = vault.seal(vault.open(blob, key_id, context), context)
                    done += await Idempotency.reseal(
                        tx, tenant_id, key, key_id, sealed, vault.key_id
                    )

    async def _reseal_wallets(self, vault: Vault) -> int:
        """Wallet phrases, a batch per transaction (bound to tenant and wallet id)."""
        done, after = 0, 0
        while True:
            async with self.db.read() as tx:
                rows = await Wallets.not_sealed_by(tx, vault.key_id, after, self.BATCH)
            if not rows:
                return done
            async with self.db.write() as tx:
                for row in rows:
                    context = wallet_context(row.tenant_id, row.id)
                    sealed = vault.seal(vault.open(row.secret, row.key_id, context), context)
                    done += await Wallets.reseal(tx, row.seq, row.key_id, sealed, vault.key_id)
            after = rows[-1].seq

    async def move(self, to: str, key_label: str | None, token_label: str | None) -> hsm.Moved:
        """Move the master key to another provider (`chainkeys key move`), audited."""
        moved = await hsm.move(self.db, self.settings, to, key_label, token_label)
        async with self.db.write() as tx:
            details = {"to": moved.to, "already": moved.already}
            await Audit.insert(tx, audit_event(None, "key.move", "ok", account_name=moved.key_id,
                                               details=details))  # fmt: skip
        return moved

    async def retire(self) -> RetireReport:
        """Forget every key but the current one, once nothing needs an older key: no
        secret sealed by one, and no live process sealing with one. The ring is
        cleared (a retired key must unwrap nothing) and retired key files removed."""
        in_hsm = self.settings.key_provider == "pkcs11"
        if in_hsm:
            keys = await hsm.load(self.db, self.settings, sealed=True)
            vault = Vault(keys.current, keys.others)
        else:
            provider = provider_from_settings(self.settings)
            vault = Vault(provider.load(create=False), provider.others())
        async with self.db.read() as tx:
            KeyRing(self.db, vault).absorb(await Ring.entries(tx))
            used = await Meta.key_ids(tx)
            live = await KeyUsers.live(tx, live_since(self.settings.key_refresh_seconds))
        current = vault.key_id
        if used - {current}:
            raise Conflict(
                f"secrets are still sealed by key id {', '.join(sorted(used - {current}))}: "
                "run `chainkeys key rotate` (it resumes) before retiring"
            )
        sealing = [u for u in live if u.sealing_key_id != current]
        if sealing:
            raise Conflict(
                f"{len(sealing)} running process(es) still seal with an older key: "
                f"{describe(sealing, now_ms())}; each switches within "
                f"{self.settings.key_refresh_seconds:g} s of a rotation (or stop it)"
            )
        async with self.db.write() as tx:
            cleared = await Ring.clear(tx)
            details = {"ring_entries": cleared}
            await Audit.insert(tx, audit_event(None, "key.retire", "ok", account_name=current,
                                               details=details))  # fmt: skip
        removed = [] if in_hsm else provider.retire()
        rooted = [u for u in live if u.root_key_id != current]
        return RetireReport(current, removed, cleared, rooted)
