"""Moving the master key between providers (`chainkeys key move --to PROVIDER`, any
row of `vault.providers.PROVIDERS` that may be a target).

A move changes where the master key is kept, never the key, so no secret is
re-sealed. Each move ends in one database step (the wrapped blob stored, replaced or
deleted) or a file write, so an interrupted move is safe to run again: a re-run first
asks the target whether the key is there already.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chainkeys.config import Settings
from chainkeys.errors import Conflict, StartupError
from chainkeys.store.backend import Backend
from chainkeys.vault.opening import check_opens
from chainkeys.vault.providers import PROVIDERS, WRAPPED_NEXT, provider_for
from chainkeys.vault.repository import MetaBlobs


@dataclass(frozen=True, slots=True)
class Moved:
    key_id: str
    to: str  # a description of where the master key now is
    already: bool  # the key was there already (a re-run)


async def move(
    db: Backend, settings: Settings, to: str, overrides: Mapping[str, Any] | None = None
) -> Moved:
    """Move the master key from the configured provider to `to` (its settings changed
    by `overrides`: another HSM key, KMS key or transit key of the same provider).

    file/env → a wrapped key: wrap the key and store the blob (one insert; the file stays).
    wrapped → wrapped (another provider, or another key of the same one): wrap under the
    target, replace the blob (one update).
    wrapped → file: write the key file (0600, fsynced; an existing one must hold the
    same key), then delete the blob (one delete).
    """
    targets = [name for name, row in PROVIDERS.items() if row.target]
    if to not in targets:
        raise StartupError(f"cannot move the master key to {to!r}: use {', '.join(targets)}")
    blobs = MetaBlobs(db)
    if await blobs.get(WRAPPED_NEXT) is not None:
        raise Conflict("a master-key rotation is under way: finish it with `chainkeys key rotate`")
    target = provider_for(settings, blobs, to, overrides)
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
