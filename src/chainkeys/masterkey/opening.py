"""Opening the vault at start: the master key(s) must open what the store holds.

The keys come from the provider (key file, environment or HSM) and from the key
ring in the database (keys a rotation introduced, unwrapped with the provider's).
"""

from __future__ import annotations

from chainkeys.accounts.repository import Accounts
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.masterkey import hsm
from chainkeys.masterkey.repository import CHECK_CONTEXT, CHECK_KEY, Meta, Ring
from chainkeys.masterkey.ring import KeyRing
from chainkeys.store.backend import Backend
from chainkeys.vault import SealError, Vault, provider_from_settings


async def open_vault(db: Backend, settings: Settings) -> Vault:
    """Load the master key(s) and prove they open what the store holds.

    A store with sealed data and a missing or different key stops the start:
    making a new key would silently orphan every account.
    """
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
        sealed = check is not None or await Accounts.count(tx) > 0
        used = await Meta.key_ids(tx) if sealed else set()
    if settings.key_provider == "pkcs11":
        keys = await hsm.load(db, settings, sealed)
        key, others, description = keys.current, keys.others, keys.description
    else:
        wrapped, _ = await hsm.wrapped_blobs(db)
        if wrapped is not None:
            hsm.refuse_other_provider(wrapped)
        provider = provider_from_settings(settings)
        key, others = provider.load(create=not sealed), provider.others()
        description = provider.description
    vault = Vault(key, others)
    async with db.read() as tx:
        KeyRing(db, vault).absorb(await Ring.entries(tx))
    missing = sorted(k for k in used if not vault.holds(k))
    if missing:
        raise StartupError(
            f"the master key from {description} (id {key.id}) does not open this "
            f"store: it holds secrets sealed with key id {', '.join(missing)}; "
            "start with the key that sealed them (after a rotation on another host, "
            "install its key file here)"
        )
    if check is not None:
        blob, key_id = check
        try:
            vault.open(blob, key_id or "", CHECK_CONTEXT)
        except SealError:
            raise StartupError(
                f"the master key from {description} (id {key.id}) does not open this "
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
