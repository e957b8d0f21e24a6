"""Opening the vault at start: the master key(s) must open what the store holds."""

from __future__ import annotations

from chainkeys.accounts.repository import Accounts
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.keys.repository import Meta
from chainkeys.store.db import Database
from chainkeys.vault import Context, SealError, Vault, provider_from_settings

CHECK_KEY = "master_key_check"
CHECK_CONTEXT = Context("-", "-", CHECK_KEY, purpose="check")


async def open_vault(db: Database, settings: Settings) -> Vault:
    """Load the master key(s) and prove they open what the store holds.

    A store with sealed data and a missing or different key stops the start:
    making a new key would silently orphan every account.
    """
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
        sealed = check is not None or await Accounts.count(tx) > 0
        used = await Meta.key_ids(tx) if sealed else set()
    provider = provider_from_settings(settings)
    key = provider.load(create=not sealed)
    vault = Vault(key, provider.others())
    missing = sorted(k for k in used if not vault.holds(k))
    if missing:
        raise StartupError(
            f"the master key from {provider.description} (id {key.id}) does not open this "
            f"store: it holds secrets sealed with key id {', '.join(missing)}; "
            "start with the key that sealed them"
        )
    if check is not None:
        blob, key_id = check
        try:
            vault.open(blob, key_id or "", CHECK_CONTEXT)
        except SealError:
            raise StartupError(
                f"the master key from {provider.description} (id {key.id}) does not open this "
                f"store: its check record (key id {key_id}) fails to open; the key file or "
                "the database has been altered"
            ) from None
    elif sealed:
        raise StartupError("the store holds sealed accounts but no master-key check record")
    else:
        async with db.write() as tx:
            if await Meta.get(tx, CHECK_KEY) is None:
                await Meta.insert(tx, CHECK_KEY, vault.seal(b"chainkeys", CHECK_CONTEXT), key.id)
    return vault
