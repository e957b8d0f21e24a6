"""The master key: opening the vault at start, rotation and retirement."""

from chainkeys.keys.service import KeyService, RotationReport
from chainkeys.keys.vault import open_vault

__all__ = ["KeyService", "RotationReport", "open_vault"]
