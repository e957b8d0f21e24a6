"""Master-key rotation: re-seal every secret under the new key, resumably."""

from __future__ import annotations

from dataclasses import dataclass

from chainkeys.accounts.idempotency_store import Idempotency
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.config import Settings
from chainkeys.errors import Conflict, StartupError
from chainkeys.keys import hsm
from chainkeys.keys.repository import CHECK_CONTEXT, CHECK_KEY, SEALED_TABLES, Meta
from chainkeys.store.db import Database
from chainkeys.vault import Context, Vault, provider_from_settings


@dataclass(frozen=True, slots=True)
class RotationReport:
    new_key_id: str
    accounts: int
    records: int
    retired_key_file: str | None


class KeyService:
    """Master-key rotation: re-seal every secret under the new key, resumably."""

    BATCH = 500

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    async def rotate(self) -> RotationReport:
        """Re-seal what another key sealed; each batch commits on its own.

        With the key file, a `.next` key is made (or reused, when resuming) and
        promoted once nothing is sealed by the old key. With CHAINKEYS_MASTER_KEY,
        the new key is that variable and the old ones are in
        CHAINKEYS_PREVIOUS_MASTER_KEYS. Interrupted at any point, every secret
        still opens with the keys held, and running it again finishes the job.
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
        accounts = await self._reseal_accounts(vault)
        records = await self._reseal_records(vault)
        async with self.db.read() as tx:
            left = (await Meta.key_ids(tx)) - {vault.key_id}
        if left:
            raise StartupError(f"secrets sealed with key id {', '.join(sorted(left))} remain")
        retired = None
        if in_hsm:
            await hsm.finish_rotation(self.db)
        elif old.id != new.id:
            retired = provider.finish_rotation(old, new)
        async with self.db.write() as tx:
            await Audit.insert(tx, audit_event(None, "key.rotate", "ok", account_name=vault.key_id))
        return RotationReport(vault.key_id, accounts, records, retired)

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
                        assert row.id is not None
                        context = Context(row.tenant_id, row.family, row.name)
                        sealed = vault.seal(vault.open(row.secret, row.key_id, context), context)
                        done += await table.reseal(tx, row.id, row.key_id, sealed, vault.key_id)
                after = rows[-1].id or after
        return done

    async def _reseal_records(self, vault: Vault) -> int:
        done = 0
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

    async def move(self, to: str, key_label: str | None, token_label: str | None) -> hsm.Moved:
        """Move the master key to another provider (`chainkeys key move`), audited."""
        moved = await hsm.move(self.db, self.settings, to, key_label, token_label)
        async with self.db.write() as tx:
            details = {"to": moved.to, "already": moved.already}
            await Audit.insert(tx, audit_event(None, "key.move", "ok", account_name=moved.key_id,
                                               details=details))  # fmt: skip
        return moved

    async def retire(self) -> list[str]:
        """Forget keys kept for older seals once nothing in the store needs them."""
        if self.settings.key_provider == "pkcs11":
            return []  # an HSM rotation keeps no old key: the wrapped blob was replaced
        provider = provider_from_settings(self.settings)
        current = provider.load(create=False)
        async with self.db.read() as tx:
            used = await Meta.key_ids(tx)
        if used - {current.id}:
            raise Conflict(
                "some secrets are still sealed by an older key: run `chainkeys key rotate`"
            )
        return provider.retire()
