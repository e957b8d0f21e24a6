"""`Client` (sync, httpx.Client) and `AsyncClient` (httpx.AsyncClient).

Each endpoint group lives in its own module as call builders plus a sync and
an async face (`_accounts.py`, `_signing.py`, `_wallets.py`, `_approvals.py`,
`_tokens.py`); a client only attaches the faces. A new group is one new module
of the same form and one attribute in each client's `__init__` below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from chainkeys_client._accounts import Accounts, AsyncAccounts
from chainkeys_client._approvals import Approvals, AsyncApprovals
from chainkeys_client._core import (
    DEFAULT_TIMEOUT,
    AsyncRunner,
    Call,
    RetryPolicy,
    SyncRunner,
    data_as,
    headers_for,
)
from chainkeys_client._models import AuditEvent, AuditPage, Networks
from chainkeys_client._signing import AsyncSigning, Signing
from chainkeys_client._tokens import AsyncTokens, Tokens
from chainkeys_client._wallets import AsyncWallets, Wallets

USER_AGENT = "chainkeys-client-python/0.1.0"


def networks_call() -> Call[Networks]:
    return Call("GET", "/networks", data_as(Networks), retry=True)


def audit_call(
    limit: int | None = None, cursor: str | None = None, since_ms: int | None = None
) -> Call[AuditPage]:
    params: dict[str, Any] = {"limit": limit, "cursor": cursor, "since": since_ms}
    return Call("GET", "/audit", data_as(AuditPage), params=params, retry=True)


def _base_url(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError("url is the service's base URL, http:// or https://")
    return url.rstrip("/")


class Client:
    """A synchronous chainkeys client.

    >>> with Client("http://127.0.0.1:8000", token) as ck:
    ...     account = ck.accounts.create("cosmos")

    `transport` is passed to httpx (e.g. `httpx.MockTransport` in tests);
    `retries`/`backoff` set the retry policy for safe requests (reads, and
    creates, which always carry an Idempotency-Key).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        retries: int = 2,
        backoff: float = 0.25,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.url = _base_url(url)
        self._http = httpx.Client(
            base_url=self.url, headers=headers_for(token, user_agent), timeout=timeout,
            transport=transport, follow_redirects=False,
        )  # fmt: skip
        run = SyncRunner(self._http, RetryPolicy(retries=retries, backoff=backoff))
        self._run = run
        self.accounts = Accounts(run)
        self.signing = Signing(run)
        self.wallets = Wallets(run)
        self.approvals = Approvals(run)
        self.tokens = Tokens(run)

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def networks(self) -> Networks:
        """Families, their networks and defaults (`GET /networks`, no token needed)."""
        return self._run(networks_call())

    def audit(
        self, limit: int | None = None, cursor: str | None = None, *, since_ms: int | None = None
    ) -> AuditPage:
        """One page of the tenant's audit log, oldest first."""
        return self._run(audit_call(limit, cursor, since_ms))

    def iter_audit(
        self, *, page_size: int | None = None, since_ms: int | None = None
    ) -> Iterator[AuditEvent]:
        cursor: str | None = None
        while True:
            page = self.audit(page_size, cursor, since_ms=since_ms)
            yield from page.events
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio client: the same groups and methods as `Client`, awaited."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = 2,
        backoff: float = 0.25,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.url = _base_url(url)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers_for(token, user_agent), timeout=timeout,
            transport=transport, follow_redirects=False,
        )  # fmt: skip
        run = AsyncRunner(self._http, RetryPolicy(retries=retries, backoff=backoff))
        self._run = run
        self.accounts = AsyncAccounts(run)
        self.signing = AsyncSigning(run)
        self.wallets = AsyncWallets(run)
        self.approvals = AsyncApprovals(run)
        self.tokens = AsyncTokens(run)

    def __repr__(self) -> str:
        return f"AsyncClient(url={self.url!r})"

    async def networks(self) -> Networks:
        return await self._run(networks_call())

    async def audit(
        self, limit: int | None = None, cursor: str | None = None, *, since_ms: int | None = None
    ) -> AuditPage:
        return await self._run(audit_call(limit, cursor, since_ms))

    async def iter_audit(
        self, *, page_size: int | None = None, since_ms: int | None = None
    ) -> AsyncIterator[AuditEvent]:
        cursor: str | None = None
        while True:
            page = await self.audit(page_size, cursor, since_ms=since_ms)
            for event in page.events:
                yield event
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
