"""Tokens: `GET /tokens/self`, what the caller's own token may do (never the token)."""

from __future__ import annotations

from chainkeys_client._core import AsyncRunner, Call, SyncRunner, data_as
from chainkeys_client._models import TokenInfo


def self_call() -> Call[TokenInfo]:
    return Call("GET", "/tokens/self", data_as(TokenInfo), retry=True)


class Tokens:
    """`client.tokens`: `self()`, the caller's tenant, label, scopes, families, group,
    creation and expiry (any valid token may ask)."""

    def __init__(self, run: SyncRunner) -> None:
        self._run = run

    def self(self) -> TokenInfo:
        return self._run(self_call())


class AsyncTokens:
    """`client.tokens` of the AsyncClient."""

    def __init__(self, run: AsyncRunner) -> None:
        self._run = run

    async def self(self) -> TokenInfo:
        return await self._run(self_call())


__all__ = ["AsyncTokens", "Tokens"]
