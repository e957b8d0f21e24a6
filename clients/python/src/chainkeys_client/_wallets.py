"""HD wallets: `/wallets`, `/wallets/{wallet}` and a wallet's derived accounts,
extended public key and export (docs/wallets.md). `{wallet}` is the id or the name.

The phrase and passphrase go in a request body only: never in a path, a query,
an exception or a `repr`.

Create carries an Idempotency-Key like account creation (a fresh uuid4 unless
given), but it is not retried automatically: the service does not replay wallet
creates by key yet, so a repeat after a lost answer could generate a second
wallet (or answer 409 for an import that did succeed). Derive is retried only
when it names its `index` (the same path answers the same account) or is a
preview; without an index every call takes the next indices.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec

from chainkeys_client._accounts import IDEMPOTENCY_HEADER, cosmos_public_key
from chainkeys_client._core import (
    Answer,
    AsyncRunner,
    Call,
    SyncRunner,
    data_as,
    family_segment,
    ignore,
    segment,
)
from chainkeys_client._models import DerivedAccount, Wallet, WalletPage, WalletSecret, Xpub


Derived = list[DerivedAccount]


class _Derived(msgspec.Struct, kw_only=True):
    accounts: Derived


def read_derived(answer: Answer) -> Derived:
    """The derived accounts; a Cosmos `public_key` (base64 in the answer) as compressed
    hex, as in `Account` and the other families."""
    accounts = data_as(_Derived)(answer).accounts
    for account in accounts:
        if account.family == "cosmos" and account.pubkey:
            account.public_key = cosmos_public_key(account.pubkey) or account.public_key
    return accounts


def _ref(wallet: str | Wallet) -> str:
    return segment(wallet.id if isinstance(wallet, Wallet) else wallet, "a wallet id or name")


def _present(**given: Any) -> dict[str, Any]:
    return {k: v for k, v in given.items() if v is not None}


# ---- the calls ------------------------------------------------------------------------


def create_call(
    *,
    name: str | None = None,
    words: int | None = None,
    mnemonic: str | None = None,
    passphrase: str | None = None,
    idempotency_key: str | None = None,
) -> Call[Wallet]:
    if mnemonic is not None and words is not None:
        raise ValueError("give words (generate) or mnemonic (import), not both")
    body = _present(name=name, words=words, mnemonic=mnemonic, passphrase=passphrase)
    key = idempotency_key or str(uuid.uuid4())
    return Call("POST", "/wallets", data_as(Wallet), body=body,
                headers={IDEMPOTENCY_HEADER: key})  # fmt: skip


def list_call(limit: int | None = None, cursor: str | None = None) -> Call[WalletPage]:
    params: dict[str, Any] = {"limit": limit, "cursor": cursor}
    return Call("GET", "/wallets", data_as(WalletPage), params=params, retry=True)


def get_call(wallet: str | Wallet) -> Call[Wallet]:
    return Call("GET", f"/wallets/{_ref(wallet)}", data_as(Wallet), retry=True)


def delete_call(wallet: str | Wallet) -> Call[None]:
    return Call("DELETE", f"/wallets/{_ref(wallet)}", ignore)


def derive_call(
    wallet: str | Wallet,
    family: str,
    *,
    network: str | None = None,
    address_type: str | None = None,
    account: int | None = None,
    change: int | None = None,
    index: int | None = None,
    count: int | None = None,
    name: str | None = None,
    preview: bool = False,
) -> Call[Derived]:
    body = _present(
        family=family_segment(family), network=network, address_type=address_type,
        account=account, change=change, index=index, count=count, name=name,
        preview=preview or None,
    )  # fmt: skip
    return Call("POST", f"/wallets/{_ref(wallet)}/accounts", read_derived, body=body,
                retry=index is not None or preview)  # fmt: skip


def xpub_call(
    wallet: str | Wallet,
    family: str,
    *,
    network: str | None = None,
    address_type: str | None = None,
    account: int | None = None,
    format: str | None = None,
) -> Call[Xpub]:
    params: dict[str, Any] = {
        "family": family_segment(family), "network": network, "address_type": address_type,
        "account": account, "format": format,
    }  # fmt: skip
    return Call("GET", f"/wallets/{_ref(wallet)}/xpub", data_as(Xpub), params=params, retry=True)


def export_call(wallet: str | Wallet) -> Call[WalletSecret]:
    return Call("POST", f"/wallets/{_ref(wallet)}/export", data_as(WalletSecret))


# ---- sync and async faces --------------------------------------------------------------


class Wallets:
    """`client.wallets`: create/import, list, get, derive accounts, xpub, export, delete."""

    def __init__(self, run: SyncRunner) -> None:
        self._run = run

    def create(
        self,
        *,
        name: str | None = None,
        words: int | None = None,
        mnemonic: str | None = None,
        passphrase: str | None = None,
        idempotency_key: str | None = None,
    ) -> Wallet:
        """Generate (`words`: 12…24, default 24) or import (`mnemonic`, `passphrase`) a
        wallet. The phrase is never in the answer (export it where allowed). The same
        phrase and passphrase already in the tenant, or a name in use: `Conflict`.
        Not retried automatically (see the module's doc)."""
        return self._run(create_call(name=name, words=words, mnemonic=mnemonic,
                                     passphrase=passphrase, idempotency_key=idempotency_key))  # fmt: skip

    def list(self, limit: int | None = None, cursor: str | None = None) -> WalletPage:
        return self._run(list_call(limit, cursor))

    def iter(self, *, page_size: int | None = None) -> Iterator[Wallet]:
        """Every wallet of the tenant, page after page."""
        cursor: str | None = None
        while True:
            page = self.list(page_size, cursor)
            yield from page.wallets
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get(self, wallet: str | Wallet) -> Wallet:
        """One wallet, by id (`wal_…`) or name."""
        return self._run(get_call(wallet))

    def derive(
        self,
        wallet: str | Wallet,
        family: str,
        *,
        network: str | None = None,
        address_type: str | None = None,
        account: int | None = None,
        change: int | None = None,
        index: int | None = None,
        count: int | None = None,
        name: str | None = None,
        preview: bool = False,
    ) -> Derived:
        """Derive accounts: `index` (that one, then the next `count - 1`) or the next
        `count` (1…100) indices; `address_type` for Litecoin, `name` for EOS (one
        account); `preview` derives and stores nothing. Each is then an ordinary
        account: `client.signing` signs with its `name`."""
        return self._run(derive_call(
            wallet, family, network=network, address_type=address_type, account=account,
            change=change, index=index, count=count, name=name, preview=preview,
        ))  # fmt: skip

    def xpub(
        self,
        wallet: str | Wallet,
        family: str,
        *,
        network: str | None = None,
        address_type: str | None = None,
        account: int | None = None,
        format: str | None = None,
    ) -> Xpub:
        """The account-level extended public key (`format`: xpub, Ltub, zpub, dgub, …)."""
        return self._run(xpub_call(wallet, family, network=network, address_type=address_type,
                                   account=account, format=format))  # fmt: skip

    def export(self, wallet: str | Wallet) -> WalletSecret:
        """The phrase (export scope, CHAINKEYS_EXPORT_ENABLED); marks the wallet exported."""
        return self._run(export_call(wallet))

    def delete(self, wallet: str | Wallet) -> None:
        """Delete the seed (derived accounts stay). Never retried automatically."""
        self._run(delete_call(wallet))


class AsyncWallets:
    """`client.wallets` of the AsyncClient: the same methods, awaited."""

    def __init__(self, run: AsyncRunner) -> None:
        self._run = run

    async def create(
        self,
        *,
        name: str | None = None,
        words: int | None = None,
        mnemonic: str | None = None,
        passphrase: str | None = None,
        idempotency_key: str | None = None,
    ) -> Wallet:
        return await self._run(create_call(name=name, words=words, mnemonic=mnemonic,
                                           passphrase=passphrase,
                                           idempotency_key=idempotency_key))  # fmt: skip

    async def list(self, limit: int | None = None, cursor: str | None = None) -> WalletPage:
        return await self._run(list_call(limit, cursor))

    async def iter(self, *, page_size: int | None = None) -> AsyncIterator[Wallet]:
        cursor: str | None = None
        while True:
            page = await self.list(page_size, cursor)
            for wallet in page.wallets:
                yield wallet
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get(self, wallet: str | Wallet) -> Wallet:
        return await self._run(get_call(wallet))

    async def derive(
        self,
        wallet: str | Wallet,
        family: str,
        *,
        network: str | None = None,
        address_type: str | None = None,
        account: int | None = None,
        change: int | None = None,
        index: int | None = None,
        count: int | None = None,
        name: str | None = None,
        preview: bool = False,
    ) -> Derived:
        return await self._run(derive_call(
            wallet, family, network=network, address_type=address_type, account=account,
            change=change, index=index, count=count, name=name, preview=preview,
        ))  # fmt: skip

    async def xpub(
        self,
        wallet: str | Wallet,
        family: str,
        *,
        network: str | None = None,
        address_type: str | None = None,
        account: int | None = None,
        format: str | None = None,
    ) -> Xpub:
        return await self._run(xpub_call(wallet, family, network=network,
                                         address_type=address_type, account=account,
                                         format=format))  # fmt: skip

    async def export(self, wallet: str | Wallet) -> WalletSecret:
        return await self._run(export_call(wallet))

    async def delete(self, wallet: str | Wallet) -> None:
        await self._run(delete_call(wallet))


__all__ = ["AsyncWallets", "Wallets"]
