"""Master-key providers: where the 32-byte key that seals every secret comes from."""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import msgspec

from chainkeys.errors import StartupError

if TYPE_CHECKING:
    from chainkeys.config import Settings

KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class MasterKey:
    """A master key and its public id (a fingerprint, not the key)."""

    material: bytes = field(repr=False)
    id: str = ""

    def __post_init__(self) -> None:
        if len(self.material) != KEY_BYTES:
            raise StartupError(f"a master key is {KEY_BYTES} bytes, got {len(self.material)}")
        if not self.id:
            digest = hashlib.sha256(b"chainkeys key id\x00" + self.material).hexdigest()
            object.__setattr__(self, "id", digest[:16])

    def __repr__(self) -> str:
        return f"MasterKey(id={self.id!r}, material=***)"


class Blobs(Protocol):
    """Named blobs beside the data (`meta`), handed to the providers that keep their
    key there (the HSM-wrapped key) or must see that another provider does."""

    async def get(self, name: str) -> bytes | None: ...

    async def put(self, name: str, blob: bytes) -> None: ...

    async def delete(self, name: str) -> None: ...


WRAPPED = "master_key_wrapped"  # the master key wrapped outside (HSM, KMS); no master key sealed it
WRAPPED_NEXT = "master_key_wrapped_next"  # a rotation's next key, until it finishes


class KeyProvider(Protocol):
    """Where the root master key lives: everything start-up, rotation and moves ask of it.

    One interface for the key file, the environment and the wrapped keys (vault/wrapped.py:
    an HSM, a KMS); a new place for the key is one class with these methods and one row in
    `PROVIDERS`. Storage is handed in where a provider needs it (`Blobs`); nothing outside
    `provider_for` asks which one it is.
    """

    description: str

    async def load(self, *, create: bool) -> MasterKey:
        """The current key; `create` is allowed only when no sealed data exists."""
        ...

    async def others(self) -> list[MasterKey]:
        """Keys the provider still holds besides the current one (a rotation under way,
        older keys not yet retired)."""
        ...

    async def begin_rotation(self, current: MasterKey) -> MasterKey:
        """The key to re-seal under (made on the first call, the same one when resuming)."""
        ...

    async def finish_rotation(self, old: MasterKey, new: MasterKey) -> str | None:
        """Make `new` the current key; what was kept of `old` (the ring holds it too)."""
        ...

    async def retire(self) -> list[str]:
        """Forget the provider's own copies of older keys (the store's key ring keeps
        every past key under the current one); what was removed."""
        ...

    async def adopt(self, key: MasterKey) -> bool:
        """Keep `key` here from now on (a move); True when it was here already."""
        ...

    async def release(self) -> None:
        """Stop keeping the key (a move away from here finished)."""
        ...


def decode_key(text: str, source: str) -> MasterKey:
    """Decode a base64 master key; the error names the source, never the value."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise StartupError(f"{source} is not valid base64") from None
    if len(raw) != KEY_BYTES:
        raise StartupError(f"{source} must hold {KEY_BYTES} bytes in base64, not {len(raw)}")
    return MasterKey(raw)


def encode_key(key: MasterKey) -> str:
    return base64.b64encode(key.material).decode()


class EnvKeyProvider:
    """CHAINKEYS_MASTER_KEY: for deployments whose secret store injects env vars."""

    description = "CHAINKEYS_MASTER_KEY"

    def __init__(self, value: str, previous: str, blobs: Blobs) -> None:
        self._value = value
        self._previous = previous
        self._blobs = blobs

    async def load(self, *, create: bool) -> MasterKey:
        await refuse_if_wrapped(self._blobs)
        return decode_key(self._value, self.description)

    async def others(self) -> list[MasterKey]:
        """CHAINKEYS_PREVIOUS_MASTER_KEYS: comma-separated keys being rotated away from."""
        parts = [p for p in self._previous.split(",") if p.strip()]
        return [decode_key(p, "CHAINKEYS_PREVIOUS_MASTER_KEYS") for p in parts]

    async def begin_rotation(self, current: MasterKey) -> MasterKey:
        """The operator already set the new key as CHAINKEYS_MASTER_KEY."""
        return current

    async def finish_rotation(self, old: MasterKey, new: MasterKey) -> str | None:
        return None  # nothing to promote: the environment already names the new key

    async def retire(self) -> list[str]:
        return []  # CHAINKEYS_PREVIOUS_MASTER_KEYS may be unset: the ring keeps those keys

    async def adopt(self, key: MasterKey) -> bool:
        raise StartupError(
            "the master key cannot be moved into CHAINKEYS_MASTER_KEY by "
            "chainkeys: set the variable yourself"
        )

    async def release(self) -> None:
        return None


class FileKeyProvider:
    """A key file created with mode 0600 on first start (the default)."""

    def __init__(self, path: Path, blobs: Blobs) -> None:
        self.path = path
        self.next_path = path.with_name(path.name + ".next")
        self.description = f"key file {path}"
        self._blobs = blobs

    def retired_paths(self) -> list[Path]:
        return sorted(self.path.parent.glob(self.path.name + ".retired-*"))

    async def others(self) -> list[MasterKey]:
        paths = [self.next_path] if self.next_path.exists() else []
        return [self._read(p) for p in [*paths, *self.retired_paths()]]

    async def begin_rotation(self, current: MasterKey) -> MasterKey:
        """The next key: made (0600) on the first call, re-read when a rotation resumes."""
        if self.next_path.exists():
            return self._read(self.next_path)
        try:
            return self._write_new(self.next_path)
        except OSError as exc:
            raise StartupError(
                f"cannot write the next master key beside {self.path} ({exc.strerror}): the "
                "key file is on a read-only mount (a Docker or Kubernetes secret?). Rotate "
                "with environment keys instead: CHAINKEYS_MASTER_KEY set to a new key and "
                "CHAINKEYS_PREVIOUS_MASTER_KEYS to this one (docs/deploy.md)"
            ) from None

    async def finish_rotation(self, old: MasterKey, new: MasterKey) -> str | None:
        """Promote the next key; keep the old one beside it until `retire`.

        Every step leaves a key file set from which all seals still open.
        """
        retired = self.path.with_name(f"{self.path.name}.retired-{old.id}")
        if not retired.exists():
            self.write_key(retired, old)
        os.replace(self.next_path, self.path)
        _fsync_dir(self.path.parent)
        return str(retired)

    async def retire(self) -> list[str]:
        removed = self.retired_paths()
        for path in removed:
            path.unlink()
        _fsync_dir(self.path.parent)
        return [str(p) for p in removed]

    def _read(self, path: Path) -> MasterKey:
        info = path.stat()
        mode = info.st_mode & 0o777
        if mode & 0o077:
            raise StartupError(
                f"the master key file {path} is readable by others (mode {mode:o}); "
                f"run: chmod 600 {path}"
            )
        try:
            text = path.read_text()
        except PermissionError:
            raise StartupError(
                f"the master key file {path} (owner uid {info.st_uid}, mode {mode:o}) cannot be "
                f"read by uid {os.getuid()}: give it to the service's user (chown), or in a "
                "container pass it as CHAINKEYS_MASTER_KEY_SECRET (deploy/docker-entrypoint.sh)"
            ) from None
        return decode_key(text, f"key file {path}")

    async def load(self, *, create: bool) -> MasterKey:
        await refuse_if_wrapped(self._blobs)
        return self.read_or_create(create=create)

    def read_or_create(self, *, create: bool) -> MasterKey:
        if not self.path.exists():
            if not create:
                raise StartupError(
                    f"the master key file {self.path} is missing but the store holds sealed "
                    "secrets; restore the key file (or set CHAINKEYS_MASTER_KEY). "
                    "A new key would not open them."
                )
            return self._write_new(self.path)
        return self._read(self.path)

    async def adopt(self, key: MasterKey) -> bool:
        """Write `key` to the file (0600, fsynced); an existing file must hold it."""
        if self.path.exists():
            held = self.read_or_create(create=False)
            if held.id != key.id:
                raise StartupError(
                    f"{self.path} holds another master key (id {held.id}); move it aside first"
                )
            return True
        self.write_key(self.path, key)
        os.chmod(self.path, 0o600)
        return False

    async def release(self) -> None:
        return None  # the file stays: the operator removes it once the move is settled

    def _write_new(self, path: Path) -> MasterKey:
        key = MasterKey(secrets.token_bytes(KEY_BYTES))
        try:
            self.write_key(path, key)
        except FileExistsError:
            # Another process made it first: both must use the same key.
            return self._read(path)
        return key

    @staticmethod
    def write_key(path: Path, key: MasterKey) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting at once must not each write their own key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(encode_key(key) + "\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def kept_by(blob: bytes) -> tuple[str, str]:
    """Which provider wrapped a `WRAPPED` blob and a description of its key, from the
    blob's public fields (no provider module is loaded, no key service called).

    Every wrapped blob is a JSON object naming its `provider` and `where`; the first
    blobs (PKCS#11 only) named neither, so a blob without them is pkcs11's.
    """
    try:
        fields = msgspec.json.decode(blob)
    except msgspec.DecodeError:
        fields = None
    if not isinstance(fields, dict):
        raise StartupError(
            f"the wrapped master key in meta {WRAPPED!r} is not a wrapped-key "
            "record: the database was altered"
        )
    return kept_by_fields(fields)


def kept_by_fields(fields: Mapping[str, Any]) -> tuple[str, str]:
    """`kept_by` of a blob's decoded fields."""
    provider = str(fields.get("provider", "pkcs11"))
    where = fields.get("where") or (
        f"HSM key {fields.get('key_label')!r} in token {fields.get('token_label')!r}"
    )
    return provider, str(where)


async def refuse_if_wrapped(blobs: Blobs, kind: str = "file") -> None:
    """A store whose master key is wrapped outside (an HSM, a KMS), started with the
    file or env provider: the refusal names the provider the store was last moved to."""
    blob = await blobs.get(WRAPPED)
    if blob is not None:
        provider, where = kept_by(blob)
        raise StartupError(
            f"this store's master key is wrapped by {where}: start with "
            f"CHAINKEYS_MASTER_KEY_PROVIDER={provider} (or move it out with "
            f"`chainkeys key move --to {kind}`)"
        )


Factory = Callable[["Settings", Blobs], KeyProvider]


@dataclass(frozen=True, slots=True)
class Kind:
    """One row of the registry: where its provider is made, and what `chainkeys key move
    --key` overrides for it (the settings field naming the wrapping key)."""

    factory: str  # "module:function", imported only when this provider is used
    summary: str  # a few words for help texts
    key_setting: str | None = None
    target: bool = True  # `chainkeys key move --to` may name it


# The registry: a new place for the master key is a module with a factory
# `(settings, blobs) -> KeyProvider` and one row here (and its name in
# config.Settings.master_key_provider). Providers that keep the master key wrapped in
# `meta` record their name in the blob (`kept_by`), so the other providers refuse to
# start on such a store and name it.
PROVIDERS: dict[str, Kind] = {
    "file": Kind("chainkeys.vault.providers:file_provider", "a key file (0600)"),
    "env": Kind("chainkeys.vault.providers:env_provider", "CHAINKEYS_MASTER_KEY", target=False),
    "pkcs11": Kind("chainkeys.vault.pkcs11:from_settings", "an HSM (PKCS#11)", "pkcs11_key_label"),
    "shamir": Kind("chainkeys.vault.shamir:from_settings", "operators' Shamir shares"),
    "awskms": Kind("chainkeys.vault.awskms:from_settings", "an AWS KMS key", "awskms_key_id"),
    "transit": Kind("chainkeys.vault.transit:from_settings", "a transit key", "transit_key"),
    "kmip": Kind("chainkeys.vault.kmip:from_settings", "a KMIP server's AES key", "kmip_key_id"),
}


def file_provider(settings: Settings, blobs: Blobs) -> KeyProvider:
    return FileKeyProvider(settings.key_file, blobs)


def env_provider(settings: Settings, blobs: Blobs) -> KeyProvider:
    if settings.master_key is None:
        raise StartupError("CHAINKEYS_MASTER_KEY_PROVIDER=env needs CHAINKEYS_MASTER_KEY")
    previous = settings.previous_master_keys
    return EnvKeyProvider(
        settings.master_key.get_secret_value(),
        previous.get_secret_value() if previous is not None else "",
        blobs,
    )


def provider_for(
    settings: Settings,
    blobs: Blobs,
    kind: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> KeyProvider:
    """The provider the settings name (or `kind`, with settings `overrides`, for a
    move's target): the one place that tells the providers apart, from `PROVIDERS`."""
    kind = kind or settings.key_provider
    row = PROVIDERS.get(kind)
    if row is None:
        raise StartupError(f"cannot keep the master key in {kind!r}: use {', '.join(PROVIDERS)}")
    if overrides:
        settings = settings.model_copy(update=dict(overrides))
    module, _, name = row.factory.partition(":")
    factory = cast(Factory, getattr(importlib.import_module(module), name))
    return factory(settings, blobs)
