"""The master key wrapped by a key that never leaves an external service (an HSM, a
cloud KMS, Vault's transit engine, a KMIP server), as Vault's auto-unseal does it.

The wrapped blob is kept beside the data (`meta`, under `WRAPPED`; a rotation's next
key under `WRAPPED_NEXT`) as one JSON object: its public fields (`provider`, the
registry name; `where`, the wrapping key in words; `store`, this store's id; the
master key's id) and whatever the `Wrapper` returned. At start the blob is unwrapped
once and the master key kept in memory, so no request ever calls the service.

A new service is one `Wrapper` (describe, wrap, unwrap, same_place, rewrap) in a
module of its own, a factory returning `WrappedKeyProvider(wrapper, blobs)`, and a
row in `providers.PROVIDERS`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from chainkeys.errors import StartupError
from chainkeys.vault.providers import (
    KEY_BYTES,
    WRAPPED,
    WRAPPED_NEXT,
    Blobs,
    MasterKey,
    kept_by,
    kept_by_fields,
)

log = logging.getLogger("chainkeys.vault")

STORE_ID = "store_id"  # meta: this store's random id, named in every wrap (KMS context, AAD)
Fields = Mapping[str, Any]


class Wrapper(Protocol):
    """An external key that encrypts the 32-byte master key and gives it back.

    `wrap` and `unwrap` bind the blob to `store` (this store's id) where the service
    can (an encryption context, associated data); errors are StartupError naming the
    service and what to do, never key material or credentials.
    """

    kind: str  # the registry name, recorded in the blob as `provider`
    description: str  # where the wrapping key is, in words ("AWS KMS key alias/x")

    def wrap(self, material: bytes, store: str) -> dict[str, Any]:
        """The fields that let `unwrap` give `material` back (public ones included:
        the key's reference, so `same_place` and messages can name it)."""
        ...

    def unwrap(self, fields: Fields, store: str) -> bytes:
        """The master key's bytes from `wrap`'s fields."""
        ...

    def same_place(self, fields: Fields) -> bool:
        """Whether these fields were made by the key this wrapper is configured with."""
        ...

    def rewrap(self, fields: Fields, material: bytes, store: str) -> dict[str, Any] | None:
        """Fields under the wrapping key's newest version when the service rotated it
        since `fields` were made (`material` is what they hold, just unwrapped); None
        when they are current (or the key has no versions)."""
        ...


def decode(blob: bytes) -> dict[str, Any]:
    kept_by(blob)  # a record that is no JSON object is refused there, with words
    fields: dict[str, Any] = msgspec.json.decode(blob)
    return fields


class WrappedKeyProvider:
    """`providers.KeyProvider` for a key wrapped by `wrapper`, its blob in `Blobs`; a
    rotation's next key waits wrapped beside it, as the file provider's `.next` does."""

    def __init__(self, wrapper: Wrapper, blobs: Blobs) -> None:
        self.wrapper = wrapper
        self.description = wrapper.description
        self._blobs = blobs

    async def _store(self, *, create: bool) -> str:
        found = await self._blobs.get(STORE_ID)
        if found is not None:
            return found.decode()
        if not create:
            return ""
        made = secrets.token_hex(16)
        await self._blobs.put(STORE_ID, made.encode())
        return made

    def _ours(self, fields: Fields) -> None:
        """Refuse a blob another provider or another key of this one wrapped."""
        provider, where = kept_by_fields(fields)
        kind = self.wrapper.kind
        if provider != kind:
            raise StartupError(
                f"this store's master key is wrapped by {where}: start with "
                f"CHAINKEYS_MASTER_KEY_PROVIDER={provider} (the provider it was last moved "
                f"to), not {kind}; or, from there, `chainkeys key move --to {kind}`"
            )
        if not self.wrapper.same_place(fields):
            raise StartupError(
                f"{self.description} did not wrap this store's master key: {where} did; "
                "start with the settings that name that key (or, from there, move it with "
                f"`chainkeys key move --to {kind} --key ...`)"
            )

    async def _open(self, fields: Fields) -> MasterKey:
        store = await self._store(create=False)
        recorded = fields.get("store")
        if recorded is not None and recorded != store:
            raise StartupError(
                f"the wrapped master key in this database was made for store {recorded}, "
                f"and this store's id (meta {STORE_ID!r}) is {store or 'missing'}: a record "
                "copied from another store, or the database was altered"
            )
        material = self.wrapper.unwrap(fields, store)
        if len(material) != KEY_BYTES:
            raise StartupError(
                f"{self.description} gives back {len(material)} bytes for this store's master "
                "key, not 32: the wrapped key was altered"
            )
        key = MasterKey(bytes(material))
        if key.id != fields.get("master_key_id"):
            raise StartupError(
                f"the master key {self.description} unwrapped is not the one this store recorded"
            )
        return key

    async def _blob(self, key: MasterKey) -> bytes:
        """`key` wrapped, checked to come back before anything depends on the blob."""
        store = await self._store(create=True)
        fields = {
            "v": 1,
            "provider": self.wrapper.kind,
            "where": self.description,
            "store": store,
            "master_key_id": key.id,
            **self.wrapper.wrap(key.material, store),
        }
        if (await self._open(fields)).id != key.id:
            raise StartupError(f"{self.description} does not give back the key it wrapped")
        return msgspec.json.encode(fields)

    async def load(self, *, create: bool) -> MasterKey:
        blob = await self._blobs.get(WRAPPED)
        if blob is None:
            if not create:
                raise StartupError(
                    f"this store's master key is not wrapped by {self.description} (the store "
                    "records no wrapped key: it is a key file or CHAINKEYS_MASTER_KEY): move it "
                    f"there first with `chainkeys key move --to {self.wrapper.kind}`"
                )
            key = MasterKey(secrets.token_bytes(KEY_BYTES))
            await self._blobs.put(WRAPPED, await self._blob(key))
            return key
        fields = decode(blob)
        self._ours(fields)
        key = await self._open(fields)
        await self._rewrap(blob, fields, key)
        return key

    async def _rewrap(self, blob: bytes, fields: Fields, key: MasterKey) -> None:
        """After the service rotated its key: the blob under the newest version. A failure
        here is logged, not fatal: the blob still opens with the older version."""
        store = await self._store(create=False)
        try:
            newer = self.wrapper.rewrap(fields, key.material, store)
            if newer is None:
                return
            updated = {**fields, **newer}
            if (await self._open(updated)).id != key.id:
                raise StartupError(f"{self.description} rewrapped another key")
        except StartupError as exc:
            log.warning("master key not rewrapped: %s", exc.message)
            return
        if await self._blobs.get(WRAPPED) == blob:  # not replaced meanwhile (a rotation)
            await self._blobs.put(WRAPPED, msgspec.json.encode(updated))
            log.info("master key rewrapped under the newest version of %s", self.description)

    async def others(self) -> list[MasterKey]:
        following = await self._blobs.get(WRAPPED_NEXT)
        return [await self._open(decode(following))] if following is not None else []

    async def begin_rotation(self, current: MasterKey) -> MasterKey:
        following = await self._blobs.get(WRAPPED_NEXT)
        if following is not None:
            return await self._open(decode(following))
        new = MasterKey(secrets.token_bytes(KEY_BYTES))
        await self._blobs.put(WRAPPED_NEXT, await self._blob(new))
        return new

    async def finish_rotation(self, old: MasterKey, new: MasterKey) -> str | None:
        following = await self._blobs.get(WRAPPED_NEXT)
        if following is not None:
            await self._blobs.put(WRAPPED, following)
            await self._blobs.delete(WRAPPED_NEXT)
        return None

    async def retire(self) -> list[str]:
        return []  # only the current key's blob is kept

    def _here(self, blob: bytes | None) -> bool:
        if blob is None:
            return False
        fields = decode(blob)
        return kept_by_fields(fields)[0] == self.wrapper.kind and self.wrapper.same_place(fields)

    async def adopt(self, key: MasterKey) -> bool:
        """Wrap `key` under this key and keep the blob (replacing another provider's);
        the target must give the key back before the old blob goes."""
        blob = await self._blobs.get(WRAPPED)
        if blob is not None and self._here(blob):
            if (await self._open(decode(blob))).id != key.id:
                raise StartupError(f"{self.description} wraps another master key")
            return True
        await self._blobs.put(WRAPPED, await self._blob(key))
        return False

    async def release(self) -> None:
        """Delete the blob if this key wrapped it (after a move to another key or
        provider, the blob is the target's and stays)."""
        if self._here(await self._blobs.get(WRAPPED)):
            await self._blobs.delete(WRAPPED)
