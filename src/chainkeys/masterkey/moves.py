"""Moving the master key between providers (`chainkeys key move --to file|pkcs11`).

A move changes where the master key is kept, never the key, so no secret is
re-sealed. Each move ends in one database step (the HSM-wrapped blob stored,
replaced or deleted) or a file write, so an interrupted move is safe to run again:
a re-run first asks the target whether the key is there already.
"""

from __future__ import annotations

from dataclasses import dataclass

from chainkeys.config import Settings
from chainkeys.errors import Conflict, StartupError
from chainkeys.store.backend import Backend
from chainkeys.vault.opening import CHECK_CONTEXT
from chainkeys.vault.providers import WRAPPED_NEXT, MasterKey, provider_for
from chainkeys.vault.repository import CHECK_KEY, Meta, MetaBlobs
from chainkeys.vault.seal import SealError, Vault


@dataclass(frozen=True, slots=True)
class Moved:
    key_id: str
    to: str  # a description of where the master key now is
    already: bool  # the key was there already (a re-run)


async def move(db: Backend, settings: Settings, to: str, key_label: str | None = None,
               token_label: str | None = None) -> Moved:  # fmt: skip
    """Move the master key from the configured provider to `to`.

    file/env → pkcs11: wrap the key and store the blob (one insert; the file stays).
    pkcs11 → pkcs11 (another key or token): re-wrap, replace the blob (one update).
    pkcs11 → file: write the key file (0600, fsynced; an existing one must hold the
    same key), then delete the blob (one delete).
    """
    if to not in ("file", "pkcs11"):
        raise StartupError(f"cannot move the master key to {to!r}: use file or pkcs11")
    blobs = MetaBlobs(db)
    if await blobs.get(WRAPPED_NEXT) is not None:
        raise Conflict("a master-key rotation is under way: finish it with `chainkeys key rotate`")
    target = provider_for(settings, blobs, to, key_label, token_label)
    try:  # a re-run of a finished move: the target holds the key and it opens the store
        key = await target.load(create=False)
        await check_opens(db, key)
        return Moved(key.id, target.description, already=True)
    except StartupError:
        pass
    source = provider_for(settings, blobs)
    key = await source.load(create=False)
    await check_opens(db, key)
    await target.adopt(key)
    await source.release()
    return Moved(key.id, target.description, already=False)


async def check_opens(db: Backend, key: MasterKey) -> None:
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
    if check is None:
        raise StartupError("this store has no master-key check record: start it once first")
    try:
        Vault(key, []).open(check[0], check[1] or "", CHECK_CONTEXT)
    except SealError:
        raise StartupError(
            f"the master key from the configured provider (id {key.id}) does not open this store"
        ) from None
