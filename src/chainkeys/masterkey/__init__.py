"""The master key: opening the vault at start, rotation and retirement."""

from chainkeys.masterkey.opening import open_vault
from chainkeys.masterkey.service import KeyService, RotationReport

__all__ = ["KeyService", "RotationReport", "open_vault"]
