"""Signing with stored keys: decode, check, then sign; every signature audited."""

from chainkeys.signing.service import SigningService

__all__ = ["SigningService"]
