"""Master-key providers: where the 32-byte key that seals every secret comes from."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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


WRAPPED = "master_key_wrapped"  # the HSM-wrapped master key (no master key sealed it)
WRAPPED_NEXT = "master_key_wrapped_next"  # a rotation's next key, until it finishes


class KeyProvider(Protocol):
    """Where the root master key lives: everything start-up, rotation and moves ask of it.

    One interface for the key file, the environment and an HSM (PKCS#11); a new place
    for the key (a KMS) is one class with these methods. Storage is handed in where a
    provider needs it (`Blobs`); nothing outside `provider_for` asks which one it is.
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
        raise StartupError("the master key cannot be moved into CHAINKEYS_MASTER_KEY by "
                           "chainkeys: set the variable yourself")  # fmt: skip

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
                raise StartupError(f"{self.path} holds another master key (id {held.id}); "
                                   "move it aside first")  # fmt: skip
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


async def refuse_if_wrapped(blobs: Blobs) -> None:
    """A store whose master key is in an HSM, started with the file or env provider."""
    blob = await blobs.get(WRAPPED)
    if blob is not None:
        from chainkeys.vault.pkcs11 import describe

        info = describe(blob)
        raise StartupError(
            f"this store's master key is wrapped by HSM key {info['key_label']!r} in token "
            f"{info['token_label']!r}: start with CHAINKEYS_MASTER_KEY_PROVIDER=pkcs11 "
            "(or move it out with `chainkeys key move --to file`)"
        )


def provider_for(
    settings: Settings, blobs: Blobs, kind: str | None = None, key_label: str | None = None,
    token_label: str | None = None,
) -> KeyProvider:  # fmt: skip
    """The provider the settings name (or `kind`, with HSM labels, for a move): the one
    place that tells file, environment and PKCS#11 apart."""
    kind = kind or settings.key_provider
    if kind == "pkcs11":
        from chainkeys.vault.pkcs11 import Pkcs11KeyProvider, hsm_from_settings

        return Pkcs11KeyProvider(hsm_from_settings(settings, key_label, token_label), blobs)
    if kind == "env":
        if settings.master_key is None:
            raise StartupError("CHAINKEYS_MASTER_KEY_PROVIDER=env needs CHAINKEYS_MASTER_KEY")
        previous = settings.previous_master_keys
        return EnvKeyProvider(
            settings.master_key.get_secret_value(),
            previous.get_secret_value() if previous is not None else "",
            blobs,
        )
    if kind != "file":
        raise StartupError(f"cannot keep the master key in {kind!r}: use file or pkcs11")
    return FileKeyProvider(settings.key_file, blobs)
