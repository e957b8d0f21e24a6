"""Tenants and their API tokens: who may call, with which scopes."""

from chainkeys.tokens.service import (
    DEFAULT_SCOPES,
    SCOPES,
    Principal,
    TokenService,
    hash_token,
)

__all__ = ["DEFAULT_SCOPES", "SCOPES", "Principal", "TokenService", "hash_token"]
