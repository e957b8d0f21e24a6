"""The master key of an HSM install: its wrapped blob in the store, and moving an
install between providers.

The wrapped blob lives in `meta` (no key id: it is not sealed by a master key).
During a rotation the next key's blob waits beside it, as the file provider's
`.next` file does. A move changes where the master key is kept, never the key,
so no account is re-encrypted; each move ends in one atomic database step, so
an interrupted move is safe to run again.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from chainkeys.config import Settings
from chainkeys.errors import Conflict, StartupError
from chainkeys.masterkey.repository import CHECK_CONTEXT, CHECK_KEY, Meta
from chainkeys.store.backend import Backend
from chainkeys.vault import SealError, Vault
from chainkeys.vault.pkcs11 import Hsm, describe, hsm_from_settings, unwrap, wrap
from chainkeys.vault.providers import KEY_BYTES, FileKeyProvider, MasterKey, provider_from_settings

WRAPPED = "master_key_wrapped"
WRAPPED_NEXT = "master_key_wrapped_next"


@dataclass(frozen=True, slots=True)
class HsmKeys:
    current: MasterKey
    others: list[MasterKey]
    description: str


async def wrapped_blobs(db: Backend) -> tuple[bytes | None, bytes | None]:
    async with db.read() as tx:
        current, following = await Meta.get(tx, WRAPPED), await Meta.get(tx, WRAPPED_NEXT)
    return (current[0] if current else None), (following[0] if following else None)


def refuse_other_provider(blob: bytes) -> None:
    """A store whose master key is in an HSM, started with the file or env provider."""
    info = describe(blob)
    raise StartupError(
        f"this store's master key is wrapped by HSM key {info['key_label']!r} in token "
        f"{info['token_label']!r}: start with CHAINKEYS_MASTER_KEY_PROVIDER=pkcs11 "
        "(or move it out with `chainkeys key move --to file`)"
    )


async def load(db: Backend, settings: Settings, sealed: bool) -> HsmKeys:
    """Unwrap the master key (and a rotation's next key); on a first start, make one
    and store it wrapped. Called under the start-up lock."""
    hsm = hsm_from_settings(settings)
    blob, following = await wrapped_blobs(db)
    if blob is None:
        if sealed:
            raise StartupError(
                "this store's master key is not in an HSM (it is a key file or "
                "CHAINKEYS_MASTER_KEY): move it there first with `chainkeys key move --to pkcs11`"
            )
        key = MasterKey(secrets.token_bytes(KEY_BYTES))
        async with db.write() as tx:
            await Meta.insert(tx, WRAPPED, wrap(hsm, key), None)
        return HsmKeys(key, [], hsm.description)
    others = [unwrap(hsm, following)] if following is not None else []
    return HsmKeys(unwrap(hsm, blob), others, hsm.description)


async def begin_rotation(db: Backend, settings: Settings) -> tuple[MasterKey, MasterKey]:
    """(old, new): the next key is made and stored wrapped before anything is re-sealed
    with it (re-used when a rotation resumes)."""
    hsm = hsm_from_settings(settings)
    blob, following = await wrapped_blobs(db)
    if blob is None:
        raise StartupError("this store's master key is not in an HSM")
    old = unwrap(hsm, blob)
    if following is not None:
        return old, unwrap(hsm, following)
    new = MasterKey(secrets.token_bytes(KEY_BYTES))
    async with db.write() as tx:
        await Meta.insert(tx, WRAPPED_NEXT, wrap(hsm, new), None)
    return old, new


async def finish_rotation(db: Backend) -> None:
    async with db.write() as tx:
        following = await Meta.get(tx, WRAPPED_NEXT)
        if following is not None:
            await Meta.put(tx, WRAPPED, following[0], None)
            await Meta.delete(tx, WRAPPED_NEXT)


@dataclass(frozen=True, slots=True)
class Moved:
    key_id: str
    to: str  # a description of where the master key now is
    already: bool  # the key was there already (a re-run)


async def move(db: Backend, settings: Settings, to: str, key_label: str | None = None,
               token_label: str | None = None) -> Moved:  # fmt: skip
    """Move the master key from the configured provider to `to` ("file" or "pkcs11").

    file/env → pkcs11: wrap the key and store the blob (one insert).
    pkcs11 → pkcs11 (another key or token): re-wrap, replace the blob (one update).
    pkcs11 → file: write the key file (0600, fsynced; an existing one must hold the
    same key), then delete the blob (one delete).
    A re-run after any interruption finds the move done or does it.
    """
    if to not in ("file", "pkcs11"):
        raise StartupError(f"cannot move the master key to {to!r}: use file or pkcs11")
    blob, following = await wrapped_blobs(db)
    if following is not None:
        raise Conflict("a master-key rotation is under way: finish it with `chainkeys key rotate`")
    target = hsm_from_settings(settings, key_label, token_label) if to == "pkcs11" else None
    done = await _already_moved(db, settings, blob, target)
    if done is not None:
        return done
    key = await _source_key(db, settings, blob)
    if target is not None:
        new_blob = wrap(target, key)
        if unwrap(target, new_blob).id != key.id:  # the target opens it before the old copy goes
            raise StartupError(f"{target.description} does not give back the key it wrapped")
        async with db.write() as tx:
            await Meta.put(tx, WRAPPED, new_blob, None)
        return Moved(key.id, target.description, already=False)
    path = settings.key_file
    already = _write_key_file(FileKeyProvider(path), key)
    async with db.write() as tx:
        await Meta.delete(tx, WRAPPED)
    return Moved(key.id, f"key file {path}", already=already)


async def _already_moved(db: Backend, settings: Settings, blob: bytes | None,
                         target: Hsm | None) -> Moved | None:  # fmt: skip
    """The key is where it should go already (a re-run of a finished move)."""
    if target is not None and blob is not None:
        info = describe(blob)
        if (info["key_label"], info["token_label"]) == (target.key_label, target.token_label):
            key = unwrap(target, blob)
            return Moved(key.id, target.description, already=True)
    if target is None and blob is None:
        if settings.key_provider == "env":
            raise StartupError("the master key is in CHAINKEYS_MASTER_KEY, not in an HSM")
        if settings.key_provider == "file" or settings.key_file.exists():
            key = FileKeyProvider(settings.key_file).load(create=False)
            await _check_opens(db, key)
            return Moved(key.id, f"key file {settings.key_file}", already=True)
    return None


async def _source_key(db: Backend, settings: Settings, blob: bytes | None) -> MasterKey:
    """The master key from the configured provider, proven to open the store."""
    if settings.key_provider == "pkcs11":
        if blob is None:
            raise StartupError("this store's master key is not in an HSM; check the settings")
        key = unwrap(hsm_from_settings(settings), blob)
    else:
        if blob is not None:
            refuse_other_provider(blob)
        key = provider_from_settings(settings).load(create=False)
    await _check_opens(db, key)
    return key


async def _check_opens(db: Backend, key: MasterKey) -> None:
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


def _write_key_file(provider: FileKeyProvider, key: MasterKey) -> bool:
    """Write `key` to the provider's file; True when it held that key already."""
    if provider.path.exists():
        held = provider.load(create=False)
        if held.id != key.id:
            raise StartupError(
                f"{provider.path} holds another master key (id {held.id}); move it aside first"
            )
        return True
    provider.write_key(provider.path, key)
    os.chmod(provider.path, 0o600)
    return False
