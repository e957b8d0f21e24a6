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


class KeyProvider(Protocol):
    """Loads the master key; `create` is allowed only when no sealed data exists."""

    description: str

    def exists(self) -> bool: ...

    def load(self, *, create: bool) -> MasterKey: ...


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

    def __init__(self, value: str) -> None:
        self._value = value

    def exists(self) -> bool:
        return True

    def load(self, *, create: bool) -> MasterKey:
        return decode_key(self._value, self.description)


class FileKeyProvider:
    """A key file created with mode 0600 on first start (the default)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = f"key file {path}"

    def exists(self) -> bool:
        return self.path.exists()

    def load(self, *, create: bool) -> MasterKey:
        if not self.path.exists():
            if not create:
                raise StartupError(
                    f"the master key file {self.path} is missing but the store holds sealed "
                    "secrets; restore the key file (or set CHAINKEYS_MASTER_KEY). "
                    "A new key would not open them."
                )
            return self._create()
        mode = self.path.stat().st_mode & 0o777
        if mode & 0o077:
            raise StartupError(
                f"the master key file {self.path} is readable by others (mode {mode:o}); "
                f"run: chmod 600 {self.path}"
            )
        return decode_key(self.path.read_text(), self.description)

    def _create(self) -> MasterKey:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = MasterKey(secrets.token_bytes(KEY_BYTES))
        # O_EXCL: two processes starting at once must not each write their own key.
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self.load(create=False)
        with os.fdopen(fd, "w") as f:
            f.write(encode_key(key) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return key


def provider_from_settings(settings: Settings) -> KeyProvider:
    if settings.master_key is not None:
        return EnvKeyProvider(settings.master_key.get_secret_value())
    return FileKeyProvider(settings.key_file)
