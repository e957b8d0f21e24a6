"""Envelope encryption of secrets at rest and the master-key providers."""

from chainkeys.vault.providers import (
    EnvKeyProvider,
    FileKeyProvider,
    KeyProvider,
    MasterKey,
    provider_from_settings,
)
from chainkeys.vault.seal import Context, SealError, Vault

__all__ = [
    "Context",
    "EnvKeyProvider",
    "FileKeyProvider",
    "KeyProvider",
    "MasterKey",
    "SealError",
    "Vault",
    "provider_from_settings",
]
